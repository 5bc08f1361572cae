package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// firstCall and ending add up, over a benchmark's worker runs, the time from the start
// to the worker's first call, and from its answer to its exit (its cgroup removed).
var firstCall, ending time.Duration

// tinyScript makes one tool call and a little computation: a chain's usual shape.
const tinyScript = "x = call(\"t_echo\", text=\"hi\")\nresult = {\"n\": len(x), \"s\": x + \"!\"}\n"

// runTiny runs tinyScript in a worker process (inProcess false) or in this process over
// pipes (the interpreter as the daemon ran it before workers), answering its one call.
// With measure, it reports the worker's RSS and virtual size while it waits for the
// call's reply.
func runTiny(b *testing.B, inProcess bool, parent string, measure func(pid int)) time.Duration {
	start := time.Now()
	p := DefaultPolicy()
	var (
		send func(message)
		msgs <-chan message
		pid  int
		end  func()
	)
	if inProcess {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		exited := make(chan int, 1)
		go func() {
			exited <- serveWorker(inR, outW, nil)
			_ = outW.Close()
		}()
		ch := make(chan message)
		go func() {
			defer close(ch)
			dec := json.NewDecoder(outR)
			for {
				var m message
				if dec.Decode(&m) != nil {
					return
				}
				ch <- m
			}
		}()
		enc := json.NewEncoder(inW)
		send = func(m message) { _ = enc.Encode(m) }
		msgs = ch
		end = func() {
			_ = inW.Close()
			<-exited
			for range ch {
			}
		}
	} else {
		w, err := startWorker(context.Background(), parent, fmt.Sprintf("%s%d-bench%d", workerCgroupPrefix, os.Getpid(), time.Now().UnixNano()), p.MaxMemoryBytes, p.maxLine())
		if err != nil {
			b.Fatal(err)
		}
		send, msgs, pid, end = w.send, w.msgs, w.proc.Pid, w.close
	}
	send(message{Type: msgStart, Start: &workerStart{Script: tinyScript, Tools: []string{"t_echo"}, MaxToolCalls: p.MaxToolCalls,
		MaxSteps: p.MaxSteps, MaxMemoryBytes: p.MaxMemoryBytes, MaxInlineResultBytes: p.MaxInlineResultBytes, MaxLineBytes: p.maxLine()}})
	for m := range msgs {
		switch m.Type {
		case msgCall:
			if measure != nil && pid != 0 {
				firstCall += time.Since(start)
				measure(pid)
			}
			send(message{Type: msgReply, Reply: &callReply{CallID: "tc_1", Text: "hello"}})
		case msgDone:
			if m.Done.Error != nil || string(m.Done.Result) != `{"n":5,"s":"hello!"}` {
				b.Fatalf("tiny script: %+v %s", m.Done.Error, m.Done.Result)
			}
			t := time.Now()
			end()
			if pid != 0 {
				ending += time.Since(t)
			}
			return time.Since(start)
		}
	}
	b.Fatal("the worker ended without an answer")
	return 0
}

// procStatus reads a field of /proc/<pid>/status in kB.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// BenchmarkChainWorker runs a tiny script in this process and in a worker process
// (the spawn, the protocol, the exit), alternately in one run, and reports the ratio
// and the worker's RSS and virtual size at its call.
func BenchmarkChainWorker(b *testing.B) {
	parent := (&workers{}).cgroupParent()
	firstCall, ending = 0, 0
	var inProc, inWorker time.Duration
	var rss, vsz int64
	measure := func(pid int) { rss, vsz = procStatus(pid, "VmRSS"), procStatus(pid, "VmSize") }
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			inProc += runTiny(b, true, parent, nil)
			inWorker += runTiny(b, false, parent, measure)
		} else {
			inWorker += runTiny(b, false, parent, measure)
			inProc += runTiny(b, true, parent, nil)
		}
	}
	b.ReportMetric(float64(inProc.Nanoseconds())/float64(b.N), "in-process-ns/op")
	b.ReportMetric(float64(inWorker.Nanoseconds())/float64(b.N), "worker-ns/op")
	b.ReportMetric(float64(inWorker)/float64(inProc), "worker/in-process")
	b.ReportMetric(float64(firstCall.Microseconds())/1000/float64(b.N), "worker-first-call-ms")
	b.ReportMetric(float64(ending.Microseconds())/1000/float64(b.N), "worker-exit-ms")
	b.ReportMetric(float64(rss)/1024, "worker-rss-MiB")
	b.ReportMetric(float64(vsz)/1024, "worker-vsz-MiB")
	b.ReportMetric(boolMetric(parent != ""), "cgroup")
}

func boolMetric(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// BenchmarkStdioCall calls the echo tool of bench/mcpcompare's echoserver, a real
// mcp-go server child over stdio, through the registry the way the daemon does
// (argument validation, then the proxy tool's Run), from parallel callers. It
// measures the proxy's own per-call cost (allocs/op; goroutines/op, started per call;
// cpu-µs/op: this process's CPU per call, the child's not included; compare builds
// alternately in one run).
func BenchmarkStdioCall(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "echoserver")
	root := strings.TrimSpace(goEnv(b, "GOMOD"))
	build := exec.Command("go", "build", "-o", bin, "./bench/mcpcompare/echoserver")
	build.Dir = filepath.Dir(root)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build echoserver: %v\n%s", err, out)
	}
	tools := toolmgr.New()
	log := slog.New(slog.DiscardHandler)
	m, err := New(Config{HealthInterval: time.Hour, Servers: []ServerConfig{{Name: "up", Transport: TransportStdio,
		Command: bin, Enabled: true}}}, tools, nil, log, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var e *toolmgr.Entry
	if !eventually(20*time.Second, func() bool {
		var ok bool
		e, ok = tools.Lookup("mcp__up__echo")
		return ok
	}) {
		b.Fatalf("echo not registered (have %v)", tools.Names())
	}
	for _, size := range []int{5, 16 << 10} {
		b.Run(fmt.Sprintf("message=%dB", size), func(b *testing.B) { benchCall(b, tools, e, strings.Repeat("h", size)) })
	}
}

func benchCall(b *testing.B, tools *toolmgr.Manager, e *toolmgr.Entry, msg string) {
	args, _ := json.Marshal(map[string]string{"message": msg})
	want := "Echo: " + msg
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	cpu0, gs0 := selfCPU(), goroutinesCreated()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res := tools.Run(e, toolmgr.Invocation{
				Ctx:  &tool.Context{Context: context.Background(), CallID: "tc_bench", ToolName: "mcp__up__echo", Progress: tool.NoProgress},
				Args: args,
			})
			if res.IsError || res.Text() != want {
				b.Errorf("result %s: %.100s", res.ErrorKind, res.Text())
				return
			}
		}
	})
	b.ReportMetric(float64(selfCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(goroutinesCreated()-gs0)/float64(b.N), "goroutines/op")
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []rtmetrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// selfCPU is this process's CPU time (user+system), the child's not included.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func goEnv(b *testing.B, name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		b.Fatalf("go env %s: %v", name, err)
	}
	return string(out)
}

// Command progress measures the live tool_progress channel end to end through a real
// toolserverd (app.New, SQLite, real bash): throughput of command output delivered to
// an NDJSON client, and the latency from a line written by the command to its arrival
// at the client, at the configured coalescing window.
//
//	go run ./bench/progress [-mb 200] [-lines 300] [-interval-ms 50]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

func main() {
	mb := flag.Int("mb", 200, "megabytes of output for the throughput run")
	lines := flag.Int("lines", 300, "timestamped lines for the latency run (one every 10 ms)")
	window := flag.Int("interval-ms", 50, "progress.flush_interval_ms")
	flag.Parse()
	r, err := Run(context.Background(), Options{MB: *mb, Lines: *lines, WindowMS: *window})
	if err != nil {
		fmt.Fprintln(os.Stderr, "progress:", err)
		os.Exit(1)
	}
	r.Print(os.Stdout)
}

// Options of a run.
type Options struct{ MB, Lines, WindowMS int }

// Result of a run.
type Result struct {
	Options
	Bytes         int64
	Elapsed       time.Duration
	P50, P99, Max time.Duration
	Samples       int
}

// Print writes the figures.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "throughput: %d MB of command output delivered as tool_progress in %s = %.0f MB/s\n",
		r.Bytes>>20, r.Elapsed.Round(time.Millisecond), float64(r.Bytes)/(1<<20)/r.Elapsed.Seconds())
	fmt.Fprintf(w, "latency (write in command → event at client, window %d ms, %d lines): p50 %s  p99 %s  max %s  (target p99 < %d ms)\n",
		r.WindowMS, r.Samples, r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond), r.Max.Round(100*time.Microsecond), r.WindowMS+25)
}

// Run starts a daemon and measures.
func Run(ctx context.Context, o Options) (Result, error) {
	res := Result{Options: o}
	dir, err := os.MkdirTemp("", "toolserverd-progress-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	cfg := config.Defaults()
	cfg.Auth.Unauthenticated = true // loopback only; the measured path is the same
	cfg.DataDir = dir
	cfg.ReplicaID = "bench"
	cfg.Progress.FlushIntervalMS = o.WindowMS
	cfg.Sandbox.OutputCapBytes = int64(o.MB+1) << 20
	cfg.Permissions.Allow = []string{"execute_command"} // the operator trusts these commands
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return res, err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx, ln) }()
	defer func() { stop(); <-served }()
	base := "http://" + ln.Addr().String()

	resp, err := http.Post(base+"/v1/sessions", "application/json", strings.NewReader(`{"available_tools":["execute_command"]}`))
	if err != nil {
		return res, err
	}
	var s struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	url := base + "/v1/sessions/" + s.ID + "/tool-calls"

	// Throughput: yes(1) output, cut to the size asked for.
	t0 := time.Now()
	n, err := stream(url, fmt.Sprintf("yes 'toolserverd progress throughput line' | head -c %d", o.MB<<20), nil)
	if err != nil {
		return res, err
	}
	res.Elapsed, res.Bytes = time.Since(t0), n
	if n != int64(o.MB)<<20 {
		return res, fmt.Errorf("throughput run delivered %d bytes, want %d", n, o.MB<<20)
	}

	// Latency: each line carries the time it was written (ns); the client compares it
	// with the time the event arrived.
	var lat []time.Duration
	cmd := fmt.Sprintf("seq 1 %d | while read i; do date +%%s%%N; sleep 0.01; done", o.Lines)
	_, err = stream(url, cmd, func(text string, at time.Time) {
		for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
			if ns, err := strconv.ParseInt(l, 10, 64); err == nil {
				lat = append(lat, at.Sub(time.Unix(0, ns)))
			}
		}
	})
	if err != nil {
		return res, err
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("no latency samples")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.Samples, res.P50, res.P99, res.Max = len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	return res, nil
}

// stream runs a command and reads its NDJSON answer, returning the stdout bytes that
// arrived as tool_progress; each chunk is passed to seen with its arrival time.
func stream(url, command string, seen func(text string, at time.Time)) (int64, error) {
	body, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"id": "c", "name": "execute_command",
		"arguments": map[string]any{"command": command, "timeout_ms": 600000}}}})
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 32<<20)
	for sc.Scan() {
		at := time.Now()
		var e struct{ Type, Stream, Text, Data string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return n, err
		}
		if e.Type != "tool_progress" || e.Stream != "stdout" {
			continue
		}
		if e.Data != "" {
			b, _ := base64.StdEncoding.DecodeString(e.Data)
			e.Text = string(b)
		}
		n += int64(len(e.Text))
		if seen != nil {
			seen(e.Text, at)
		}
	}
	return n, sc.Err()
}

package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRunShort runs the whole benchmark with tiny counts: every configuration must
// answer every call correctly and the report must evaluate every target. It asserts
// nothing about speed. Under CI=true missing node or npm packages fail the test.
func TestRunShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every proxy and both upstreams")
	}
	o := Options{Clients: 4, Calls: 200, Duration: 3 * time.Second, WarmupCalls: 20, Warmup: time.Second, SerialCalls: 20, Progress: tlog{t}}
	if err := o.Prerequisites(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: scripts/test.sh runs npm ci in testdata/npm and bench/mcpcompare", err)
		}
		t.Skip(err)
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(allTargets)*2 {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(allTargets)*2)
	}
	for _, r := range res.Rows {
		if r.Errors != 0 || r.Calls == 0 || r.FirstError != "" {
			t.Errorf("%s/%s: %d calls, %d errors (%s)", r.Upstream, r.Target, r.Calls, r.Errors, r.FirstError)
		}
		if r.RPS <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.SerialP50 <= 0 {
			t.Errorf("%s/%s: implausible figures %+v", r.Upstream, r.Target, r)
		}
		if r.HasProxy != (r.Target != targetDirect) || (r.HasProxy && r.ProxyCPU < 0) {
			t.Errorf("%s/%s: proxy CPU %v (has proxy %v)", r.Upstream, r.Target, r.ProxyCPU, r.HasProxy)
		}
	}
	var b bytes.Buffer
	res.Print(&b)
	out := b.String()
	t.Log("\n" + out)
	for _, c := range res.Checks {
		if c.Missing {
			t.Errorf("target %q not evaluated", c.Name)
		}
	}
	if n := strings.Count(out, "PASS") + strings.Count(out, "MISS"); n != len(res.Checks) {
		t.Errorf("%d verdicts for %d targets", n, len(res.Checks))
	}
}

// TestCPUTime reads this process's CPU time, which must grow as it works.
func TestCPUTime(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU time did not grow: %v → %v", before, after)
	}
	if machineBusy() <= 0 {
		t.Fatal("no machine-wide CPU time")
	}
}

type tlog struct{ t *testing.T }

func (l tlog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

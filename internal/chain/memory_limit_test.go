package chain_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/sandbox"
)

const testMemoryLimit = 32 << 20

// TestChainMemoryDoubling: a script doubling a value (each `x + x` one step) is
// stopped once it passes chain.max_memory_bytes, and the worker it ran in never held
// much more: the guard stops it between steps, the kernel's bound (a memory cgroup, or
// RLIMIT_AS where none can be made) within a step. Unbounded, the list would reach
// 2^25 slots (512 MiB, with its half alive beside it).
func TestChainMemoryDoubling(t *testing.T) {
	t.Parallel()
	for _, bound := range []string{"cgroup", "rlimit"} {
		t.Run(bound, func(t *testing.T) {
			t.Parallel()
			e := start(t, func(c *config.Config) { c.Chain.MaxMemoryBytes = testMemoryLimit })
			if bound == "rlimit" {
				withoutCgroups(t, e)
			} else if _, err := sandbox.MemoryCgroupParent(); err != nil {
				t.Skipf("no memory cgroup can be made here: %v", err)
			}
			sess := e.session("tool_chain", "t_*")
			for _, tc := range []struct{ name, script string }{
				{"list", "x = [1]\nfor i in range(25):\n    x = x + x\nresult = len(x)\n"},
				{"string", "s = 'ab'\nfor i in range(28):\n    s = s + s\nresult = len(s)\n"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := e.chain(sess, tc.script)
					wantError(t, r, "failed", "chain.max_memory_bytes")
					rss := workerMaxRSS(t, e, r.CallID)
					t.Logf("the worker held %d MiB at most; answer %s", rss>>20, r.Out.Error.Message)
					if rss == 0 {
						// Below the test process's own peak, which Linux counts in a child's
						// maxrss (see TestChainWorkerRSSIsItsOwn).
						t.Logf("the worker's own peak RSS is unknown: below the test process's")
						return
					}
					// The kernel's bound and its headroom (see proc.go), and the worker's own
					// start (about 20 MiB; more under the race detector).
					if limit := int64(2*testMemoryLimit + 64<<20 + 128<<20 + 96<<20); rss > limit {
						t.Errorf("the worker held %d MiB, more than its bound allows (%d MiB)", rss>>20, limit>>20)
					}
				})
			}
		})
	}
}

// workerMaxRSS is the most memory the worker of a chain call held, from its record's
// details; 0 when the record says it is unknown (below the test process's own peak).
func workerMaxRSS(t *testing.T, e *env, callID string) int64 {
	t.Helper()
	var rec struct {
		Result struct {
			Details struct {
				Worker struct {
					MaxRSSBytes int64 `json:"max_rss_bytes"`
				} `json:"worker"`
			} `json:"details"`
		} `json:"result"`
	}
	b, _ := json.Marshal(e.record(callID))
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Result.Details.Worker.MaxRSSBytes < 0 {
		t.Fatalf("the record of %s has a negative worker max_rss_bytes: %s", callID, b)
	}
	return rec.Result.Details.Worker.MaxRSSBytes
}

// TestChainRangeBound: list(range(1 << 40)) asks for 16 TiB in one step, which no check
// between steps can stop and the Go runtime answers by ending the process; the chain's
// range refuses it, and the daemon lives on.
func TestChainRangeBound(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Chain.MaxMemoryBytes = testMemoryLimit })
	sess := e.session("tool_chain", "t_*")
	r := e.chain(sess, "x = list(range(1 << 40))\n")
	wantError(t, r, "failed", fmt.Sprintf("a range of %d elements is more than a chain may make", 1<<40))
	// A range within the bound is Starlark's own.
	r = e.chain(sess, "result = [len(range(1000)), list(range(2, 10, 3)), 5 in range(10), range(3)[-1]]\n")
	if r.IsError || strings.TrimSpace(string(r.Out.Result)) != "[1000,[2,5,8],true,2]" {
		t.Fatalf("a small range: %+v %s", r.Out.Error, r.Out.Result)
	}
}

// TestChainWorkerRSSIsItsOwn: a worker's max_rss_bytes is its own peak, not the
// daemon's. Linux counts in a child's maxrss the peak of the process that started it:
// a daemon that had once held 300 MiB reported every worker, even an idle one, as
// holding that much (and TestChainMemoryDoubling failed whenever other tests had grown
// the test process past its bound). The daemon runs in a child test process, whose
// peak this test raises.
func TestChainWorkerRSSIsItsOwn(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChainWorkerRSSHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CHAIN_RSS_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestChainWorkerRSSHelper") {
		t.Fatalf("the helper did not pass: %s", out)
	}
}

// TestChainWorkerRSSHelper is TestChainWorkerRSSIsItsOwn's daemon, in a process of its
// own: it runs only there.
func TestChainWorkerRSSHelper(t *testing.T) {
	if os.Getenv("CHAIN_RSS_HELPER") != "1" {
		t.Skip("run by TestChainWorkerRSSIsItsOwn")
	}
	e := start(t, nil)
	sess := e.session("tool_chain", "t_*")
	peak := make([]byte, 300<<20)
	for i := range peak {
		peak[i] = 1
	}
	peak = nil
	r := e.chain(sess, "result = 1\n")
	if r.IsError {
		t.Fatalf("%+v", r.Out.Error)
	}
	if rss := workerMaxRSS(t, e, r.CallID); rss >= 250<<20 {
		t.Fatalf("an idle worker held %d MiB at most, says its record: the test process's peak", rss>>20)
	}
}

package chain

import (
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// normalScript is what a chain does between its tool calls: loops over results,
// dicts, string formatting, a JSON round trip.
const normalScript = `
rows = []
for i in range(2000):
    rows.append({"id": i, "name": "item %d" % i, "tags": ["a", "b"] if i % 2 else []})
by_tag = {}
for r in rows:
    for t in r["tags"]:
        by_tag[t] = by_tag.get(t, 0) + 1
names = ",".join([r["name"] for r in rows if r["id"] % 7 == 0])
result = {"n": len(rows), "tags": by_tag, "names": len(names), "json": len(json.encode(rows[:100]))}
`

func runNormal(b *testing.B, guarded bool, probe *heapProbe) time.Duration {
	th := &starlark.Thread{Name: "bench"}
	predeclared := (&script{spec: &workerStart{MaxMemoryBytes: DefaultPolicy().MaxMemoryBytes}}).builtins()
	start := time.Now()
	if guarded {
		g := &memoryGuard{limit: 256 << 20, probe: probe, stop: func(msg string) { b.Fatal(msg) }}
		g.install(th, 10_000_000, func(*starlark.Thread) { b.Fatal("step limit") })
		defer g.start()()
	} else {
		th.SetMaxExecutionSteps(10_000_000)
	}
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true},
		th, "bench.star", normalScript, predeclared); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkChainMemoryGuard runs a normal script with and without the memory guard
// (its step hook and its watcher), alternately in one run, and reports the ratio.
func BenchmarkChainMemoryGuard(b *testing.B) {
	var plain, guarded time.Duration
	probe := &heapProbe{}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 { // alternate, so that neither pays the other's garbage
			plain += runNormal(b, false, probe)
			guarded += runNormal(b, true, probe)
		} else {
			guarded += runNormal(b, true, probe)
			plain += runNormal(b, false, probe)
		}
	}
	b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(guarded.Nanoseconds())/float64(b.N), "guarded-ns/op")
	b.ReportMetric(float64(guarded)/float64(plain), "guarded/plain")
}

package chain

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"
)

// How the memory guard watches a script. Starlark counts steps, not bytes, and the heap
// is the whole process's, so the guard works from the runtime's counters:
//
//   - the bytes allocated since the last measurement bound how much the script can have
//     kept since then (it cannot keep more than the process allocated);
//   - when they could have taken the script past its limit, the script is paused at its
//     next step and a garbage collection measures the live heap: garbage, the other
//     sessions' included, does not count, and the script is stopped only when the live
//     heap has really grown past the limit.
//
// One step is never interrupted, so a single operation that allocates a lot at once
// (`[0] * n`, `s.replace(a, s)`) still allocates it whole before the script is stopped.
const (
	// memoryPoll is how often a running script's allocation is read.
	memoryPoll = 2 * time.Millisecond
	// minForcedGCInterval spaces the collections the guards force, for the whole
	// process: under another session's allocation a script with a small limit would
	// otherwise force one per limit's worth of the process's garbage.
	minForcedGCInterval = 20 * time.Millisecond
)

// heapSample is one reading of the runtime's heap counters.
type heapSample struct {
	allocs uint64 // bytes allocated since the process started
	live   uint64 // live heap as of the last finished collection
	cycles uint64 // collections finished
}

func readHeap() heapSample {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return heapSample{allocs: u(0), live: u(1), cycles: u(2)}
}

// heapProbe forces the collections that measure the live heap, one at a time for the
// whole process (one per chainTool, which the daemon makes once).
type heapProbe struct {
	mu   sync.Mutex
	last time.Time // when the last forced collection ended
}

// measure returns the heap after a collection that finished after seen was read: one
// another guard forced meanwhile serves, else it forces one.
func (h *heapProbe) measure(seen heapSample) heapSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := readHeap(); s.cycles > seen.cycles {
		return s
	}
	if wait := minForcedGCInterval - time.Since(h.last); wait > 0 {
		time.Sleep(wait)
		if s := readHeap(); s.cycles > seen.cycles {
			return s
		}
	}
	runtime.GC()
	h.last = time.Now()
	return readHeap()
}

// memoryGuard stops a script whose live heap grows past its limit.
type memoryGuard struct {
	limit int64
	probe *heapProbe
	stop  func(msg string) // records why and cancels the thread

	// pause is non-nil while a measurement is under way: the script waits for it to be
	// closed at its next step, so it cannot keep allocating while the heap is measured.
	pause atomic.Pointer[chan struct{}]

	done chan struct{}
	wg   sync.WaitGroup
}

// install makes th stop at maxSteps, calling onMaxSteps, and wait at each step while
// the guard measures the heap: the step limit is reached at every step (Starlark's only
// hook between steps) and moved on by one.
func (g *memoryGuard) install(th *starlark.Thread, maxSteps uint64, onMaxSteps func(*starlark.Thread)) {
	th.SetMaxExecutionSteps(1)
	th.OnMaxSteps = func(th *starlark.Thread) {
		if th.Steps >= maxSteps {
			onMaxSteps(th)
			return
		}
		if ch := g.pause.Load(); ch != nil {
			<-*ch
		}
		th.SetMaxExecutionSteps(th.Steps + 1)
	}
}

// start watches until end is called.
func (g *memoryGuard) start() (end func()) {
	if g.limit <= 0 {
		return func() {}
	}
	g.done = make(chan struct{})
	g.wg.Add(1)
	go g.watch()
	return func() {
		close(g.done)
		g.wg.Wait()
	}
}

func (g *memoryGuard) watch() {
	defer g.wg.Done()
	prev := readHeap()
	base := int64(prev.live)
	// ref is the last known live heap, and the allocation counter as it was at some
	// point before that heap was measured: what was allocated since may be kept on top
	// of it (counted twice at worst, which costs a measurement, never a wrong stop).
	ref := prev
	t := time.NewTicker(memoryPoll)
	defer t.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-t.C:
		}
		s := readHeap()
		if s.cycles != ref.cycles {
			// A collection finished since prev was read (the script may have made a
			// large value right after it: the allocation counted since prev covers it).
			ref = heapSample{allocs: prev.allocs, live: s.live, cycles: s.cycles}
		}
		prev = s
		if g.over(int64(s.live) - base) {
			return
		}
		// Even if the script kept all the process allocated since ref, is it within?
		if int64(ref.live)-base+int64(s.allocs-ref.allocs) <= g.limit {
			continue
		}
		ch := make(chan struct{})
		g.pause.Store(&ch)
		m := g.probe.measure(s)
		stopped := g.over(int64(m.live) - base) // before the script takes its next step
		g.pause.Store(nil)
		close(ch)
		if stopped {
			return
		}
		ref = heapSample{allocs: s.allocs, live: m.live, cycles: m.cycles}
		prev = heapSample{allocs: s.allocs, live: m.live, cycles: m.cycles}
	}
}

// over stops the script when grown passes the limit.
func (g *memoryGuard) over(grown int64) bool {
	if grown <= g.limit {
		return false
	}
	g.stop(fmt.Sprintf("the script kept more than %d MiB in memory (chain.max_memory_bytes) and was stopped", g.limit>>20))
	return true
}

// bytesPerRangeElement is about what an element of a range costs once a builtin makes
// the range whole in one step: a list slot is 16 bytes, dict(zip(range(n), range(n)))
// about 130.
const bytesPerRangeElement = 64

// boundedRange is Starlark's range refusing more than max elements. list(range(n)),
// sorted, reversed and zip make a range whole within one step, which the memory guard
// cannot interrupt: list(range(1 << 40)) asked the runtime for 16 TiB at once, and a Go
// program that cannot have the memory it asks for dies, with every session's calls.
func boundedRange(max int64) *starlark.Builtin {
	universal := starlark.Universe["range"].(*starlark.Builtin)
	return starlark.NewBuiltin("range", func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		v, err := universal.CallInternal(th, args, kw)
		if err != nil {
			return nil, err
		}
		if n := starlark.Len(v); int64(n) > max {
			return nil, fmt.Errorf("a range of %d elements is more than a chain may make (%d, from chain.max_memory_bytes)", n, max)
		}
		return v, nil
	})
}

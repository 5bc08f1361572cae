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

// How the memory guard watches a script. Starlark counts steps, not bytes, so the guard
// works from the runtime's counters. It runs in the script's worker process (worker.go),
// whose heap is the script's and the interpreter's; it was written for the daemon's
// heap, shared by every session, and still makes no assumption that it is alone:
//
//   - the bytes allocated since the last measurement bound how much the script can have
//     kept since then (it cannot keep more than the process allocated);
//   - when they could have taken the script past its limit, the script is paused at its
//     next step and a garbage collection measures the live heap: garbage, the other
//     sessions' included, does not count, and the script is stopped only when the live
//     heap has really grown past the limit (measured a second time with the script held,
//     not counting what was allocated meanwhile, since a collection counts as live
//     what is allocated while it runs).
//
// One step is never interrupted, so a single operation that allocates a lot at once
// (`[0] * n`, `s.replace(a, s)`) still allocates it whole before the script is stopped:
// the worker's hard bound (a memory cgroup, or RLIMIT_AS; proc.go) ends the worker
// then, and the guard gives the clearer answer of the usual case.
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
	allocs  uint64 // bytes allocated since the process started
	live    uint64 // live heap as of the last finished collection
	cycles  uint64 // collections finished
	objects uint64 // heap in use now: the live heap, what was allocated since, garbage not yet swept
}

func readHeap() heapSample {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return heapSample{allocs: u(0), live: u(1), cycles: u(2), objects: u(3)}
}

// heapProbe forces the collections that measure the live heap, one at a time for the
// whole process (one per chainTool, which the daemon makes once).
type heapProbe struct {
	mu   sync.Mutex
	last time.Time // when the last forced collection ended
}

// next is how long until a forced collection is allowed.
func (h *heapProbe) next() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return minForcedGCInterval - time.Since(h.last)
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

	// pause is non-nil while a measurement is under way: the script waits at its next
	// step until it ends, so that it cannot keep allocating while the heap is measured.
	pause atomic.Pointer[pause]

	done chan struct{}
	wg   sync.WaitGroup
}

// pause holds a script between two steps.
type pause struct {
	arrive  sync.Once
	arrived chan struct{} // closed when the script waits
	release chan struct{} // closed when it may go on
}

func newPause() *pause {
	return &pause{arrived: make(chan struct{}), release: make(chan struct{})}
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
		if p := g.pause.Load(); p != nil {
			p.arrive.Do(func() { close(p.arrived) })
			<-p.release
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
	start := g.baseline()
	g.wg.Add(1)
	go g.watch(start)
	return func() {
		close(g.done)
		g.wg.Wait()
	}
}

// baseline is the live heap as the script starts. The last collection's may be long
// out of date (the daemon's heap has grown since, and that growth would be blamed on
// the script); the heap in use now is at most that much above the live heap. When the
// two differ by more than a quarter of the limit a collection measures it.
func (g *memoryGuard) baseline() heapSample {
	s := readHeap()
	if s.objects > s.live && s.objects-s.live > uint64(g.limit/4) {
		m := g.probe.measure(s)
		return heapSample{allocs: s.allocs, live: m.live, cycles: m.cycles}
	}
	return heapSample{allocs: s.allocs, live: max(s.live, s.objects), cycles: s.cycles}
}

func (g *memoryGuard) watch(start heapSample) {
	defer g.wg.Done()
	base := int64(start.live)
	// ref is the last known live heap, and the allocation counter as it was at some
	// point before that heap was measured: what was allocated since may be kept on top
	// of it (counted twice at worst, which costs a measurement, never a wrong stop).
	ref, prev := start, start
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
		// Even if the script kept all the process allocated since ref, is it within?
		if int64(ref.live)-base+int64(s.allocs-ref.allocs) <= g.limit {
			continue
		}
		// Wait for the collections' turn with the script running: held through the
		// wait, it would crawl while other sessions' garbage keeps calling for them.
		if wait := g.probe.next(); wait > 0 {
			select {
			case <-g.done:
				return
			case <-time.After(wait):
			}
			s = readHeap()
		}
		p := newPause()
		g.pause.Store(p)
		r, stopped := g.measure(s, p, base)
		g.pause.Store(nil) // after the stop: the script's next step sees it
		close(p.release)
		if stopped {
			return
		}
		ref, prev = r, r
	}
}

// measure is called with the script held at (or on its way to) its next step; it
// stops the script when its live heap has grown past the limit, and returns the heap
// it found.
func (g *memoryGuard) measure(s heapSample, p *pause, base int64) (heapSample, bool) {
	m := g.probe.measure(s)
	m.allocs = s.allocs
	if int64(m.live)-base <= g.limit {
		return m, false
	}
	// A collection counts as live what was allocated while it marked, other sessions'
	// garbage included. Before stopping the script, measure again once it is held
	// (a step under way has ended and made its value), not counting what was allocated
	// during that collection: none of it is the script's.
	select {
	case <-p.arrived:
	case <-g.done:
		return m, false
	}
	before := readHeap()
	m = g.probe.measure(before)
	m.live -= min(m.live, m.allocs-before.allocs)
	m.allocs = before.allocs
	return m, g.over(int64(m.live) - base)
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

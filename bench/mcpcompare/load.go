package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// caller makes one echo call as concurrent caller number client (0 ≤ client <
// Options.Clients) and checks the answer: "Echo: " + msg must come back.
type caller func(ctx context.Context, client int, msg string) error

// bound limits one phase of load: whichever of calls and time runs out first.
type bound struct {
	calls int
	time  time.Duration
}

// phase is what one phase of load measured.
type phase struct {
	lat     []time.Duration // sorted, successful calls only
	errors  int
	firstEr error
	elapsed time.Duration
}

// load runs clients callers until b is spent. Every caller issues its next call as
// soon as the previous one is answered.
func load(ctx context.Context, clients int, b bound, call caller) phase {
	ctx, cancel := context.WithTimeout(ctx, b.time)
	defer cancel()
	var (
		claimed atomic.Int64
		mu      sync.Mutex
		p       phase
		wg      sync.WaitGroup
	)
	t0 := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1024)
			errs := 0
			var first error
			for n := 0; ctx.Err() == nil && claimed.Add(1) <= int64(b.calls); n++ {
				msg := "c" + strconv.Itoa(c) + "-" + strconv.Itoa(n)
				start := time.Now()
				err := call(ctx, c, msg)
				d := time.Since(start)
				if err != nil {
					if ctx.Err() != nil {
						break // cut by the time bound, not a failure
					}
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, d)
			}
			mu.Lock()
			p.lat = append(p.lat, lat...)
			p.errors += errs
			if p.firstEr == nil {
				p.firstEr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	p.elapsed = time.Since(t0)
	sort.Slice(p.lat, func(i, j int) bool { return p.lat[i] < p.lat[j] })
	return p
}

func (p phase) quantile(q float64) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	return p.lat[min(len(p.lat)-1, int(float64(len(p.lat))*q))]
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every
// Linux architecture Go supports.
const clockTick = 100

// cpuTime is the user+system CPU time pid has used so far (all its threads, not its
// children).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// descendants lists the processes below pid (children, grandchildren, …).
func descendants(pid int) []int {
	parent := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range parent[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// cpuMeter samples the CPU time of a set of processes; processes are fixed when the
// meter is made, so that one that exits later reads as what it had used.
type cpuMeter struct {
	pids []int
	last map[int]time.Duration
}

func newCPUMeter(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, last: map[int]time.Duration{}}
	m.read()
	return m
}

// read is the total CPU time of the meter's processes so far.
func (m *cpuMeter) read() time.Duration {
	var sum time.Duration
	for _, p := range m.pids {
		if t, err := cpuTime(p); err == nil {
			m.last[p] = t
		}
		sum += m.last[p]
	}
	return sum
}

// machineBusy is the CPU time all processes on the machine have used so far (every
// CPU, from the first line of /proc/stat): total minus idle and iowait.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, s := range f[1:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest and guest_nice are already counted in user and nice
			break
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / clockTick
}

// loadAvg is the 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

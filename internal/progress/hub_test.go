package progress

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSubscriberThatNeverReadsDoesNotBlockEmit(t *testing.T) {
	t.Parallel()
	h, reg := newTestHub(t, func(c *Config) { c.FlushInterval, c.SubscriberBuffer = 0, 2 })
	stuck := h.Subscribe(Filter{All: true}) // never read
	const emits = 10000
	done := make(chan struct{})
	go func() {
		defer close(done)
		e := h.Begin(CallMeta{CallID: "tc_1"})
		for range emits {
			e.Emit("stdout", "line\n")
		}
		e.Close()
	}()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Emit blocked on a subscriber that never reads")
	}
	if got, want := stuck.Dropped(), int64(emits+1-2); got != want {
		t.Fatalf("dropped %d, want %d (all but the buffered 2)", got, want)
	}
	if d := counter(t, reg, "toolserverd_progress_events_dropped_total"); d != float64(emits+1-2) {
		t.Fatalf("dropped_total = %v", d)
	}
	if n := counter(t, reg, "toolserverd_progress_events_total"); n != emits+1 {
		t.Fatalf("events_total = %v, want %d", n, emits+1)
	}
}

func TestFilters(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = 0 })
	subs := map[string]*Subscription{
		"session A":          h.Subscribe(Filter{SessionID: "A"}),
		"calls a1,b1":        h.Subscribe(Filter{CallIDs: []string{"a1", "b1"}}),
		"session A + b1, a1": h.Subscribe(Filter{SessionID: "A", CallIDs: []string{"b1", "a1"}}),
		"all":                h.Subscribe(Filter{All: true}),
		"zero":               h.Subscribe(Filter{}),
		"session C":          h.Subscribe(Filter{SessionID: "C"}),
	}
	closedEarly := h.Subscribe(Filter{All: true})
	closedEarly.Close()
	closedEarly.Close()

	for _, m := range []CallMeta{{CallID: "a1", SessionID: "A"}, {CallID: "a2", SessionID: "A"}, {CallID: "b1", SessionID: "B"}, {CallID: "n1"}} {
		e := h.Begin(m)
		e.Emit("stdout", m.CallID)
		e.Close()
	}
	want := map[string][]string{
		"session A":          {"a1", "a1.", "a2", "a2."},
		"calls a1,b1":        {"a1", "a1.", "b1", "b1."},
		"session A + b1, a1": {"a1", "a1.", "a2", "a2.", "b1", "b1."},
		"all":                {"a1", "a1.", "a2", "a2.", "b1", "b1.", "n1", "n1."},
		"zero":               nil,
		"session C":          nil,
	}
	for name, s := range subs {
		var got []string
		for _, ev := range pending(s) {
			if ev.Closed {
				got = append(got, ev.CallID+".")
			} else {
				got = append(got, ev.Text)
			}
		}
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s: got %q, want %q", name, got, want[name])
		}
	}
	if _, ok := <-closedEarly.Events(); ok {
		t.Error("closed subscription received an event")
	}
}

func TestRetentionCollectsFinishedLogs(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.Retention = time.Hour })
	done := h.Begin(CallMeta{CallID: "tc_done"})
	done.Emit("stdout", "x")
	done.Close()
	live := h.Begin(CallMeta{CallID: "tc_live"})
	live.Emit("stdout", "y")
	defer live.Close()

	// Directories left by an earlier process: one idle past retention, one fresh.
	old := filepath.Join(h.cfg.Dir, "tc_old")
	fresh := filepath.Join(h.cfg.Dir, "tc_fresh")
	for _, dir := range []string{old, fresh} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stdout.log"), []byte("z"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{filepath.Join(old, "stdout.log"), old} {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}

	exists := func(id string) bool {
		_, err := os.Stat(filepath.Join(h.cfg.Dir, id))
		return err == nil
	}
	h.collect(time.Now().Add(30 * time.Minute))
	if !exists("tc_done") || exists("tc_old") || !exists("tc_fresh") || !exists("tc_live") {
		t.Fatalf("after 30m: done %v old %v fresh %v live %v; want only old gone",
			exists("tc_done"), exists("tc_old"), exists("tc_fresh"), exists("tc_live"))
	}
	h.collect(time.Now().Add(2 * time.Hour))
	if exists("tc_done") || !exists("tc_live") {
		t.Fatalf("after 2h: done %v live %v; want done gone, live kept", exists("tc_done"), exists("tc_live"))
	}
	if _, _, _, err := h.Read("tc_done", "stdout", 0, 0); !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("Read of a collected call: %v, want ErrUnknownCall", err)
	}
	if data, _, _, err := h.Read("tc_live", "stdout", 0, 0); err != nil || string(data) != "y" {
		t.Fatalf("Read of the live call = %q, %v", data, err)
	}
}

func TestRetentionRunsInBackground(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.Retention = 20 * time.Millisecond })
	e := h.Begin(CallMeta{CallID: "tc_1"})
	e.Emit("stdout", "x")
	e.Close()
	deadline := time.Now().Add(waitLimit)
	for {
		_, _, _, err := h.Read("tc_1", "stdout", 0, 0)
		if errors.Is(err, ErrUnknownCall) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finished call not collected: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Read fails as soon as the log file is gone, which may be before RemoveAll has
	// removed its directory.
	for {
		_, err := os.Stat(filepath.Join(h.cfg.Dir, "tc_1"))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log dir still there: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLogsOfEarlierProcessStayReadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Dir = dir
	first, err := NewHub(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	odd := "../a b/ü\x00" // neither may escape Dir nor collide
	e := first.Begin(CallMeta{CallID: odd})
	e.Emit("weird/stream", "abc\xff\xfe")
	e.Emit("stdout", "out")
	first.Stop() // the process ends without closing the call

	second, err := NewHub(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Stop()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || strings.ContainsAny(entries[0].Name(), "/. ") {
		t.Fatalf("Dir holds %v, want one safely named directory", entries)
	}
	data, next, finished, err := second.Read(odd, "weird/stream", 1, 0)
	if err != nil || string(data) != "bc\xff\xfe" || next != 5 || !finished {
		t.Fatalf("Read = %q, %d, %v, %v", data, next, finished, err)
	}
	if got := second.Streams(odd); !slices.Equal(got, []string{"stdout", "weird/stream"}) {
		t.Fatalf("Streams = %q", got)
	}
	// Rerunning the call id in the new process starts its logs afresh.
	e = second.Begin(CallMeta{CallID: odd})
	e.Emit("stdout", "new")
	if data, _, finished, _ := second.Read(odd, "stdout", 0, 0); string(data) != "new" || finished {
		t.Fatalf("Read after rerun = %q, finished %v", data, finished)
	}
	e.Close()
}

func TestRead(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = 0 })
	e := h.Begin(CallMeta{CallID: "tc_1"})
	e.Emit("stdout", "0123456789")
	cases := []struct {
		name       string
		call, strm string
		off        int64
		max        int
		data       string
		next       int64
		finished   bool
		err        error
	}{
		{"all", "tc_1", "stdout", 0, 0, "0123456789", 10, false, nil},
		{"window", "tc_1", "stdout", 3, 4, "3456", 7, false, nil},
		{"at end", "tc_1", "stdout", 10, 0, "", 10, false, nil},
		{"past end", "tc_1", "stdout", 99, 0, "", 99, false, nil},
		{"unwritten stream", "tc_1", "stderr", 0, 0, "", 0, false, nil},
		{"negative offset", "tc_1", "stdout", -1, 0, "", -1, false, ErrBadOffset},
		{"unknown call", "tc_nope", "stdout", 0, 0, "", 0, false, ErrUnknownCall},
		{"path escape", "..", "stdout", 0, 0, "", 0, false, ErrUnknownCall},
	}
	for _, tc := range cases {
		data, next, finished, err := h.Read(tc.call, tc.strm, tc.off, tc.max)
		if string(data) != tc.data || next != tc.next || finished != tc.finished || !errors.Is(err, tc.err) {
			t.Errorf("%s: Read = %q, %d, %v, %v; want %q, %d, %v, %v",
				tc.name, data, next, finished, err, tc.data, tc.next, tc.finished, tc.err)
		}
	}
	e.Close()
	if _, _, finished, _ := h.Read("tc_1", "stdout", 5, 2); finished {
		t.Error("finished before the end of the log")
	}
	if _, _, finished, _ := h.Read("tc_1", "stdout", 5, 0); !finished {
		t.Error("not finished at the end of a closed call's log")
	}
	info, err := h.Info("tc_1")
	if err != nil || !info.Finished || info.Sizes["stdout"] != 10 || len(info.Sizes) != 1 {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	if h.Streams("tc_nope") != nil {
		t.Error("Streams of an unknown call is not nil")
	}
}

func TestDisabledHubDoesNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "never")
	h, err := NewHub(Config{Enabled: false, Dir: dir}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	sub := h.Subscribe(Filter{All: true})
	defer sub.Close()
	e := h.Begin(CallMeta{CallID: "tc_1"})
	e.Emit("stdout", "x")
	e.Close()
	var nilEmitter *Emitter
	nilEmitter.Emit("stdout", "x")
	if got := pending(sub); len(got) != 0 {
		t.Fatalf("disabled hub published %v", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("disabled hub touched Dir: %v", err)
	}
	if _, _, _, err := h.Read("tc_1", "stdout", 0, 0); !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("Read: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := DefaultConfig()
	valid.Dir = t.TempDir()
	cases := []struct {
		name string
		edit func(*Config)
		bad  string
	}{
		{"defaults", func(*Config) {}, ""},
		{"no coalescing", func(c *Config) { c.FlushInterval = 0 }, ""},
		{"disabled without dir", func(c *Config) { c.Enabled, c.Dir = false, "" }, ""},
		{"negative interval", func(c *Config) { c.FlushInterval = -1 }, "flush interval"},
		{"zero flush bytes", func(c *Config) { c.FlushBytes = 0 }, "flush bytes"},
		{"huge flush bytes", func(c *Config) { c.FlushBytes = 1 << 30 }, "flush bytes"},
		{"no dir", func(c *Config) { c.Dir = "" }, "dir"},
		{"zero retention", func(c *Config) { c.Retention = 0 }, "retention"},
		{"zero buffer", func(c *Config) { c.SubscriberBuffer = 0 }, "subscriber buffer"},
	}
	for _, tc := range cases {
		cfg := valid
		tc.edit(&cfg)
		err := cfg.Validate()
		if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%s: Validate() = %v, want error about %q", tc.name, err, tc.bad)
		}
	}
	if _, err := NewHub(Config{Enabled: true}, nil); err == nil {
		t.Error("NewHub accepted an invalid config")
	}
	reg := prometheus.NewRegistry()
	if _, err := NewHub(valid, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewHub(valid, reg); err == nil {
		t.Error("second hub on one registry: metrics registered twice without error")
	}
}

// Many calls emitting concurrently while subscriptions come and go: every call's
// log and the events of a subscriber that keeps up agree exactly.
func TestConcurrentCallsAndSubscriptions(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) {
		c.FlushInterval, c.FlushBytes, c.SubscriberBuffer = time.Millisecond, 512, 1<<16
	})
	all := h.Subscribe(Filter{All: true})
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s := h.Subscribe(Filter{SessionID: fmt.Sprint("ses", i%4), CallIDs: []string{fmt.Sprint("tc_", i%50)}})
			pending(s)
			s.Close()
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				id := fmt.Sprintf("tc_%d_%d", w, i)
				e := h.Begin(CallMeta{CallID: id, SessionID: fmt.Sprint("ses", i%4)})
				for j := range 200 {
					e.Emit([]string{"stdout", "stderr"}[j%2], fmt.Sprintf("%s:%d;", id, j))
				}
				e.Close()
			}
		})
	}
	wg.Wait()
	close(stop)
	churn.Wait()

	checks := map[string]*streamCheck{}
	closed := 0
	for closed < 8*25 {
		ev := next(t, all)
		if ev.Closed {
			closed++
			continue
		}
		if checks[ev.CallID] == nil {
			checks[ev.CallID] = newStreamCheck()
		}
		if err := checks[ev.CallID].add(ev); err != nil {
			t.Fatalf("%s: %v", ev.CallID, err)
		}
	}
	for id, check := range checks {
		for _, stream := range []string{"stdout", "stderr"} {
			log := sha256.Sum256(readAll(t, h, id, stream, 0))
			if got := check.sum(stream); !bytes.Equal(got, log[:]) || check.next[stream] == 0 {
				t.Fatalf("%s %s: events (%d bytes) differ from the log", id, stream, check.next[stream])
			}
		}
	}
	if len(checks) != 8*25 {
		t.Fatalf("events from %d calls, want %d", len(checks), 8*25)
	}
}

// TestFinishedCallsLeaveMemory: a finished call is forgotten after FinishedLinger, so
// that memory does not grow with every call of the Retention (an hour of calls at
// 2,000/s is millions); its logs, sizes and latest value are still read, from disk,
// until Retention. A running call stays.
func TestFinishedCallsLeaveMemory(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FinishedLinger = 20 * time.Millisecond })
	done := h.Begin(CallMeta{CallID: "tc_done", SessionID: "ses_1"})
	done.Emit("stdout", "hello\n")
	done.Report(3, 4, "three of four")
	done.Close()
	running := h.Begin(CallMeta{CallID: "tc_running"})
	running.Emit("stdout", "still here\n")
	deadline := time.Now().Add(waitLimit)
	for h.lookup("tc_done") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the finished call is still in memory")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := string(readAll(t, h, "tc_done", "stdout", 0)); got != "hello\n" {
		t.Errorf("stdout read back from disk: %q", got)
	}
	if _, _, fin, err := h.Read("tc_done", "stdout", 6, 0); !fin || err != nil {
		t.Errorf("read at the end: finished %v, %v", fin, err)
	}
	if v, ok := h.Latest("tc_done"); !ok || v.Progress != 3 || v.Total != 4 || v.Message != "three of four" || v.Seq != 1 {
		t.Errorf("latest value from disk: %+v %v", v, ok)
	}
	info, err := h.Info("tc_done")
	if err != nil || !info.Finished || info.Sizes["stdout"] != 6 || info.Progress == nil || info.Progress.Progress != 3 {
		t.Errorf("info from disk: %+v %v", info, err)
	}
	if h.lookup("tc_running") == nil {
		t.Error("a running call left memory")
	}
}

// TestHoldKeepsProgressOpenPastClose: a held call takes emits after Close and is
// finished, with one closed event, only once the last hold is released.
func TestHoldKeepsProgressOpenPastClose(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = 0 })
	sub := h.Subscribe(Filter{All: true})
	e := h.Begin(CallMeta{CallID: "tc_h"})
	release, release2 := e.Hold(), e.Hold()
	e.Emit("stdout", "a")
	e.Close()
	e.Emit("stdout", "b")
	release()
	release() // a second call of one release does not release the other hold
	e.Emit("stdout", "c")
	if _, _, fin, err := h.Read("tc_h", "stdout", 0, 0); err != nil || fin {
		t.Fatalf("held call: finished %v, err %v", fin, err)
	}
	release2()
	e.Emit("stdout", "dropped")
	data, _, fin, err := h.Read("tc_h", "stdout", 0, 0)
	if err != nil || !fin || string(data) != "abc" {
		t.Fatalf("after the last release: %q finished %v err %v", data, fin, err)
	}
	if r := e.Hold(); r == nil {
		t.Fatal("Hold after the end returned nil")
	} else {
		r()
	}
	var closed int
	for len(sub.Events()) > 0 {
		if ev := <-sub.Events(); ev.Closed {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d closed events, want 1", closed)
	}

	// Released before Close: Close ends the call at once.
	e2 := h.Begin(CallMeta{CallID: "tc_h2"})
	e2.Hold()()
	e2.Close()
	if _, _, fin, _ := h.Read("tc_h2", "stdout", 0, 0); !fin {
		t.Fatal("call released before Close is not finished after it")
	}
	// The zero emitter's Hold does nothing.
	(&Emitter{}).Hold()()
}

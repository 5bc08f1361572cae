package progress

import (
	"strings"
	"testing"
	"time"
)

func texts(evs []Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Text
		if ev.Closed {
			out[i] = "<closed>"
		}
	}
	return out
}

func TestCoalescingWithinWindow(t *testing.T) {
	t.Parallel()
	// A window far longer than the test makes "within the window" certain.
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = time.Hour })
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}})
	e := h.Begin(CallMeta{CallID: "tc_1", ToolCallID: "call_1", SessionID: "ses_1"})

	e.Emit("stdout", "first\n") // opens the window: published at once
	ev := next(t, sub)
	if ev.Text != "first\n" || ev.Offset != 0 || ev.Stream != "stdout" || ev.ToolCallID != "call_1" || ev.SessionID != "ses_1" {
		t.Fatalf("first event = %+v", ev)
	}
	var want strings.Builder
	for i := range 500 {
		s := string(rune('a' + i%26))
		e.Emit("stdout", s)
		want.WriteString(s)
	}
	if got := pending(sub); len(got) != 0 {
		t.Fatalf("emits within the window published %d events: %q", len(got), texts(got))
	}
	e.Close()
	ev = next(t, sub)
	if ev.Text != want.String() || ev.Offset != int64(len("first\n")) {
		t.Fatalf("coalesced event = %q at %d, want %q at %d", ev.Text, ev.Offset, want.String(), len("first\n"))
	}
	if ev = next(t, sub); !ev.Closed || ev.Text != "" || ev.Stream != "" || ev.CallID != "tc_1" {
		t.Fatalf("want the closed event, got %+v", ev)
	}
}

func TestCoalescingWindowElapses(t *testing.T) {
	t.Parallel()
	const window = 200 * time.Millisecond
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = window })
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	defer e.Close()

	e.Emit("stderr", "a")
	first := next(t, sub)
	e.Emit("stderr", "b")
	e.Emit("stderr", "c")
	ev := next(t, sub) // delivered by the timer, not by Close
	if ev.Text != "bc" || ev.Offset != 1 || ev.Stream != "stderr" {
		t.Fatalf("timer flush = %+v, want \"bc\" at 1", ev)
	}
	if gap := ev.TS.Sub(first.TS); gap < window {
		t.Fatalf("timer flushed %v after the previous flush, window is %v", gap, window)
	}
}

func TestFlushBytesThreshold(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = time.Hour; c.FlushBytes = 16 })
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	defer e.Close()

	e.Emit("stdout", "x")
	next(t, sub)
	e.Emit("stdout", "0123456789")
	if got := pending(sub); len(got) != 0 {
		t.Fatalf("10 of 16 bytes flushed early: %q", texts(got))
	}
	e.Emit("stdout", "abcdefghij") // 20 bytes pending >= 16
	if got := pending(sub); len(got) != 1 || got[0].Text != "0123456789abcdefghij" || got[0].Offset != 1 {
		t.Fatalf("threshold flush = %q, want one event of 20 bytes at 1", texts(got))
	}
	big := strings.Repeat("z", 40) // a chunk over the threshold on an empty buffer
	e.Emit("stdout", big)
	if got := pending(sub); len(got) != 1 || got[0].Text != big || got[0].Offset != 21 {
		t.Fatalf("large chunk = %q, want it alone at 21", texts(got))
	}
}

func TestCloseFlushesAllStreamsThenOneClosedEvent(t *testing.T) {
	t.Parallel()
	h, reg := newTestHub(t, func(c *Config) { c.FlushInterval = time.Hour })
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	for _, s := range []string{"stdout", "stderr", "info"} {
		e.Emit(s, s+"-1 ")
		e.Emit(s, s+"-2 ")
	}
	e.Close()
	e.Close()
	e.Emit("stdout", "late")
	h.Begin(CallMeta{CallID: "tc_1"}).Emit("stdout", "rejoined after close")

	got := texts(pending(sub))
	want := []string{"stdout-1 ", "stderr-1 ", "info-1 ", "stdout-2 ", "stderr-2 ", "info-2 ", "<closed>"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events = %q, want %q", got, want)
	}
	if n := counter(t, reg, "toolserverd_progress_events_total"); n != float64(len(want)) {
		t.Fatalf("events_total = %v, want %d", n, len(want))
	}
	for _, s := range []string{"stdout", "stderr", "info"} {
		if log := string(readAll(t, h, "tc_1", s, 0)); log != s+"-1 "+s+"-2 " {
			t.Fatalf("%s log = %q", s, log)
		}
	}
	if got := h.Streams("tc_1"); strings.Join(got, ",") != "info,stderr,stdout" {
		t.Fatalf("Streams = %q", got)
	}
}

func TestZeroIntervalPublishesEveryEmit(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = 0 })
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	var off int64
	for i := range 100 {
		s := strings.Repeat("y", i+1)
		e.Emit("stdout", s)
		ev := next(t, sub)
		if ev.Text != s || ev.Offset != off {
			t.Fatalf("emit %d: event %q at %d, want %q at %d", i, ev.Text, ev.Offset, s, off)
		}
		off += int64(len(s))
	}
	e.Emit("stdout", "") // empty emits carry nothing
	e.Close()
	if ev := next(t, sub); !ev.Closed {
		t.Fatalf("want closed, got %+v", ev)
	}
}

func TestStopFlushesAndClosesSubscriptions(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = time.Hour })
	sub := h.Subscribe(Filter{All: true})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	e.Emit("stdout", "a")
	e.Emit("stdout", "b")
	h.Stop()
	e.Emit("stdout", "after stop")
	var got []string
	for ev := range sub.Events() { // ends: Stop closed the channel
		got = append(got, texts([]Event{ev})...)
	}
	if strings.Join(got, "|") != "a|b" {
		t.Fatalf("events = %q, want a then the flushed b", got)
	}
	if s := h.Subscribe(Filter{All: true}); s != nil {
		if _, ok := <-s.Events(); ok {
			t.Fatal("subscription after Stop is open")
		}
	}
	data, _, finished, err := h.Read("tc_1", "stdout", 0, 0)
	if err != nil || string(data) != "ab" || finished {
		t.Fatalf("Read after Stop = %q, finished %v, %v; want \"ab\", unfinished", data, finished, err)
	}
}

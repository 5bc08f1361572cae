package progress

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestReportLatestWinsInOneWindow: reports within one window go out as one event
// whose text holds every line and whose value is the last report; the first report
// after a quiet window goes out at once with its own value. A subscriber that never
// reads holds up nothing.
func TestReportLatestWinsInOneWindow(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval, c.FlushBytes, c.SubscriberBuffer = time.Hour, 1<<20, 2 })
	_ = h.Subscribe(Filter{All: true}) // never read
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}, Buffer: 16})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	const reports = 10000
	// The subscriber that never reads must not block Report: a hang guard, not a
	// speed check (bench_test.go measures the speed).
	start := time.Now()
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		for i := 1; i <= reports; i++ {
			e.Report(float64(i), reports, "step "+strconv.Itoa(i))
		}
	}()
	select {
	case <-reported:
		t.Logf("%d reports took %s", reports, time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatalf("%d reports still not done after %s: Report blocks", reports, time.Since(start))
	}
	first := next(t, sub)
	if first.Progress == nil || first.Progress.Progress != 1 || first.Progress.Seq != 1 || first.Text != "step 1 (1/10000)\n" || first.Stream != "info" {
		t.Fatalf("first event = %+v (value %+v), want report 1 at once", first, first.Progress)
	}
	if v, ok := h.Latest("tc_1"); !ok || v.Progress != reports || v.Total != reports || v.Message != "step 10000" || v.Seq != reports {
		t.Fatalf("Latest = %+v, %v; want the last report", v, ok)
	}
	if got := pending(sub); len(got) != 0 {
		t.Fatalf("events inside the window: %d, want none before it ends", len(got))
	}
	e.Close()
	rest := next(t, sub)
	if rest.Progress == nil || rest.Progress.Progress != reports || rest.Progress.Seq != reports {
		t.Fatalf("flushed event carries %+v, want the last report", rest.Progress)
	}
	if n := strings.Count(rest.Text, "\n"); n != reports-1 || !strings.HasSuffix(rest.Text, "step 10000 (10000/10000)\n") {
		t.Fatalf("flushed text has %d lines, ends %q", n, rest.Text[max(0, len(rest.Text)-40):])
	}
	if ev := next(t, sub); !ev.Closed || ev.Progress != nil {
		t.Fatalf("want the closed event without a value, got %+v", ev)
	}
	// The info log holds every line: text-only readers lose nothing.
	if log := readAll(t, h, "tc_1", "info", 0); strings.Count(string(log), "\n") != reports {
		t.Fatalf("info log has %d lines, want %d", strings.Count(string(log), "\n"), reports)
	}
	e.Report(reports+1, 0, "after close")
	if v, _ := h.Latest("tc_1"); v.Seq != reports {
		t.Fatalf("a report after Close changed the value: %+v", v)
	}
	info, err := h.Info("tc_1")
	if err != nil || info.Progress == nil || info.Progress.Seq != reports {
		t.Fatalf("Info = %+v, %v", info, err)
	}
}

// TestReportEventValueMatchesItsText: with a short window, every event that carries
// a value carries the report whose line ends its text, values only move forward, and
// the last event has the last report.
func TestReportEventValueMatchesItsText(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = 2 * time.Millisecond })
	sub := h.Subscribe(Filter{CallIDs: []string{"tc_1"}})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	const reports = 300
	for i := 1; i <= reports; i++ {
		e.Report(float64(i), 0, "")
		if i%3 == 0 {
			e.Emit("stdout", "out\n")
			time.Sleep(50 * time.Microsecond)
		}
	}
	e.Close()
	var seq uint64
	valued := 0
	for ev := range sub.Events() {
		if ev.Closed {
			break
		}
		if ev.Stream != "info" {
			if ev.Progress != nil {
				t.Fatalf("a %s event carries a value", ev.Stream)
			}
			continue
		}
		if ev.Progress == nil {
			t.Fatalf("an info event of reports only has no value: %q", ev.Text)
		}
		valued++
		if ev.Progress.Seq <= seq {
			t.Fatalf("value went from seq %d to %d", seq, ev.Progress.Seq)
		}
		seq = ev.Progress.Seq
		lines := strings.Split(strings.TrimSuffix(ev.Text, "\n"), "\n")
		if want := tool.ProgressLine(ev.Progress.Progress, 0, ""); lines[len(lines)-1]+"\n" != want {
			t.Fatalf("event ends with %q but carries %+v", lines[len(lines)-1], ev.Progress)
		}
	}
	if seq != reports || valued < 2 {
		t.Fatalf("last value seq %d over %d events, want %d over several", seq, valued, reports)
	}
}

// TestReportBounds: bad numbers never become the value (a message still goes out as
// text), long messages are cut on a character boundary, and a call out of streams
// still keeps its value for pollers.
func TestReportBounds(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, func(c *Config) { c.FlushInterval = 0 })
	sub := h.Subscribe(Filter{All: true})
	e := h.Begin(CallMeta{CallID: "tc_1"})
	e.Report(math.NaN(), 1, "nan")
	e.Report(1, math.Inf(1), "")
	e.Report(-2, 0, "negative")
	if _, ok := h.Latest("tc_1"); ok {
		t.Fatal("bad numbers became the value")
	}
	for _, want := range []string{"nan\n", "negative\n"} {
		if ev := next(t, sub); ev.Text != want || ev.Progress != nil {
			t.Fatalf("event %q (value %+v), want text %q without a value", ev.Text, ev.Progress, want)
		}
	}
	long := strings.Repeat("é", MaxMessage) // 2 bytes each
	e.Report(5, 10, long)
	v, _ := h.Latest("tc_1")
	if len(v.Message) > MaxMessage || !utf8.ValidString(v.Message) || !strings.HasSuffix(v.Message, "…") {
		t.Fatalf("message of %d bytes (valid %v) ends %q", len(v.Message), utf8.ValidString(v.Message), v.Message[max(0, len(v.Message)-8):])
	}
	if ev := next(t, sub); ev.Progress == nil || ev.Progress.Message != v.Message || len(ev.Text) > MaxMessage+20 {
		t.Fatalf("event of %d bytes with %+v", len(ev.Text), ev.Progress)
	}

	full := h.Begin(CallMeta{CallID: "tc_full"})
	for i := range maxStreams {
		full.Emit("s"+strconv.Itoa(i), "x")
	}
	full.Report(3, 4, "no stream left")
	if v, ok := h.Latest("tc_full"); !ok || v.Progress != 3 || v.Total != 4 {
		t.Fatalf("Latest of a call out of streams = %+v, %v", v, ok)
	}
	if _, ok := h.Latest("tc_unknown"); ok {
		t.Fatal("an unknown call has a value")
	}
	e.Close()
	full.Close()
}

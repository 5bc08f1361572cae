package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// testCallOutputOpen: a call that finishes with its output still open (a background
// job streams under it) is listed as live until CloseCallOutput or the recovery of its
// owner (AbandonCalls) clears the mark.
func testCallOutputOpen(t *testing.T, s store.Store) {
	mk := func(id, owner string, created time.Duration) *store.Call {
		c := runningCall(id, "ses_1", "call_"+id, at(created))
		c.Owner = owner
		return c
	}
	done := tool.TextResult("Started background job j1")
	mustWrite(t, s, []*store.Call{
		mk("tc_1", "r1", 1*time.Second), // finishes with its output open
		mk("tc_2", "r1", 2*time.Second), // finishes, output closed
		mk("tc_3", "r2", 3*time.Second), // finishes with its output open, on another replica
		mk("tc_4", "r1", 4*time.Second), // stays running
	}, nil)
	// One written whole, already finished, with its output open (a folded insert).
	whole := mk("tc_5", "r1", 5*time.Second)
	whole.Status, whole.Result, whole.FinishedAt, whole.OutputOpen = store.CallSucceeded, done, ptr(at(6*time.Second)), true
	mustWrite(t, s, []*store.Call{whole}, []store.CallFinish{
		{ID: "tc_1", Status: store.CallSucceeded, Result: done, FinishedAt: at(10 * time.Second), OutputOpen: true},
		{ID: "tc_2", Status: store.CallSucceeded, Result: done, FinishedAt: at(10 * time.Second)},
		{ID: "tc_3", Status: store.CallSucceeded, Result: done, FinishedAt: at(10 * time.Second), OutputOpen: true},
	})

	open := func() map[string]bool {
		t.Helper()
		m := map[string]bool{}
		for _, id := range []string{"tc_1", "tc_2", "tc_3", "tc_4", "tc_5"} {
			if c := mustGetCall(t, s, id); c.OutputOpen {
				m[id] = true
			}
		}
		return m
	}
	list := func(f store.CallFilter) []string {
		t.Helper()
		f.Tenant = "acme"
		got, err := s.ListRecentCalls(t.Context(), f)
		if err != nil {
			t.Fatalf("ListRecentCalls(%+v): %v", f, err)
		}
		return ids(got)
	}
	active := []store.CallStatus{store.CallPending, store.CallRunning, store.CallWaiting}
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}

	check("open", open(), map[string]bool{"tc_1": true, "tc_3": true, "tc_5": true})
	check("live", list(store.CallFilter{Live: true}), []string{"tc_5", "tc_4", "tc_3", "tc_1"})
	check("active statuses", list(store.CallFilter{Statuses: active}), []string{"tc_4"})
	check("live and succeeded", list(store.CallFilter{Live: true, Statuses: []store.CallStatus{store.CallSucceeded}}), []string{"tc_5", "tc_3", "tc_1"})
	check("live page", list(store.CallFilter{Live: true, Before: at(4 * time.Second), BeforeID: "tc_4", Limit: 1}), []string{"tc_3"})

	// A second finish of a finished call is ignored: it does not close the output.
	mustWrite(t, s, nil, []store.CallFinish{{ID: "tc_1", Status: store.CallFailed, Result: done, FinishedAt: at(11 * time.Second)}})
	check("open after a second finish", open()["tc_1"], true)

	if err := s.CloseCallOutput(t.Context(), "tc_1"); err != nil {
		t.Fatalf("CloseCallOutput: %v", err)
	}
	for _, id := range []string{"tc_1", "tc_2", "tc_unknown"} { // again, not marked, unknown: no error
		if err := s.CloseCallOutput(t.Context(), id); err != nil {
			t.Errorf("CloseCallOutput(%s): %v", id, err)
		}
	}
	c := mustGetCall(t, s, "tc_1")
	check("tc_1 after close", [2]any{c.OutputOpen, c.Status}, [2]any{false, store.CallSucceeded})
	check("live after close", list(store.CallFilter{Live: true}), []string{"tc_5", "tc_4", "tc_3"})

	// Replica r2 restarts: its calls' output died with it. r1's is left alone.
	if _, err := s.AbandonCalls(t.Context(), "r2", tool.ErrorResult(tool.KindFailed, "restarted"), at(time.Hour)); err != nil {
		t.Fatalf("AbandonCalls: %v", err)
	}
	check("open after r2 restarted", open(), map[string]bool{"tc_5": true})
	if _, err := s.AbandonCalls(t.Context(), "r1", tool.ErrorResult(tool.KindFailed, "restarted"), at(time.Hour)); err != nil {
		t.Fatalf("AbandonCalls: %v", err)
	}
	check("open after r1 restarted", open(), map[string]bool{})
	check("live after restarts", list(store.CallFilter{Live: true}), []string{})
}

package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func testCallRoundTrip(t *testing.T, s store.Store) {
	full := &tool.Result{
		Content: []tool.Content{
			{Type: tool.ContentText, Text: "line 1\nline 2 <b>&amp;</b> ü \u2028 \x00 end"},
			{Type: tool.ContentImage, Data: "iVBORw0KGgo=", MimeType: "image/png"},
			{Type: tool.ContentAudio, Data: "UklGRg==", MimeType: "audio/wav"},
			{Type: tool.ContentResource, URI: "file:///tmp/x.txt", Text: "inline", MimeType: "text/plain"},
		},
		Structured: json.RawMessage(`{"files": ["a", "b"], "count": 2, "nested": {"ok": true, "n": null}}`),
		Details:    json.RawMessage(`{"exit_code":0,"duration_ms":12.5}`),
		Truncated:  true,
	}
	failed := &tool.Result{
		Content:   []tool.Content{{Type: tool.ContentText, Text: "permission denied"}},
		IsError:   true,
		ErrorKind: tool.KindDenied,
		Details:   json.RawMessage(`"rule 3"`),
	}
	tests := []struct {
		name string
		call store.Call
	}{
		{"running", store.Call{
			ID: "tc_run", SessionID: "ses_1", Tenant: "acme", ToolCallID: "call_1", Name: "read_file",
			Arguments: json.RawMessage(`{ "path" : "README.md",  "lines": [1, 2] }`),
			Status:    store.CallRunning, Owner: "replica-1",
			CreatedAt: base, StartedAt: ptr(at(time.Millisecond)),
		}},
		{"pending without optional fields", store.Call{
			ID: "tc_pending", SessionID: "ses_1", ToolCallID: "call_2", Name: "shell",
			Status: store.CallPending, CreatedAt: at(time.Second),
		}},
		{"waiting", store.Call{
			ID: "tc_wait", SessionID: "ses_1", Tenant: "acme", ToolCallID: "call_3", Name: "shell",
			Arguments: json.RawMessage(`{"command":"rm -rf build"}`), Status: store.CallWaiting, Owner: "replica-2",
			CreatedAt: at(2 * time.Second),
		}},
		{"succeeded with every result field", store.Call{
			ID: "tc_ok", SessionID: "ses_1", Tenant: "acme", ToolCallID: "call_4", Name: "list",
			Arguments: json.RawMessage(`{}`), Status: store.CallSucceeded, Result: full, Owner: "replica-1",
			CreatedAt: at(3 * time.Second), StartedAt: ptr(at(3 * time.Second)), FinishedAt: ptr(at(4 * time.Second)),
		}},
		{"failed with error kind", store.Call{
			ID: "tc_fail", SessionID: "ses_2", Tenant: "other", ToolCallID: "call_1", Name: "shell",
			Arguments: json.RawMessage(`[1,"two",{"3":null}]`), Status: store.CallFailed, Result: failed,
			ErrorKind: tool.KindDenied, Owner: "replica-1",
			CreatedAt: at(5 * time.Second), FinishedAt: ptr(at(6 * time.Second)),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.call
			mustWrite(t, s, []*store.Call{&in}, nil)
			checkCall(t, mustGetCall(t, s, tt.call.ID), &tt.call)

			byModel, err := s.GetCallByToolCallID(t.Context(), tt.call.SessionID, tt.call.ToolCallID)
			if err != nil {
				t.Fatalf("GetCallByToolCallID: %v", err)
			}
			checkCall(t, byModel, &tt.call)
		})
	}
}

func testCallDefaults(t *testing.T, s store.Store) {
	before := time.Now().Add(-time.Second)
	c := &store.Call{ID: "tc_1", SessionID: "ses_1", ToolCallID: "call_1", Name: "x", Status: store.CallRunning}
	mustWrite(t, s, []*store.Call{c}, nil)
	if c.CreatedAt.Before(before) || c.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("zero CreatedAt was set to %s, want about now", c.CreatedAt)
	}
	got := mustGetCall(t, s, "tc_1")
	checkTime(t, "CreatedAt", got.CreatedAt, c.CreatedAt)
	if got.StartedAt != nil || got.FinishedAt != nil || got.Result != nil || got.Arguments != nil {
		t.Errorf("optional fields = started %v finished %v result %v args %q, want all nil",
			got.StartedAt, got.FinishedAt, got.Result, got.Arguments)
	}

	f := []store.CallFinish{{ID: "tc_1", Status: store.CallSucceeded, Result: tool.TextResult("ok")}}
	mustWrite(t, s, nil, f)
	if f[0].FinishedAt.Before(before) {
		t.Fatalf("zero FinishedAt was set to %s, want about now", f[0].FinishedAt)
	}
	got = mustGetCall(t, s, "tc_1")
	checkTimePtr(t, "FinishedAt", got.FinishedAt, &f[0].FinishedAt)
}

func testCallNotFound(t *testing.T, s store.Store) {
	mustWrite(t, s, []*store.Call{runningCall("tc_1", "ses_1", "call_1", base)}, nil)
	tests := []struct {
		name string
		get  func() (*store.Call, error)
	}{
		{"GetCall unknown id", func() (*store.Call, error) { return s.GetCall(t.Context(), "tc_missing") }},
		{"GetCallByToolCallID unknown tool call id", func() (*store.Call, error) {
			return s.GetCallByToolCallID(t.Context(), "ses_1", "call_missing")
		}},
		{"GetCallByToolCallID other session", func() (*store.Call, error) {
			return s.GetCallByToolCallID(t.Context(), "ses_2", "call_1")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.get()
			wantErrIs(t, tt.name, err, store.ErrNotFound)
			if c != nil {
				t.Errorf("got call %+v with ErrNotFound", c)
			}
		})
	}
}

func testInsertDuplicate(t *testing.T, s store.Store) {
	mustWrite(t, s, []*store.Call{runningCall("tc_1", "ses_1", "call_1", base)}, nil)
	dup := runningCall("tc_1", "ses_1", "call_other", at(time.Second))
	fresh := runningCall("tc_2", "ses_1", "call_2", at(time.Second))
	err := s.WriteCalls(t.Context(), []*store.Call{fresh, dup}, nil)
	wantErrIs(t, "WriteCalls(duplicate id)", err, store.ErrConflict)

	if got := mustGetCall(t, s, "tc_1"); got.ToolCallID != "call_1" {
		t.Errorf("first record's tool_call_id = %q, want it untouched (call_1)", got.ToolCallID)
	}
	_, err = s.GetCall(t.Context(), "tc_2")
	wantErrIs(t, "GetCall of an insert from the failed transaction", err, store.ErrNotFound)
}

func testInvalidRecords(t *testing.T, s store.Store) {
	valid := func() *store.Call { return runningCall("tc_ok", "ses_1", "call_1", base) }
	tests := []struct {
		name     string
		inserts  []*store.Call
		finishes []store.CallFinish
	}{
		{"empty id", []*store.Call{{SessionID: "ses_1", Name: "x", Status: store.CallRunning}}, nil},
		{"empty session", []*store.Call{{ID: "tc_x", Name: "x", Status: store.CallRunning}}, nil},
		{"empty name", []*store.Call{{ID: "tc_x", SessionID: "ses_1", Status: store.CallRunning}}, nil},
		{"unknown status", []*store.Call{{ID: "tc_x", SessionID: "ses_1", Name: "x", Status: "done"}}, nil},
		{"arguments not JSON", []*store.Call{{ID: "tc_x", SessionID: "ses_1", Name: "x", Status: store.CallRunning,
			Arguments: json.RawMessage(`{"path":`)}}, nil},
		{"structured not JSON", []*store.Call{{ID: "tc_x", SessionID: "ses_1", Name: "x", Status: store.CallSucceeded,
			Result: &tool.Result{Structured: json.RawMessage(`nope`)}}}, nil},
		// Text PostgreSQL cannot keep is refused by every store, before anything is
		// written, so that one such call never fails the writes batched with it.
		{"tool_call_id with a NUL byte", []*store.Call{{ID: "tc_x", SessionID: "ses_1", ToolCallID: "call\x00", Name: "x", Status: store.CallRunning}}, nil},
		{"name not UTF-8", []*store.Call{{ID: "tc_x", SessionID: "ses_1", ToolCallID: "call_x", Name: "x\xff", Status: store.CallRunning}}, nil},
		{"arguments not UTF-8", []*store.Call{{ID: "tc_x", SessionID: "ses_1", ToolCallID: "call_x", Name: "x", Status: store.CallRunning,
			Arguments: json.RawMessage("{\"path\":\"Jos\xe9\"}")}}, nil},
		{"finish to a non-terminal status", nil, []store.CallFinish{{ID: "tc_ok", Status: store.CallRunning}}},
		{"finish without id", nil, []store.CallFinish{{Status: store.CallSucceeded}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A valid insert rides along: nothing of the call may be written.
			ok := valid()
			err := s.WriteCalls(t.Context(), append([]*store.Call{ok}, tt.inserts...), tt.finishes)
			wantErrIs(t, "WriteCalls", err, store.ErrInvalid)
			_, err = s.GetCall(t.Context(), "tc_ok")
			wantErrIs(t, "GetCall of the valid record in the refused write", err, store.ErrNotFound)
		})
	}
	err := s.CreateSession(t.Context(), &store.Session{ID: "ses_bad", Spec: json.RawMessage(`{`)})
	wantErrIs(t, "CreateSession(bad spec)", err, store.ErrInvalid)
	err = s.CreateSession(t.Context(), &store.Session{Tenant: "acme"})
	wantErrIs(t, "CreateSession(no id)", err, store.ErrInvalid)
}

// testResultNotUTF8: a tool's structured output may hold bytes that are not UTF-8 (an
// upstream API answering JSON in Latin-1). PostgreSQL cannot keep them, so every store
// keeps U+FFFD in their place; the finish, and the other calls written with it, succeed.
func testResultNotUTF8(t *testing.T, s store.Store) {
	mustWrite(t, s, []*store.Call{runningCall("tc_latin1", "ses_1", "call_1", base), runningCall("tc_other", "ses_2", "call_1", base)}, nil)
	res := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: "ok"}},
		Structured: json.RawMessage("{\"name\":\"Jos\xe9\"}"), Details: json.RawMessage("\"caf\xe9\"")}
	mustWrite(t, s, nil, []store.CallFinish{
		{ID: "tc_latin1", Status: store.CallSucceeded, Result: res, FinishedAt: at(time.Second)},
		{ID: "tc_other", Status: store.CallSucceeded, Result: tool.TextResult("fine"), FinishedAt: at(time.Second)},
	})
	got := mustGetCall(t, s, "tc_latin1")
	if got.Status != store.CallSucceeded || got.Result == nil {
		t.Fatalf("tc_latin1 = %+v", got)
	}
	if want := "{\"name\":\"Jos\uFFFD\"}"; string(got.Result.Structured) != want {
		t.Errorf("Structured = %q, want %q", got.Result.Structured, want)
	}
	if want := "\"caf\uFFFD\""; string(got.Result.Details) != want {
		t.Errorf("Details = %q, want %q", got.Result.Details, want)
	}
	if got := mustGetCall(t, s, "tc_other"); got.Status != store.CallSucceeded {
		t.Errorf("tc_other = %s, want succeeded", got.Status)
	}
}

func testFinishOnce(t *testing.T, s store.Store) {
	mustWrite(t, s, []*store.Call{runningCall("tc_1", "ses_1", "call_1", base)}, nil)
	first := store.CallFinish{ID: "tc_1", Status: store.CallSucceeded,
		Result:     &tool.Result{Content: []tool.Content{{Type: "text", Text: "first"}}, Structured: json.RawMessage(`{"n":1}`)},
		FinishedAt: at(time.Second)}
	mustWrite(t, s, nil, []store.CallFinish{first})

	want := runningCall("tc_1", "ses_1", "call_1", base)
	want.Status, want.Result, want.FinishedAt = store.CallSucceeded, first.Result, ptr(first.FinishedAt)
	checkCall(t, mustGetCall(t, s, "tc_1"), want)

	second := store.CallFinish{ID: "tc_1", Status: store.CallFailed,
		Result: tool.ErrorResult(tool.KindTimeout, "too late"), FinishedAt: at(time.Minute)}
	mustWrite(t, s, nil, []store.CallFinish{second})
	checkCall(t, mustGetCall(t, s, "tc_1"), want)

	// Two finishes of one running call in one write: the first wins there too.
	mustWrite(t, s, []*store.Call{runningCall("tc_2", "ses_1", "call_2", base)}, nil)
	mustWrite(t, s, nil, []store.CallFinish{
		{ID: "tc_2", Status: store.CallFailed, Result: tool.ErrorResult(tool.KindTimeout, "timed out"), FinishedAt: at(time.Second)},
		{ID: "tc_2", Status: store.CallSucceeded, Result: tool.TextResult("late"), FinishedAt: at(2 * time.Second)},
	})
	got := mustGetCall(t, s, "tc_2")
	if got.Status != store.CallFailed || got.ErrorKind != tool.KindTimeout || got.Result.Text() != "timed out" {
		t.Errorf("after two finishes in one write: status %q kind %q text %q, want failed/timeout/'timed out'",
			got.Status, got.ErrorKind, got.Result.Text())
	}
	checkTimePtr(t, "FinishedAt", got.FinishedAt, ptr(at(time.Second)))
}

func testFinishUnknown(t *testing.T, s store.Store) {
	mustWrite(t, s, []*store.Call{runningCall("tc_1", "ses_1", "call_1", base)}, nil)
	err := s.WriteCalls(t.Context(),
		[]*store.Call{runningCall("tc_2", "ses_1", "call_2", base)},
		[]store.CallFinish{
			{ID: "tc_1", Status: store.CallSucceeded, Result: tool.TextResult("ok"), FinishedAt: at(time.Second)},
			{ID: "tc_missing", Status: store.CallSucceeded, FinishedAt: at(time.Second)},
		})
	wantErrIs(t, "WriteCalls(finish of unknown call)", err, store.ErrNotFound)
	if got := mustGetCall(t, s, "tc_1"); got.Status != store.CallRunning || got.Result != nil {
		t.Errorf("tc_1 = %q with result %v, want the failed transaction rolled back (running, no result)", got.Status, got.Result)
	}
	_, err = s.GetCall(t.Context(), "tc_2")
	wantErrIs(t, "GetCall of an insert from the failed transaction", err, store.ErrNotFound)
}

func testFinishInSameWrite(t *testing.T, s store.Store) {
	c := runningCall("tc_1", "ses_1", "call_1", base)
	res := tool.ErrorResult(tool.KindInvalidArgs, "/path: required")
	mustWrite(t, s, []*store.Call{c}, []store.CallFinish{{ID: "tc_1", Status: store.CallFailed, Result: res, FinishedAt: at(time.Second)}})
	want := runningCall("tc_1", "ses_1", "call_1", base)
	want.Status, want.Result, want.ErrorKind, want.FinishedAt = store.CallFailed, res, tool.KindInvalidArgs, ptr(at(time.Second))
	checkCall(t, mustGetCall(t, s, "tc_1"), want)
}

func testGetCallByToolCallIDNewest(t *testing.T, s store.Store) {
	// Inserted out of time order, in separate writes and in one write.
	mustWrite(t, s, []*store.Call{runningCall("tc_b", "ses_1", "call_1", at(2*time.Second))}, nil)
	mustWrite(t, s, []*store.Call{
		runningCall("tc_c", "ses_1", "call_1", at(3*time.Second)),
		runningCall("tc_a", "ses_1", "call_1", at(1*time.Second)),
	}, nil)
	// Newer, but another session or another tool call id.
	mustWrite(t, s, []*store.Call{
		runningCall("tc_x", "ses_2", "call_1", at(time.Hour)),
		runningCall("tc_y", "ses_1", "call_2", at(time.Hour)),
	}, nil)
	got, err := s.GetCallByToolCallID(t.Context(), "ses_1", "call_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "tc_c" {
		t.Errorf("GetCallByToolCallID = %s, want the newest, tc_c", got.ID)
	}
	// Finishing the newest does not change which one is newest.
	mustWrite(t, s, nil, []store.CallFinish{{ID: "tc_a", Status: store.CallSucceeded, FinishedAt: at(time.Hour)}})
	if got, err = s.GetCallByToolCallID(t.Context(), "ses_1", "call_1"); err != nil || got.ID != "tc_c" {
		t.Errorf("after finishing an older one: %v, %v; want tc_c", got, err)
	}
}

func ids(calls []*store.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.ID
	}
	return out
}

func testListCalls(t *testing.T, s store.Store) {
	// Shuffled insert order; tc_3a and tc_3b share a timestamp (ties: id descending).
	mustWrite(t, s, []*store.Call{
		runningCall("tc_3a", "ses_1", "call_3a", at(3*time.Second)),
		runningCall("tc_1", "ses_1", "call_1", at(1*time.Second)),
		runningCall("tc_5", "ses_1", "call_5", at(5*time.Second)),
	}, nil)
	mustWrite(t, s, []*store.Call{
		runningCall("tc_3b", "ses_1", "call_3b", at(3*time.Second)),
		runningCall("tc_2", "ses_1", "call_2", at(2*time.Second)),
		runningCall("tc_other", "ses_2", "call_1", at(4*time.Second)),
	}, nil)
	all := []string{"tc_5", "tc_3b", "tc_3a", "tc_2", "tc_1"}
	tests := []struct {
		session string
		limit   int
		want    []string
	}{
		{"ses_1", 3, all[:3]},
		{"ses_1", 1, all[:1]},
		{"ses_1", 5, all},
		{"ses_1", 100, all},
		{"ses_1", 0, all},
		{"ses_1", -1, all},
		{"ses_2", 10, []string{"tc_other"}},
		{"ses_missing", 10, []string{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s limit %d", tt.session, tt.limit), func(t *testing.T) {
			got, err := s.ListCalls(t.Context(), tt.session, store.CallPage{Limit: tt.limit})
			if err != nil {
				t.Fatalf("ListCalls: %v", err)
			}
			if got == nil {
				t.Errorf("ListCalls returned nil, want an empty slice")
			}
			if !reflect.DeepEqual(ids(got), tt.want) {
				t.Errorf("ListCalls = %v, want %v", ids(got), tt.want)
			}
		})
	}
	// Pages after a call: ties by id, the last page, another session's call as the
	// place (a place, not a filter).
	for _, tt := range []struct {
		name string
		p    store.CallPage
		want []string
	}{
		{"after a tie", store.CallPage{Limit: 2, Before: at(3 * time.Second), BeforeID: "tc_3b"}, []string{"tc_3a", "tc_2"}},
		{"after the newest", store.CallPage{Before: at(5 * time.Second), BeforeID: "tc_5"}, all[1:]},
		{"past the oldest", store.CallPage{Before: at(1 * time.Second), BeforeID: "tc_1"}, []string{}},
		{"after another session's call", store.CallPage{Before: at(4 * time.Second), BeforeID: "tc_other"}, all[1:]},
	} {
		got, err := s.ListCalls(t.Context(), "ses_1", tt.p)
		if err != nil || !reflect.DeepEqual(ids(got), tt.want) {
			t.Errorf("%s: ListCalls = %v, %v; want %v", tt.name, ids(got), err, tt.want)
		}
	}
	// Pages of 2, each after the last call of the one before, walk everything once.
	var paged []string
	p := store.CallPage{Limit: 2}
	for range 10 {
		page, err := s.ListCalls(t.Context(), "ses_1", p)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, ids(page)...)
		last := page[len(page)-1]
		p.Before, p.BeforeID = last.CreatedAt, last.ID
	}
	if !reflect.DeepEqual(paged, all) {
		t.Errorf("paging = %v, want %v", paged, all)
	}
	// Full records, not only ids.
	got, err := s.ListCalls(t.Context(), "ses_1", store.CallPage{Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListCalls: %v, %v", got, err)
	}
	checkCall(t, got[0], runningCall("tc_5", "ses_1", "call_5", at(5*time.Second)))
}

func testAbandonCalls(t *testing.T, s store.Store) {
	mk := func(id, owner string, status store.CallStatus) *store.Call {
		c := runningCall(id, "ses_1", "call_"+id, base)
		c.Owner, c.Status = owner, status
		if status.Terminal() {
			c.Result, c.FinishedAt = tool.TextResult("done before"), ptr(at(time.Second))
		}
		return c
	}
	calls := []*store.Call{
		mk("a_pending", "a", store.CallPending),
		mk("a_running", "a", store.CallRunning),
		mk("a_waiting", "a", store.CallWaiting),
		mk("a_ok", "a", store.CallSucceeded),
		mk("a_failed", "a", store.CallFailed),
		mk("b_running", "b", store.CallRunning),
		mk("b_pending", "b", store.CallPending),
	}
	mustWrite(t, s, calls, nil)
	orig := map[string]*store.Call{}
	for _, c := range calls {
		cp := *c
		orig[c.ID] = &cp
	}

	res := tool.ErrorResult(tool.KindUnavailable, "the daemon restarted while the call ran")
	when := at(time.Hour)
	n, err := s.AbandonCalls(t.Context(), "a", res, when)
	if err != nil {
		t.Fatalf("AbandonCalls: %v", err)
	}
	// Named, oldest first (ties by id), saying which had started, for the start-up log.
	created := base.UTC().Truncate(time.Microsecond)
	wantAbandoned := []store.AbandonedCall{
		{ID: "a_pending", SessionID: "ses_1", Name: "read_file", CreatedAt: created, Started: false},
		{ID: "a_running", SessionID: "ses_1", Name: "read_file", CreatedAt: created, Started: true},
	}
	if !reflect.DeepEqual(n, wantAbandoned) {
		t.Errorf("AbandonCalls = %+v, want %+v", n, wantAbandoned)
	}
	for _, c := range calls {
		got := mustGetCall(t, s, c.ID)
		want := orig[c.ID]
		switch c.ID {
		case "a_running":
			w := *want
			w.Status, w.Result, w.ErrorKind, w.FinishedAt = store.CallFailed, res, tool.KindUnavailable, ptr(when)
			want = &w
		case "a_pending": // it never started: not "may have run"
			w := *want
			w.Status, w.Result, w.ErrorKind, w.FinishedAt = store.CallFailed, store.NotStartedResult(), tool.KindFailed, ptr(when)
			want = &w
		}
		checkCall(t, got, want)
	}
	if n, err := s.AbandonCalls(t.Context(), "a", res, when); err != nil || len(n) != 0 {
		t.Errorf("second AbandonCalls = %+v, %v; want none, nil", n, err)
	}
	if n, err := s.AbandonCalls(t.Context(), "nobody", res, when); err != nil || len(n) != 0 {
		t.Errorf("AbandonCalls(unknown owner) = %+v, %v; want none, nil", n, err)
	}
}

func testContextCancelled(t *testing.T, s store.Store) {
	mustCreateSession(t, s, "ses_1")
	mustWrite(t, s, []*store.Call{runningCall("tc_1", "ses_1", "call_1", base)}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		call func() error
	}{
		{"CreateSession", func() error {
			return s.CreateSession(ctx, &store.Session{ID: "ses_new", CreatedAt: base, UpdatedAt: base})
		}},
		{"GetSession", func() error { _, err := s.GetSession(ctx, "ses_1"); return err }},
		{"UpdateSessionSpec", func() error {
			return s.UpdateSessionSpec(ctx, "ses_1", json.RawMessage(`{}`), json.RawMessage(`{"x":1}`), base)
		}},
		{"WriteCalls", func() error {
			return s.WriteCalls(ctx, []*store.Call{runningCall("tc_new", "ses_1", "call_2", base)},
				[]store.CallFinish{{ID: "tc_1", Status: store.CallSucceeded, FinishedAt: base}})
		}},
		{"GetCall", func() error { _, err := s.GetCall(ctx, "tc_1"); return err }},
		{"GetCallByToolCallID", func() error { _, err := s.GetCallByToolCallID(ctx, "ses_1", "call_1"); return err }},
		{"ListCalls", func() error { _, err := s.ListCalls(ctx, "ses_1", store.CallPage{Limit: 10}); return err }},
		{"AbandonCalls", func() error { _, err := s.AbandonCalls(ctx, "replica-1", tool.TextResult("x"), base); return err }},
		{"Ping", func() error { return s.Ping(ctx) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErrIs(t, tt.name+" with a cancelled context", tt.call(), context.Canceled)
		})
	}
	// Nothing was written.
	if _, err := s.GetSession(t.Context(), "ses_new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session from a cancelled CreateSession: %v, want ErrNotFound", err)
	}
	sess, err := s.GetSession(t.Context(), "ses_1")
	if err != nil || string(sess.Spec) != `{}` {
		t.Errorf("session after a cancelled update: %+v, %v; want spec {}", sess, err)
	}
	if _, err := s.GetCall(t.Context(), "tc_new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("call from a cancelled WriteCalls: %v, want ErrNotFound", err)
	}
	if c := mustGetCall(t, s, "tc_1"); c.Status != store.CallRunning {
		t.Errorf("tc_1 status = %q after cancelled writes, want running", c.Status)
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// resultFor is the result each concurrent call is finished with: checking it proves
// no finish went to the wrong record.

func testConcurrentWriteCalls(t *testing.T, s store.Store) {
	const workers, perWorker = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i += 2 {
				// Two inserts per transaction, then their finishes.
				a := runningCall(fmt.Sprintf("tc_%d_%d", w, i), "ses_1", fmt.Sprintf("call_%d_%d", w, i), at(time.Duration(i)*time.Millisecond))
				b := runningCall(fmt.Sprintf("tc_%d_%d", w, i+1), "ses_1", fmt.Sprintf("call_%d_%d", w, i+1), at(time.Duration(i+1)*time.Millisecond))
				if err := s.WriteCalls(t.Context(), []*store.Call{a, b}, nil); err != nil {
					errs <- err
					return
				}
				if err := s.WriteCalls(t.Context(), nil, []store.CallFinish{
					{ID: a.ID, Status: store.CallSucceeded, Result: resultFor(a.ID)},
					{ID: b.ID, Status: store.CallSucceeded, Result: resultFor(b.ID)},
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent WriteCalls: %v", err)
	}
	all, err := s.ListCalls(t.Context(), "ses_1", store.CallPage{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != workers*perWorker {
		t.Errorf("ListCalls found %d calls, want %d", len(all), workers*perWorker)
	}
	for w := range workers {
		for i := range perWorker {
			checkFinished(t, s, fmt.Sprintf("tc_%d_%d", w, i))
		}
	}
}

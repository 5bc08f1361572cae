// Package storetest is the conformance suite every store.Store implementation passes.
// Run it from the implementation's tests:
//
//	func TestSQLite(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { … a fresh, empty store … })
//	}
//
// open is called once per subtest, with the subtest's t, and must return an empty store
// that is closed in t.Cleanup. Subtests run in parallel.
package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Run runs the conformance suite.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SessionRoundTrip", testSessionRoundTrip},
		{"SessionDefaults", testSessionDefaults},
		{"SessionDuplicate", testSessionDuplicate},
		{"SessionNotFound", testSessionNotFound},
		{"UpdateSessionSpec", testUpdateSessionSpec},
		{"CallRoundTrip", testCallRoundTrip},
		{"CallDefaults", testCallDefaults},
		{"CallNotFound", testCallNotFound},
		{"InsertDuplicate", testInsertDuplicate},
		{"InvalidRecords", testInvalidRecords},
		{"FinishOnce", testFinishOnce},
		{"ResultNotUTF8", testResultNotUTF8},
		{"FinishUnknown", testFinishUnknown},
		{"FinishInSameWrite", testFinishInSameWrite},
		{"GetCallByToolCallIDNewest", testGetCallByToolCallIDNewest},
		{"ListCalls", testListCalls},
		{"ListRecentCalls", testListRecentCalls},
		{"AbandonCalls", testAbandonCalls},
		{"CallOutputOpen", testCallOutputOpen},
		{"ContextCancelled", testContextCancelled},
		{"Ping", testPing},
		{"ConcurrentWriteCalls", testConcurrentWriteCalls},
		{"StartCalls", testStartCalls},
		{"GroupCommitConcurrent", testGroupCommitConcurrent},
		{"GroupCommitFoldWindow", testGroupCommitFoldWindow},
		{"GroupCommitMarkRunning", testGroupCommitMarkRunning},
		{"GroupCommitRecordError", testGroupCommitRecordError},
		{"GroupCommitStopDrains", testGroupCommitStopDrains},
		{"GroupCommitStoreFailure", testGroupCommitStoreFailure},
		{"GroupCommitFinishFinal", testGroupCommitFinishFinal},
		{"DeleteFinishedCalls", testDeleteFinishedCalls},
		{"DeleteFinishedCallsFrom", testDeleteFinishedCallsFrom},
		{"DeleteFinishedCallsConcurrent", testDeleteFinishedCallsConcurrent},
		{"DeleteFinishedCallsOutputOpen", testDeleteFinishedCallsOutputOpen},
		{"UnusedSessions", testUnusedSessions},
		{"ExistingSessions", testExistingSessions},
		{"DeleteUnusedSession", testDeleteUnusedSession},
		{"DeleteUnusedSessionConcurrent", testDeleteUnusedSessionConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// base is an arbitrary instant with sub-microsecond digits and a non-UTC zone: the
// store must return it in UTC, truncated to microseconds.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("UTC+2", 2*3600))

func at(d time.Duration) time.Time { return base.Add(d) }

func ptr(t time.Time) *time.Time { return &t }

func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func mustCreateSession(t *testing.T, s store.Store, id string) *store.Session {
	t.Helper()
	sess := &store.Session{ID: id, Tenant: "acme", Spec: json.RawMessage(`{}`), CreatedAt: base, UpdatedAt: base}
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession(%s): %v", id, err)
	}
	return sess
}

func mustWrite(t *testing.T, s store.Store, inserts []*store.Call, finishes []store.CallFinish) {
	t.Helper()
	if err := s.WriteCalls(t.Context(), inserts, finishes); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
}

func mustGetCall(t *testing.T, s store.Store, id string) *store.Call {
	t.Helper()
	c, err := s.GetCall(t.Context(), id)
	if err != nil {
		t.Fatalf("GetCall(%s): %v", id, err)
	}
	return c
}

// runningCall is a call as the daemon records it when it starts.
func runningCall(id, sessionID, toolCallID string, created time.Time) *store.Call {
	return &store.Call{
		ID: id, SessionID: sessionID, Tenant: "acme", ToolCallID: toolCallID, Name: "read_file",
		Arguments: json.RawMessage(`{"path":"README.md"}`), Status: store.CallRunning, Owner: "replica-1",
		CreatedAt: created, StartedAt: ptr(created),
	}
}

func wantErrIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want errors.Is(err, %v)", what, err, target)
	}
}

// checkTime fails unless got is want in UTC, truncated to microseconds.
func checkTime(t *testing.T, field string, got, want time.Time) {
	t.Helper()
	if !got.Equal(micro(want)) {
		t.Errorf("%s = %s, want %s", field, got.Format(time.RFC3339Nano), micro(want).Format(time.RFC3339Nano))
	}
	if got.Location() != time.UTC {
		t.Errorf("%s location = %s, want UTC", field, got.Location())
	}
}

func checkTimePtr(t *testing.T, field string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", field, got, want)
	default:
		checkTime(t, field, *got, *want)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func checkResult(t *testing.T, field string, got, want *tool.Result) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Errorf("%s = %+v, want %+v", field, got, want)
		return
	}
	if got == nil {
		return
	}
	if !reflect.DeepEqual(got.Content, want.Content) && !(len(got.Content) == 0 && len(want.Content) == 0) {
		t.Errorf("%s.Content = %+v, want %+v", field, got.Content, want.Content)
	}
	if !sameJSON(got.Structured, want.Structured) {
		t.Errorf("%s.Structured = %s, want %s", field, got.Structured, want.Structured)
	}
	if !sameJSON(got.Details, want.Details) {
		t.Errorf("%s.Details = %s, want %s", field, got.Details, want.Details)
	}
	if got.IsError != want.IsError || got.ErrorKind != want.ErrorKind || got.Truncated != want.Truncated {
		t.Errorf("%s flags = is_error %v kind %q truncated %v, want %v %q %v", field,
			got.IsError, got.ErrorKind, got.Truncated, want.IsError, want.ErrorKind, want.Truncated)
	}
}

// checkCall compares every field. Arguments must come back byte for byte.
func checkCall(t *testing.T, got, want *store.Call) {
	t.Helper()
	if got.ID != want.ID || got.SessionID != want.SessionID || got.Tenant != want.Tenant ||
		got.ToolCallID != want.ToolCallID || got.Name != want.Name || got.Owner != want.Owner {
		t.Errorf("call identity = {%q %q %q %q %q owner %q}, want {%q %q %q %q %q owner %q}",
			got.ID, got.SessionID, got.Tenant, got.ToolCallID, got.Name, got.Owner,
			want.ID, want.SessionID, want.Tenant, want.ToolCallID, want.Name, want.Owner)
	}
	if string(got.Arguments) != string(want.Arguments) {
		t.Errorf("%s Arguments = %q, want %q (byte for byte)", want.ID, got.Arguments, want.Arguments)
	}
	if got.Status != want.Status {
		t.Errorf("%s Status = %q, want %q", want.ID, got.Status, want.Status)
	}
	if got.ErrorKind != want.ErrorKind {
		t.Errorf("%s ErrorKind = %q, want %q", want.ID, got.ErrorKind, want.ErrorKind)
	}
	checkResult(t, want.ID+" Result", got.Result, want.Result)
	checkTime(t, want.ID+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTimePtr(t, want.ID+" StartedAt", got.StartedAt, want.StartedAt)
	checkTimePtr(t, want.ID+" FinishedAt", got.FinishedAt, want.FinishedAt)
}

func resultFor(id string) *tool.Result {
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: "result of " + id}},
		Structured: json.RawMessage(`{"id":"` + id + `"}`)}
}

func checkFinished(t *testing.T, s store.Store, id string) {
	t.Helper()
	c, err := s.GetCall(t.Context(), id)
	if err != nil {
		t.Errorf("GetCall(%s): %v", id, err)
		return
	}
	if c.Status != store.CallSucceeded || c.Result.Text() != "result of "+id || c.FinishedAt == nil {
		t.Errorf("%s: status %q text %q finished %v, want succeeded with its own result", id, c.Status, c.Result.Text(), c.FinishedAt)
	}
}

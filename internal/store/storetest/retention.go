package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// retentionStores are the stores a retention test reads besides Store.
type retentionStores interface {
	store.Store
	store.ApprovalStore
	store.TaskStore
	store.ScratchpadStore
}

func asRetention(t *testing.T, s store.Store) retentionStores {
	t.Helper()
	r, ok := s.(retentionStores)
	if !ok {
		t.Fatalf("%T does not keep approvals, tasks and scratchpads", s)
	}
	return r
}

// finishedCall records a call of sessionID that ran for the millisecond before finished.
func finishedCall(t *testing.T, s store.Store, id, sessionID string, finished time.Time) {
	t.Helper()
	c := runningCall(id, sessionID, "call_"+id, finished.Add(-time.Millisecond))
	c.Status, c.Result, c.FinishedAt = store.CallSucceeded, tool.TextResult("done"), ptr(finished)
	mustWrite(t, s, []*store.Call{c}, nil)
}

// callWithApproval records a running call of sessionID and a pending approval of it,
// which makes the call waiting.
func callWithApproval(t *testing.T, s retentionStores, id, sessionID, approvalID string) {
	t.Helper()
	mustWrite(t, s, []*store.Call{runningCall(id, sessionID, "call_"+id, base)}, nil)
	a := &store.Approval{ID: approvalID, CallID: id, Arguments: json.RawMessage(`{"path":"README.md"}`), CreatedAt: base}
	if err := s.CreateApproval(t.Context(), a); err != nil {
		t.Fatalf("CreateApproval(%s): %v", approvalID, err)
	}
}

func finish(t *testing.T, s store.Store, id string, at time.Time) {
	t.Helper()
	mustWrite(t, s, nil, []store.CallFinish{{ID: id, Status: store.CallSucceeded, Result: tool.TextResult("late"), FinishedAt: at}})
}

func wantCalls(t *testing.T, s store.Store, gone bool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := s.GetCall(t.Context(), id)
		switch {
		case gone && !errors.Is(err, store.ErrNotFound):
			t.Errorf("call %s: GetCall error %v, want it deleted", id, err)
		case !gone && err != nil:
			t.Errorf("call %s: GetCall error %v, want it kept", id, err)
		}
	}
}

func wantApprovals(t *testing.T, s retentionStores, gone bool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := s.GetApproval(t.Context(), id)
		switch {
		case gone && !errors.Is(err, store.ErrNotFound):
			t.Errorf("approval %s: GetApproval error %v, want it deleted", id, err)
		case !gone && err != nil:
			t.Errorf("approval %s: GetApproval error %v, want it kept", id, err)
		}
	}
}

func auditCount(t *testing.T, s retentionStores) int {
	t.Helper()
	es, err := s.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	return len(es)
}

// testDeleteFinishedCalls: only terminal calls finished before the cutoff go, the
// oldest created first, limit at a time, with their decided approvals; a terminal
// call whose approval is still pending, and active calls, stay; the audit log is
// untouched. Calls of another tenant go too.
func testDeleteFinishedCalls(t *testing.T, st store.Store) {
	s := asRetention(t, st)
	ctx := t.Context()
	cutoff := at(time.Hour)
	finishedCall(t, s, "tc_old1", "ses_1", at(1*time.Second))
	finishedCall(t, s, "tc_old2", "ses_1", at(2*time.Second))
	finishedCall(t, s, "tc_old3", "ses_2", at(3*time.Second))
	finishedCall(t, s, "tc_recent", "ses_1", at(2*time.Hour))
	finishedCall(t, s, "tc_edge", "ses_1", cutoff) // not before the cutoff
	mustWrite(t, s, []*store.Call{runningCall("tc_running", "ses_1", "call_running", base)}, nil)
	// Denied at 1m: the call finished then, its approval is decided.
	callWithApproval(t, s, "tc_denied", "ses_1", "apr_denied")
	if _, err := s.DecideApproval(ctx, "apr_denied", store.ApprovalDecision{Kind: store.DecisionDeny, Actor: "alice", At: at(time.Minute)}); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	// Finished while its approval is still pending: kept.
	callWithApproval(t, s, "tc_stuck", "ses_1", "apr_stuck")
	finish(t, s, "tc_stuck", at(2*time.Second))
	callWithApproval(t, s, "tc_waiting", "ses_1", "apr_waiting")
	audit := auditCount(t, s)

	other := runningCall("tc_other", "ses_9", "call_other", at(time.Second))
	other.Tenant, other.Status, other.Result, other.FinishedAt = "globex", store.CallFailed, tool.TextResult("x"), ptr(at(2*time.Second))
	mustWrite(t, s, []*store.Call{other}, nil)

	// tc_denied was created first (at base), then tc_old1, tc_old2, tc_old3; then
	// the other tenant's. Each batch goes on from the tenant the one before stopped in.
	batch := func(from string, limit, want int, wantStopped string) string {
		t.Helper()
		n, stopped, err := s.DeleteFinishedCalls(ctx, cutoff, from, limit)
		if err != nil || n != want || stopped != wantStopped {
			t.Fatalf("DeleteFinishedCalls(from %q, limit %d) = %d, %q, %v; want %d, %q", from, limit, n, stopped, err, want, wantStopped)
		}
		return stopped
	}
	from := batch("", 2, 2, "acme")
	wantCalls(t, s, true, "tc_denied", "tc_old1")
	wantCalls(t, s, false, "tc_old2", "tc_old3") // later: the next batch's
	from = batch(from, 2, 2, "acme")
	batch(from, 2, 1, "") // the other tenant's
	batch("", 2, 0, "")
	batch("", 0, 0, "")
	wantCalls(t, s, true, "tc_old2", "tc_old3", "tc_other")
	wantCalls(t, s, false, "tc_recent", "tc_edge", "tc_running", "tc_stuck", "tc_waiting")
	wantApprovals(t, s, true, "apr_denied")
	wantApprovals(t, s, false, "apr_stuck", "apr_waiting")
	if got := mustGetApproval(t, s, "apr_waiting"); got.Status != store.ApprovalPending {
		t.Errorf("apr_waiting is %s, want still pending", got.Status)
	}
	if n := auditCount(t, s); n != audit {
		t.Errorf("audit log has %d entries, had %d: retention must not touch it", n, audit)
	}
}

// testDeleteFinishedCallsOutputOpen: a call that finished long ago with its output
// still open (a background job it started runs on) is live: its record, which the
// job's output is read and followed through, stays until the output closes.
func testDeleteFinishedCallsOutputOpen(t *testing.T, s store.Store) {
	ctx := t.Context()
	job := runningCall("tc_job", "ses_1", "call_job", at(time.Second))
	mustWrite(t, s, []*store.Call{job}, []store.CallFinish{
		{ID: "tc_job", Status: store.CallSucceeded, Result: tool.TextResult("Started background job j1"), FinishedAt: at(2 * time.Second), OutputOpen: true},
	})
	finishedCall(t, s, "tc_plain", "ses_1", at(2*time.Second))
	if n, _, err := s.DeleteFinishedCalls(ctx, at(time.Hour), "", 0); err != nil || n != 1 {
		t.Fatalf("DeleteFinishedCalls = %d, %v; want 1 (tc_plain only)", n, err)
	}
	wantCalls(t, s, true, "tc_plain")
	wantCalls(t, s, false, "tc_job")
	if err := s.CloseCallOutput(ctx, "tc_job"); err != nil {
		t.Fatalf("CloseCallOutput: %v", err)
	}
	if n, _, err := s.DeleteFinishedCalls(ctx, at(time.Hour), "", 0); err != nil || n != 1 {
		t.Fatalf("DeleteFinishedCalls after the output closed = %d, %v; want 1", n, err)
	}
	wantCalls(t, s, true, "tc_job")
}

// testDeleteFinishedCallsFrom: a batch starts at the tenant it is given, leaving the
// tenants before it alone, and stops in the tenant where it filled up; batches that
// go on from there delete every due call once.
func testDeleteFinishedCallsFrom(t *testing.T, s store.Store) {
	ctx := t.Context()
	tenants := []string{"t1", "t2", "t3", "t4"}
	for i, tenant := range tenants {
		for j := range 3 {
			c := runningCall(fmt.Sprintf("tc_%d_%d", i, j), "ses_"+tenant, fmt.Sprintf("call_%d_%d", i, j), at(time.Duration(j)*time.Second))
			c.Tenant, c.Status, c.Result, c.FinishedAt = tenant, store.CallSucceeded, tool.TextResult("x"), ptr(at(time.Duration(j+1)*time.Second))
			mustWrite(t, s, []*store.Call{c}, nil)
		}
	}
	// From t3: t1 and t2 are not touched.
	n, stopped, err := s.DeleteFinishedCalls(ctx, at(time.Hour), "t3", 4)
	if err != nil || n != 4 || stopped != "t4" {
		t.Fatalf("from t3 = %d, %q, %v; want 4, stopped in t4", n, stopped, err)
	}
	wantCalls(t, s, false, "tc_0_0", "tc_0_1", "tc_0_2", "tc_1_0", "tc_1_1", "tc_1_2", "tc_3_1", "tc_3_2")
	wantCalls(t, s, true, "tc_2_0", "tc_2_1", "tc_2_2", "tc_3_0")
	// A tenant before any that has calls, or between two, starts at the next one.
	if n, stopped, err = s.DeleteFinishedCalls(ctx, at(time.Hour), "t0", 2); err != nil || n != 2 || stopped != "t1" {
		t.Fatalf("from t0 = %d, %q, %v; want 2, stopped in t1", n, stopped, err)
	}
	if n, stopped, err = s.DeleteFinishedCalls(ctx, at(time.Hour), "t1x", 3); err != nil || n != 3 || stopped != "t2" {
		t.Fatalf("from t1x = %d, %q, %v; want t2's 3, stopped in t2", n, stopped, err)
	}
	// Going on from t2: t4's last two, then the end.
	if n, stopped, err = s.DeleteFinishedCalls(ctx, at(time.Hour), stopped, 3); err != nil || n != 2 || stopped != "" {
		t.Fatalf("from t2 = %d, %q, %v; want 2, to the end", n, stopped, err)
	}
	wantCalls(t, s, false, "tc_0_2")
	if n, stopped, err = s.DeleteFinishedCalls(ctx, at(time.Hour), "", 0); err != nil || n != 1 || stopped != "" {
		t.Fatalf("from the start = %d, %q, %v; want t1's last", n, stopped, err)
	}
}

// testDeleteFinishedCallsConcurrent: sweepers running at once (replicas) delete each
// due call once, and all of them between them.
func testDeleteFinishedCallsConcurrent(t *testing.T, s store.Store) {
	const calls = 60
	for i := range calls {
		finishedCall(t, s, "tc_"+string(rune('a'+i/26))+string(rune('a'+i%26)), "ses_1", at(time.Duration(i)*time.Second))
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
	)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, _, err := s.DeleteFinishedCalls(t.Context(), at(time.Hour), "", 7)
				mu.Lock()
				total += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if n == 0 || err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 || total != calls {
		t.Fatalf("sweepers deleted %d calls, errors %v; want %d, none", total, errs, calls)
	}
	if left, err := s.ListCalls(t.Context(), "ses_1", store.CallPage{}); err != nil || len(left) != 0 {
		t.Fatalf("left %d calls (%v), want none", len(left), err)
	}
}

func mustSessionAt(t *testing.T, s store.Store, id string, updated time.Time) {
	t.Helper()
	sess := &store.Session{ID: id, Tenant: "acme", Spec: json.RawMessage(`{"workdir":""}`), CreatedAt: base, UpdatedAt: updated}
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession(%s): %v", id, err)
	}
}

func sessionIDs(ss []*store.Session) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// testUnusedSessions pages through the sessions not updated since the cutoff, oldest
// first, and TouchSession moves a session's updated_at forward only.
func testUnusedSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustSessionAt(t, s, "ses_b", base)
	mustSessionAt(t, s, "ses_a", base)
	mustSessionAt(t, s, "ses_c", at(time.Minute))
	mustSessionAt(t, s, "ses_d", at(2*time.Hour))
	page, err := s.UnusedSessions(ctx, at(time.Hour), nil, 2)
	if err != nil || len(page) != 2 || page[0].ID != "ses_a" || page[1].ID != "ses_b" {
		t.Fatalf("first page = %v, %v; want [ses_a ses_b]", sessionIDs(page), err)
	}
	if string(page[0].Spec) != `{"workdir":""}` || page[0].Tenant != "acme" {
		t.Errorf("page row = %q %q, want the stored tenant and spec", page[0].Tenant, page[0].Spec)
	}
	checkTime(t, "UpdatedAt", page[0].UpdatedAt, base)
	page, err = s.UnusedSessions(ctx, at(time.Hour), page[1], 2)
	if err != nil || len(page) != 1 || page[0].ID != "ses_c" {
		t.Fatalf("second page = %v, %v; want [ses_c]", sessionIDs(page), err)
	}
	page, err = s.UnusedSessions(ctx, at(time.Hour), page[0], 2)
	if err != nil || len(page) != 0 {
		t.Fatalf("third page = %v, %v; want none", sessionIDs(page), err)
	}

	if err := s.TouchSession(ctx, "ses_a", at(3*time.Hour)); err != nil {
		t.Fatalf("TouchSession: %v", err)
	}
	if err := s.TouchSession(ctx, "ses_a", at(time.Hour)); err != nil {
		t.Fatalf("TouchSession earlier: %v", err)
	}
	got, err := s.GetSession(ctx, "ses_a")
	if err != nil {
		t.Fatal(err)
	}
	checkTime(t, "touched UpdatedAt", got.UpdatedAt, at(3*time.Hour))
	page, err = s.UnusedSessions(ctx, at(time.Hour), nil, 0)
	if err != nil || len(page) != 2 || page[0].ID != "ses_b" || page[1].ID != "ses_c" {
		t.Fatalf("after touch = %v, %v; want [ses_b ses_c]", sessionIDs(page), err)
	}
	wantErrIs(t, "TouchSession(unknown)", s.TouchSession(ctx, "ses_nope", at(time.Hour)), store.ErrNotFound)
}

// testExistingSessions: of the ids asked about, those of stored sessions.
func testExistingSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustSessionAt(t, s, "ses_a", base)
	mustSessionAt(t, s, "ses_b", base)
	got, err := s.(store.Retention).ExistingSessions(ctx, []string{"ses_b", "ses_gone", "ses_a", "ses_a"})
	sort.Strings(got)
	if err != nil || !slices.Equal(got, []string{"ses_a", "ses_b"}) {
		t.Fatalf("ExistingSessions = %v, %v; want [ses_a ses_b]", got, err)
	}
	if got, err := s.(store.Retention).ExistingSessions(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("ExistingSessions(none) = %v, %v", got, err)
	}
	many := make([]string, store.RetentionBatch+1)
	for i := range many {
		many[i] = fmt.Sprintf("ses_%d", i)
	}
	_, err = s.(store.Retention).ExistingSessions(ctx, many)
	wantErrIs(t, "ExistingSessions(too many)", err, store.ErrInvalid)
}

// testDeleteUnusedSession: an unused session goes with everything of its own, limit
// calls per transaction; one with an unfinished or recent call, a pending approval, a
// recent update or touch stays; other sessions' records and the audit log stay.
func testDeleteUnusedSession(t *testing.T, st store.Store) {
	s := asRetention(t, st)
	ctx := t.Context()
	cutoff := at(time.Hour)

	mustSessionAt(t, s, "ses_old", base)
	finishedCall(t, s, "tc_o1", "ses_old", at(time.Second))
	finishedCall(t, s, "tc_o2", "ses_old", at(2*time.Second))
	callWithApproval(t, s, "tc_o3", "ses_old", "apr_o3")
	if _, err := s.DecideApproval(ctx, "apr_o3", store.ApprovalDecision{Kind: store.DecisionDeny, Actor: "alice", At: at(time.Minute)}); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	task := &store.Task{Tenant: "acme", SessionID: "ses_old", Subject: "write it"}
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	if _, err := s.ScratchpadSet(ctx, "ses_old", "notes", "x", 0); err != nil {
		t.Fatalf("ScratchpadSet: %v", err)
	}

	mustSessionAt(t, s, "ses_other", base) // a bystander: its own records stay
	finishedCall(t, s, "tc_other", "ses_other", at(time.Second))
	if _, err := s.ScratchpadSet(ctx, "ses_other", "notes", "y", 0); err != nil {
		t.Fatalf("ScratchpadSet: %v", err)
	}

	mustSessionAt(t, s, "ses_running", base)
	mustWrite(t, s, []*store.Call{runningCall("tc_r", "ses_running", "call_r", base)}, nil)
	mustSessionAt(t, s, "ses_pending", base)
	callWithApproval(t, s, "tc_p", "ses_pending", "apr_p")
	finish(t, s, "tc_p", at(time.Second)) // finished, but its approval is pending
	mustSessionAt(t, s, "ses_recentcall", base)
	finishedCall(t, s, "tc_rc", "ses_recentcall", at(2*time.Hour))
	mustSessionAt(t, s, "ses_updated", at(2*time.Hour))
	mustSessionAt(t, s, "ses_touched", base)
	if err := s.TouchSession(ctx, "ses_touched", at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A call finished long ago whose background job runs on (its output open): the
	// session is live, as the call's record is to DeleteFinishedCalls.
	mustSessionAt(t, s, "ses_job", base)
	mustWrite(t, s, []*store.Call{runningCall("tc_j", "ses_job", "call_j", base)}, []store.CallFinish{
		{ID: "tc_j", Status: store.CallSucceeded, Result: tool.TextResult("Started background job j1"), FinishedAt: at(time.Second), OutputOpen: true},
	})
	audit := auditCount(t, s)

	for _, id := range []string{"ses_running", "ses_pending", "ses_recentcall", "ses_updated", "ses_touched", "ses_job"} {
		n, gone, err := s.DeleteUnusedSession(ctx, id, cutoff, 0)
		if !errors.Is(err, store.ErrConflict) || gone || n != 0 {
			t.Errorf("DeleteUnusedSession(%s) = %d, %v, %v; want ErrConflict: it is in use", id, n, gone, err)
		}
		if _, err := s.GetSession(ctx, id); err != nil {
			t.Errorf("%s: GetSession %v, want it kept", id, err)
		}
	}
	wantCalls(t, s, false, "tc_r", "tc_p", "tc_rc", "tc_j")
	wantApprovals(t, s, false, "apr_p")
	// Once the job's output closes, the session is unused again.
	if err := s.CloseCallOutput(ctx, "tc_j"); err != nil {
		t.Fatalf("CloseCallOutput: %v", err)
	}
	if n, gone, err := s.DeleteUnusedSession(ctx, "ses_job", cutoff, 0); err != nil || !gone || n != 1 {
		t.Errorf("DeleteUnusedSession(ses_job) after its output closed = %d, %v, %v; want 1 call, gone", n, gone, err)
	}
	// A client's own delete takes a session whose job runs on (the job is killed),
	// and is refused, as retention is, by an unfinished call.
	mustSessionAt(t, s, "ses_job2", base)
	mustWrite(t, s, []*store.Call{runningCall("tc_j2", "ses_job2", "call_j2", base)}, []store.CallFinish{
		{ID: "tc_j2", Status: store.CallSucceeded, Result: tool.TextResult("Started background job j2"), FinishedAt: at(time.Second), OutputOpen: true},
	})
	if _, _, err := s.DeleteSession(ctx, "ses_running", cutoff, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("DeleteSession(ses_running) = %v, want ErrConflict", err)
	}
	if n, gone, err := s.DeleteSession(ctx, "ses_job2", cutoff, 0); err != nil || !gone || n != 1 {
		t.Errorf("DeleteSession(ses_job2) = %d, %v, %v; want 1 call, gone: a client's delete ends the job", n, gone, err)
	}

	n, gone, err := s.DeleteUnusedSession(ctx, "ses_old", cutoff, 2)
	if err != nil || gone || n != 2 {
		t.Fatalf("first DeleteUnusedSession = %d, %v, %v; want 2 calls, not gone yet", n, gone, err)
	}
	if _, err := s.GetSession(ctx, "ses_old"); err != nil {
		t.Fatalf("session deleted before its last calls: %v", err)
	}
	n, gone, err = s.DeleteUnusedSession(ctx, "ses_old", cutoff, 2)
	if err != nil || !gone || n != 1 {
		t.Fatalf("second DeleteUnusedSession = %d, %v, %v; want 1 call, gone", n, gone, err)
	}
	if _, err := s.GetSession(ctx, "ses_old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSession after delete: %v, want ErrNotFound", err)
	}
	wantCalls(t, s, true, "tc_o1", "tc_o2", "tc_o3")
	wantApprovals(t, s, true, "apr_o3")
	if ts, err := s.ListTasks(ctx, "acme", "ses_old", store.TaskFilter{}); err != nil || len(ts) != 0 {
		t.Errorf("tasks left: %d, %v; want none", len(ts), err)
	}
	if _, err := s.ScratchpadGet(ctx, "ses_old", "notes"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("scratchpad left: %v, want ErrNotFound", err)
	}
	_, _, err = s.DeleteUnusedSession(ctx, "ses_old", cutoff, 2)
	wantErrIs(t, "DeleteUnusedSession again", err, store.ErrNotFound)

	if _, err := s.GetSession(ctx, "ses_other"); err != nil {
		t.Errorf("bystander session: %v", err)
	}
	wantCalls(t, s, false, "tc_other")
	if _, err := s.ScratchpadGet(ctx, "ses_other", "notes"); err != nil {
		t.Errorf("bystander scratchpad: %v", err)
	}
	if n := auditCount(t, s); n != audit {
		t.Errorf("audit log has %d entries, had %d: retention must not touch it", n, audit)
	}
}

// testDeleteUnusedSessionConcurrent: sweepers deleting the same session at once (two
// replicas) delete it once; the others are told it is not found.
func testDeleteUnusedSessionConcurrent(t *testing.T, s store.Store) {
	mustSessionAt(t, s, "ses_race", base)
	for i := range 5 {
		finishedCall(t, s, "tc_race"+string(rune('a'+i)), "ses_race", at(time.Second))
	}
	const sweepers = 4
	type outcome struct {
		calls int
		gone  bool
		err   error
	}
	out := make(chan outcome, sweepers)
	start := make(chan struct{})
	for range sweepers {
		go func() {
			<-start
			n, gone, err := s.DeleteUnusedSession(t.Context(), "ses_race", at(time.Hour), 0)
			out <- outcome{n, gone, err}
		}()
	}
	close(start)
	deleted := 0
	for range sweepers {
		o := <-out
		switch {
		case o.err == nil && o.gone && o.calls == 5:
			deleted++
		case errors.Is(o.err, store.ErrNotFound):
		default:
			t.Errorf("sweeper: %d calls, gone %v, err %v; want all 5 and gone, or ErrNotFound", o.calls, o.gone, o.err)
		}
	}
	if deleted != 1 {
		t.Fatalf("%d sweepers deleted the session, want exactly 1", deleted)
	}
}

package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func testDecideApprove(t *testing.T, s store.Store, as store.ApprovalStore) {
	for _, kind := range []string{store.DecisionApprove, store.DecisionApproveForSession, store.DecisionApproveWithRule} {
		t.Run(kind, func(t *testing.T) {
			id, callID := "apr_"+kind, "tc_"+kind
			pendingApproval(t, s, as, id, callID)
			d := store.ApprovalDecision{Kind: kind, Actor: "alice", Reason: "fine <b>&</b>", At: at(time.Minute)}
			var rules any // in the audit only
			switch kind {
			case store.DecisionApproveWithRule:
				d.Rule = "shell(rm -rf build)"
			case store.DecisionApproveForSession:
				d.Rules = []string{"shell(rm -rf build)", "shell(rm *)"}
				rules = []any{"shell(rm -rf build)", "shell(rm *)"}
			}
			got, err := as.DecideApproval(t.Context(), id, d)
			if err != nil {
				t.Fatalf("DecideApproval: %v", err)
			}
			want := fullApproval(id, callID)
			want.Status, want.DecidedAt, want.Decision = store.ApprovalApproved, ptr(d.At), &d
			checkApproval(t, got, want)
			checkApproval(t, mustGetApproval(t, as, id), want)
			if c := mustGetCall(t, s, callID); c.Status != store.CallWaiting || c.Result != nil {
				t.Errorf("approved call = %q with result %v, want waiting for its claimer", c.Status, c.Result)
			}
			checkOneAudit(t, as, id, store.AuditApprovalApproved, "alice", d.At,
				map[string]any{"call_id": callID, "tool": "shell", "kind": kind, "reason": d.Reason, "rule": nilIfEmpty(d.Rule), "rules": rules})
		})
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func testDecideDeny(t *testing.T, s store.Store, as store.ApprovalStore) {
	tests := []struct {
		reason, wantText string
		byPolicy         bool // bob approved, the policy denied: stored with the decision
	}{
		{"too risky", "denied by bob: too risky", false},
		{"", "denied by bob", false},
		{"a deny rule", "denied by bob: a deny rule", true},
	}
	for i, tt := range tests {
		t.Run(tt.wantText, func(t *testing.T) {
			id, callID := fmt.Sprintf("apr_%d", i), fmt.Sprintf("tc_%d", i)
			pendingApproval(t, s, as, id, callID)
			d := store.ApprovalDecision{Kind: store.DecisionDeny, Actor: "bob", Reason: tt.reason, ByPolicy: tt.byPolicy, At: at(2 * time.Minute)}
			got, err := as.DecideApproval(t.Context(), id, d)
			if err != nil {
				t.Fatalf("DecideApproval(deny): %v", err)
			}
			want := fullApproval(id, callID)
			want.Status, want.DecidedAt, want.Decision = store.ApprovalDenied, ptr(d.At), &d
			checkApproval(t, got, want)
			checkApproval(t, mustGetApproval(t, as, id), want)

			c := mustGetCall(t, s, callID)
			if c.Status != store.CallFailed || c.ErrorKind != tool.KindDenied || c.Result == nil ||
				!c.Result.IsError || c.Result.ErrorKind != tool.KindDenied || c.Result.Text() != tt.wantText {
				t.Errorf("denied call = status %q kind %q result %+v, want failed/denied with %q", c.Status, c.ErrorKind, c.Result, tt.wantText)
			}
			checkTimePtr(t, "denied call FinishedAt", c.FinishedAt, ptr(d.At))
			wantAudit := map[string]any{"call_id": callID, "kind": "deny", "reason": nilIfEmpty(tt.reason), "by_policy": nil}
			if tt.byPolicy {
				wantAudit["by_policy"] = true
			}
			checkOneAudit(t, as, id, store.AuditApprovalDenied, "bob", d.At, wantAudit)
			// Denied is final: it cannot be claimed.
			err = as.ClaimCall(t.Context(), callID, "replica-2", at(time.Hour))
			wantErrIs(t, "ClaimCall of a denied call", err, store.ErrConflict)
		})
	}
}

// testDenyWithResult: a deny by the system for a call that was cancelled while it
// waited finishes the call with the given result, and the approval, denied, can no
// longer be approved (so nothing runs the call later).
func testDenyWithResult(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	res := tool.ErrorResult(tool.KindCancelled, "shell was cancelled by request before it ran")
	d := store.ApprovalDecision{Kind: store.DecisionDeny, Actor: store.AuditActorSystem, Reason: "cancelled", Result: res, At: at(2 * time.Minute)}
	got, err := as.DecideApproval(t.Context(), "apr_1", d)
	if err != nil {
		t.Fatalf("DecideApproval(deny with a result): %v", err)
	}
	if got.Status != store.ApprovalDenied || got.Decision == nil || got.Decision.Result != nil || got.Decision.Reason != "cancelled" {
		t.Errorf("approval = %q %+v, want denied, reason cancelled, no result in the stored decision", got.Status, got.Decision)
	}
	c := mustGetCall(t, s, "tc_1")
	if c.Status != store.CallFailed || c.ErrorKind != tool.KindCancelled || c.Result == nil || !c.Result.IsError ||
		c.Result.Text() != res.Text() {
		t.Errorf("call = status %q kind %q result %+v, want failed/cancelled %q", c.Status, c.ErrorKind, c.Result, res.Text())
	}
	_, err = as.DecideApproval(t.Context(), "apr_1", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice"})
	wantErrIs(t, "DecideApproval(approve) after the withdrawal", err, store.ErrConflict)
	err = as.ClaimCall(t.Context(), "tc_1", "replica-2", at(time.Hour))
	wantErrIs(t, "ClaimCall of a withdrawn call", err, store.ErrConflict)

	// Only a deny finishes its call, and only with an error result.
	pendingApproval(t, s, as, "apr_2", "tc_2")
	for _, d := range []store.ApprovalDecision{
		{Kind: store.DecisionApprove, Actor: "system", Result: res},
		{Kind: store.DecisionDeny, Actor: "system", Result: tool.TextResult("fine")},
		{Kind: store.DecisionDeny, Actor: "system", Result: &tool.Result{IsError: true, Structured: json.RawMessage(`{`)}},
	} {
		_, err := as.DecideApproval(t.Context(), "apr_2", d)
		wantErrIs(t, fmt.Sprintf("DecideApproval(%+v)", d), err, store.ErrInvalid)
	}
	if a := mustGetApproval(t, as, "apr_2"); a.Status != store.ApprovalPending {
		t.Errorf("approval after invalid decisions = %q, want pending", a.Status)
	}
}

func testDecideTwice(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	first := decide(t, as, "apr_1", store.DecisionApprove)
	for _, kind := range []string{store.DecisionDeny, store.DecisionApprove} {
		got, err := as.DecideApproval(t.Context(), "apr_1",
			store.ApprovalDecision{Kind: kind, Actor: "mallory", At: at(3 * time.Minute)})
		wantErrIs(t, "second DecideApproval ("+kind+")", err, store.ErrConflict)
		if got == nil {
			t.Fatalf("second decision: no approval returned with ErrConflict, want the current one")
		}
		checkApproval(t, got, first)
	}
	checkApproval(t, mustGetApproval(t, as, "apr_1"), first)
	if c := mustGetCall(t, s, "tc_1"); c.Status != store.CallWaiting {
		t.Errorf("call after a refused deny = %q, want still waiting", c.Status)
	}
	if n := len(auditFor(t, as, "apr_1", store.AuditApprovalDenied)) + len(auditFor(t, as, "apr_1", store.AuditApprovalApproved)); n != 1 {
		t.Errorf("decision audit entries = %d, want 1 (refused decisions are not audited)", n)
	}
}

// testDecideConcurrent: of deciders racing, one wins; the others see its decision.
func testDecideConcurrent(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kind := store.DecisionApprove
			if i%2 == 1 {
				kind = store.DecisionDeny
			}
			<-start
			_, errs[i] = as.DecideApproval(t.Context(), "apr_1",
				store.ApprovalDecision{Kind: kind, Actor: fmt.Sprintf("approver-%d", i), At: at(time.Minute)})
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("deciders %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("decider %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no decider won: %v", errs)
	}
	a := mustGetApproval(t, as, "apr_1")
	if a.Decision == nil || a.Decision.Actor != fmt.Sprintf("approver-%d", winner) {
		t.Errorf("stored decision %+v, want the winner's (approver-%d)", a.Decision, winner)
	}
	c := mustGetCall(t, s, "tc_1")
	if denied := winner%2 == 1; denied != (c.Status == store.CallFailed) || (!denied && c.Status != store.CallWaiting) {
		t.Errorf("call = %q after winner %d (deny=%v)", c.Status, winner, winner%2 == 1)
	}
	n2 := len(auditFor(t, as, "apr_1", store.AuditApprovalDenied)) + len(auditFor(t, as, "apr_1", store.AuditApprovalApproved))
	if n2 != 1 {
		t.Errorf("decision audit entries = %d, want 1", n2)
	}
}

// testDecideExpired: a decision at or after ExpiresAt is refused and expires the
// approval (committed), whoever decides.
func testDecideExpired(t *testing.T, s store.Store, as store.ApprovalStore) {
	a := pendingApproval(t, s, as, "apr_1", "tc_1")
	// One microsecond before expiry still counts.
	pendingApproval(t, s, as, "apr_ok", "tc_ok")
	if _, err := as.DecideApproval(t.Context(), "apr_ok", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice",
		At: a.ExpiresAt.Add(-time.Microsecond)}); err != nil {
		t.Fatalf("decision just before expiry: %v", err)
	}

	when := *a.ExpiresAt // at the instant of expiry: too late
	got, err := as.DecideApproval(t.Context(), "apr_1", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice", At: when})
	wantErrIs(t, "DecideApproval after expiry", err, store.ErrConflict)
	wantErrIs(t, "DecideApproval that expired the request", err, store.ErrApprovalExpired)
	want := fullApproval("apr_1", "tc_1")
	want.Status, want.DecidedAt = store.ApprovalExpired, ptr(when)
	if got == nil {
		t.Fatalf("no approval returned with the expiry conflict")
	}
	checkApproval(t, got, want)
	checkApproval(t, mustGetApproval(t, as, "apr_1"), want)
	checkExpiredCall(t, s, "tc_1", when)
	checkOneAudit(t, as, "apr_1", store.AuditApprovalExpired, store.AuditActorSystem, when, map[string]any{"call_id": "tc_1"})
	if n := len(auditFor(t, as, "apr_1", store.AuditApprovalApproved)); n != 0 {
		t.Errorf("the refused decision was audited %d times", n)
	}
	// Still expired for the next decider, and not expired twice: only the decision
	// that expired it says so.
	_, err = as.DecideApproval(t.Context(), "apr_1", store.ApprovalDecision{Kind: store.DecisionDeny, Actor: "bob", At: when.Add(time.Hour)})
	wantErrIs(t, "DecideApproval of an expired approval", err, store.ErrConflict)
	if errors.Is(err, store.ErrApprovalExpired) {
		t.Errorf("DecideApproval of an approval expired before: %v, want a plain conflict, not ErrApprovalExpired", err)
	}
	if expired, err := as.ExpireApprovals(t.Context(), when.Add(time.Hour)); err != nil || len(expired) != 0 {
		t.Errorf("ExpireApprovals after the decision expired it = %d, %v; want none", len(expired), err)
	}
	checkApproval(t, mustGetApproval(t, as, "apr_1"), want)
	if n := len(auditFor(t, as, "apr_1", store.AuditApprovalExpired)); n != 1 {
		t.Errorf("expiry audited %d times, want 1", n)
	}
}

func checkExpiredCall(t *testing.T, s store.Store, id string, when time.Time) {
	t.Helper()
	c := mustGetCall(t, s, id)
	if c.Status != store.CallFailed || c.ErrorKind != tool.KindDenied || c.Result == nil || !c.Result.IsError ||
		!strings.Contains(c.Result.Text(), "approval request expired") {
		t.Errorf("call %s = status %q kind %q result %+v, want failed/denied saying the approval request expired", id, c.Status, c.ErrorKind, c.Result)
	}
	checkTimePtr(t, id+" FinishedAt", c.FinishedAt, ptr(when))
}

func testDecideInvalid(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	for _, d := range []store.ApprovalDecision{
		{Kind: "maybe", Actor: "alice"},
		{Kind: "", Actor: "alice"},
		{Kind: store.DecisionApprove},
		{Kind: store.DecisionApproveWithRule, Actor: "alice"},
	} {
		_, err := as.DecideApproval(t.Context(), "apr_1", d)
		wantErrIs(t, fmt.Sprintf("DecideApproval(%+v)", d), err, store.ErrInvalid)
	}
	if a := mustGetApproval(t, as, "apr_1"); a.Status != store.ApprovalPending || a.Decision != nil {
		t.Errorf("approval after invalid decisions = %q %+v, want pending without decision", a.Status, a.Decision)
	}
	// A zero At is now.
	before := time.Now().Add(-time.Second)
	got, err := as.DecideApproval(t.Context(), "apr_1", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice"})
	if err == nil {
		t.Fatalf("DecideApproval with At = now on an approval that expired in 2025 succeeded")
	}
	wantErrIs(t, "DecideApproval now, after the 2025 expiry", err, store.ErrConflict)
	if got == nil || got.DecidedAt == nil || got.DecidedAt.Before(before) {
		t.Errorf("expired with zero At: %+v, want DecidedAt about now", got)
	}
}

// testDenyFinishedCall: a call finished while waiting (the client cancelled) keeps its
// result when its approval is denied afterwards.
func testDenyFinishedCall(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	cancelled := tool.ErrorResult(tool.KindCancelled, "client went away")
	mustWrite(t, s, nil, []store.CallFinish{{ID: "tc_1", Status: store.CallFailed, Result: cancelled, FinishedAt: at(30 * time.Second)}})
	decide(t, as, "apr_1", store.DecisionDeny)
	c := mustGetCall(t, s, "tc_1")
	if c.ErrorKind != tool.KindCancelled || c.Result.Text() != "client went away" {
		t.Errorf("call = kind %q text %q, want the first result (cancelled)", c.ErrorKind, c.Result.Text())
	}
	checkTimePtr(t, "FinishedAt", c.FinishedAt, ptr(at(30*time.Second)))
}

func testExpireApprovals(t *testing.T, s store.Store, as store.ApprovalStore) {
	now := at(2 * time.Hour)
	mk := func(id string, expires *time.Time) {
		mustCall(t, s, "tc_"+id, store.CallPending)
		a := fullApproval(id, "tc_"+id)
		a.ExpiresAt = expires
		if err := as.CreateApproval(t.Context(), a); err != nil {
			t.Fatalf("CreateApproval(%s): %v", id, err)
		}
	}
	mk("apr_past", ptr(at(time.Hour)))
	mk("apr_now", ptr(now))
	mk("apr_future", ptr(now.Add(time.Microsecond)))
	mk("apr_never", nil)
	mk("apr_approved", ptr(at(time.Hour)))
	mk("apr_denied", ptr(at(time.Hour)))
	mk("apr_finished", ptr(at(time.Hour)))
	decide(t, as, "apr_approved", store.DecisionApprove)
	decide(t, as, "apr_denied", store.DecisionDeny)
	mustWrite(t, s, nil, []store.CallFinish{{ID: "tc_apr_finished", Status: store.CallSucceeded, Result: tool.TextResult("ran"), FinishedAt: at(time.Minute)}})

	expired, err := as.ExpireApprovals(t.Context(), now)
	if err != nil {
		t.Fatalf("ExpireApprovals: %v", err)
	}
	if got := expiredIDs(t, expired, now); !slices.Equal(got, []string{"apr_finished", "apr_now", "apr_past"}) {
		t.Errorf("ExpireApprovals = %v, want [apr_finished apr_now apr_past]", got)
	}
	for id, want := range map[string]store.ApprovalStatus{
		"apr_past": store.ApprovalExpired, "apr_now": store.ApprovalExpired, "apr_finished": store.ApprovalExpired,
		"apr_future": store.ApprovalPending, "apr_never": store.ApprovalPending,
		"apr_approved": store.ApprovalApproved, "apr_denied": store.ApprovalDenied,
	} {
		a := mustGetApproval(t, as, id)
		if a.Status != want {
			t.Errorf("%s status = %q, want %q", id, a.Status, want)
		}
		if want == store.ApprovalExpired {
			checkTimePtr(t, id+" DecidedAt", a.DecidedAt, ptr(now))
			if a.Decision != nil {
				t.Errorf("%s expired with decision %+v, want none", id, a.Decision)
			}
			checkOneAudit(t, as, id, store.AuditApprovalExpired, store.AuditActorSystem, now, map[string]any{"call_id": "tc_" + id})
		} else if len(auditFor(t, as, id, store.AuditApprovalExpired)) != 0 {
			t.Errorf("%s (%s) has an expiry audit entry", id, want)
		}
	}
	checkExpiredCall(t, s, "tc_apr_past", now)
	checkExpiredCall(t, s, "tc_apr_now", now)
	if c := mustGetCall(t, s, "tc_apr_finished"); c.Status != store.CallSucceeded || c.Result.Text() != "ran" {
		t.Errorf("finished call = %q %q, want its own result kept", c.Status, c.Result.Text())
	}
	for _, id := range []string{"tc_apr_future", "tc_apr_never", "tc_apr_approved"} {
		if c := mustGetCall(t, s, id); c.Status != store.CallWaiting {
			t.Errorf("%s = %q, want waiting", id, c.Status)
		}
	}
	if expired, err := as.ExpireApprovals(t.Context(), now); err != nil || len(expired) != 0 {
		t.Errorf("second ExpireApprovals = %v, %v; want none, nil", expiredIDs(t, expired, now), err)
	}
	later := now.Add(time.Microsecond)
	if expired, err := as.ExpireApprovals(t.Context(), later); err != nil || !slices.Equal(expiredIDs(t, expired, later), []string{"apr_future"}) {
		t.Errorf("ExpireApprovals a microsecond later = %v, %v; want [apr_future]", expiredIDs(t, expired, later), err)
	}
}

// ExpireRace checks that of sweeps and late decisions racing to expire the same
// requests, spread over stores (handles on one database), exactly one reports each
// expiry: ExpireApprovals returning it, or DecideApproval answering
// ErrApprovalExpired. Whoever tells of expiries (the approval webhook) tells once.
func ExpireRace(t *testing.T, stores ...store.Store) {
	t.Helper()
	s, as := stores[0], approvalStore(t, stores[0])
	const requests, sweeps = 5, 4
	for i := range requests {
		pendingApproval(t, s, as, fmt.Sprintf("apr_%d", i), fmt.Sprintf("tc_%d", i))
	}
	late := at(2 * time.Hour) // past every request's expiry
	var (
		mu       sync.Mutex
		reported = map[string]int{}
		wg       sync.WaitGroup
	)
	start := make(chan struct{})
	report := func(id string) {
		mu.Lock()
		reported[id]++
		mu.Unlock()
	}
	for w := range sweeps + requests {
		h := approvalStore(t, stores[w%len(stores)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if w < sweeps {
				expired, err := h.ExpireApprovals(t.Context(), late)
				if err != nil {
					t.Errorf("sweep %d: %v", w, err)
				}
				for _, a := range expired {
					report(a.ID)
				}
				return
			}
			id := fmt.Sprintf("apr_%d", w-sweeps)
			_, err := h.DecideApproval(t.Context(), id, store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice", At: late})
			switch {
			case errors.Is(err, store.ErrApprovalExpired):
				report(id)
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("late decision of %s: %v, want ErrConflict", id, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := range requests {
		id := fmt.Sprintf("apr_%d", i)
		if reported[id] != 1 {
			t.Errorf("%s reported expired %d times, want 1", id, reported[id])
		}
		if a := mustGetApproval(t, as, id); a.Status != store.ApprovalExpired {
			t.Errorf("%s = %q, want expired", id, a.Status)
		}
		if n := len(auditFor(t, as, id, store.AuditApprovalExpired)); n != 1 {
			t.Errorf("%s expiry audited %d times, want 1", id, n)
		}
	}
}

// expiredIDs are the sorted ids of the approvals ExpireApprovals returned; each must be
// whole, as expired at when.
func expiredIDs(t *testing.T, expired []*store.Approval, when time.Time) []string {
	t.Helper()
	ids := []string{}
	for _, a := range expired {
		want := fullApproval(a.ID, "tc_"+a.ID)
		want.ExpiresAt = a.ExpiresAt
		want.Status, want.DecidedAt = store.ApprovalExpired, ptr(when)
		checkApproval(t, a, want)
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

// testDecideWithSessionSpec: a decision that changes its session's spec (an approval
// "for session" adding rules) does both in one transaction: both happen, or, when the
// change fails, neither; a decision refused (already decided) changes no spec.
func testDecideWithSessionSpec(t *testing.T, s store.Store, as store.ApprovalStore) {
	if _, err := s.GetSession(t.Context(), "ses_1"); errors.Is(err, store.ErrNotFound) {
		mustCreateSession(t, s, "ses_1")
	}
	spec := func() string {
		t.Helper()
		got, err := s.GetSession(t.Context(), "ses_1")
		if err != nil {
			t.Fatal(err)
		}
		return string(got.Spec)
	}
	addRule := func(rule string) func(json.RawMessage) (json.RawMessage, error) {
		return func(old json.RawMessage) (json.RawMessage, error) {
			var m map[string]any
			if err := json.Unmarshal(old, &m); err != nil {
				return nil, err
			}
			rules, _ := m["allow"].([]any)
			m["allow"] = append(rules, rule)
			return json.Marshal(m)
		}
	}
	before := spec()
	refused := errors.New("refused")
	for _, tc := range []struct {
		name   string
		change func(json.RawMessage) (json.RawMessage, error)
		want   error
	}{
		{"change fails", func(json.RawMessage) (json.RawMessage, error) { return nil, refused }, refused},
		{"change is not JSON", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{nope`), nil }, store.ErrInvalid},
	} {
		pendingApproval(t, s, as, "apr_"+tc.name, "tc_"+tc.name)
		d := store.ApprovalDecision{Kind: store.DecisionApproveForSession, Actor: "alice", At: at(time.Minute), SessionSpec: tc.change}
		_, err := as.DecideApproval(t.Context(), "apr_"+tc.name, d)
		wantErrIs(t, "DecideApproval("+tc.name+")", err, tc.want)
		if a := mustGetApproval(t, as, "apr_"+tc.name); a.Status != store.ApprovalPending || a.Decision != nil {
			t.Errorf("%s: approval %s with decision %+v, want still pending", tc.name, a.Status, a.Decision)
		}
		if got := spec(); got != before {
			t.Errorf("%s: session spec = %s, want %s", tc.name, got, before)
		}
		if n := len(auditFor(t, as, "apr_"+tc.name, store.AuditApprovalApproved)); n != 0 {
			t.Errorf("%s: %d approval entries audited for a decision that failed", tc.name, n)
		}
	}

	pendingApproval(t, s, as, "apr_ok", "tc_ok")
	d := store.ApprovalDecision{Kind: store.DecisionApproveForSession, Actor: "alice", At: at(30 * time.Minute), SessionSpec: addRule("shell(rm -rf build)")}
	got, err := as.DecideApproval(t.Context(), "apr_ok", d)
	if err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	if got.Status != store.ApprovalApproved {
		t.Errorf("status = %s, want approved", got.Status)
	}
	if got := spec(); got != `{"allow":["shell(rm -rf build)"]}` {
		t.Errorf("session spec = %s, want the rule added", got)
	}
	sess, err := s.GetSession(t.Context(), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	checkTime(t, "session UpdatedAt", sess.UpdatedAt, at(30*time.Minute))

	// Decided already: the second decision changes nothing, its spec change included.
	d.SessionSpec = addRule("shell(rm *)")
	_, err = as.DecideApproval(t.Context(), "apr_ok", d)
	wantErrIs(t, "DecideApproval(again)", err, store.ErrConflict)
	if got := spec(); got != `{"allow":["shell(rm -rf build)"]}` {
		t.Errorf("session spec after a refused decision = %s", got)
	}
}

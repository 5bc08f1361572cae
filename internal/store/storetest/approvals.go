package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// RunApprovals runs the conformance suite of store.ApprovalStore. open has Run's
// contract; the store it returns must implement store.ApprovalStore.
func RunApprovals(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, as store.ApprovalStore)
	}{
		{"ApprovalRoundTrip", testApprovalRoundTrip},
		{"ApprovalFromCall", testApprovalFromCall},
		{"ApprovalCallStates", testApprovalCallStates},
		{"ApprovalDuplicate", testApprovalDuplicate},
		{"ApprovalInvalid", testApprovalInvalid},
		{"ApprovalNotFound", testApprovalNotFound},
		{"ListApprovals", testListApprovals},
		{"DecideApprove", testDecideApprove},
		{"DecideDeny", testDecideDeny},
		{"DenyWithResult", testDenyWithResult},
		{"DecideTwice", testDecideTwice},
		{"DecideWithSessionSpec", testDecideWithSessionSpec},
		{"DecideConcurrent", testDecideConcurrent},
		{"DecideExpired", testDecideExpired},
		{"DecideInvalid", testDecideInvalid},
		{"DenyFinishedCall", testDenyFinishedCall},
		{"ExpireApprovals", testExpireApprovals},
		{"ExpireOnce", func(t *testing.T, s store.Store, _ store.ApprovalStore) { ExpireRace(t, s) }},
		{"ClaimCall", testClaimCall},
		{"ClaimAgainAfterSecondApproval", testClaimAgainAfterSecondApproval},
		{"ApprovedUnclaimed", testApprovedUnclaimed},
		{"ClaimExclusive", func(t *testing.T, s store.Store, _ store.ApprovalStore) { ClaimRace(t, s) }},
		{"WaitingSurvivesAbandonCalls", testWaitingSurvivesAbandonCalls},
		{"Audit", testAudit},
		{"AuditInvalid", testAuditInvalid},
		{"ApprovalContextCancelled", testApprovalContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			tt.fn(t, s, approvalStore(t, s))
		})
	}
}

func approvalStore(t *testing.T, s store.Store) store.ApprovalStore {
	t.Helper()
	as, ok := s.(store.ApprovalStore)
	if !ok {
		t.Fatalf("%T does not implement store.ApprovalStore", s)
	}
	return as
}

// mustCall records a call of "shell" in ses_1 (tenant acme, owner replica-1).
func mustCall(t *testing.T, s store.Store, id string, status store.CallStatus) *store.Call {
	t.Helper()
	c := runningCall(id, "ses_1", "call_"+id, base)
	c.Name, c.Status, c.Arguments = "shell", status, json.RawMessage(`{"command":"rm -rf build"}`)
	if status == store.CallPending || status == store.CallWaiting {
		c.StartedAt = nil
	}
	if status.Terminal() {
		c.Result, c.FinishedAt = tool.TextResult("done before"), ptr(at(time.Second))
		c.ErrorKind = ""
	}
	mustWrite(t, s, []*store.Call{c}, nil)
	return c
}

// fullApproval sets every field a caller can set.
func fullApproval(id, callID string) *store.Approval {
	return &store.Approval{
		ID: id, Tenant: "acme", SessionID: "ses_1", CallID: callID, Tool: "shell",
		Arguments:   json.RawMessage(`{ "command" : "rm -rf build",  "n": [1, 2] }`),
		Risk:        tool.RiskHigh,
		Reason:      "deletes files <b>&amp;</b> ü \u2028",
		Suggestions: json.RawMessage(`[{"rule": "shell(rm -rf build)"}, {"rule":"shell(rm *)", "scope":"session"}]`),
		CreatedAt:   base,
		ExpiresAt:   ptr(at(time.Hour)),
	}
}

// pendingApproval records call callID (pending) and its approval id.
func pendingApproval(t *testing.T, s store.Store, as store.ApprovalStore, id, callID string) *store.Approval {
	t.Helper()
	mustCall(t, s, callID, store.CallPending)
	a := fullApproval(id, callID)
	if err := as.CreateApproval(t.Context(), a); err != nil {
		t.Fatalf("CreateApproval(%s): %v", id, err)
	}
	return a
}

func mustGetApproval(t *testing.T, as store.ApprovalStore, id string) *store.Approval {
	t.Helper()
	a, err := as.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatalf("GetApproval(%s): %v", id, err)
	}
	return a
}

// checkApproval compares every field. JSON must come back byte for byte.
func checkApproval(t *testing.T, got, want *store.Approval) {
	t.Helper()
	if got.ID != want.ID || got.Tenant != want.Tenant || got.SessionID != want.SessionID ||
		got.CallID != want.CallID || got.Tool != want.Tool {
		t.Errorf("approval identity = {%q %q %q %q %q}, want {%q %q %q %q %q}",
			got.ID, got.Tenant, got.SessionID, got.CallID, got.Tool,
			want.ID, want.Tenant, want.SessionID, want.CallID, want.Tool)
	}
	if string(got.Arguments) != string(want.Arguments) {
		t.Errorf("%s Arguments = %q, want %q", want.ID, got.Arguments, want.Arguments)
	}
	if string(got.Suggestions) != string(want.Suggestions) {
		t.Errorf("%s Suggestions = %q, want %q", want.ID, got.Suggestions, want.Suggestions)
	}
	if got.Risk != want.Risk || got.Reason != want.Reason || got.Status != want.Status {
		t.Errorf("%s risk/reason/status = %q %q %q, want %q %q %q", want.ID,
			got.Risk, got.Reason, got.Status, want.Risk, want.Reason, want.Status)
	}
	checkTime(t, want.ID+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTimePtr(t, want.ID+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	checkTimePtr(t, want.ID+" DecidedAt", got.DecidedAt, want.DecidedAt)
	switch {
	case got.Decision == nil && want.Decision == nil:
	case got.Decision == nil || want.Decision == nil:
		t.Errorf("%s Decision = %+v, want %+v", want.ID, got.Decision, want.Decision)
	default:
		g, w := *got.Decision, *want.Decision
		if g.Kind != w.Kind || g.Rule != w.Rule || g.Reason != w.Reason || g.Actor != w.Actor || g.ByPolicy != w.ByPolicy {
			t.Errorf("%s Decision = %+v, want %+v", want.ID, g, w)
		}
		checkTime(t, want.ID+" Decision.At", g.At, w.At)
	}
}

// auditFor returns the entries about subject with action, oldest first.
func auditFor(t *testing.T, as store.ApprovalStore, subject, action string) []*store.AuditEntry {
	t.Helper()
	all, err := as.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	var out []*store.AuditEntry
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Subject == subject && all[i].Action == action {
			out = append(out, all[i])
		}
	}
	return out
}

// checkOneAudit checks that exactly one entry about subject has action, actor, time
// and these detail fields.
func checkOneAudit(t *testing.T, as store.ApprovalStore, subject, action, actor string, when time.Time, detail map[string]any) {
	t.Helper()
	es := auditFor(t, as, subject, action)
	if len(es) != 1 {
		t.Fatalf("audit entries %s/%s = %d, want 1", subject, action, len(es))
	}
	e := es[0]
	if e.Actor != actor || e.Tenant != "acme" {
		t.Errorf("audit %s/%s actor %q tenant %q, want %q acme", subject, action, e.Actor, e.Tenant, actor)
	}
	checkTime(t, "audit "+action+" At", e.At, when)
	var got map[string]any
	if err := json.Unmarshal(e.Detail, &got); err != nil {
		t.Fatalf("audit detail %s: %v", e.Detail, err)
	}
	for k, v := range detail {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("audit %s detail[%s] = %v, want %v (detail %s)", action, k, got[k], v, e.Detail)
		}
	}
}

func testApprovalRoundTrip(t *testing.T, s store.Store, as store.ApprovalStore) {
	mustCall(t, s, "tc_1", store.CallRunning)
	in := fullApproval("apr_1", "tc_1")
	in.Status = store.ApprovalPending // allowed: a new approval is pending
	if err := as.CreateApproval(t.Context(), in); err != nil {
		t.Fatalf("CreateApproval: %v", err)
	}
	want := fullApproval("apr_1", "tc_1")
	want.Status = store.ApprovalPending
	checkApproval(t, mustGetApproval(t, as, "apr_1"), want)
	list, err := as.ListApprovals(t.Context(), store.ApprovalFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListApprovals = %d, %v; want 1", len(list), err)
	}
	checkApproval(t, list[0], want)

	// The call waits, with everything else as it was.
	c := mustGetCall(t, s, "tc_1")
	if c.Status != store.CallWaiting || c.Owner != "replica-1" || c.StartedAt == nil || c.FinishedAt != nil {
		t.Errorf("call after CreateApproval = status %q owner %q started %v finished %v, want waiting, rest unchanged",
			c.Status, c.Owner, c.StartedAt, c.FinishedAt)
	}
	checkOneAudit(t, as, "apr_1", store.AuditApprovalRequested, store.AuditActorSystem, base,
		map[string]any{"call_id": "tc_1", "session_id": "ses_1", "tool": "shell", "risk": "high", "reason": in.Reason})

	// Optional fields absent; a zero CreatedAt is now, written back.
	mustCall(t, s, "tc_2", store.CallPending)
	before := time.Now().Add(-time.Second)
	minimal := &store.Approval{ID: "apr_2", CallID: "tc_2", Tenant: "acme"}
	if err := as.CreateApproval(t.Context(), minimal); err != nil {
		t.Fatalf("CreateApproval(minimal): %v", err)
	}
	if minimal.CreatedAt.Before(before) || minimal.CreatedAt.After(time.Now().Add(time.Second)) || minimal.Status != store.ApprovalPending {
		t.Errorf("minimal approval after create: created %s status %q, want about now and pending", minimal.CreatedAt, minimal.Status)
	}
	got := mustGetApproval(t, as, "apr_2")
	if got.Arguments != nil || got.Suggestions != nil || got.ExpiresAt != nil || got.DecidedAt != nil ||
		got.Decision != nil || got.Risk != "" || got.Reason != "" {
		t.Errorf("minimal approval = %+v, want optional fields empty", got)
	}
	checkTime(t, "minimal CreatedAt", got.CreatedAt, minimal.CreatedAt)
}

func testApprovalFromCall(t *testing.T, s store.Store, as store.ApprovalStore) {
	mustCall(t, s, "tc_1", store.CallPending)
	a := &store.Approval{ID: "apr_1", CallID: "tc_1", CreatedAt: base}
	if err := as.CreateApproval(t.Context(), a); err != nil {
		t.Fatalf("CreateApproval: %v", err)
	}
	if a.Tenant != "acme" || a.SessionID != "ses_1" || a.Tool != "shell" {
		t.Errorf("written back: tenant %q session %q tool %q, want acme ses_1 shell", a.Tenant, a.SessionID, a.Tool)
	}
	got := mustGetApproval(t, as, "apr_1")
	if got.Tenant != "acme" || got.SessionID != "ses_1" || got.Tool != "shell" {
		t.Errorf("stored: tenant %q session %q tool %q, want the call's: acme ses_1 shell", got.Tenant, got.SessionID, got.Tool)
	}
}

func testApprovalCallStates(t *testing.T, s store.Store, as store.ApprovalStore) {
	tests := []struct {
		status  store.CallStatus
		wantErr error
	}{
		{store.CallPending, nil},
		{store.CallRunning, nil},
		{store.CallWaiting, store.ErrConflict},
		{store.CallSucceeded, store.ErrConflict},
		{store.CallFailed, store.ErrConflict},
		{"", store.ErrNotFound}, // no call
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			callID := "tc_" + string(tt.status)
			var before *store.Call
			if tt.status != "" {
				before = mustCall(t, s, callID, tt.status)
			}
			err := as.CreateApproval(t.Context(), fullApproval("apr_"+string(tt.status), callID))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("CreateApproval on a %s call: %v", tt.status, err)
				}
				if c := mustGetCall(t, s, callID); c.Status != store.CallWaiting {
					t.Errorf("call status = %q, want waiting", c.Status)
				}
				return
			}
			wantErrIs(t, "CreateApproval on a "+string(tt.status)+" call", err, tt.wantErr)
			_, err = as.GetApproval(t.Context(), "apr_"+string(tt.status))
			wantErrIs(t, "GetApproval after a refused create", err, store.ErrNotFound)
			if n := len(auditFor(t, as, "apr_"+string(tt.status), store.AuditApprovalRequested)); n != 0 {
				t.Errorf("refused create wrote %d audit entries", n)
			}
			if before != nil {
				checkCall(t, mustGetCall(t, s, callID), before)
			}
		})
	}
}

func testApprovalDuplicate(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	mustCall(t, s, "tc_2", store.CallPending)
	err := as.CreateApproval(t.Context(), fullApproval("apr_1", "tc_2"))
	wantErrIs(t, "CreateApproval(duplicate id)", err, store.ErrConflict)
	if c := mustGetCall(t, s, "tc_2"); c.Status != store.CallPending {
		t.Errorf("call of the refused approval is %q, want pending (rolled back)", c.Status)
	}
	if got := mustGetApproval(t, as, "apr_1"); got.CallID != "tc_1" {
		t.Errorf("first approval's call = %q, want it untouched (tc_1)", got.CallID)
	}
}

func testApprovalInvalid(t *testing.T, s store.Store, as store.ApprovalStore) {
	mustCall(t, s, "tc_1", store.CallPending)
	mk := func(edit func(a *store.Approval)) *store.Approval {
		a := fullApproval("apr_bad", "tc_1")
		edit(a)
		return a
	}
	tests := []struct {
		name string
		a    *store.Approval
	}{
		{"nil", nil},
		{"empty id", mk(func(a *store.Approval) { a.ID = "" })},
		{"empty call id", mk(func(a *store.Approval) { a.CallID = "" })},
		{"not pending", mk(func(a *store.Approval) { a.Status = store.ApprovalApproved })},
		{"with a decision", mk(func(a *store.Approval) { a.Decision = &store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "x"} })},
		{"with decided at", mk(func(a *store.Approval) { a.DecidedAt = ptr(base) })},
		{"unknown risk", mk(func(a *store.Approval) { a.Risk = "apocalyptic" })},
		{"arguments not JSON", mk(func(a *store.Approval) { a.Arguments = json.RawMessage(`{"command":`) })},
		{"suggestions not JSON", mk(func(a *store.Approval) { a.Suggestions = json.RawMessage(`[`) })},
		{"another session than the call", mk(func(a *store.Approval) { a.SessionID = "ses_2" })},
		{"another tenant than the call", mk(func(a *store.Approval) { a.Tenant = "evil" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := as.CreateApproval(t.Context(), tt.a)
			wantErrIs(t, "CreateApproval", err, store.ErrInvalid)
			if c := mustGetCall(t, s, "tc_1"); c.Status != store.CallPending {
				t.Errorf("call status = %q after a refused approval, want pending", c.Status)
			}
			_, err = as.GetApproval(t.Context(), "apr_bad")
			wantErrIs(t, "GetApproval of a refused approval", err, store.ErrNotFound)
		})
	}
}

func testApprovalNotFound(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	a, err := as.GetApproval(t.Context(), "apr_missing")
	wantErrIs(t, "GetApproval(unknown)", err, store.ErrNotFound)
	if a != nil {
		t.Errorf("got %+v with ErrNotFound", a)
	}
	_, err = as.DecideApproval(t.Context(), "apr_missing", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice"})
	wantErrIs(t, "DecideApproval(unknown)", err, store.ErrNotFound)
}

func approvalIDs(as []*store.Approval) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func testListApprovals(t *testing.T, s store.Store, as store.ApprovalStore) {
	// Created out of order; apr_3a and apr_3b share a timestamp (ties: id descending).
	mk := func(id, tenant, session string, created time.Duration) {
		c := runningCall("tc_"+id, session, "call_"+id, base)
		c.Tenant, c.Status = tenant, store.CallPending
		mustWrite(t, s, []*store.Call{c}, nil)
		a := &store.Approval{ID: id, CallID: c.ID, CreatedAt: at(created), ExpiresAt: ptr(at(time.Hour))}
		if err := as.CreateApproval(t.Context(), a); err != nil {
			t.Fatalf("CreateApproval(%s): %v", id, err)
		}
	}
	mk("apr_3a", "acme", "ses_1", 3*time.Second)
	mk("apr_1", "acme", "ses_1", 1*time.Second)
	mk("apr_5", "acme", "ses_2", 5*time.Second)
	mk("apr_3b", "acme", "ses_2", 3*time.Second)
	mk("apr_2", "acme", "ses_1", 2*time.Second)
	mk("apr_4", "other", "ses_9", 4*time.Second)
	decide(t, as, "apr_2", store.DecisionApprove)
	decide(t, as, "apr_5", store.DecisionDeny)

	tests := []struct {
		name string
		f    store.ApprovalFilter
		want []string
	}{
		{"all", store.ApprovalFilter{}, []string{"apr_5", "apr_4", "apr_3b", "apr_3a", "apr_2", "apr_1"}},
		{"tenant", store.ApprovalFilter{Tenant: "acme"}, []string{"apr_5", "apr_3b", "apr_3a", "apr_2", "apr_1"}},
		{"other tenant", store.ApprovalFilter{Tenant: "other"}, []string{"apr_4"}},
		{"unknown tenant", store.ApprovalFilter{Tenant: "nobody"}, []string{}},
		{"pending", store.ApprovalFilter{Tenant: "acme", Status: store.ApprovalPending}, []string{"apr_3b", "apr_3a", "apr_1"}},
		{"approved", store.ApprovalFilter{Status: store.ApprovalApproved}, []string{"apr_2"}},
		{"denied", store.ApprovalFilter{Status: store.ApprovalDenied}, []string{"apr_5"}},
		{"expired", store.ApprovalFilter{Status: store.ApprovalExpired}, []string{}},
		// Judged at a time (Now): before their expiry they are pending; at it, expired,
		// though no sweep has marked them so.
		{"pending before expiry", store.ApprovalFilter{Tenant: "acme", Status: store.ApprovalPending, Now: at(30 * time.Minute)}, []string{"apr_3b", "apr_3a", "apr_1"}},
		{"pending at expiry", store.ApprovalFilter{Tenant: "acme", Status: store.ApprovalPending, Now: at(time.Hour)}, []string{}},
		{"expired at expiry", store.ApprovalFilter{Tenant: "acme", Status: store.ApprovalExpired, Now: at(time.Hour)}, []string{"apr_3b", "apr_3a", "apr_1"}},
		{"session", store.ApprovalFilter{SessionID: "ses_1"}, []string{"apr_3a", "apr_2", "apr_1"}},
		{"session and status", store.ApprovalFilter{SessionID: "ses_2", Status: store.ApprovalPending}, []string{"apr_3b"}},
		{"call", store.ApprovalFilter{CallID: "tc_apr_3a"}, []string{"apr_3a"}},
		{"call of another tenant", store.ApprovalFilter{Tenant: "other", CallID: "tc_apr_3a"}, []string{}},
		{"unknown call", store.ApprovalFilter{CallID: "tc_nope"}, []string{}},
		{"limit", store.ApprovalFilter{Tenant: "acme", Limit: 2}, []string{"apr_5", "apr_3b"}},
		{"before", store.ApprovalFilter{Tenant: "acme", Before: at(3 * time.Second)}, []string{"apr_2", "apr_1"}},
		{"before a row (tie)", store.ApprovalFilter{Tenant: "acme", Before: at(3 * time.Second), BeforeID: "apr_3b"},
			[]string{"apr_3a", "apr_2", "apr_1"}},
		{"before a row, limited", store.ApprovalFilter{Before: at(5 * time.Second), BeforeID: "apr_5", Limit: 2},
			[]string{"apr_4", "apr_3b"}},
	}
	// The pending gauge counts without reading: every tenant's pending requests.
	if c, ok := as.(interface {
		CountPendingApprovals(context.Context) (int, error)
	}); !ok {
		t.Errorf("%T cannot count pending approvals", as)
	} else if n, err := c.CountPendingApprovals(t.Context()); err != nil || n != 4 {
		t.Errorf("CountPendingApprovals = %d, %v; want 4 (apr_1, apr_3a, apr_3b, apr_4)", n, err)
	}
	// Listed at a time past their expiry, undecided requests show as expired.
	if got, err := as.ListApprovals(t.Context(), store.ApprovalFilter{Tenant: "acme", Now: at(time.Hour)}); err != nil {
		t.Errorf("ListApprovals at expiry: %v", err)
	} else {
		for _, a := range got {
			want := map[string]store.ApprovalStatus{"apr_2": store.ApprovalApproved, "apr_5": store.ApprovalDenied}[a.ID]
			if want == "" {
				want = store.ApprovalExpired
			}
			if a.Status != want {
				t.Errorf("listed at expiry: %s is %q, want %q", a.ID, a.Status, want)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := as.ListApprovals(t.Context(), tt.f)
			if err != nil {
				t.Fatalf("ListApprovals(%+v): %v", tt.f, err)
			}
			if got == nil {
				t.Errorf("ListApprovals returned nil, want an empty slice")
			}
			if !reflect.DeepEqual(approvalIDs(got), tt.want) {
				t.Errorf("ListApprovals(%+v) = %v, want %v", tt.f, approvalIDs(got), tt.want)
			}
		})
	}
	// Pages of 2 walk everything once.
	var all []string
	f := store.ApprovalFilter{Limit: 2}
	for range 10 {
		page, err := as.ListApprovals(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, approvalIDs(page)...)
		last := page[len(page)-1]
		f.Before, f.BeforeID = last.CreatedAt, last.ID
	}
	if want := []string{"apr_5", "apr_4", "apr_3b", "apr_3a", "apr_2", "apr_1"}; !reflect.DeepEqual(all, want) {
		t.Errorf("paging = %v, want %v", all, want)
	}
	for _, f := range []store.ApprovalFilter{{Status: "maybe"}, {BeforeID: "apr_1"}} {
		_, err := as.ListApprovals(t.Context(), f)
		wantErrIs(t, fmt.Sprintf("ListApprovals(%+v)", f), err, store.ErrInvalid)
	}
}

// decide takes decision kind on id at base+1m by alice, and fails the test on error.
func decide(t *testing.T, as store.ApprovalStore, id, kind string) *store.Approval {
	t.Helper()
	d := store.ApprovalDecision{Kind: kind, Actor: "alice", Reason: "looked at it", At: at(time.Minute)}
	if kind == store.DecisionApproveWithRule {
		d.Rule = "shell(rm -rf build)"
	}
	a, err := as.DecideApproval(t.Context(), id, d)
	if err != nil {
		t.Fatalf("DecideApproval(%s, %s): %v", id, kind, err)
	}
	return a
}

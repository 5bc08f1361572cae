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

func testClaimCall(t *testing.T, s store.Store, as store.ApprovalStore) {
	setup := map[string]func(id string){
		"approved": func(id string) {
			pendingApproval(t, s, as, "apr_"+id, id)
			decide(t, as, "apr_"+id, store.DecisionApproveForSession)
		},
		"waiting without approval": func(id string) { mustCall(t, s, id, store.CallWaiting) },
		"pending approval":         func(id string) { pendingApproval(t, s, as, "apr_"+id, id) },
		"denied": func(id string) {
			pendingApproval(t, s, as, "apr_"+id, id)
			decide(t, as, "apr_"+id, store.DecisionDeny)
		},
		"expired": func(id string) {
			pendingApproval(t, s, as, "apr_"+id, id)
			if _, err := as.ExpireApprovals(t.Context(), at(24*time.Hour)); err != nil {
				t.Fatal(err)
			}
		},
		"pending call":  func(id string) { mustCall(t, s, id, store.CallPending) },
		"running call":  func(id string) { mustCall(t, s, id, store.CallRunning) },
		"finished call": func(id string) { mustCall(t, s, id, store.CallSucceeded) },
		"unknown call":  func(string) {},
	}
	tests := []struct {
		name    string
		wantErr error
	}{
		{"approved", nil},
		{"waiting without approval", nil},
		{"pending approval", store.ErrConflict},
		{"denied", store.ErrConflict},
		{"expired", store.ErrConflict},
		{"pending call", store.ErrConflict},
		{"running call", store.ErrConflict},
		{"finished call", store.ErrConflict},
		{"unknown call", store.ErrNotFound},
	}
	for i, tt := range tests {
		// Sequential: the "expired" setup expires every pending approval of the store.
		id := fmt.Sprintf("tc_%d", i)
		setup[tt.name](id)
		var before *store.Call
		if tt.wantErr != store.ErrNotFound {
			before = mustGetCall(t, s, id)
		}
		err := as.ClaimCall(t.Context(), id, "replica-2", at(3*time.Hour))
		if tt.wantErr != nil {
			wantErrIs(t, "ClaimCall("+tt.name+")", err, tt.wantErr)
			if before != nil {
				checkCall(t, mustGetCall(t, s, id), before)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ClaimCall(%s): %v", tt.name, err)
		}
		want := *before
		want.Status, want.Owner, want.StartedAt = store.CallRunning, "replica-2", ptr(at(3*time.Hour))
		checkCall(t, mustGetCall(t, s, id), &want)
		err = as.ClaimCall(t.Context(), id, "replica-3", at(4*time.Hour))
		wantErrIs(t, "second ClaimCall("+tt.name+")", err, store.ErrConflict)
		checkCall(t, mustGetCall(t, s, id), &want)
	}
	// A zero at is now.
	mustCall(t, s, "tc_now", store.CallWaiting)
	before := time.Now().Add(-time.Second)
	if err := as.ClaimCall(t.Context(), "tc_now", "replica-2", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if c := mustGetCall(t, s, "tc_now"); c.StartedAt == nil || c.StartedAt.Before(before) {
		t.Errorf("StartedAt = %v, want about now", c.StartedAt)
	}
}

// testClaimAgainAfterSecondApproval: a running call may ask again; it can be claimed
// only once the new approval is approved.
func testClaimAgainAfterSecondApproval(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	decide(t, as, "apr_1", store.DecisionApprove)
	if err := as.ClaimCall(t.Context(), "tc_1", "replica-1", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := fullApproval("apr_2", "tc_1")
	second.CreatedAt = at(2 * time.Minute)
	if err := as.CreateApproval(t.Context(), second); err != nil {
		t.Fatalf("second CreateApproval on the running call: %v", err)
	}
	err := as.ClaimCall(t.Context(), "tc_1", "replica-1", at(time.Hour))
	wantErrIs(t, "ClaimCall while the second approval is pending", err, store.ErrConflict)
	if _, err := as.DecideApproval(t.Context(), "apr_2", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice", At: at(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := as.ClaimCall(t.Context(), "tc_1", "replica-1", at(time.Hour)); err != nil {
		t.Errorf("ClaimCall after the second approval: %v", err)
	}
}

// ClaimRace checks that of 8 concurrent claimers of one approved call, spread over the
// given handles (one store, or several handles on one database), exactly one wins; and
// the same for a waiting call without approval. The first handle sets up.
func ClaimRace(t *testing.T, stores ...store.Store) {
	t.Helper()
	s, as := stores[0], approvalStore(t, stores[0])
	pendingApproval(t, s, as, "apr_race", "tc_race")
	decide(t, as, "apr_race", store.DecisionApprove)
	mustCall(t, s, "tc_race_ext", store.CallWaiting)
	for _, id := range []string{"tc_race", "tc_race_ext"} {
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			h := approvalStore(t, stores[i%len(stores)])
			go func() {
				defer wg.Done()
				<-start
				errs[i] = h.ClaimCall(t.Context(), id, fmt.Sprintf("claimer-%d", i), at(time.Hour))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("%s: claimers %d and %d both won", id, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("%s: claimer %d: %v, want nil or ErrConflict", id, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no claimer won: %v", id, errs)
		}
		for _, h := range stores {
			c := mustGetCall(t, h, id)
			if c.Status != store.CallRunning || c.Owner != fmt.Sprintf("claimer-%d", winner) {
				t.Errorf("%s = %q owned by %q, want running, owned by the winner claimer-%d", id, c.Status, c.Owner, winner)
			}
		}
	}
}

// testWaitingSurvivesAbandonCalls: a restart abandons its pending and running calls but
// not those waiting for a person; the approval goes on after the restart.
func testWaitingSurvivesAbandonCalls(t *testing.T, s store.Store, as store.ApprovalStore) {
	mustCall(t, s, "tc_running", store.CallRunning)
	pendingApproval(t, s, as, "apr_1", "tc_1") // owner replica-1, now waiting
	before := mustGetCall(t, s, "tc_1")
	n, err := s.AbandonCalls(t.Context(), "replica-1", tool.ErrorResult(tool.KindUnavailable, "restarted"), at(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != 1 || n[0].ID != "tc_running" {
		t.Errorf("AbandonCalls = %+v, want tc_running only", n)
	}
	checkCall(t, mustGetCall(t, s, "tc_1"), before)
	decide(t, as, "apr_1", store.DecisionApprove)
	if err := as.ClaimCall(t.Context(), "tc_1", "replica-1", at(2*time.Hour)); err != nil {
		t.Fatalf("ClaimCall after the restart: %v", err)
	}
}

func testAudit(t *testing.T, s store.Store, as store.ApprovalStore) {
	mk := func(tenant, action string, ts time.Time) *store.AuditEntry {
		e := &store.AuditEntry{At: ts, Tenant: tenant, Actor: "alice", Action: action, Subject: "ses_1",
			Detail: json.RawMessage(`{ "rule" : "shell(ls *)", "n": 1 }`)}
		if err := as.AppendAudit(t.Context(), e); err != nil {
			t.Fatalf("AppendAudit(%s): %v", action, err)
		}
		return e
	}
	e3 := mk("acme", "rule.added", at(3*time.Second))
	e1 := mk("acme", "rule.removed", at(1*time.Second))
	e3b := mk("acme", "session.closed", at(3*time.Second))
	eo := mk("other", "rule.added", at(2*time.Second))
	if !(e1.ID > e3.ID && e3b.ID > e1.ID && eo.ID > e3b.ID) {
		t.Errorf("ids %d %d %d %d, want increasing in append order", e3.ID, e1.ID, e3b.ID, eo.ID)
	}
	got, err := as.ListAudit(t.Context(), store.AuditFilter{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if want := []int64{e3b.ID, e3.ID, e1.ID}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ListAudit(acme) ids = %v, want %v (newest first, ties by id)", ids, want)
	}
	g := got[0]
	if g.Tenant != "acme" || g.Actor != "alice" || g.Action != "session.closed" || g.Subject != "ses_1" ||
		string(g.Detail) != string(e3b.Detail) {
		t.Errorf("entry = %+v, want %+v (detail byte for byte)", g, e3b)
	}
	checkTime(t, "audit At", g.At, at(3*time.Second))
	for _, tc := range []struct {
		tenant string
		limit  int
		want   int
	}{{"acme", 2, 2}, {"other", 0, 1}, {"", 0, 4}, {"", -1, 4}, {"", 3, 3}, {"nobody", 0, 0}} {
		got, err := as.ListAudit(t.Context(), store.AuditFilter{Tenant: tc.tenant, Limit: tc.limit})
		if err != nil || len(got) != tc.want || got == nil {
			t.Errorf("ListAudit(%q, %d) = %d entries (nil %v), %v; want %d", tc.tenant, tc.limit, len(got), got == nil, err, tc.want)
		}
	}
	// A zero At is now, written back; no detail is fine.
	before := time.Now().Add(-time.Second)
	e := &store.AuditEntry{Tenant: "acme", Actor: "system", Action: "ping"}
	if err := as.AppendAudit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if e.At.Before(before) {
		t.Errorf("zero At set to %s, want about now", e.At)
	}
	if got, _ := as.ListAudit(t.Context(), store.AuditFilter{Tenant: "acme", Limit: 1}); len(got) != 1 || got[0].ID != e.ID || got[0].Detail != nil {
		t.Errorf("newest entry = %+v, want %d without detail", got, e.ID)
	}

	// Pages: each from the last entry of the previous one, in the same order; filters.
	pageIDs := func(f store.AuditFilter) []int64 {
		t.Helper()
		got, err := as.ListAudit(t.Context(), f)
		if err != nil {
			t.Fatalf("ListAudit(%+v): %v", f, err)
		}
		out := []int64{}
		for _, e := range got {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    store.AuditFilter
		want []int64
	}{
		{store.AuditFilter{Tenant: "acme", Limit: 2}, []int64{e.ID, e3b.ID}},
		{store.AuditFilter{Tenant: "acme", Limit: 2, Before: e3b.ID}, []int64{e3.ID, e1.ID}},
		{store.AuditFilter{Tenant: "acme", Before: e1.ID}, []int64{}},
		{store.AuditFilter{Before: e3.ID}, []int64{eo.ID, e1.ID}}, // every tenant's, eo at 2s
		{store.AuditFilter{Action: "rule.added"}, []int64{e3.ID, eo.ID}},
		{store.AuditFilter{Tenant: "acme", Action: "rule.added"}, []int64{e3.ID}},
		{store.AuditFilter{Subject: "ses_1", Tenant: "other"}, []int64{eo.ID}},
		{store.AuditFilter{Subject: "ses_2"}, []int64{}},
		{store.AuditFilter{ActionPrefix: "rule."}, []int64{e3.ID, eo.ID, e1.ID}},
		{store.AuditFilter{ActionPrefix: "rule.", Tenant: "acme", Limit: 1, Before: e3.ID}, []int64{e1.ID}},
		{store.AuditFilter{ActionPrefix: "rule_"}, []int64{}}, // no wildcard
	} {
		if got := pageIDs(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ListAudit(%+v) ids = %v, want %v", tc.f, got, tc.want)
		}
	}
	_, err = as.ListAudit(t.Context(), store.AuditFilter{Before: eo.ID + 1000})
	wantErrIs(t, "ListAudit after an entry that does not exist", err, store.ErrNotFound)
	// A tenant's pages go on from its own entries only: a cursor naming another
	// tenant's entry would tell when that entry was made (bisecting with the pages).
	got, err = as.ListAudit(t.Context(), store.AuditFilter{Tenant: "acme", Before: eo.ID})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListAudit(acme) after another tenant's entry = %d entries, %v; want ErrNotFound", len(got), err)
	}
	got, err = as.ListAudit(t.Context(), store.AuditFilter{Tenant: "other", Before: e.ID})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListAudit(other) after another tenant's entry (none older) = %d entries, %v; want ErrNotFound", len(got), err)
	}
}

func testAuditInvalid(t *testing.T, s store.Store, as store.ApprovalStore) {
	for _, e := range []*store.AuditEntry{
		nil,
		{Action: "x"},
		{Actor: "alice"},
		{Actor: "alice", Action: "x", Detail: json.RawMessage(`{`)},
	} {
		err := as.AppendAudit(t.Context(), e)
		wantErrIs(t, fmt.Sprintf("AppendAudit(%+v)", e), err, store.ErrInvalid)
	}
	if got, err := as.ListAudit(t.Context(), store.AuditFilter{}); err != nil || len(got) != 0 {
		t.Errorf("ListAudit after refused appends = %d, %v; want none", len(got), err)
	}
}

func testApprovalContextCancelled(t *testing.T, s store.Store, as store.ApprovalStore) {
	pendingApproval(t, s, as, "apr_1", "tc_1")
	pendingApproval(t, s, as, "apr_2", "tc_2")
	decide(t, as, "apr_2", store.DecisionApprove)
	mustCall(t, s, "tc_3", store.CallPending)
	audits, _ := as.ListAudit(t.Context(), store.AuditFilter{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		call func() error
	}{
		{"CreateApproval", func() error { return as.CreateApproval(ctx, fullApproval("apr_3", "tc_3")) }},
		{"GetApproval", func() error { _, err := as.GetApproval(ctx, "apr_1"); return err }},
		{"ListApprovals", func() error { _, err := as.ListApprovals(ctx, store.ApprovalFilter{}); return err }},
		{"DecideApproval", func() error {
			_, err := as.DecideApproval(ctx, "apr_1", store.ApprovalDecision{Kind: store.DecisionDeny, Actor: "bob", At: at(time.Minute)})
			return err
		}},
		{"ClaimCall", func() error { return as.ClaimCall(ctx, "tc_2", "replica-2", at(time.Hour)) }},
		{"ExpireApprovals", func() error { _, err := as.ExpireApprovals(ctx, at(24*time.Hour)); return err }},
		{"AppendAudit", func() error { return as.AppendAudit(ctx, &store.AuditEntry{Actor: "a", Action: "b"}) }},
		{"ListAudit", func() error { _, err := as.ListAudit(ctx, store.AuditFilter{}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErrIs(t, tt.name+" with a cancelled context", tt.call(), context.Canceled)
		})
	}
	// Nothing was written.
	if _, err := as.GetApproval(t.Context(), "apr_3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("approval from a cancelled create: %v, want ErrNotFound", err)
	}
	for id, want := range map[string]store.CallStatus{"tc_1": store.CallWaiting, "tc_2": store.CallWaiting, "tc_3": store.CallPending} {
		if c := mustGetCall(t, s, id); c.Status != want {
			t.Errorf("%s = %q after cancelled writes, want %q", id, c.Status, want)
		}
	}
	if a := mustGetApproval(t, as, "apr_1"); a.Status != store.ApprovalPending {
		t.Errorf("apr_1 = %q after cancelled writes, want pending", a.Status)
	}
	if after, _ := as.ListAudit(t.Context(), store.AuditFilter{}); len(after) != len(audits) {
		t.Errorf("audit entries %d → %d after cancelled writes", len(audits), len(after))
	}
}

// AuditIsTransactional checks that the audit entry is written in the same transaction
// as the state change: breakAudit makes every later insert into audit_log fail (a
// trigger), after which creating, deciding and expiring approvals must fail and change
// nothing. s is an empty store.
func AuditIsTransactional(t *testing.T, s store.Store, breakAudit func(t *testing.T)) {
	t.Helper()
	as := approvalStore(t, s)
	pendingApproval(t, s, as, "apr_1", "tc_1")
	mustCall(t, s, "tc_2", store.CallRunning)
	breakAudit(t)

	if err := as.CreateApproval(t.Context(), fullApproval("apr_2", "tc_2")); err == nil {
		t.Errorf("CreateApproval succeeded without its audit entry")
	}
	if c := mustGetCall(t, s, "tc_2"); c.Status != store.CallRunning {
		t.Errorf("call of the failed CreateApproval = %q, want running (rolled back)", c.Status)
	}
	if _, err := as.GetApproval(t.Context(), "apr_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("approval of the failed CreateApproval: %v, want ErrNotFound", err)
	}
	if _, err := as.DecideApproval(t.Context(), "apr_1", store.ApprovalDecision{Kind: store.DecisionDeny, Actor: "bob", At: at(time.Minute)}); err == nil {
		t.Errorf("DecideApproval succeeded without its audit entry")
	}
	if expired, err := as.ExpireApprovals(t.Context(), at(24*time.Hour)); err == nil {
		t.Errorf("ExpireApprovals expired %d without audit entries", len(expired))
	}
	if a := mustGetApproval(t, as, "apr_1"); a.Status != store.ApprovalPending || a.Decision != nil || a.DecidedAt != nil {
		t.Errorf("approval after failed decision/expiry = %q %+v, want pending, undecided", a.Status, a.Decision)
	}
	if c := mustGetCall(t, s, "tc_1"); c.Status != store.CallWaiting || c.Result != nil {
		t.Errorf("call after failed deny/expiry = %q %+v, want still waiting", c.Status, c.Result)
	}
}

// testApprovedUnclaimed: only calls still waiting after an approval, with no other
// approval undecided or refused, decided at or before the cutoff, are found.
func testApprovedUnclaimed(t *testing.T, s store.Store, as store.ApprovalStore) {
	approve := func(id string) {
		pendingApproval(t, s, as, "apr_"+id, id)
		decide(t, as, "apr_"+id, store.DecisionApprove) // decided at(time.Minute)
	}
	approve("tc_a")
	approve("tc_b")
	pendingApproval(t, s, as, "apr_pending", "tc_pending")
	pendingApproval(t, s, as, "apr_denied", "tc_denied")
	decide(t, as, "apr_denied", store.DecisionDeny)
	approve("tc_claimed")
	if err := as.ClaimCall(t.Context(), "tc_claimed", "replica-1", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustCall(t, s, "tc_external", store.CallWaiting)
	// Approved, claimed, then asking again: waiting on a pending second approval.
	approve("tc_again")
	if err := as.ClaimCall(t.Context(), "tc_again", "replica-1", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := fullApproval("apr_again_2", "tc_again")
	second.CreatedAt = at(2 * time.Minute)
	if err := as.CreateApproval(t.Context(), second); err != nil {
		t.Fatal(err)
	}

	find := func(before time.Time, limit int) []string {
		t.Helper()
		ids, err := as.ApprovedUnclaimed(t.Context(), before, limit)
		if err != nil {
			t.Fatalf("ApprovedUnclaimed: %v", err)
		}
		return ids
	}
	if got := find(at(time.Hour), 0); !reflect.DeepEqual(got, []string{"tc_a", "tc_b"}) {
		t.Errorf("approved and unclaimed: %q, want tc_a and tc_b", got)
	}
	if got := find(at(time.Minute), 0); !reflect.DeepEqual(got, []string{"tc_a", "tc_b"}) {
		t.Errorf("cutoff at the decision: %q, want both (at or before)", got)
	}
	if got := find(at(59*time.Second), 0); len(got) != 0 || got == nil {
		t.Errorf("cutoff before the decision: %#v, want an empty list", got)
	}
	if got := find(at(time.Hour), 1); !reflect.DeepEqual(got, []string{"tc_a"}) {
		t.Errorf("limit 1: %q, want the oldest", got)
	}
	// The second approval approved: the call is found again; claimed: it is not.
	if _, err := as.DecideApproval(t.Context(), "apr_again_2", store.ApprovalDecision{Kind: store.DecisionApprove, Actor: "alice", At: at(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got := find(at(time.Hour), 0); !reflect.DeepEqual(got, []string{"tc_a", "tc_again", "tc_b"}) {
		t.Errorf("after the second approval: %q, want tc_a, tc_again, tc_b", got)
	}
	if err := as.ClaimCall(t.Context(), "tc_a", "replica-1", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := find(at(time.Hour), 0); !reflect.DeepEqual(got, []string{"tc_again", "tc_b"}) {
		t.Errorf("after claiming tc_a: %q, want tc_again, tc_b", got)
	}
}

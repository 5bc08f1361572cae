package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func testListRecentCalls(t *testing.T, s store.Store) {
	mk := func(id, session, tenant string, created time.Duration, status store.CallStatus) *store.Call {
		c := runningCall(id, session, "call_"+id, at(created))
		c.Tenant, c.Status = tenant, status
		if status.Terminal() {
			c.Result, c.FinishedAt = tool.TextResult("done"), ptr(at(created+time.Millisecond))
		}
		return c
	}
	// Two sessions of one tenant interleaved in time, one call of another tenant, and
	// a tie on created_at (ties: id descending).
	mustWrite(t, s, []*store.Call{
		mk("tc_a1", "ses_a", "acme", 1*time.Second, store.CallSucceeded),
		mk("tc_b2", "ses_b", "acme", 2*time.Second, store.CallRunning),
		mk("tc_a3", "ses_a", "acme", 3*time.Second, store.CallWaiting),
		mk("tc_x4", "ses_x", "other", 4*time.Second, store.CallRunning),
	}, nil)
	mustWrite(t, s, []*store.Call{
		mk("tc_b5", "ses_b", "acme", 5*time.Second, store.CallFailed),
		mk("tc_a5", "ses_a", "acme", 5*time.Second, store.CallPending),
	}, nil)
	tests := []struct {
		name string
		f    store.CallFilter
		want []string
	}{
		{"all of a tenant", store.CallFilter{Tenant: "acme"}, []string{"tc_b5", "tc_a5", "tc_a3", "tc_b2", "tc_a1"}},
		{"limit", store.CallFilter{Tenant: "acme", Limit: 2}, []string{"tc_b5", "tc_a5"}},
		{"one status", store.CallFilter{Tenant: "acme", Statuses: []store.CallStatus{store.CallRunning}}, []string{"tc_b2"}},
		{"live statuses", store.CallFilter{Tenant: "acme", Statuses: []store.CallStatus{store.CallPending, store.CallRunning, store.CallWaiting}},
			[]string{"tc_a5", "tc_a3", "tc_b2"}},
		{"finished statuses with limit", store.CallFilter{Tenant: "acme", Statuses: []store.CallStatus{store.CallSucceeded, store.CallFailed}, Limit: 1},
			[]string{"tc_b5"}},
		{"other tenant", store.CallFilter{Tenant: "other"}, []string{"tc_x4"}},
		{"unknown tenant", store.CallFilter{Tenant: "nobody"}, []string{}},
		{"page after a tie", store.CallFilter{Tenant: "acme", Before: at(5 * time.Second), BeforeID: "tc_b5", Limit: 2},
			[]string{"tc_a5", "tc_a3"}},
		{"page of live calls", store.CallFilter{Tenant: "acme", Statuses: []store.CallStatus{store.CallPending, store.CallRunning, store.CallWaiting},
			Before: at(3 * time.Second), BeforeID: "tc_a3"}, []string{"tc_b2"}},
		{"page past the oldest", store.CallFilter{Tenant: "acme", Before: at(1 * time.Second), BeforeID: "tc_a1"}, []string{}},
		{"before a time", store.CallFilter{Tenant: "acme", Before: at(3 * time.Second)}, []string{"tc_b2", "tc_a1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListRecentCalls(t.Context(), tt.f)
			if err != nil {
				t.Fatalf("ListRecentCalls: %v", err)
			}
			if got == nil {
				t.Errorf("ListRecentCalls returned nil, want an empty slice")
			}
			if !reflect.DeepEqual(ids(got), tt.want) {
				t.Errorf("ListRecentCalls(%+v) = %v, want %v", tt.f, ids(got), tt.want)
			}
		})
	}
	// Pages of 2, each after the last call of the one before, walk everything once.
	var all []string
	f := store.CallFilter{Tenant: "acme", Limit: 2}
	for range 10 {
		page, err := s.ListRecentCalls(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, ids(page)...)
		last := page[len(page)-1]
		f.Before, f.BeforeID = last.CreatedAt, last.ID
	}
	if want := []string{"tc_b5", "tc_a5", "tc_a3", "tc_b2", "tc_a1"}; !reflect.DeepEqual(all, want) {
		t.Errorf("paging = %v, want %v", all, want)
	}
	// Full records, results included.
	got, err := s.ListRecentCalls(t.Context(), store.CallFilter{Tenant: "acme", Statuses: []store.CallStatus{store.CallSucceeded}})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListRecentCalls: %v, %v", got, err)
	}
	checkCall(t, got[0], mk("tc_a1", "ses_a", "acme", 1*time.Second, store.CallSucceeded))
}

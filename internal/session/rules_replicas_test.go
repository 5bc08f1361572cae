package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestRulesAddedOnTwoReplicasAtOnce: approvers deciding "for session" on two
// replicas at the same moment (a console behind a Service) each add their rules to
// the stored spec; neither write may drop the other's, as a read-then-write of the
// whole spec does when the two interleave.
func TestRulesAddedOnTwoReplicasAtOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st retentionStore) {
		ctx := context.Background()
		a := newReplica(t, st, Config{})
		b := newReplica(t, st, Config{})
		s, _, err := a.Create(ctx, "t1", Spec{AvailableTools: []string{"echo", "other"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, "t1", s.ID); err != nil {
			t.Fatal(err)
		}
		const rounds = 100
		var (
			wg   sync.WaitGroup
			want []string
		)
		for i := range rounds {
			for name, m := range map[string]*Manager{"a": a, "b": b} {
				rule := fmt.Sprintf("echo(%s-%d)", name, i)
				want = append(want, rule)
				wg.Go(func() {
					if err := m.AllowRules(ctx, "t1", s.ID, []string{rule}); err != nil {
						t.Errorf("AllowRules(%s): %v", rule, err)
					}
				})
			}
		}
		wg.Wait()
		rec, err := st.GetSession(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		var stored storedSpec
		if err := json.Unmarshal(rec.Spec, &stored); err != nil {
			t.Fatal(err)
		}
		var got []string
		if stored.Spec.Rules != nil {
			got = stored.Spec.Rules.Allow
		}
		var lost []string
		for _, r := range want {
			if !slices.Contains(got, r) {
				lost = append(lost, r)
			}
		}
		if len(lost) > 0 {
			t.Fatalf("stored allow rules lost %d of %d added: %v", len(lost), len(want), lost)
		}
	})
}

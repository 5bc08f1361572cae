package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func batchWriter(t *testing.T, s store.Store) store.BatchWriter {
	t.Helper()
	bw, ok := s.(store.BatchWriter)
	if !ok {
		t.Skipf("%T does not implement store.BatchWriter", s)
	}
	return bw
}

func testStartCalls(t *testing.T, s store.Store) {
	bw := batchWriter(t, s)
	mk := func(id string, status store.CallStatus) *store.Call {
		c := runningCall(id, "ses_1", "call_"+id, base)
		c.Status, c.StartedAt, c.Owner = status, nil, "replica-old"
		if status == store.CallRunning {
			c.StartedAt = ptr(base)
		}
		if status.Terminal() {
			c.Result, c.FinishedAt = tool.TextResult("done"), ptr(at(time.Second))
		}
		return c
	}
	calls := []*store.Call{
		mk("tc_pending", store.CallPending), mk("tc_waiting", store.CallWaiting),
		mk("tc_running", store.CallRunning), mk("tc_ok", store.CallSucceeded), mk("tc_failed", store.CallFailed),
	}
	mustWrite(t, s, calls, nil)
	tests := []struct {
		id      string
		wantErr error
	}{
		{"tc_pending", nil},
		{"tc_waiting", nil},
		{"tc_running", store.ErrConflict},
		{"tc_ok", store.ErrConflict},
		{"tc_failed", store.ErrConflict},
		{"tc_missing", store.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			before, _ := s.GetCall(t.Context(), tt.id)
			// An insert rides along: a refused start must roll it back.
			extra := runningCall("tc_extra_"+tt.id, "ses_1", "call_x", base)
			err := bw.WriteCallBatch(t.Context(), store.CallWrites{
				Inserts: []*store.Call{extra},
				Starts:  []store.CallStart{{ID: tt.id, Owner: "replica-new", StartedAt: at(time.Minute)}},
			})
			if tt.wantErr != nil {
				wantErrIs(t, "start", err, tt.wantErr)
				if _, err := s.GetCall(t.Context(), extra.ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("insert in the refused write: %v, want ErrNotFound", err)
				}
				if before != nil {
					checkCall(t, mustGetCall(t, s, tt.id), before)
				}
				return
			}
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			want := *before
			want.Status, want.Owner, want.StartedAt = store.CallRunning, "replica-new", ptr(at(time.Minute))
			checkCall(t, mustGetCall(t, s, tt.id), &want)
			mustGetCall(t, s, extra.ID)

			// Started once: a second claim loses.
			err = bw.WriteCallBatch(t.Context(), store.CallWrites{Starts: []store.CallStart{{ID: tt.id, Owner: "replica-3"}}})
			wantErrIs(t, "second start", err, store.ErrConflict)
			// Insert, start and finish of one call in one write apply in that order.
			id := "tc_all_" + tt.id
			c := runningCall(id, "ses_1", "call_all", base)
			c.Status, c.StartedAt = store.CallPending, nil
			if err := bw.WriteCallBatch(t.Context(), store.CallWrites{
				Inserts:  []*store.Call{c},
				Starts:   []store.CallStart{{ID: id, Owner: "replica-new", StartedAt: at(time.Second)}},
				Finishes: []store.CallFinish{{ID: id, Status: store.CallSucceeded, Result: resultFor(id), FinishedAt: at(2 * time.Second)}},
			}); err != nil {
				t.Fatalf("insert+start+finish: %v", err)
			}
			got := mustGetCall(t, s, id)
			checkTimePtr(t, "StartedAt", got.StartedAt, ptr(at(time.Second)))
			checkFinished(t, s, id)
		})
	}
	err := bw.WriteCallBatch(t.Context(), store.CallWrites{Starts: []store.CallStart{{Owner: "x"}}})
	wantErrIs(t, "start without id", err, store.ErrInvalid)
}

// testGroupCommitMarkRunning: calls recorded as pending are claimed through the
// committer; of several claims on one call exactly one wins.

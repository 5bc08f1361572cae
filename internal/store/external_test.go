package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/tool"
)

type externalStore interface {
	store.Store
	WaitCall(ctx context.Context, id string) error
	AnswerCall(ctx context.Context, id string, result *tool.Result, at time.Time) error
	ClaimCall(ctx context.Context, callID, owner string, at time.Time) error
}

func TestExternalCalls(t *testing.T) {
	t.Parallel()
	opens := map[string]func(t *testing.T) externalStore{
		"sqlite": func(t *testing.T) externalStore {
			s, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "x.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(t *testing.T) externalStore {
			s, err := store.OpenPostgres(context.Background(), pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := open(t)
			if err := s.CreateSession(ctx, &store.Session{ID: "s1", Tenant: "t", Spec: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			insert := func(id string, status store.CallStatus) {
				c := &store.Call{ID: id, SessionID: "s1", Tenant: "t", ToolCallID: id, Name: "ask_user", Arguments: json.RawMessage(`{}`), Status: status, CreatedAt: now}
				if err := s.WriteCalls(ctx, []*store.Call{c}, nil); err != nil {
					t.Fatal(err)
				}
			}
			insert("a", store.CallRunning)
			insert("done", store.CallSucceeded)
			if err := s.WaitCall(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitCall(ctx, "done"); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("wait on a finished call: %v", err)
			}
			if err := s.WaitCall(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("wait on an unknown call: %v", err)
			}
			// A waiting call survives AbandonCalls (a restart).
			if _, err := s.AbandonCalls(ctx, "", tool.ErrorResult(tool.KindFailed, "x"), now); err != nil {
				t.Fatal(err)
			}
			if c, _ := s.GetCall(ctx, "a"); c.Status != store.CallWaiting {
				t.Fatalf("after AbandonCalls: %s", c.Status)
			}
			answer := tool.TextResult("blue")
			if err := s.AnswerCall(ctx, "a", answer, now); err != nil {
				t.Fatal(err)
			}
			c, _ := s.GetCall(ctx, "a")
			if c.Status != store.CallSucceeded || c.Result.Text() != "blue" || c.FinishedAt == nil {
				t.Fatalf("answered: %+v", c)
			}
			if err := s.AnswerCall(ctx, "a", tool.TextResult("red"), now); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("second answer: %v", err)
			}
			if err := s.AnswerCall(ctx, "nope", answer, now); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("answer to an unknown call: %v", err)
			}
			insert("b", store.CallPending)
			_ = s.WaitCall(ctx, "b")
			if err := s.AnswerCall(ctx, "b", tool.ErrorResult(tool.KindFailed, "user declined"), now); err != nil {
				t.Fatal(err)
			}
			if c, _ := s.GetCall(ctx, "b"); c.Status != store.CallFailed || c.ErrorKind != tool.KindFailed {
				t.Fatalf("error answer: %+v", c)
			}
		})
	}
}

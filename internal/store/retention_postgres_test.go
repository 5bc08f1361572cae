package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestDeleteUnusedSessionDeletesItsJobs: the rows that record which replica runs a
// session's background jobs go with the session (they name it and its tenant); the
// jobs of other sessions stay. Only PostgreSQL records jobs.
func TestDeleteUnusedSessionDeletesItsJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := store.OpenPostgres(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Heartbeat(ctx, "replica-a", "http://a:8080", time.Time{}); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-48 * time.Hour).UTC()
	for _, id := range []string{"ses_old", "ses_kept"} {
		if err := s.CreateSession(ctx, &store.Session{ID: id, Tenant: "t", CreatedAt: long, UpdatedAt: long}); err != nil {
			t.Fatal(err)
		}
	}
	for id, sess := range map[string]string{"job_1": "ses_old", "job_2": "ses_old", "job_3": "ses_kept"} {
		if err := s.RecordJob(ctx, &store.Job{ID: id, SessionID: sess, Tenant: "t", Owner: "replica-a", CreatedAt: long}); err != nil {
			t.Fatal(err)
		}
	}
	if _, gone, err := s.DeleteUnusedSession(ctx, "ses_old", time.Now().Add(-time.Hour), 0); err != nil || !gone {
		t.Fatalf("DeleteUnusedSession = %v, %v; want it gone", gone, err)
	}
	for _, id := range []string{"job_1", "job_2"} {
		if j, err := s.GetJob(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("job %s of the deleted session: %+v, %v; want it deleted", id, j, err)
		}
	}
	if _, err := s.GetJob(ctx, "job_3"); err != nil {
		t.Errorf("the other session's job: %v", err)
	}
}

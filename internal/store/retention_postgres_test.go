package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// TestDeleteUnusedSessionDeletesItsJobs: the rows that record which replica runs a
// session's background jobs go with the session (they name it and its tenant); the
// jobs of other sessions stay. Only PostgreSQL records jobs.
func TestDeleteUnusedSessionDeletesItsJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openPostgresWithReplica(t, "replica-a")
	long := createOldSessions(t, s, "ses_old", "ses_kept")
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

// createOldSessions creates sessions ids in tenant "t", created and last used two
// days ago (old enough for retention to delete), and returns that time.
func createOldSessions(t *testing.T, s store.Store, ids ...string) time.Time {
	t.Helper()
	long := time.Now().Add(-48 * time.Hour).UTC()
	for _, id := range ids {
		if err := s.CreateSession(t.Context(), &store.Session{ID: id, Tenant: "t", CreatedAt: long, UpdatedAt: long}); err != nil {
			t.Fatal(err)
		}
	}
	return long
}

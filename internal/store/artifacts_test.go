package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// TestDeleteArtifact: an evicted artifact's row is deleted by its owner, only by its
// owner, and deleting one that is gone is no error; a swept session's rows go but
// for those recorded after the sweep. PostgreSQL only: with SQLite one process holds
// every artifact and keeps no rows of them.
func TestDeleteArtifact(t *testing.T) {
	t.Parallel()
	for _, bc := range []struct {
		name string
		open func(t *testing.T) store.ArtifactStore
	}{
		{"postgres", func(t *testing.T) store.ArtifactStore {
			s := openPostgres(t)
			for _, id := range []string{"replica-a", "replica-b"} {
				if err := s.Heartbeat(t.Context(), id, "http://"+id, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			return s
		}},
	} {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := bc.open(t)
			for _, ref := range []string{"art_1", "art_2"} {
				if err := s.RecordArtifact(ctx, &store.Artifact{Ref: ref, SessionID: "ses_1", Tenant: "t", Owner: "replica-a"}); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.GetArtifact(ctx, "art_1"); err != nil || got.Owner != "replica-a" || got.SessionID != "ses_1" || got.CreatedAt.IsZero() {
				t.Fatalf("GetArtifact = %+v, %v", got, err)
			}
			if err := s.DeleteArtifact(ctx, "art_1", "replica-b"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetArtifact(ctx, "art_1"); err != nil {
				t.Errorf("another replica deleted replica-a's artifact row: %v", err)
			}
			if err := s.DeleteArtifact(ctx, "art_1", "replica-a"); err != nil {
				t.Fatal(err)
			}
			if a, err := s.GetArtifact(ctx, "art_1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the evicted artifact's row: %+v, %v; want it deleted", a, err)
			}
			if _, err := s.GetArtifact(ctx, "art_2"); err != nil {
				t.Errorf("the other artifact's row: %v", err)
			}
			if err := s.DeleteArtifact(ctx, "art_1", "replica-a"); err != nil {
				t.Errorf("deleting it again: %v", err)
			}

			// A swept session's rows go, but for one recorded since the sweep.
			swept := time.Now()
			if err := s.RecordArtifact(ctx, &store.Artifact{Ref: "art_3", SessionID: "ses_1", Tenant: "t", Owner: "replica-a", CreatedAt: swept.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordArtifact(ctx, &store.Artifact{Ref: "art_4", SessionID: "ses_2", Tenant: "t", Owner: "replica-a"}); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteSessionArtifacts(ctx, "ses_1", "replica-a", swept); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetArtifact(ctx, "art_2"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the swept session's artifact row: %v; want it deleted", err)
			}
			for _, ref := range []string{"art_3", "art_4"} {
				if _, err := s.GetArtifact(ctx, ref); err != nil {
					t.Errorf("%s, recorded after the sweep or of another session: %v", ref, err)
				}
			}
		})
	}
}

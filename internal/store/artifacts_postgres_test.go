package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestArtifactOwners: an artifact's owner is found by its reference; an unknown one
// is ErrNotFound, a record with a missing field ErrInvalid, a session deleted by
// retention takes its artifacts' rows with it while another session's stay, and a row
// outlives its replica's. Only PostgreSQL records artifacts.
func TestArtifactOwners(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openPostgresWithReplica(t, "replica-a")
	createOldSessions(t, s, "ses_old", "ses_kept")
	want := &store.Artifact{Ref: "art_1", SessionID: "ses_old", Tenant: "t", Owner: "replica-a"}
	if err := s.RecordArtifact(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetArtifact(ctx, "art_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref != want.Ref || got.SessionID != want.SessionID || got.Tenant != want.Tenant || got.Owner != want.Owner || got.CreatedAt.IsZero() {
		t.Fatalf("GetArtifact = %+v, want %+v", got, want)
	}
	if _, err := s.GetArtifact(ctx, "art_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown artifact: %v", err)
	}
	if err := s.RecordArtifact(ctx, &store.Artifact{Ref: "art_3", SessionID: "ses_old", Tenant: "t"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("no owner: %v", err)
	}
	if err := s.RecordArtifact(ctx, &store.Artifact{Ref: "art_5", SessionID: "ses_kept", Tenant: "t", Owner: "replica-a"}); err != nil {
		t.Fatal(err)
	}

	if _, gone, err := s.DeleteUnusedSession(ctx, "ses_old", time.Now().Add(-time.Hour), 0); err != nil || !gone {
		t.Fatalf("DeleteUnusedSession = %v, %v; want it gone", gone, err)
	}
	if a, err := s.GetArtifact(ctx, "art_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted session's artifact: %+v, %v; want it deleted", a, err)
	}
	if _, err := s.GetArtifact(ctx, "art_5"); err != nil {
		t.Errorf("the other session's artifact: %v", err)
	}

	// The row outlives its replica's once the sweep forgets that replica: the file is
	// in the replica's data_dir, which may come back under its id.
	if err := s.LeaveReplica(ctx, "replica-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExpireReplicas(ctx, "replica-b", time.Second, func(string, bool) *tool.Result { return tool.ErrorResult(tool.KindFailed, "gone") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReplica(ctx, "replica-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replica that left, after the sweep: %v; want it forgotten", err)
	}
	if got, err := s.GetArtifact(ctx, "art_5"); err != nil || got.Owner != "replica-a" {
		t.Fatalf("the artifact of the forgotten replica: %+v, %v; want its row kept", got, err)
	}
}

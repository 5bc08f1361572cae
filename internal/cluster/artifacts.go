package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// ArtifactStore is what the artifact relay needs of the store.
type ArtifactStore interface {
	RecordArtifact(ctx context.Context, a *store.Artifact) error
	GetArtifact(ctx context.Context, ref string) (*store.Artifact, error)
	DeleteArtifact(ctx context.Context, ref, owner string) error
	DeleteSessionArtifacts(ctx context.Context, session, owner string, before time.Time) error
	GetReplica(ctx context.Context, id string) (*store.Replica, error)
}

// ArtifactRelay lets artifact_read on any replica read a tool_chain artifact,
// whichever replica holds it: the artifact is a file in the data_dir of the replica
// that ran the chain, so that replica records itself as the owner, and a read on
// another replica is forwarded to the owner the way a job tool's call is (the same
// route, with the caller's own key; the owner checks the session and tenant itself,
// so forwarding grants nothing).
type ArtifactRelay struct {
	self    string
	st      ArtifactStore
	records CallRecords
	client  *http.Client
}

// NewArtifactRelay returns the relay of replica self; records commits a call's
// record before the call is forwarded (nil: records are written at once); transport
// nil uses one with short dial timeouts (the call's own deadline bounds the rest).
func NewArtifactRelay(self string, st ArtifactStore, records CallRecords, transport http.RoundTripper) *ArtifactRelay {
	return &ArtifactRelay{self: self, st: st, records: records, client: replicaClient(transport)}
}

// Stored records that this replica holds artifact ref of sess.
func (r *ArtifactRelay) Stored(ctx context.Context, sess *tool.Session, ref string) error {
	return r.st.RecordArtifact(ctx, &store.Artifact{Ref: ref, SessionID: sess.ID, Tenant: sess.Tenant, Owner: r.self})
}

// Evicted forgets that this replica holds artifact ref: it was deleted to make room,
// and a read of it from any replica is then not found here or anywhere (not
// forwarded to this replica, nor unavailable while this replica is out of reach).
func (r *ArtifactRelay) Evicted(ctx context.Context, ref string) error {
	return r.st.DeleteArtifact(ctx, ref, r.self)
}

// Swept forgets the artifacts of session this replica held before at: its sweep
// deleted them (the session had not used them for the retention).
func (r *ArtifactRelay) Swept(ctx context.Context, session string, at time.Time) error {
	return r.st.DeleteSessionArtifacts(ctx, session, r.self, at)
}

// Forward runs ctx's call (artifact_read, with args) on the replica that holds ref.
// handled is false when no other replica holds an artifact of that reference for
// ctx's session: it is then unknown. When the owner cannot be reached the result is
// an unavailable error naming it.
func (r *ArtifactRelay) Forward(ctx *tool.Context, ref string, args json.RawMessage) (res *tool.Result, handled bool, err error) {
	if forwarded(ctx) || ctx.Session == nil {
		return nil, false, nil
	}
	a, err := r.st.GetArtifact(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, tool.Errorf(tool.KindUnavailable, "could not look up which replica holds artifact %s: %v", ref, err)
	}
	if a.SessionID != ctx.Session.ID || a.Tenant != ctx.Session.Tenant || a.Owner == r.self {
		// Another session's artifact does not exist from here; one this replica made
		// and no longer has was evicted or swept.
		return nil, false, nil
	}
	rep, err := r.st.GetReplica(ctx, a.Owner)
	if errors.Is(err, store.ErrNotFound) {
		// Its row outlives the replica's (migration 0017): a replica that stopped,
		// forgotten by the others, may come back under its id with its data_dir.
		return nil, true, tool.Errorf(tool.KindUnavailable, "artifact %s is held by replica %s, which has stopped; "+
			"it is out of reach until that replica is back (with its data_dir); run the chain again if the result is needed now", ref, a.Owner)
	}
	if err != nil {
		return nil, true, tool.Errorf(tool.KindUnavailable, "could not look up replica %s, which holds artifact %s: %v", a.Owner, ref, err)
	}
	res, err = forwardCall(ctx, r.client, r.records, r.self, rep, JobCallRequest{CallID: ctx.CallID, Name: ctx.ToolName, Arguments: args})
	if err != nil {
		return nil, true, tool.Errorf(tool.KindUnavailable, "artifact %s is held by replica %s (%s), which did not answer: %v; "+
			"if that replica stopped, the artifact is out of reach until it is back (with its data_dir)", ref, a.Owner, rep.Address, err)
	}
	return res, true, nil
}

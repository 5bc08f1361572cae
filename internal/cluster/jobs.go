package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/telemetry"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// ForwardedHeader marks a request one replica forwarded to another, naming the
// sender. A replica never forwards such a request again, so two replicas that
// disagree about an owner cannot loop.
const ForwardedHeader = "X-Toolserverd-Forwarded-By"

// JobCallPath is the owner's route that runs a job tool's call forwarded by another
// replica: POST with a JobCallRequest, answered with a JobCallResponse.
func JobCallPath(sessionID string) string {
	return "/v1/sessions/" + url.PathEscape(sessionID) + "/job-calls"
}

// JobCallRequest is a job tool's call forwarded to the replica running the job.
type JobCallRequest struct {
	// CallID is the forwarding replica's record of this call (tc_…): the owner runs
	// the call only if that record exists, in this session, for this tool and these
	// arguments, and is running — which only the executor's permission path produces.
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// JobCallResponse is the owner's result of a forwarded call.
type JobCallResponse struct {
	Result *tool.Result `json:"result"`
}

// JobStore is what the job relay needs of the store.
type JobStore interface {
	RecordJob(ctx context.Context, j *store.Job) error
	GetJob(ctx context.Context, id string) (*store.Job, error)
	GetReplica(ctx context.Context, id string) (*store.Replica, error)
}

// CallRecords commits a call's record that may still be waiting to be written
// (store.GroupCommitter holds a read-only call's record for its result).
type CallRecords interface {
	Commit(ctx context.Context, id string) error
}

// JobRelay lets the job tools of any replica reach a background job, whichever
// replica runs it: the job's process and output logs live where it started, so the
// starting replica records itself as the owner, and a call about the job on another
// replica is forwarded to the owner's advertised address with the caller's own API
// key. The owner authenticates the key and checks the session's tenant itself, so
// forwarding grants nothing the caller does not hold.
type JobRelay struct {
	self    string
	st      JobStore
	records CallRecords
	client  *http.Client
	// since is when this process began: a job it is recorded to run that began
	// before then ran in an earlier run of this replica, and ended with it.
	since time.Time
}

// NewJobRelay returns the relay of replica self; records commits a call's record
// before the call is forwarded (nil: records are written at once); transport nil
// uses one with short dial timeouts (a call's own deadline bounds the rest).
func NewJobRelay(self string, st JobStore, records CallRecords, transport http.RoundTripper) *JobRelay {
	return &JobRelay{self: self, st: st, records: records, client: replicaClient(transport), since: time.Now()}
}

// replicaClient reaches the other replicas through transport, or one with short dial
// timeouts when it is nil.
func replicaClient(transport http.RoundTripper) *http.Client {
	if transport == nil {
		transport = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	return &http.Client{Transport: transport}
}

type forwardedKey struct{}

// MarkForwarded returns ctx marked as serving a call another replica forwarded:
// a job not found here is then not looked for elsewhere.
func MarkForwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

func forwarded(ctx context.Context) bool { v, _ := ctx.Value(forwardedKey{}).(bool); return v }

// Started records that this replica runs job jobID of sess.
func (r *JobRelay) Started(ctx context.Context, sess *tool.Session, jobID string) error {
	return r.st.RecordJob(ctx, &store.Job{ID: jobID, SessionID: sess.ID, Tenant: sess.Tenant, Owner: r.self})
}

// Forward runs ctx's call (a job tool's, with args) on the replica that runs jobID.
// handled is false when no other replica runs a job of that id for ctx's session:
// the job is then unknown. When the owner cannot be reached the result is an
// unavailable error naming it.
func (r *JobRelay) Forward(ctx *tool.Context, jobID string, args json.RawMessage) (res *tool.Result, handled bool, err error) {
	if ctx.Session == nil {
		return nil, false, nil
	}
	j, err := r.st.GetJob(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, tool.Errorf(tool.KindUnavailable, "could not look up which replica runs job %s: %v", jobID, err)
	}
	if j.SessionID != ctx.Session.ID || j.Tenant != ctx.Session.Tenant {
		return nil, false, nil // another session's job does not exist from here
	}
	if j.Owner == r.self {
		if j.CreatedAt.Before(r.since) {
			// Started by this replica before it restarted (asked here, or forwarded
			// here by another replica): the job ended with that run.
			return nil, true, tool.Errorf(tool.KindNotFound, "job %s ran on replica %s before that replica restarted; "+
				"the job ended then and its process and output are gone; start it again if it is still needed", jobID, j.Owner)
		}
		return nil, false, nil // one this process ran and has cleared since
	}
	if forwarded(ctx) {
		return nil, false, nil
	}
	rep, err := r.st.GetReplica(ctx, j.Owner)
	if errors.Is(err, store.ErrNotFound) {
		return nil, true, tool.Errorf(tool.KindUnavailable, "job %s ran on replica %s, which has stopped; the job ended with it and its process and output are gone; start it again if it is still needed", jobID, j.Owner)
	}
	if err != nil {
		return nil, true, tool.Errorf(tool.KindUnavailable, "could not look up replica %s, which runs job %s: %v", j.Owner, jobID, err)
	}
	res, err = forwardCall(ctx, r.client, r.records, r.self, rep, JobCallRequest{CallID: ctx.CallID, Name: ctx.ToolName, Arguments: args})
	if err != nil {
		return nil, true, tool.Errorf(tool.KindUnavailable, "job %s runs on replica %s (%s), which did not answer: %v; "+
			"if that replica stopped, the job and its output are gone", jobID, j.Owner, rep.Address, err)
	}
	return res, true, nil
}

// forwardCall runs ctx's call on replica rep through the job-call route, sent by self
// with the caller's own key, and returns rep's result.
//
// rep runs the call only once it finds the call's record in the store, so the record
// is committed first: a read-only call's record would otherwise wait out the fold
// window here while rep polls for it. Committed as running and owned by this
// replica, it is finished here with rep's answer (or the error), or, if this replica
// dies first, failed by the others' sweep when its lease runs out.
func forwardCall(ctx *tool.Context, client *http.Client, records CallRecords, self string, rep *store.Replica, body JobCallRequest) (*tool.Result, error) {
	base, err := url.Parse(rep.Address)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("its advertised address %q is not a URL", rep.Address)
	}
	if records != nil && body.CallID != "" {
		if err := records.Commit(ctx, body.CallID); err != nil {
			return nil, fmt.Errorf("the call's record could not be written before forwarding it: %w", err)
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(rep.Address, "/")+JobCallPath(ctx.Session.ID), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedHeader, self)
	if id := telemetry.RequestID(ctx); id != "" {
		// One id across both replicas' logs, as for forwarded reads.
		req.Header.Set("X-Request-Id", id)
	}
	if key := auth.Credential(ctx); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw[:min(len(raw), 512)]))
	}
	var out JobCallResponse
	if err := json.Unmarshal(raw, &out); err != nil || out.Result == nil {
		return nil, fmt.Errorf("an answer that is not a result: %.200s", raw)
	}
	return out.Result, nil
}

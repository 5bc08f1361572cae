package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/telemetry"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// jobsOf is a job store of one job, owned by replica owner at address.
type jobsOf struct {
	job     store.Job
	replica store.Replica
}

func (j *jobsOf) RecordJob(context.Context, *store.Job) error { return nil }
func (j *jobsOf) GetJob(_ context.Context, id string) (*store.Job, error) {
	if id != j.job.ID {
		return nil, store.ErrNotFound
	}
	job := j.job
	return &job, nil
}
func (j *jobsOf) GetReplica(_ context.Context, id string) (*store.Replica, error) {
	if id != j.replica.ID {
		return nil, store.ErrNotFound
	}
	rep := j.replica
	return &rep, nil
}

// TestForwardedJobCallKeepsItsRequestID: a job tool's call forwarded to the replica
// running the job (await_job, read_job_output, kill_job) carries the request's
// X-Request-Id, as forwarded reads do, so that one id follows it through both
// replicas' logs; it was sent without one and the owner made its own.
func TestForwardedJobCallKeepsItsRequestID(t *testing.T) {
	got := make(chan string, 1)
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Request-Id")
		_ = json.NewEncoder(w).Encode(JobCallResponse{Result: tool.TextResult("ok")})
	}))
	defer owner.Close()
	st := &jobsOf{job: store.Job{ID: "job_1", SessionID: "ses_1", Tenant: "default", Owner: "a"},
		replica: store.Replica{ID: "a", Address: owner.URL}}
	relay := NewJobRelay("b", st, nil, nil)
	ctx := &tool.Context{Context: telemetry.WithRequestID(context.Background(), "req-job-1"), CallID: "tc_1", ToolName: "await_job",
		Session: &tool.Session{ID: "ses_1", Tenant: "default"}}
	res, handled, err := relay.Forward(ctx, "job_1", json.RawMessage(`{"job_id":"job_1"}`))
	if err != nil || !handled || res == nil {
		t.Fatalf("Forward: %v, handled %v, %v", res, handled, err)
	}
	if id := <-got; id != "req-job-1" {
		t.Errorf("the owner got X-Request-Id %q, want the request's %q", id, "req-job-1")
	}
}

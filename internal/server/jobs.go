package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"time"

	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// jobTools are the tools whose calls another replica may forward here: they act on
// what only this replica holds, a background job of the session (it runs only where
// it started) or a tool_chain artifact (a file in this replica's data_dir).
var jobTools = map[string]bool{"await_job": true, "read_job_output": true, "kill_job": true, "artifact_read": true}

// runForwardedJobCall runs a job tool's (or artifact_read's) call that another
// replica forwarded because this replica runs the job (holds the artifact). The
// forwarding replica resolved, permitted and records the call; this one only runs it,
// in the session's own sandbox (which holds the job) or artifact directory. The
// caller's key came along, so the tenant check is the usual one, and only the three
// job tools and artifact_read, of a session that allows them, can be run this way. The
// call must be on record as running, in this session, with this tool and these
// arguments: a client calling this route directly cannot skip the permission policy.
func (s *Server) runForwardedJobCall(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(cluster.ForwardedHeader) == "" {
		s.writeError(w, r, errorf(CodeBadRequest, "this route serves job calls forwarded by another replica ("+cluster.ForwardedHeader+" is missing)"))
		return
	}
	var req cluster.JobCallRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !jobTools[req.Name] {
		s.writeError(w, r, errorf(CodeBadRequest, "only await_job, read_job_output, kill_job and artifact_read calls can be forwarded, not "+req.Name))
		return
	}
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkForwardedCall(r, sess.ID, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, e, ok := sess.Tools.Resolve(req.Name)
	if !ok {
		s.writeError(w, r, errorf(CodeNotFound, "this session cannot call "+req.Name))
		return
	}
	tc := &tool.Context{Context: cluster.MarkForwarded(r.Context()), ToolName: req.Name, Session: sess.Info, ReadOnly: sess.ReadOnly(), Progress: tool.NoProgress}
	res := m.Run(e, toolmgr.Invocation{Ctx: tc, Args: req.Arguments, Timeout: e.Spec.Timeout, Log: s.log})
	writeJSON(w, http.StatusOK, cluster.JobCallResponse{Result: res})
}

// checkForwardedCall finds the forwarded call's record. The forwarding replica
// commits it before forwarding (cluster.forwardCall); a missing record is still
// waited for briefly, for a replica of an earlier version, which did not.
func (s *Server) checkForwardedCall(r *http.Request, sessionID string, req *cluster.JobCallRequest) error {
	if req.CallID == "" {
		return errorf(CodeBadRequest, "call_id is required: the forwarding replica's record of the call")
	}
	deny := errorf(CodeForbidden, "call "+quote(req.CallID)+" is not a running "+req.Name+" call of this session with these arguments")
	var rec *store.Call
	for deadline := time.Now().Add(3 * time.Second); ; {
		var err error
		rec, err = s.Calls.GetCall(r.Context(), req.CallID)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if time.Now().After(deadline) {
			return deny
		}
		select {
		case <-r.Context().Done():
			return r.Context().Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if rec.SessionID != sessionID || rec.Tenant != tenantOf(r) || rec.Name != req.Name || rec.Status != store.CallRunning || !sameJSON(rec.Arguments, req.Arguments) {
		return deny
	}
	return nil
}

// sameJSON compares two JSON documents by value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

package server

import (
	"net/http"

	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// jobTools are the tools whose calls another replica may forward here: they act on
// a background job of the session, and the job runs only where it started.
var jobTools = map[string]bool{"await_job": true, "read_job_output": true, "kill_job": true}

// runForwardedJobCall runs a job tool's call that another replica forwarded because
// this replica runs the job. The forwarding replica resolved, permitted and records
// the call; this one only runs it, in the session's own sandbox (which holds the
// job). The caller's key came along, so the tenant check is the usual one, and only
// the three job tools of a session that allows them can be run this way.
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
		s.writeError(w, r, errorf(CodeBadRequest, "only await_job, read_job_output and kill_job calls can be forwarded, not "+req.Name))
		return
	}
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	m, e, ok := sess.Tools.Resolve(req.Name)
	if !ok {
		s.writeError(w, r, errorf(CodeNotFound, "this session cannot call "+req.Name))
		return
	}
	tc := &tool.Context{Context: cluster.MarkForwarded(r.Context()), ToolName: req.Name, Session: sess.Info, Progress: tool.NoProgress}
	res := m.Run(e, toolmgr.Invocation{Ctx: tc, Args: req.Arguments, Timeout: e.Spec.Timeout})
	writeJSON(w, http.StatusOK, cluster.JobCallResponse{Result: res})
}

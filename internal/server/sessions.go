package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolserverd/toolserverd/internal/session"
)

type sessionResponse struct {
	ID              string           `json:"id"`
	Tools           []string         `json:"tools"`
	AvailableTools  []string         `json:"available_tools"`
	AvailableSkills []string         `json:"available_skills"`
	PermissionMode  string           `json:"permission_mode"`
	Workdir         string           `json:"workdir"`
	Metadata        map[string]any   `json:"metadata,omitempty"`
	Rules           *session.RuleSet `json:"rules,omitempty"`
	CreatedAt       time.Time        `json:"created_at"`
	Warnings        []string         `json:"warnings"`
}

func toSessionResponse(sess *session.Session, warnings []string) sessionResponse {
	if warnings == nil {
		warnings = []string{}
	}
	spec := sess.CurrentSpec()
	// Whitelists as given: null is every tool (skill), [] none.
	return sessionResponse{
		ID: sess.ID, Tools: sess.Tools.Names(), AvailableTools: spec.AvailableTools, AvailableSkills: spec.AvailableSkills,
		PermissionMode: spec.PermissionMode, Workdir: sess.Info.Workdir, Metadata: spec.Metadata, Rules: spec.Rules,
		CreatedAt: sess.CreatedAt, Warnings: warnings,
	}
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var spec session.Spec
	if err := decodeJSONOnce(w, r, s.cfg.MaxBodyBytes, &spec); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, warnings, err := s.Sessions.Create(r.Context(), tenantOf(r), spec)
	if err != nil {
		s.writeError(w, r, sessionError(err))
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, toSessionResponse(sess, warnings))
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionResponse(sess, nil))
}

// deleteSession deletes a session that has nothing running or waiting: its records,
// the directories the daemon made for it, and its sandbox (jobs are killed).
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "sessionID")
	err := s.Sessions.Delete(r.Context(), tenantOf(r), id)
	switch {
	case errors.Is(err, session.ErrBusy):
		s.writeError(w, r, errorf(CodeConflict, fmt.Sprintf("session %s has calls running or waiting (for an approval, an answer or their turn); "+
			"cancel them (POST /v1/tool-calls/{id}/cancel) or wait for them, then delete it", id)))
		return
	case errors.Is(err, session.ErrChanging):
		s.writeError(w, r, errorf(CodeConflict, fmt.Sprintf("session %s is being loaded or deleted by another request at this moment; try again", id)))
		return
	case err != nil:
		s.writeError(w, r, sessionError(err))
		return
	}
	s.log.InfoContext(r.Context(), "session deleted", "session_id", id)
	w.WriteHeader(http.StatusNoContent)
}

type interruptRequest struct {
	Message string `json:"message"`
}

// interruptSession makes the session's running batches skip calls not yet started.
func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request) {
	var req interruptRequest
	if err := decodeOptionalJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.Sessions.Interrupt(r.Context(), sess, req.Message)
	writeJSON(w, http.StatusOK, map[string]any{"session_id": sess.ID, "interrupted": true, "message": req.Message})
}

// session loads the session named in the path.
func (s *Server) session(r *http.Request) (*session.Session, error) {
	sess, err := s.Sessions.Get(r.Context(), tenantOf(r), pathParam(r, "sessionID"))
	if err != nil {
		return nil, sessionError(err)
	}
	return sess, nil
}

func sessionError(err error) error {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return errorf(CodeNotFound, "session not found")
	case errors.Is(err, session.ErrInvalid):
		return errorf(CodeBadRequest, err.Error())
	}
	return err
}

// sessionEvents streams the session's events that belong to no request (results of
// background calls) as NDJSON until the client goes away, or the daemon stops: then
// once this process's calls are over (their results written here), so that the
// stream does not hold the drain; the client connects again.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	f, err := messageFormat(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	events, stop := sess.Subscribe(64)
	defer stop()
	out := newNDJSON(w)
	out.Flush()
	ka, kaC := keepalive(s.cfg.KeepAlive)
	if ka != nil {
		defer ka.Stop()
	}
	write := func(ev session.Event) {
		if ev.Type == session.EventApproval {
			out.Encode(toApprovalEvent(ev))
		} else {
			out.Encode(resultLine(ev.Type, f, ev))
		}
		out.Flush()
	}
	stopping := s.stopping()
	var over chan struct{} // closed once the stopping daemon's calls are over
	for {
		select {
		case <-r.Context().Done():
			return
		case <-kaC:
			out.keepAlive(ka, s.cfg.KeepAlive)
		case ev := <-events:
			write(ev)
		case <-stopping:
			stopping = nil
			over = make(chan struct{})
			go func() {
				defer close(over)
				_ = s.Exec.Wait(r.Context())
			}()
		case <-over:
			for { // what the last calls published before they returned
				select {
				case ev := <-events:
					write(ev)
				default:
					return
				}
			}
		}
	}
}

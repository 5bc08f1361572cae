package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func (s *Server) runSessionToolCalls(w http.ResponseWriter, r *http.Request) {
	f, err := messageFormat(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req toolCallsRequest
	if err := s.decodeCalls(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Session != nil {
		s.writeError(w, r, errorf(CodeBadRequest, "session is only accepted by POST /v1/tool-calls; this session is named in the path"))
		return
	}
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.run(w, r, f, sess, req)
}

// providerKeys are the fields of a model's message, output or whole answer that a
// body sent as is (rather than in "calls") starts with.
var providerKeys = map[string]bool{`"role"`: true, `"tool_calls"`: true, `"content"`: true, `"output"`: true,
	`"parts"`: true, `"candidates"`: true, `"choices"`: true, `"function_call"`: true, `"type"`: true}

// decodeCalls reads a batch's body. A body that is not a batch but what a model gave
// (its tool_calls array as it came, or its message or output as is) is told where the
// calls go.
func (s *Server) decodeCalls(w http.ResponseWriter, r *http.Request, req *toolCallsRequest) error {
	_, err := s.decodeCallsBody(w, r, req)
	return err
}

// decodeCallsBody is decodeCalls returning the body read.
func (s *Server) decodeCallsBody(w http.ResponseWriter, r *http.Request, req *toolCallsRequest) ([]byte, error) {
	var b []byte
	err := checkContentType(r.Header.Get("Content-Type"))
	if err == nil {
		b, err = readBody(w, r, s.cfg.MaxBodyBytes)
	}
	if err == nil {
		err = decodeBytes(b, s.cfg.MaxBodyBytes, req)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b, err
	}
	switch field, unknown := strings.CutPrefix(ae.Message, "unknown field "); {
	case ae.typ != nil && ae.typ.Field == "" && strings.HasPrefix(ae.typ.Value, "array"):
		ae.Message += `: send {"calls": [...]} with the model's tool calls as calls`
	case ae.Code == CodeInvalidJSON && unknown && providerKeys[field]:
		ae.Message += `: the model's calls go in "calls", a list of them as the model gave them (OpenAI's tool_calls, ` +
			`Anthropic's content, a Responses output, Gemini's parts, or {"id","name","arguments"}), beside the batch's options`
	}
	return b, err
}

// oneShotRequest is the shape of a one-shot batch whose keys must each come once: the
// batch's options and its session's spec, not what is inside its calls.
type oneShotRequest struct {
	Calls        json.RawMessage `json:"calls"`
	Strategy     string          `json:"strategy"`
	BatchSize    int             `json:"batch_size"`
	TimeoutMS    int64           `json:"timeout_ms"`
	Session      *session.Spec   `json:"session"`
	Resume       bool            `json:"resume"`
	OnDisconnect string          `json:"on_disconnect"`
}

// runOneShotToolCalls creates a session from the inline spec and runs the calls in it.
func (s *Server) runOneShotToolCalls(w http.ResponseWriter, r *http.Request) {
	f, err := messageFormat(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req toolCallsRequest
	body, err := s.decodeCallsBody(w, r, &req)
	if err == nil {
		// The session's spec is a security decision (its permission mode, rules,
		// workdir): a key twice is refused as by POST /v1/sessions; the calls'
		// arguments are the model's, passed on as they came.
		err = refuseDuplicateKeys(body, reflect.TypeFor[oneShotRequest]())
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Session == nil {
		s.writeError(w, r, errorf(CodeBadRequest, "session is required: an inline session spec such as {\"available_tools\":[…]}"))
		return
	}
	if req.Resume {
		s.writeError(w, r, errorf(CodeBadRequest, "resume needs the session the calls ran in: send the batch to POST /v1/sessions/{id}/tool-calls (a one-shot request makes a new session each time)"))
		return
	}
	// Everything that can refuse the batch before it runs is checked before the
	// session is made: a refused request leaves nothing behind.
	batch, err := req.toBatch(f.format)
	if err == nil {
		_, err = req.detached()
	}
	if err == nil {
		err = planError(s.Exec.Check(batch))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, warnings, err := s.Sessions.Create(r.Context(), tenantOf(r), *req.Session)
	if err != nil {
		s.writeError(w, r, sessionError(err))
		return
	}
	if len(warnings) > 0 {
		// One line, bounded: the warnings quote names the client chose (one per
		// unknown tool), and the client has them all in the session's answer.
		s.log.InfoContext(r.Context(), "one-shot session whitelist", "session_id", sess.ID,
			"warnings", len(warnings), "first", clipLog(warnings[0], maxLoggedWarning))
	}
	w.Header().Set("X-Session-Id", sess.ID)
	s.run(w, r, f, sess, req)
}

// run plans the batch (HTTP errors are still possible), then streams NDJSON: a
// tool_start, tool_progress lines and a message per call, then done. A client that
// disconnects cancels the calls still running (unless on_disconnect is continue);
// their records are still written. With resume, calls already on record are followed
// instead of run (resume.go).
func (s *Server) run(w http.ResponseWriter, r *http.Request, f msgFormat, sess *session.Session, req toolCallsRequest) {
	batch, err := req.toBatch(f.format)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	detached, err := req.detached()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st := stream{}
	if req.Resume {
		if err := s.Exec.Check(batch); err != nil {
			s.writeError(w, r, planError(err))
			return
		}
		if st.followed, batch.Calls, err = s.resumable(r.Context(), sess, batch); err != nil {
			s.writeError(w, r, err)
			return
		}
		batch.Positions = nil // they were the request's calls'; Check passed on them
	}
	if !req.Resume || len(batch.Calls) > 0 { // Plan refuses a batch without calls
		if st.plan, err = s.Exec.Plan(sess, batch); err != nil {
			s.writeError(w, r, planError(err))
			return
		}
	}
	ctx, cancel := runContext(r, detached)
	defer cancel()
	st.ctx = ctx
	s.streamBatch(w, r, f, st)
}

// awaitHeld looks for a call another replica may still hold in its fold window: an id
// made less than RecordHold ago (ids carry their time) is looked up again until the
// window has passed, so that a client polling a call through any replica does not
// get 404 for a call that has started. Anything else is not found at once.
func (s *Server) awaitHeld(ctx context.Context, id string) (*store.Call, error) {
	at, ok := session.TimeOfID("tc_", id)
	if s.cfg.RecordHold <= 0 || !ok {
		return nil, store.ErrNotFound
	}
	// The other replica writes a held record when its window ends: allow it a commit,
	// with room for a busy replica (100 ms was too little for one under load, which
	// then answered 404 for a call it was running). Only an id younger than this that
	// nobody made waits it out.
	deadline := at.Add(s.cfg.RecordHold + time.Second)
	for {
		wait := min(time.Until(deadline), 20*time.Millisecond)
		if wait <= 0 {
			return nil, store.ErrNotFound
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		c, err := s.Calls.GetCall(ctx, id)
		if !errors.Is(err, store.ErrNotFound) {
			return c, err
		}
	}
}

// planError makes a batch's *session.PlanError a 400; other errors pass as they are.
func planError(err error) error {
	var pe *session.PlanError
	if errors.As(err, &pe) {
		return errorf(CodeBadRequest, pe.Msg)
	}
	return err
}

// callResponse is a call record as the API shows it.
type callResponse struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Status     string          `json:"status"`
	Result     *tool.Result    `json:"result"`
	ErrorKind  tool.ErrorKind  `json:"error_kind,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	DurationMS *float64        `json:"duration_ms"`
	// OutputOpen: the call finished but its output goes on (a background job it
	// started still streams under the call's id).
	OutputOpen bool `json:"output_open"`
}

func toCallResponse(c *store.Call) callResponse {
	resp := callResponse{
		ID: c.ID, SessionID: c.SessionID, ToolCallID: c.ToolCallID, Name: c.Name, Arguments: c.Arguments,
		Status: string(c.Status), Result: c.Result, ErrorKind: c.ErrorKind,
		CreatedAt: c.CreatedAt, StartedAt: c.StartedAt, FinishedAt: c.FinishedAt, OutputOpen: c.OutputOpen,
	}
	if c.StartedAt != nil && c.FinishedAt != nil {
		ms := float64(c.FinishedAt.Sub(*c.StartedAt).Microseconds()) / 1000
		resp.DurationMS = &ms
	}
	return resp
}

func (s *Server) getToolCall(w http.ResponseWriter, r *http.Request) {
	c, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCallResponse(c))
}

func (s *Server) call(r *http.Request) (*store.Call, error) {
	id := pathParam(r, "callID")
	c, err := s.Calls.GetCall(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		c, err = s.awaitHeld(r.Context(), id)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.Tenant != tenantOf(r)) {
		return nil, callNotFound(id)
	}
	return c, err
}

// lostCallHint says, in a 404 for a call id or tool_call_id, the one way a call the
// client saw start can have no record: a read-only call's record waits up to
// calls.record_fold_window for its result, and a daemon that died meanwhile wrote
// neither. Its result was never sent: the client can run it again.
const lostCallHint = "If its tool_start was sent and the daemon (or the replica running it) stopped or restarted within calls.record_fold_window (50 ms by default) of it, " +
	"the call was read-only and is lost: its record was not written yet and it sent no result, so run it again. Records are also deleted after retention.calls."

// callNotFound is the 404 of a call id without a record (or of another tenant): a
// daemon's id (tc_…, which says when it was made) gets lostCallHint.
func callNotFound(id string) error {
	at, ok := session.TimeOfID("tc_", id)
	if !ok {
		return errorf(CodeNotFound, "tool call not found")
	}
	return errorf(CodeNotFound, fmt.Sprintf("tool call not found: no record has id %s (made %s). %s", id, at.UTC().Format(time.RFC3339Nano), lostCallHint))
}

func (s *Server) getSessionToolCall(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.Calls.GetCallByToolCallID(r.Context(), sess.ID, pathParam(r, "toolCallID"))
	if errors.Is(err, store.ErrNotFound) {
		err = errorf(CodeNotFound, "no call with that tool_call_id in this session. "+lostCallHint)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCallResponse(c))
}

type callListResponse struct {
	Calls []callResponse `json:"calls"`
	// Truncated: the listing stopped at its byte budget (max_list_bytes); ask for fewer (limit), or
	// go on from the last call (NextBefore).
	Truncated bool `json:"truncated,omitempty"`
	// NextBefore is before for the next page, when there may be one (cursor.go).
	NextBefore string `json:"next_before,omitempty"`
}

// toCallList is a page of calls asked for with limit, read with the byte budget
// maxBytes.
func toCallList(calls []*store.Call, limit, maxBytes int) callListResponse {
	resp := callListResponse{Calls: make([]callResponse, 0, len(calls)), Truncated: store.ListCut(calls, maxBytes)}
	for _, c := range calls {
		resp.Calls = append(resp.Calls, toCallResponse(c))
	}
	if wantNext(len(calls), limit, resp.Truncated) {
		last := calls[len(calls)-1]
		resp.NextBefore = nextBefore(last.ID, last.CreatedAt)
	}
	return resp
}

// listSessionToolCalls lists the session's calls, newest first, a page at a time like
// listToolCalls.
func (s *Server) listSessionToolCalls(w http.ResponseWriter, r *http.Request) {
	p := store.CallPage{Limit: 50, MaxBytes: s.cfg.ListBytes}
	q := r.URL.Query()
	n, err := queryLimit(q, p.Limit, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.Limit = n
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if v := q.Get("before"); v != "" {
		at, id, err := s.callListing(tenantOf(r), sess.ID).before(r.Context(), v)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		p.Before, p.BeforeID = at, id
	}
	calls, err := s.Calls.ListCalls(r.Context(), sess.ID, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toCallList(calls, p.Limit, p.MaxBytes))
}

// cancelToolCall cancels a call that has not finished: a running one is stopped, one
// still waiting to start (its turn, the session's lock, a decision) never runs. Its
// stream then gets a cancelled result. A call another replica runs is cancelled there:
// behind a Service the cancel lands on any replica. A call left waiting for a decision
// or an answer (its client went away) is cancelled in the store (cancelParked).
func (s *Server) cancelToolCall(w http.ResponseWriter, r *http.Request) {
	c, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if c.Status.Terminal() {
		s.writeError(w, r, errorf(CodeConflict, "the call has already finished ("+string(c.Status)+")"))
		return
	}
	if s.Exec.Cancel(c.ID) {
		writeJSON(w, http.StatusAccepted, map[string]any{"id": c.ID, "cancelled": true})
		return
	}
	if s.forwardToOwner(w, r, c, s.cancelToolCall) {
		return
	}
	if c.Status == store.CallWaiting {
		cancelled, err := s.cancelParked(r.Context(), c)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if cancelled {
			writeJSON(w, http.StatusAccepted, map[string]any{"id": c.ID, "cancelled": true})
			return
		}
		// Decided, answered or expired meanwhile.
		if now, err := s.Calls.GetCall(r.Context(), c.ID); err == nil && now.Status.Terminal() {
			s.writeError(w, r, errorf(CodeConflict, "the call has already finished ("+string(now.Status)+")"))
			return
		}
		s.writeError(w, r, errorf(CodeConflict, "the call's approval request was decided or expired just now, so it was not cancelled;"+
			" read it with GET /v1/tool-calls/"+c.ID+", and cancel it again if it runs"))
		return
	}
	msg := "the call is " + string(c.Status) + " but not in this process"
	if rs := s.Replicas; rs != nil && c.Owner != "" && c.Owner != rs.Self {
		msg = "the call is " + string(c.Status) + " on replica " + c.Owner + ", which could not be reached to cancel it" +
			" (if that replica stopped, its calls are marked failed once its lease runs out)"
	}
	s.writeError(w, r, errorf(CodeConflict, msg))
}

// cancelParked cancels a call that waits durably with nothing holding it in this
// process (its client went away, or the replica whose stream held it could not be
// reached): its pending approval request is withdrawn, or its wait for an external
// answer is answered, and the store finishes it as cancelled in the same step, so that
// an approval or answer given afterwards cannot run it. A stream still waiting for it
// elsewhere wakes and sends that result. It reports false when the call was decided,
// answered or expired first.
func (s *Server) cancelParked(ctx context.Context, c *store.Call) (bool, error) {
	if s.Approvals == nil {
		return false, nil
	}
	res := tool.ErrorResult(tool.KindCancelled, "%s was cancelled by request before it ran", c.Name)
	now := time.Now().UTC()
	pending, err := s.Approvals.Store.ListApprovals(ctx, store.ApprovalFilter{Tenant: c.Tenant, CallID: c.ID,
		Status: store.ApprovalPending, Now: now, Limit: 1})
	if err != nil {
		return false, err
	}
	bg := context.WithoutCancel(ctx)
	if len(pending) > 0 {
		decided, err := s.Approvals.Store.DecideApproval(ctx, pending[0].ID, store.ApprovalDecision{Kind: store.DecisionDeny,
			Actor: store.AuditActorSystem, Reason: "the call was cancelled by request before a decision", Result: res, At: now})
		if errors.Is(err, store.ErrConflict) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		s.afterDecision(bg, decided)
		return true, nil
	}
	if s.Approvals.Answers == nil {
		return false, nil
	}
	err = s.Approvals.Answers.AnswerCall(ctx, c.ID, res, now)
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_ = s.Approvals.Notifier.Notify(bg, store.TopicCall, c.ID)
	return true, nil
}

type inputRequest struct {
	Input json.RawMessage `json:"input"`
}

// provideInput answers a stateful call that yielded an intermediate result. The call
// waits for it in the memory of the replica running it: behind a Service the answer
// lands on any replica, so one for a call of another replica is forwarded there.
func (s *Server) provideInput(w http.ResponseWriter, r *http.Request) {
	var req inputRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Input) == 0 {
		s.writeError(w, r, errorf(CodeBadRequest, "input is required (any JSON value)"))
		return
	}
	c, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.Exec.ProvideInput(c.ID, req.Input); err == nil {
		writeJSON(w, http.StatusAccepted, map[string]any{"id": c.ID, "accepted": true})
		return
	}
	if !c.Status.Terminal() && s.forwardInput(w, r, c, req) {
		return
	}
	s.writeError(w, r, errorf(CodeConflict, "the call is not waiting for input (status "+string(c.Status)+")"))
}

// forwardInput hands an answer to the replica running c, when that is another one,
// and reports whether it did. The request's body was read here, so it is sent again
// from req. An owner that cannot be reached while its lease holds may still take the
// answer later: 503 with Retry-After, naming it. One whose lease ran out is gone, and
// its calls with it: 409.
func (s *Server) forwardInput(w http.ResponseWriter, r *http.Request, c *store.Call, req inputRequest) bool {
	body, err := json.Marshal(req)
	if err != nil {
		s.writeError(w, r, err)
		return true
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return s.forward(w, r, c, s.provideInput, func(w http.ResponseWriter, r *http.Request, _ http.HandlerFunc, rep *store.Replica, reason string) {
		if !s.Replicas.alive(rep) {
			s.writeError(w, r, errorf(CodeConflict, "the call is not waiting for input: it ran on replica "+c.Owner+
				", which is gone (its lease ran out; its calls are marked failed)"))
			return
		}
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(CodeUnavailable, "the call waits for input on replica "+c.Owner+" ("+rep.Address+"), which "+
			"could not be reached ("+reason+"); send the input again shortly (if that replica stopped, its calls are marked failed once its lease runs out)"))
	}, nil)
}

type answerRequest struct {
	// Content is the answer: a string, or content blocks.
	Content    json.RawMessage `json:"content"`
	Structured json.RawMessage `json:"structured"`
	IsError    bool            `json:"is_error"`
	ErrorKind  tool.ErrorKind  `json:"error_kind"`
}

// result checks an answer against the contract and makes it the call's result.
func (req *answerRequest) result() (*tool.Result, error) {
	res := &tool.Result{IsError: req.IsError, Structured: req.Structured}
	var text string
	switch {
	case len(req.Content) == 0 || string(req.Content) == "null":
		return nil, errorf(CodeBadRequest, "content is required: the answer as a string or content blocks")
	case json.Unmarshal(req.Content, &text) == nil:
		res.Content = []tool.Content{{Type: tool.ContentText, Text: text}}
	case json.Unmarshal(req.Content, &res.Content) != nil || len(res.Content) == 0:
		return nil, errorf(CodeBadRequest, "content must be a string or a non-empty array of content blocks")
	}
	for i, b := range res.Content {
		if err := b.Validate(); err != nil {
			return nil, errorf(CodeBadRequest, fmt.Sprintf("content[%d]: %v", i, err))
		}
	}
	if req.Structured != nil && !json.Valid(req.Structured) {
		return nil, errorf(CodeBadRequest, "structured must be JSON")
	}
	if jsontext.Deeper(req.Structured, tool.MaxStructuredDepth) {
		return nil, errorf(CodeBadRequest, fmt.Sprintf("structured nests arrays and objects more than %d levels deep, more than the daemon sends to its clients", tool.MaxStructuredDepth))
	}
	switch {
	case req.ErrorKind != "" && !req.IsError:
		return nil, errorf(CodeBadRequest, "error_kind is only for answers with is_error: true")
	case req.ErrorKind != "" && !req.ErrorKind.Known():
		return nil, errorf(CodeBadRequest, fmt.Sprintf("error_kind %q is not one of not_found, invalid_args, denied, timeout, cancelled, failed, unavailable, skipped", req.ErrorKind))
	case res.IsError:
		res.ErrorKind = req.ErrorKind
		if res.ErrorKind == "" {
			res.ErrorKind = tool.KindFailed
		}
	}
	return res, nil
}

// answerCall completes a call of an external tool (ask_user) with the answer of the
// person or system it was waiting for. It is durable: the call may have waited across
// restarts, and a second answer is a conflict.
func (s *Server) answerCall(w http.ResponseWriter, r *http.Request) {
	var req answerRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := req.result()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Approvals == nil || s.Approvals.Answers == nil {
		s.writeError(w, r, errorf(CodeConflict, "this call is not waiting for an answer"))
		return
	}
	err = s.Approvals.Answers.AnswerCall(r.Context(), c.ID, res, time.Now().UTC())
	switch {
	case errors.Is(err, store.ErrConflict):
		s.writeError(w, r, errorf(CodeConflict, "the call is not waiting for an answer (status "+string(c.Status)+")"))
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	}
	_ = s.Approvals.Notifier.Notify(context.WithoutCancel(r.Context()), store.TopicCall, c.ID)
	writeJSON(w, http.StatusOK, map[string]any{"id": c.ID, "answered": true})
}

// maxLoggedWarning bounds the text of a client's whitelist warning in the log.
const maxLoggedWarning = 256

// clipLog cuts s to at most n bytes, at a character boundary, marking the cut.
func clipLog(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

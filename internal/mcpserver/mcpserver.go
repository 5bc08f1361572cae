// Package mcpserver serves a toolserverd session's tools to MCP clients over
// streamable HTTP (mark3labs/mcp-go). The tool list is the session's (whitelist,
// tool groups, the turn's selection); tools/call runs through the session's
// executor like a REST batch of one call (validation, permissions, durable
// approvals, records, truncation); the call's live output goes out as
// notifications/progress; a call waiting for approval also asks the client by
// elicitation when it supports it.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpsrv "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
)

// SessionHeader names the toolserverd session on requests to /mcp.
const SessionHeader = "X-Toolserver-Session"

// sessionProtocols are the MCP revisions the endpoint offers: those with sessions.
var sessionProtocols = []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326}

// tenantOf is the tenant of the request's API key (the server authenticates /mcp
// like the REST API); the default tenant when no principal was set.
func tenantOf(ctx context.Context) string {
	if p := auth.From(ctx); p != nil {
		return p.Tenant
	}
	return auth.DefaultTenant
}

// ApprovalDecider records a decision on an approval request (the approval store).
type ApprovalDecider interface {
	DecideApproval(ctx context.Context, id string, d store.ApprovalDecision) (*store.Approval, error)
}

// Config of the endpoint.
type Config struct {
	// SessionIdleTTL forgets MCP client sessions idle this long (no request of
	// theirs open, event streams included); 0 never does. Checked every
	// ListChangedInterval.
	SessionIdleTTL time.Duration
	// MaxSessions caps the MCP client sessions kept: past it, each new session makes
	// the endpoint forget the least recently used of those with no request open.
	// 0: no cap.
	MaxSessions int
	// ListChangedInterval is how often the tool sets of connected clients' sessions
	// are compared with what they were told (upstream MCP servers come and go);
	// calls through the endpoint trigger a comparison at once. Default 2s.
	ListChangedInterval time.Duration
	// KeepAlive: a call whose request has a progress token and that sent no
	// notification for this long sends one saying it is still waiting. 0: never.
	KeepAlive time.Duration
	// ResumeWindow: a call whose event stream broke runs on this long for its
	// client to resume the stream (Last-Event-ID); past it the call is cancelled.
	// 0: at once.
	ResumeWindow time.Duration
	// Version is reported to clients in serverInfo.
	Version string
}

// Deps are the components calls run through.
type Deps struct {
	Sessions *session.Manager
	Exec     *session.Executor
	// Progress is the live-output hub; nil sends no progress notifications.
	Progress *progress.Hub
	// Approvals and Notifier let an MCP client's elicitation answer decide an
	// approval; nil Approvals disables elicitation.
	Approvals ApprovalDecider
	Notifier  session.Notifier
	Log       *slog.Logger
}

// Endpoint is the MCP server. ServeMCP answers its HTTP requests.
type Endpoint struct {
	cfg  Config
	deps Deps
	mcp  *mcpsrv.MCPServer
	http *mcpsrv.StreamableHTTPServer

	mu       sync.Mutex
	bindings map[string]*binding // MCP session id → toolserverd session
	ids      *sessionIDs
	events   *replayStore
	streams  map[string]*postStream        // mcp-go stream id → the POST it answers, while it runs
	open     map[string]map[string]func()  // MCP session id → call id → cancel it by request
	asking   map[string]*asked             // elicitationKey → an approval question open with its client
	gets     map[uint64]context.CancelFunc // open GET streams, ended by CloseStreams
	getSeq   uint64
	closing  bool // CloseStreams was called: GET streams end at once

	kick     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	closed   sync.Once
}

// binding ties an MCP client session to the toolserverd session it initialized
// with, and remembers the tool set it was last told about.
type binding struct {
	tenant    string
	sessionID string
	print     uint64
}

// New builds the endpoint and starts its list_changed watcher; Close stops it.
func New(cfg Config, d Deps) (*Endpoint, error) {
	if d.Sessions == nil || d.Exec == nil {
		return nil, errors.New("mcpserver: Sessions and Exec are required")
	}
	if cfg.SessionIdleTTL < 0 || cfg.KeepAlive < 0 || cfg.ResumeWindow < 0 {
		return nil, errors.New("mcpserver: session idle TTL, keepalive and resume window must not be negative")
	}
	if cfg.ListChangedInterval <= 0 {
		cfg.ListChangedInterval = 2 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	e := &Endpoint{cfg: cfg, deps: d, bindings: map[string]*binding{}, ids: newSessionIDs(), streams: map[string]*postStream{}, open: map[string]map[string]func(){}, asking: map[string]*asked{}, gets: map[uint64]context.CancelFunc{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), loopDone: make(chan struct{})}
	e.events = newReplayStore(replayEvents, replayBytes, replayTotalBytes, func(id string) bool {
		ended, _ := e.ids.Validate(id)
		return !ended
	})
	e.events.stored = e.onStoreEvent

	hooks := &mcpsrv.Hooks{}
	hooks.AddOnRegisterSession(e.onRegister)
	hooks.AddOnUnregisterSession(func(_ context.Context, cs mcpsrv.ClientSession) {
		e.mu.Lock()
		delete(e.bindings, cs.SessionID())
		e.mu.Unlock()
	})
	opts := []mcpsrv.ServerOption{
		mcpsrv.WithToolCapabilities(true),
		mcpsrv.WithHooks(hooks),
		mcpsrv.WithRecovery(),
		mcpsrv.WithToolFilter(offeredOnly),
		mcpsrv.WithInstructions("Tools of a toolserverd session. Calls that need a person's approval wait for it; " +
			"their progress notifications say so."),
	}
	// No mcpsrv.WithElicitation: all it does is put "elicitation": {} among the
	// server's capabilities in the initialize result, and elicitation is a capability
	// of the client (the server may send elicitation/create to a client that declared
	// it; elicits checks). RequestElicitation does not need it.
	e.mcp = mcpsrv.NewMCPServer("toolserverd", cfg.Version, opts...)
	httpOpts := []mcpsrv.StreamableHTTPOption{
		// Stateful: a client session is bound to one toolserverd session, and
		// list_changed and elicitation need a session to reach the client. The ids
		// come from sessionIDs, which forgets ended sessions (mcp-go's WithStateful
		// manager keeps every one).
		mcpsrv.WithSessionIdManager(e.ids),
		// Protocol 2026-07-28 has no sessions (and no server-initiated requests);
		// offering only the session-oriented revisions keeps per-session tools,
		// list_changed and elicitation working. Clients fall back to them.
		mcpsrv.WithStreamableHTTPProtocolVersions(sessionProtocols...),
		// Events on SSE streams get ids and are kept (bounded), so that a client whose
		// stream broke during a long call resumes it with Last-Event-ID and gets the
		// result. mcp-go resumes only revisions before 2026-07-28 (which dropped
		// resumability), which are the ones offered. The store ignores events of
		// sessions that ended, and mcp-go purges a session's when it ends.
		mcpsrv.WithEventStore(e.events),
		mcpsrv.WithHTTPContextFunc(e.httpContext),
		mcpsrv.WithStreamableHTTPLogger(clientGoneLog(d.Log)),
	}
	e.http = mcpsrv.NewStreamableHTTPServer(e.mcp, httpOpts...)
	go e.watch()
	return e, nil
}

// Close ends open client streams, stops the watcher and mcp-go's session sweeper.
func (e *Endpoint) Close() {
	e.closed.Do(func() {
		close(e.stop)
		<-e.loopDone
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.http.Shutdown(ctx)
	})
}

// CloseStreams ends the long-lived GET streams of connected clients, and those
// opened from now on, so that an HTTP server shutdown does not wait for them. POSTs
// go on: a tools/call running when the daemon stops is drained like a REST call, and
// its client gets its result on its stream (ending the MCP sessions here, as this
// did, ended those streams without the result of calls the drain ran to their end).
// Close ends the sessions.
func (e *Endpoint) CloseStreams() {
	e.mu.Lock()
	e.closing = true
	cancels := make([]context.CancelFunc, 0, len(e.gets))
	for _, cancel := range e.gets {
		cancels = append(cancels, cancel)
	}
	e.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// trackGET makes r's context end with CloseStreams; the returned func ends the
// tracking.
func (e *Endpoint) trackGET(r *http.Request) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	e.mu.Lock()
	if e.closing {
		cancel()
	}
	e.getSeq++
	n := e.getSeq
	e.gets[n] = cancel
	e.mu.Unlock()
	return r.WithContext(ctx), func() {
		e.mu.Lock()
		delete(e.gets, n)
		e.mu.Unlock()
		cancel()
	}
}

type sessionKey struct{}

// requestKey holds the context of the HTTP request a message came in: it ends when
// the client goes away (for a POST: and does not resume its stream in time) or the
// server stops, not on notifications/cancelled.
type requestKey struct{}

// callingKey marks the context of a tools/call request: only then does mcp-go see the
// session's tools left out of the turn's narrowed list (offeredOnly).
type callingKey struct{}

func sessionFrom(ctx context.Context) *session.Session {
	s, _ := ctx.Value(sessionKey{}).(*session.Session)
	return s
}

// ServeMCP answers one request of the MCP transport. sessionID comes from a
// session-scoped URL; when empty, the X-Toolserver-Session header names the session,
// or the MCP session the request continues. run is the context a POST's message runs
// under instead of its connection's, until the daemon stops: a call whose stream
// broke runs on for the resume window.
func (e *Endpoint) ServeMCP(w http.ResponseWriter, r *http.Request, sessionID string, run context.Context) {
	if r.Method == http.MethodPost && refuseBatch(w, r) {
		return
	}
	header := r.Header.Get(SessionHeader)
	if sessionID == "" {
		sessionID = header
	} else if header != "" && header != sessionID {
		writeError(w, http.StatusBadRequest, "bad_request", "the "+SessionHeader+" header names another session than the URL")
		return
	}
	tenant := tenantOf(r.Context())
	mcpSID := r.Header.Get(mcpsrv.HeaderKeySessionID)
	live := false
	if mcpSID != "" {
		e.mu.Lock()
		b := e.bindings[mcpSID]
		e.mu.Unlock()
		live = b != nil
		switch {
		case b != nil && b.tenant != tenant:
			// Another tenant's MCP session is not found, like its records.
			writeError(w, http.StatusNotFound, "not_found", "session not found")
			return
		case b == nil:
			// Unknown or ended MCP session: mcp-go answers 404, and the client
			// initializes again.
		case sessionID == "":
			sessionID = b.sessionID
		case sessionID != b.sessionID:
			writeError(w, http.StatusBadRequest, "bad_request",
				"this MCP session was initialized for session "+b.sessionID+"; initialize a new MCP session to use "+sessionID)
			return
		}
	}
	if r.Method != http.MethodPost || !initializes(r) {
		// Everything but an initialize belongs to a live MCP session. mcp-go opens an
		// event stream for any id, or none, and nothing ever reaches it: the client
		// would listen forever instead of initializing again. It answers DELETE with
		// 200 for any id, or none, where MCP's transport wants 404 for a session that
		// is not live. And it answers a message without an id 404 "Session
		// terminated", for a session the client never named, where MCP's transport
		// wants 400; one with an id that is not live (ended, from before a restart)
		// got the same words, which did not say what to do.
		if mcpSID == "" {
			writeError(w, http.StatusBadRequest, "bad_request", "no MCP session: send initialize first, then the "+mcpsrv.HeaderKeySessionID+" header it returned")
			return
		}
		if ended, _ := e.ids.Validate(mcpSID); ended {
			writeError(w, http.StatusNotFound, "not_found", "MCP session not found or ended: initialize a new one")
			return
		}
	}
	if sessionID == "" {
		writeError(w, http.StatusBadRequest, "bad_request",
			"no session: send the "+SessionHeader+" header (a session id from POST /v1/sessions) or use /v1/sessions/{id}/mcp")
		return
	}
	sess, err := e.deps.Sessions.Get(r.Context(), tenant, sessionID)
	if errors.Is(err, session.ErrNotFound) {
		if live {
			e.forget(mcpSID) // its session was deleted: nothing can use it any more
		}
		writeError(w, http.StatusNotFound, "not_found", "session not found")
		return
	}
	if err != nil {
		e.deps.Log.ErrorContext(r.Context(), "mcp endpoint: loading session failed", "session_id", sessionID, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	if last := r.Header.Get("Last-Event-ID"); r.Method == http.MethodGet && last != "" {
		stream, err := e.events.streamOf(mcpSID, last)
		if err != nil {
			// mcp-go's answer to an id it does not have is a bare "Unknown Last-Event-ID".
			writeError(w, http.StatusBadRequest, "bad_request", "cannot resume the event stream after Last-Event-ID "+
				strconv.Quote(last)+" ("+err.Error()+"; events are kept in memory by the replica that sent them, "+
				"until the MCP session ends): send the request again")
			return
		}
		defer e.resuming(stream)()
	}
	if r.Method == http.MethodHead {
		// The head of the listening stream a GET opens (RFC 9110 §9.3.2), checked like
		// one. mcp-go answers HEAD with a bare 200, and handing it over as a GET would
		// open a second stream, taking notifications meant for the client's own.
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		return
	}
	if r.Method == http.MethodPost && live && refuseCursor(w, r) {
		return
	}
	if r.Method == http.MethodPost && run != nil {
		var done func()
		r, done = e.detachPOST(r, run)
		defer done()
	}
	if r.Method == http.MethodGet {
		var done func()
		r, done = e.trackGET(r)
		defer done()
	}
	ctx := context.WithValue(context.WithValue(r.Context(), sessionKey{}, sess), requestKey{}, r.Context())
	if r.Method == http.MethodPost && live && callsTool(r) {
		ctx = context.WithValue(ctx, callingKey{}, true)
	}
	r = r.WithContext(ctx)
	// A session is idle only while none of its requests is open (mcp-go's own
	// sweeper counted a client listening on its event stream, or waiting for a long
	// call, as idle).
	defer e.ids.begin(mcpSID)()
	e.http.ServeHTTP(flushWriter{w}, r)
	if r.Method == http.MethodDelete {
		// The client ended its MCP session (the endpoint's own ends, of idle sessions,
		// do not come this way): nobody can take its calls' results any more.
		e.cancelCallsOf(mcpSID)
	}
	if r.Method == http.MethodPost && mcpSID == "" {
		// An initialize may have made one session too many.
		e.forgetOverCap()
	}
	if r.Method == http.MethodPost {
		// A call may have changed the session's tools (reset_tools,
		// tool_expand_tools). Compared only now: while this request's stream is
		// open, mcp-go could hand the notification to it as it closes, and lose it.
		e.poke()
	}
}

// initializes reports whether a POST is one mcp-go should see without an MCP
// session: an initialize, a body that is not one JSON-RPC message (mcp-go says what
// is wrong with it), or one of a revision without sessions (mcp-go refuses it,
// naming the ones offered). It leaves the body for mcp-go to read.
func initializes(r *http.Request) bool {
	if v := r.Header.Get(mcpsrv.HeaderKeyProtocolVersion); v != "" && !slices.Contains(sessionProtocols, v) {
		return true
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
	}
	if err != nil || json.Unmarshal(body, &msg) != nil || msg.JSONRPC == "" {
		return true
	}
	return msg.Method == string(mcp.MethodInitialize)
}

// callsTool reports whether a POST is a tools/call. It leaves the body for mcp-go
// to read.
func callsTool(r *http.Request) bool {
	body, err := peekBody(r)
	var msg struct {
		Method string `json:"method"`
	}
	return err == nil && json.Unmarshal(body, &msg) == nil && msg.Method == string(mcp.MethodToolsCall)
}

// peekBody reads a request's body and leaves it for mcp-go to read.
func peekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, err
}

// refuseBatch answers a JSON-RPC batch (a JSON array), and reports whether the body
// was one. MCP removed batching in protocol revision 2025-06-18, and mcp-go never
// took batches: it answered "request body is not valid json".
func refuseBatch(w http.ResponseWriter, r *http.Request) bool {
	body, err := peekBody(r)
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); err != nil || len(trimmed) == 0 || trimmed[0] != '[' {
		return false // a read failure is mcp-go's to report
	}
	writeRPCError(w, http.StatusBadRequest, nil, mcp.INVALID_REQUEST, "JSON-RPC batches are not supported: MCP removed "+
		"batching in protocol revision "+mcp.ProtocolVersion20250618+"; send each message in a POST of its own")
	return true
}

// refuseCursor answers a tools/list with a cursor, and reports whether the body was
// one. The list is one page and no cursor is ever given, so any is not this
// server's: mcp-go answered "illegal base64 data …", or, for one that decoded, a
// short or empty list as if the client had read the tools before it.
func refuseCursor(w http.ResponseWriter, r *http.Request) bool {
	body, err := peekBody(r)
	var msg struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	if err != nil || json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodToolsList) || msg.Params.Cursor == "" {
		return false
	}
	writeRPCError(w, http.StatusOK, msg.ID, mcp.INVALID_PARAMS, "cursor "+strconv.Quote(msg.Params.Cursor)+
		" is not one this server gave: tools/list returns every tool in one page, with no nextCursor; list again without a cursor")
	return true
}

// writeRPCError writes a JSON-RPC error response.
func writeRPCError(w http.ResponseWriter, status int, id any, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(mcp.NewJSONRPCError(mcp.NewRequestId(id), code, msg, nil))
}

// httpContext runs for every request inside mcp-go, with the MCP client session in
// ctx: it gives that session the toolserverd session's current tools, so tools/list
// and tools/call see exactly them.
func (e *Endpoint) httpContext(ctx context.Context, _ *http.Request) context.Context {
	sess := sessionFrom(ctx)
	if sess == nil {
		return ctx
	}
	if cs, ok := mcpsrv.ClientSessionFromContext(ctx).(mcpsrv.SessionWithTools); ok && cs.SessionID() != "" {
		// The turn's tools (with tool_expand_tools and reset_tools) and every other
		// allowed one, which offeredOnly keeps out of tools/list.
		specs := visibleSpecs(sess)
		allowed := allowedSpecs(sess)
		tools := make(map[string]mcpsrv.ServerTool, len(specs)+len(allowed))
		for _, sp := range slices.Concat(specs, allowed) {
			tools[sp.Name] = mcpsrv.ServerTool{Tool: toMCPTool(sp), Handler: e.callTool}
		}
		cs.SetSessionTools(tools)
	}
	return ctx
}

// offeredOnly keeps tools/list (and whatever else mcp-go filters tools for) to the
// turn's tools, as visibleSpecs has them. The session's other allowed tools are among
// its MCP session tools only so that a tools/call of one reaches callTool, which
// answers, as the REST API does, that it must be expanded first (mcp-go answered
// -32602 "tool not found"); they are let through for a tools/call alone.
func offeredOnly(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	sess := sessionFrom(ctx)
	if sess == nil || ctx.Value(callingKey{}) != nil {
		return tools
	}
	offered := map[string]bool{}
	for _, sp := range visibleSpecs(sess) {
		offered[sp.Name] = true
	}
	return slices.DeleteFunc(tools, func(t mcp.Tool) bool { return !offered[t.Name] })
}

func (e *Endpoint) onRegister(ctx context.Context, cs mcpsrv.ClientSession) {
	sess := sessionFrom(ctx)
	if sess == nil {
		return
	}
	e.mu.Lock()
	e.bindings[cs.SessionID()] = &binding{tenant: sess.Tenant, sessionID: sess.ID, print: fingerprint(visibleSpecs(sess))}
	e.mu.Unlock()
}

// flushWriter lets mcp-go stream (it looks for http.Flusher) through middleware
// whose writers only offer Unwrap.
type flushWriter struct{ http.ResponseWriter }

func (f flushWriter) Flush() { _ = http.NewResponseController(f.ResponseWriter).Flush() }

func (f flushWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// writeError writes the API's error shape.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

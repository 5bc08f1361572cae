// Package server is toolserverd's HTTP API: the chi router, one handler file per
// resource, the NDJSON stream writer, JSON decoding and errors, and HTTP metrics.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolserverd/toolserverd/api"
	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
	"github.com/toolserverd/toolserverd/internal/webui"
)

// CallStore reads call records.
type CallStore interface {
	GetCall(ctx context.Context, id string) (*store.Call, error)
	GetCallByToolCallID(ctx context.Context, sessionID, toolCallID string) (*store.Call, error)
	ListCalls(ctx context.Context, sessionID string, p store.CallPage) ([]*store.Call, error)
	ListRecentCalls(ctx context.Context, f store.CallFilter) ([]*store.Call, error)
}

// ReadinessCheck is one named check behind /readyz.
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Deps are the components the API serves.
type Deps struct {
	Tools    *toolmgr.Manager
	Sessions *session.Manager
	Exec     *session.Executor
	Calls    CallStore
	Ready    []ReadinessCheck
	// Info is shown on /readyz (sandbox capabilities, store kind…).
	Info map[string]any
	// Skills is the skill registry; nil without one.
	Skills *skills.Manager
	// MCP manages upstream MCP servers; nil without the proxy.
	MCP MCPServers
	// Live adds current facts to /readyz (MCP server states…).
	Live map[string]func() any
	// Approvals serves the approvals API; nil when permissions are off.
	Approvals *Approvals
	// MCPEndpoint serves sessions' tools to MCP clients; nil answers 404.
	MCPEndpoint MCPEndpoint
	// Progress is the live-output hub; nil disables tool_progress events.
	Progress *progress.Hub
	Registry *prometheus.Registry
	Metrics  *Metrics
	Log      *slog.Logger
	// Auth checks API keys; nil serves every request as an admin of the default
	// tenant (tests that build the API directly).
	Auth *auth.Authenticator
	// Keys stores API keys for /v1/keys; nil without key management.
	Keys store.APIKeyStore
	// Audit is the audit trail of /v1/audit, where key and MCP server changes are
	// recorded too; nil without one.
	Audit AuditLog
	// CORS, when it lists origins, lets browsers on them call the API.
	CORS CORSConfig
	// Replicas forwards progress reads to the replica running the call; nil when the
	// store is not shared.
	Replicas *Replicas
	// Tracer, when set, gives every request an HTTP server span.
	Tracer trace.TracerProvider
}

// CORSConfig lets web UIs on other origins call the API.
type CORSConfig struct {
	AllowedOrigins []string
	MaxAge         time.Duration
}

// Config of the API.
type Config struct {
	MaxBodyBytes int64
	// RecordHold is how long another replica may hold a new call's record before
	// writing it (its calls.record_fold_window) when replicas share the store: a call
	// id this replica does not find yet may still appear within it. 0: a single
	// process, whose committer shows held records itself.
	RecordHold time.Duration
	// RevokeCheck is how often an open event stream checks that the key that opened
	// it is still valid (default 1s); see endOnRevoke.
	RevokeCheck time.Duration
	// KeepAlive is how long an NDJSON stream may stay quiet before it writes a
	// keepalive line (0: never).
	KeepAlive time.Duration
	// WriteTimeout is how long a response may wait for its client to take any of its
	// bytes before it is cut (0: for ever); see writeTimeoutMiddleware.
	WriteTimeout time.Duration
	// SkillPromptBudgetTokens bounds the skills part of a session's prompt fragment
	// (skills.prompt_budget_tokens); 0: skills.DefaultPromptBudgetTokens.
	SkillPromptBudgetTokens int
	// ListBytes bounds what one listing of calls or approvals reads of their
	// arguments and results (max_list_bytes); 0: store.ListBytes.
	ListBytes int
}

// Server serves the API.
type Server struct {
	Deps
	cfg Config
	log *slog.Logger
	// origins matches cors.allowed_origins (CORS and unauthenticated mode's check).
	origins *origins

	transportOnce sync.Once
	transport     http.RoundTripper // to other replicas

	// listings caches the skills part of sessions' prompt fragments.
	listings *skills.ListingCache
}

// New returns the API handler.
func New(cfg Config, d Deps) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.RevokeCheck <= 0 {
		cfg.RevokeCheck = time.Second
	}
	if cfg.ListBytes <= 0 {
		cfg.ListBytes = store.ListBytes
	}
	if cfg.SkillPromptBudgetTokens <= 0 {
		cfg.SkillPromptBudgetTokens = skills.DefaultPromptBudgetTokens
	}
	return &Server{Deps: d, cfg: cfg, log: d.Log, origins: newOrigins(d.CORS.AllowedOrigins),
		listings: skills.NewListingCache(toolmgr.CountTokens)}
}

// Handler builds the router. Every route is listed in api/openapi.yaml; a test keeps
// the two in step.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(drainBodyMiddleware, s.writeTimeoutMiddleware, s.requestIDMiddleware, s.observeMiddleware, s.recoverMiddleware, s.Metrics.middleware, headAsGet, s.corsMiddleware())
	r.NotFound(s.notFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowedMethods(r, req))
		s.writeError(w, req, errorf(CodeMethodNotAllowed, req.Method+" is not allowed on "+req.URL.Path))
	})

	r.Get("/healthz", s.healthz)
	r.With(s.probeFromWebPage).Get("/readyz", s.readyz)
	r.Get("/openapi.yaml", s.openAPIDocument)
	r.With(s.probeFromWebPage).Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{Registry: s.Registry}))
	for _, p := range []string{"/mcp", "/v1/sessions/{sessionID}/mcp"} {
		// MCP clients authenticate like agents; the key's tenant owns the session. A
		// browser's MCP client needs CORS like the REST API's (corsMiddleware).
		mcp := r.With(s.textURLMiddleware, s.authenticate, require(auth.RoleAgent))
		mcp.Post(p, s.serveMCP)
		mcp.With(s.endOnRevoke).Get(p, s.serveMCP)
		mcp.Delete(p, s.serveMCP)
	}

	// The web console: static files embedded in the binary, talking to /v1.
	r.Get("/ui", webui.Redirect)
	r.Get("/ui/*", webui.New().ServeHTTP)

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.textURLMiddleware, s.authenticate)
		// Agents run tools; approvers may read what runs (to decide and to watch).
		r.With(require(auth.RoleAgent)).Group(func(r chi.Router) {
			r.Post("/sessions", s.createSession)
			r.Post("/sessions/{sessionID}/tool-calls", s.runSessionToolCalls)
			r.Post("/sessions/{sessionID}/interrupt", s.interruptSession)
			r.Delete("/sessions/{sessionID}", s.deleteSession)
			r.Post("/tool-calls", s.runOneShotToolCalls)
			r.Post("/tool-calls/{callID}/cancel", s.cancelToolCall)
			r.Post("/tool-calls/{callID}/input", s.provideInput)
			r.Post("/tool-calls/{callID}/result", s.answerCall)
			r.Post("/sessions/{sessionID}/job-calls", s.runForwardedJobCall)
		})
		r.With(require(auth.RoleAgent, auth.RoleApprover)).Group(func(r chi.Router) {
			r.Get("/tools", s.listTools)
			r.Get("/sessions/{sessionID}", s.getSession)
			r.Get("/sessions/{sessionID}/tools", s.listSessionTools)
			r.Get("/sessions/{sessionID}/tool-calls", s.listSessionToolCalls)
			r.Get("/sessions/{sessionID}/tool-calls/{toolCallID}", s.getSessionToolCall)
			r.With(s.endOnRevoke).Get("/sessions/{sessionID}/events", s.sessionEvents)
			r.Get("/sessions/{sessionID}/prompt", s.sessionPrompt)
			r.Get("/skills", s.listSkills)
			r.Get("/skills/{name}", s.getSkill)
			r.Get("/tool-calls", s.listToolCalls)
			r.Get("/tool-calls/{callID}", s.getToolCall)
			r.With(s.endOnRevoke).Get("/tool-calls/{callID}/events", s.callEvents)
			r.Get("/tool-calls/{callID}/progress", s.getProgress)
			r.With(s.endOnRevoke).Get("/tool-calls/{callID}/progress/stream", s.streamProgress)
		})
		r.With(require(auth.RoleApprover)).Group(func(r chi.Router) {
			r.Get("/approvals", s.listApprovals)
			r.Get("/approvals/{approvalID}", s.getApproval)
			r.Post("/approvals/{approvalID}/decision", s.decideApproval)
			r.Get("/audit", s.listAudit)
		})
		r.With(require(auth.RoleAdmin)).Group(func(r chi.Router) {
			r.Get("/mcp/servers", s.listMCPServers)
			r.Post("/mcp/servers", s.addMCPServer)
			r.Delete("/mcp/servers/{name}", s.deleteMCPServer)
			r.Post("/mcp/servers/{name}/restart", s.restartMCPServer)
			r.Get("/keys", s.listKeys)
			r.Post("/keys", s.createKey)
			r.Post("/keys/{keyID}/revoke", s.revokeKey)
		})
		r.Get("/whoami", s.whoami)
	})
	return r
}

// allowedMethods lists the methods routed for the request's path, for the Allow header
// a 405 must carry (RFC 9110 §15.5.6); HEAD wherever GET is (headAsGet).
func allowedMethods(routes chi.Routes, r *http.Request) string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allow []string
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPatch, http.MethodPost, http.MethodPut} {
		routed := m
		if m == http.MethodHead {
			routed = http.MethodGet
		}
		if routes.Match(chi.NewRouteContext(), routed, path) {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// headAsGet answers HEAD on every GET route, as RFC 9110 §9.3.2 expects of a server
// that supports GET: chi routes it to the GET handler (middleware.GetHead) and
// net/http sends the head without the body. A streaming handler would go on writing
// into nothing until the client left, holding its connection: a HEAD ends at the
// first flush, when the status and headers are out, as if its client had gone.
// Handlers that answer at once never flush and are not touched.
func headAsGet(next http.Handler) http.Handler {
	asGet := middleware.GetHead(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		asGet.ServeHTTP(&headWriter{ResponseWriter: w, end: cancel}, r.WithContext(ctx))
	})
}

// headWriter is a HEAD request's writer: its first flush ends the request.
type headWriter struct {
	http.ResponseWriter
	end context.CancelFunc
}

// FlushError sends the head and ends the request (http.ResponseController calls it).
func (h *headWriter) FlushError() error {
	err := http.NewResponseController(h.ResponseWriter).Flush()
	h.end()
	return err
}

// Unwrap lets http.ResponseController reach the real writer.
func (h *headWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// openAPIDocument serves the contract, so clients (and toolserverd's own OpenAPI
// adapter) can drive the daemon from it.
func (s *Server) openAPIDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(api.OpenAPI)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type readyResponse struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	Info   map[string]any    `json:"info,omitempty"`
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	info := map[string]any{}
	for k, v := range s.Info {
		info[k] = v
	}
	for k, f := range s.Live {
		info[k] = f()
	}
	resp := readyResponse{Status: "ready", Checks: map[string]string{}, Info: info}
	status := http.StatusOK
	for _, c := range s.Ready {
		if err := c.Check(ctx); err != nil {
			resp.Checks[c.Name] = "failing: " + err.Error()
			resp.Status = "not ready"
			status = http.StatusServiceUnavailable
			continue
		}
		resp.Checks[c.Name] = "ok"
	}
	writeJSON(w, status, resp)
}

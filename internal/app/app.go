// Package app builds toolserverd from its configuration: every component, wired once.
// cmd/toolserverd, the end-to-end tests and the benchmarks all start the daemon
// through it, so they exercise the same thing.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/builtin"
	"github.com/toolserverd/toolserverd/internal/chain"
	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/mcpproxy"
	"github.com/toolserverd/toolserverd/internal/mcpserver"
	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/retention"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/server"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/telemetry"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
	"github.com/toolserverd/toolserverd/internal/webhook"
)

// App is a built daemon.
type App struct {
	Config   config.Config
	Log      *slog.Logger
	DataDir  string
	Store    store.Store
	Commits  *store.GroupCommitter
	Tools    *toolmgr.Manager
	Sessions *session.Manager
	Exec     *session.Executor
	Trunc    *toolmgr.Truncator
	Registry *prometheus.Registry
	Progress *progress.Hub
	Sandbox  *sandbox.Manager
	Notifier session.Notifier
	MCPTools *toolmgr.Manager // tools of upstream MCP servers, after the built-ins
	MCP      *mcpproxy.Manager
	Skills   *skills.Manager
	Auth     *auth.Authenticator
	API      *server.Server
	// MCPEndpoint serves sessions' tools to MCP clients; nil when disabled.
	MCPEndpoint *mcpserver.Endpoint
	// Tracing is the OpenTelemetry tracer provider; disabled unless configured.
	Tracing *telemetry.Tracing
	// StoreMetrics time store operations.
	StoreMetrics *telemetry.StoreMetrics
	// Hurry, closed while Serve drains (a second stop signal), ends the drain at once:
	// the calls still running are cancelled as at the drain deadline. Nil: never.
	Hurry <-chan struct{}

	stopNotifier   func()
	releaseReplica func() // the claim on the replica id (PostgreSQL)
	// membership heartbeats this replica (PostgreSQL, once serving); Close marks it gone.
	membership *cluster.Membership
	stopExpiry context.CancelFunc
	webhook    *webhook.Sender // the approval webhook; nil without
	expiryDone chan struct{}

	// artifacts holds tool_chain's large results; nil when chain is disabled.
	artifacts *chain.Artifacts

	// sessionLockPool serializes sessions' unsafe calls across replicas (PostgreSQL).
	sessionLockPool *store.PGSessionLocks

	// retention deletes old call records and unused sessions (config retention).
	retention *retention.Sweeper

	// openAPILoader loads the OpenAPI sources whose document is a URL; nil when none.
	openAPILoader *openAPILoader
}

// New builds every component. Close releases what New acquired.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (a *App, err error) {
	// Log lines written with a request's or a call's context carry its ids.
	log = slog.New(telemetry.NewLogHandler(log.Handler()))
	a = &App{Config: cfg, Log: log}
	// "return nil, err" clears a before deferred calls run: close what was built.
	built := a
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	if a.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := os.MkdirAll(a.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if a.Store, err = openStore(ctx, store.Config{URL: cfg.Store, DataDir: a.DataDir,
		SQLite: store.SQLiteOptions{Synchronous: cfg.SQLite.Synchronous}}, cfg.StoreConnectTimeout, log); err != nil {
		return nil, err
	}
	logSchema(log, a.Store)
	warnReadableDatabase(log, a.Store)
	warnUnlockedDatabase(log, a.Store)
	// Before AbandonCalls: with the id of a process still running, that would fail its
	// calls as this id's previous run's.
	if c, ok := a.Store.(interface {
		ClaimReplica(ctx context.Context, id string, lost func(error)) (func(), error)
	}); ok {
		if a.releaseReplica, err = c.ClaimReplica(ctx, cfg.ReplicaID, func(err error) { log.Error("replica id", "err", err) }); err != nil {
			return nil, err
		}
	}
	abandoned, err := a.Store.AbandonCalls(ctx, cfg.ReplicaID,
		tool.ErrorResult(tool.KindFailed, "the daemon stopped before this call finished; it may have run partly"), time.Now().UTC())
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of a previous run: %w", err)
	}
	logAbandoned(log, cfg.ReplicaID, abandoned)
	if ra, ok := a.Store.(recoveredApprovals); ok {
		logRecoveredApprovals(ctx, log, ra)
	}
	a.Registry = prometheus.NewRegistry()
	a.StoreMetrics = telemetry.NewStoreMetrics(a.Registry)
	if a.Commits, err = store.NewGroupCommitter(a.Store, store.GroupCommitConfig{FoldWindow: cfg.Calls.RecordFoldWindow, Observe: a.StoreMetrics.Observe}); err != nil {
		return nil, err
	}
	if err := a.Commits.Start(context.WithoutCancel(ctx)); err != nil {
		a.Commits = nil
		return nil, err
	}
	commits := a.Commits
	a.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolserverd_store_call_record_writes_total",
			Help: "Call record writes (inserts, starts, finishes) handed to the group committer's transactions.",
		}, func() float64 { return float64(commits.Stats().Ops) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolserverd_store_call_record_write_failures_total",
			Help: "Call record writes the store refused (database unreachable, disk full, a conflicting record).",
		}, func() float64 { return float64(commits.Stats().FailedOps) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolserverd_store_call_records_folded_total",
			Help: "Finishes written with their call's insert as one row (calls.record_fold_window).",
		}, func() float64 { return float64(commits.Stats().Folded) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolserverd_store_call_results_not_recorded_total",
			Help: "Call results not written because the call's record was already final: another replica's lease sweep or a restart marked the call failed while it ran (a WARN names each; its client was told what the record says).",
		}, func() float64 { return float64(commits.Stats().Final) }),
	)

	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := server.NewMetrics(a.Registry, cfg.Calls.MaxTimeout)

	pc := progress.DefaultConfig()
	pc.Enabled = cfg.Progress.Enabled
	pc.FlushInterval = time.Duration(cfg.Progress.FlushIntervalMS) * time.Millisecond
	pc.FlushBytes = cfg.Progress.FlushBytes
	pc.Dir = filepath.Join(a.DataDir, "progress")
	if a.Progress, err = progress.NewHub(pc, a.Registry); err != nil {
		return nil, err
	}
	if err := a.Progress.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	if a.Sandbox, err = sandbox.NewManager(sandbox.Config{
		Mode:     sandbox.Mode(cfg.Sandbox.Mode),
		StateDir: filepath.Join(a.DataDir, "sandbox"),
		// Isolated commands do not see the daemon's data: its database and keys,
		// other sessions' workspaces, logs and artifacts.
		Hide: []string{a.DataDir},
		// Nor its config file, wherever it lies: inline values (web.search.api_key, an
		// MCP server's env, a store URL with a password) are secrets. Nor an SQLite
		// database outside the data dir (store: sqlite:PATH), which holds every call.
		HideFiles:      append([]string{cfg.File}, sqliteFiles(a.Store)...),
		OutputCap:      cfg.Sandbox.OutputCapBytes,
		DefaultTimeout: cfg.Calls.DefaultTimeout,
		MaxTimeout:     cfg.Calls.MaxTimeout,
		AllowNetwork:   cfg.Sandbox.AllowNetwork,
		Env:            cfg.Sandbox.Env,
		EnvAllow:       cfg.Sandbox.EnvAllow,
		WritableDirs:   cfg.Sandbox.WritableDirs,
		PidsLimit:      cfg.Sandbox.PidsLimit,
		MemoryLimit:    cfg.Sandbox.MemoryLimitBytes,
		Logger:         log,
	}); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	sandboxes := a.Sandbox
	a.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolserverd_sandbox_commands_total",
			Help: "Commands started in sandboxes (execute_command, skill scripts).",
		}, func() float64 { return float64(sandboxes.Stats().Started) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolserverd_sandbox_oom_kills_total",
			Help: "Processes the kernel killed for reaching their command's memory limit (sandbox.memory_limit_bytes).",
		}, func() float64 { return float64(sandboxes.Stats().OOMKills) }),
	)
	log.Info("sandbox", "mode", cfg.Sandbox.Mode, "backend", a.Sandbox.Backend(), "pids_limited", a.Sandbox.PidsLimited(),
		"memory_limit_bytes", a.Sandbox.MemoryLimit(), "host", a.Sandbox.Capabilities())

	a.Tools = toolmgr.New()
	web, err := builtin.WebTools(builtin.WebConfig{
		Fetch:  builtin.FetchConfig{AllowHosts: cfg.Web.Fetch.AllowHosts, AllowCIDRs: cfg.Web.Fetch.AllowCIDRs, Proxy: cfg.Web.Fetch.Proxy},
		Search: builtin.SearchConfig{Provider: cfg.Web.Search.Provider, BaseURL: cfg.Web.Search.BaseURL, APIKey: cfg.Web.Search.APIKey},
	})
	if err != nil {
		return nil, fmt.Errorf("web tools: %w", err)
	}
	builtins := append(append(builtin.CommandTools(a.Sandbox, a.jobRelay()), builtin.FileTools(a.Sandbox, a.fileStamps())...), web...)
	builtins = append(builtins, builtin.InfoTool(), builtin.AskUserTool(), builtin.SkillTool(a.Sandbox))
	stateful, ok := a.Store.(interface {
		builtin.TaskStore
		builtin.MemoryStore
		builtin.ScratchpadStore
	})
	if !ok {
		return nil, fmt.Errorf("store %T cannot keep tasks and memories", a.Store)
	}
	builtins = append(builtins, builtin.TaskTools(stateful)...)
	builtins = append(builtins, builtin.MemoryTools(stateful)...)
	builtins = append(builtins, builtin.ScratchpadTools(stateful)...)
	if cfg.Chain.Enabled {
		ct, err := a.chainTools()
		if err != nil {
			return nil, err
		}
		if err := a.artifacts.Start(context.WithoutCancel(ctx), log); err != nil {
			return nil, err
		}
		builtins = append(builtins, ct...)
	}
	builtinNames := make(map[string]bool, len(builtins))
	for _, b := range builtins {
		builtinNames[b.Spec().Name] = true
	}
	for i, et := range cfg.ExternalTools {
		if builtinNames[et.Name] {
			return nil, fmt.Errorf("config: external_tools[%d].name: %q is the name of a built-in tool; pick another", i, et.Name)
		}
		params, err := json.Marshal(et.Parameters)
		if err != nil || len(et.Parameters) == 0 {
			params = nil
		}
		builtins = append(builtins, builtin.ExternalTool(et.Name, et.Description, params))
	}
	if err := a.Tools.Register(builtins...); err != nil {
		return nil, err
	}
	if err := a.registerOpenAPI(ctx); err != nil {
		return nil, err
	}
	if err := a.registerProviderTools(); err != nil {
		return nil, err
	}
	a.MCPTools = toolmgr.New()
	// An MCP server's tools come and go at run time; their series go with them, unless
	// a tool of the same name is served from elsewhere (prefix_mode never).
	a.MCPTools.OnChange(func(removed, added []string) {
		removed = slices.DeleteFunc(removed, func(name string) bool {
			_, ok := a.Tools.Lookup(name)
			return ok
		})
		metrics.ToolsChanged(removed, added)
	})
	mcpStore, _ := a.Store.(mcpproxy.ServerStore)
	mc, err := mcpConfig(cfg, a.DataDir, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config: mcp_servers: %w", err)
	}
	if a.MCP, err = mcpproxy.New(mc, a.MCPTools, func(name string) bool { _, ok := a.Tools.Lookup(name); return ok },
		log, a.Registry, mcpproxy.WithStore(mcpStore)); err != nil {
		return nil, fmt.Errorf("config: mcp_servers: %w", err)
	}
	if err := a.MCP.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	if a.Sessions, err = session.NewManager(session.Config{
		DataDir:      a.DataDir,
		WorkspaceDir: filepath.Join(a.DataDir, "workspaces"),
		ArtifactDir:  a.artifactDir(),
		WorkdirRoots: cfg.Sessions.WorkdirRoots,
		Groups:       toolGroups(cfg),
		IdleTimeout:  cfg.Sessions.IdleTimeout,
		MaxLive:      cfg.Sessions.MaxLive,
	}, a.Store, a.Tools, a.MCPTools); err != nil {
		return nil, fmt.Errorf("config: tool_groups: %w", err)
	}
	a.Sessions.UseResources(a.Sandbox)
	// A deleted session's per_session MCP upstreams (its browser) close with it.
	a.Sessions.UseClosers(a.MCP)
	// Whitelists keep the tools of MCP servers still connecting and of OpenAPI
	// documents still loading: they come later.
	pending := []session.PendingSources{a.MCP.Pending}
	if a.openAPILoader != nil {
		pending = append(pending, a.openAPILoader.Pending)
	}
	a.Sessions.UsePendingSources(pendingSources(pending...))
	a.Sessions.UseRetention(a.Store, cfg.Retention.Sessions)
	sessions := a.Sessions
	a.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolserverd_sessions_live",
		Help: "Sessions held in memory by this replica; sessions.idle_timeout and sessions.max_live evict them.",
	}, func() float64 { return float64(sessions.Live()) }))
	if a.Skills, err = skills.NewManager(skills.Config{Dirs: cfg.Skills.Dirs, Watch: cfg.Skills.Watch}, log); err != nil {
		return nil, fmt.Errorf("config: skills: %w", err)
	}
	if err := a.Skills.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	// The manager has logged every skill it could not load (and logs new ones on reload).
	a.Sessions.UseSkills(a.Skills)
	a.Trunc = toolmgr.NewTruncator(cfg.MaxToolResultTokens)
	a.Exec = session.NewExecutor(session.ExecConfig{
		DefaultTimeout: cfg.Calls.DefaultTimeout,
		MaxTimeout:     cfg.Calls.MaxTimeout,
		Owner:          cfg.ReplicaID,
		MaxBatchCalls:  cfg.Calls.MaxBatchCalls,
	}, a.Commits, a.Trunc, metrics, progressSource{a.Progress}, log)
	if a.Tracing, err = telemetry.NewTracing(ctx, telemetry.TracingConfig{Enabled: cfg.Tracing.Enabled, Endpoint: cfg.Tracing.Endpoint,
		SampleRatio: cfg.Tracing.SampleRatio, ServiceName: cfg.Tracing.ServiceName, InstanceID: cfg.ReplicaID, Log: log}); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	a.Exec.UseTracer(a.Tracing.Provider())

	if err := a.sessionLocks(ctx); err != nil {
		return nil, err
	}
	approvals, err := a.permissions(ctx, metrics)
	if err != nil {
		return nil, err
	}
	// Sessions changed on another replica are read again before their next use here:
	// on a store replicas share, checked against the store at every use (the next
	// request may arrive before the notification); the notification covers the rest.
	a.Sessions.UseNotifier(a.Notifier, cfg.ReplicaID)
	// MCP servers added, removed or restarted through the API on another replica are
	// added, removed or restarted here too: at once on the notification, within
	// mcpproxy.SyncInterval by reading the store if it was lost.
	if a.storeKind() == "postgres" {
		a.MCP.Follow(a.Notifier, cfg.ReplicaID, 0)
	}
	// A background call's result reaches the session's streams on every replica.
	a.Sessions.ShareBackgroundResults(a.Store, a.Exec.Truncate)
	if a.storeKind() == "postgres" {
		a.Sessions.ReadThrough()
	}
	if err := a.Sessions.Start(context.WithoutCancel(ctx), log); err != nil {
		return nil, err
	}
	if a.retention, err = retention.New(retention.Config{Calls: cfg.Retention.Calls, Sessions: cfg.Retention.Sessions},
		a.Store, a.Sessions, a.Registry, log); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := a.retention.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	keys, ok := a.Store.(store.APIKeyStore)
	if !ok {
		return nil, fmt.Errorf("store %T cannot keep API keys", a.Store)
	}
	if err := a.authenticator(ctx, keys); err != nil {
		return nil, err
	}
	audit, ok := a.Store.(server.AuditLog)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no audit log", a.Store)
	}

	if cfg.MCPEndpoint.Enabled {
		if a.MCPEndpoint, err = mcpserver.New(mcpserver.Config{SessionIdleTTL: cfg.MCPEndpoint.SessionIdleTTL, MaxSessions: cfg.MCPEndpoint.MaxSessions, KeepAlive: cfg.StreamKeepalive, ResumeWindow: cfg.MCPEndpoint.ResumeWindow}, mcpserver.Deps{
			Sessions: a.Sessions, Exec: a.Exec, Progress: a.Progress, Approvals: approvals.Store, Notifier: a.Notifier, Log: log,
		}); err != nil {
			return nil, fmt.Errorf("config: mcp_endpoint: %w", err)
		}
	}

	apiCfg := server.Config{MaxBodyBytes: cfg.MaxBodyBytes, KeepAlive: cfg.StreamKeepalive, WriteTimeout: cfg.WriteTimeout,
		SkillPromptBudgetTokens: cfg.Skills.PromptBudgetTokens, ListBytes: cfg.MaxListBytes}
	if a.storeKind() == "postgres" { // replicas may share it
		apiCfg.RecordHold = cfg.Calls.RecordFoldWindow
	}
	a.API = server.New(apiCfg, server.Deps{
		Tools: a.Tools, Sessions: a.Sessions, Exec: a.Exec, Calls: a.Commits,
		Ready: a.readinessChecks(),
		Info: map[string]any{"store": a.storeKind(), "replica_id": cfg.ReplicaID, "schema": schemaInfo(a.Store),
			"sandbox": map[string]any{"mode": cfg.Sandbox.Mode, "backend": a.Sandbox.Backend(), "pids_limited": a.Sandbox.PidsLimited(),
				"memory_limit_bytes": a.Sandbox.MemoryLimit(), "host": a.Sandbox.Capabilities()}},
		Progress:  a.Progress,
		Approvals: approvals,
		MCP:       a.MCP,
		Skills:    a.Skills,
		Live:      a.liveInfo(),
		Registry:  a.Registry, Metrics: metrics, Log: log,
		Auth: a.Auth, Keys: keys, Audit: audit,
		CORS:   server.CORSConfig{AllowedOrigins: cfg.CORS.AllowedOrigins, MaxAge: cfg.CORS.MaxAge},
		Tracer: a.Tracing.Provider(),
	})
	if a.MCPEndpoint != nil {
		a.API.MCPEndpoint = a.MCPEndpoint
	}
	a.API.Replicas = a.replicaForwarding()
	return a, nil
}

// liveInfo is what /readyz shows of the tool sources coming up: MCP servers, and the
// OpenAPI sources whose document is a URL when there are any.
func (a *App) liveInfo() map[string]func() any {
	live := map[string]func() any{"mcp": func() any { return a.MCP.Summary() }}
	if l := a.openAPILoader; l != nil {
		live["openapi"] = func() any { return l.Summary() }
	}
	return live
}

// artifactDir holds tool_chain's artifacts, a directory per session; retention
// deletes a session's with it.
func (a *App) artifactDir() string { return filepath.Join(a.DataDir, "artifacts") }

// chainTools builds tool_chain and artifact_read from the chain: config block.
func (a *App) chainTools() ([]tool.Tool, error) {
	c := a.Config.Chain
	p := chain.Policy{MaxToolCalls: c.MaxToolCalls, CallTimeout: c.CallTimeout, TotalTimeout: c.TotalTimeout,
		MaxInlineResultBytes: c.MaxInlineResultBytes, ApprovalTimeout: c.ApprovalTimeout,
		MaxRiskWithoutApproval: tool.Risk(c.MaxRiskWithoutApproval), MaxSteps: uint64(max(c.MaxSteps, 0)), MaxMemoryBytes: c.MaxMemoryBytes,
		ArtifactBytesPerSession: c.ArtifactBytesPerSession, MaxMessageBytes: a.Config.MaxBodyBytes}
	var err error
	if a.artifacts, err = chain.NewArtifacts(a.artifactDir(), c.ArtifactBytesPerSession, c.ArtifactRetention); err != nil {
		return nil, err
	}
	if d := a.artifactRelay(); d != nil {
		a.artifacts.Share(d)
	}
	ts, err := chain.Tools(p, a.artifacts)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ts, nil
}

func (a *App) storeKind() string {
	if strings.HasPrefix(a.Config.Store, "postgres") {
		return "postgres"
	}
	return "sqlite"
}

// authenticator builds the API key checker. With keys required and none declared or
// stored, it creates an admin key for the default tenant and writes it to
// data_dir/admin.key, so that a zero-configuration start is usable and still closed.
func (a *App) authenticator(ctx context.Context, keys store.APIKeyStore) error {
	ac := a.Config.Auth
	cfg := auth.Config{Unauthenticated: ac.Unauthenticated, Limits: auth.Limits{
		RequestsPerSecond: ac.RateLimit.RequestsPerSecond, Burst: ac.RateLimit.Burst, MaxConcurrent: ac.MaxConcurrentRequests}}
	for _, k := range ac.Keys {
		cfg.Keys = append(cfg.Keys, auth.ConfigKey{Name: k.Name, Tenant: k.Tenant, Roles: k.Roles, SHA256: k.SHA256})
	}
	var err error
	if a.Auth, err = auth.New(cfg, keys); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if ac.Unauthenticated {
		a.Log.Warn("auth.unauthenticated is on: every request is served without an API key, as an admin of tenant " + auth.DefaultTenant)
		return nil
	}
	if a.Auth.HasConfigKeys() {
		return nil
	}
	existing, err := keys.ListAPIKeys(ctx, "")
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if len(existing) > 0 {
		return nil
	}
	key, hash := auth.NewKey()
	path := filepath.Join(a.DataDir, "admin.key")
	// A new 0600 file renamed into place: an admin.key already there (from a wiped
	// store, or another daemon starting on this data dir) neither lends the key its
	// mode nor redirects it through a symlink, and a failure removes only our file.
	tmp, err := writeNewFile(a.DataDir, ".admin.key-*", []byte(key+"\n"))
	if err != nil {
		return fmt.Errorf("auth: writing the first admin key: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }() // gone after the rename
	k := &store.APIKey{ID: session.NewID("key_"), Tenant: auth.DefaultTenant, Name: "bootstrap admin", Roles: []string{auth.RoleAdmin}, Hash: hash}
	if err := keys.CreateAPIKey(ctx, k); err != nil {
		return fmt.Errorf("auth: storing the first admin key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("auth: writing the first admin key: %w", err)
	}
	if al, ok := keys.(server.AuditLog); ok {
		detail, _ := json.Marshal(map[string]any{"name": k.Name, "tenant": k.Tenant, "roles": k.Roles, "file": path})
		if err := al.AppendAudit(ctx, &store.AuditEntry{Tenant: k.Tenant, Actor: store.AuditActorSystem, Action: server.AuditKeyCreated,
			Subject: k.ID, Detail: detail}); err != nil {
			a.Log.Error("recording the first admin key in the audit trail failed", "err", err)
		}
	}
	a.Log.Warn("no API keys existed: created an admin key for tenant "+auth.DefaultTenant+"; send it as Authorization: Bearer <key>", "key_file", path)
	return nil
}

// writeNewFile writes b to a new file in dir (mode 0600, named after pattern as
// os.CreateTemp does) and returns its path.
func writeNewFile(dir, pattern string, b []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// progressSource gives each call an emitter of the progress hub.
type progressSource struct{ hub *progress.Hub }

func (p progressSource) Begin(callID, toolCallID, sessionID string) tool.Progress {
	return p.hub.Begin(progress.CallMeta{CallID: callID, ToolCallID: toolCallID, SessionID: sessionID})
}

// Serve answers HTTP on ln until ctx ends, then drains: it stops accepting, lets
// in-flight calls finish up to the shutdown timeout, and cancels what remains.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	if err := auth.CheckListen(a.Config.Auth.Unauthenticated, ln.Addr().String()); err != nil {
		return err
	}
	// In-flight calls run under base; it is cancelled only after the drain deadline.
	base, cancelBase := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelBase(nil)
	srv := &http.Server{
		Handler:           a.API.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A request, head and body, must arrive within read_body_timeout of its first
		// byte. net/http lifts this deadline as the handler reads the body to its end
		// (at once for a request without one), so responses that stream for minutes
		// afterwards are not cut; a client that trickles its body is, and is answered
		// 408 (server.readBody). A handler must not set read deadlines of its own: one
		// set after the body is read would end the request (golang/go#70834).
		ReadTimeout: a.Config.ReadBodyTimeout,
		IdleTimeout: 2 * time.Minute,
		// Marked so that calls that outlive their client (on_disconnect: continue)
		// still end with base.
		BaseContext: func(net.Listener) context.Context { return server.StopContext(base) },
	}
	if a.MCPEndpoint != nil {
		// MCP clients' GET streams stay open; end them so the drain does not wait.
		srv.RegisterOnShutdown(a.MCPEndpoint.CloseStreams)
	}
	warmed := make(chan struct{})
	defer func() { <-warmed }() // Serve leaves nothing running behind it
	go func() {
		defer close(warmed)
		// The tokenizer takes a few hundred milliseconds to load; not on the first call.
		if err := a.Trunc.Warm(); err != nil {
			a.Log.Error("tokenizer unavailable; large results are cut by bytes", "err", err)
		}
	}()
	leave, err := a.joinCluster(ctx, ln)
	if err != nil {
		return err
	}
	defer leave() // after the drain: heartbeats go on while calls finish
	// Said once the start can no longer fail: what waits for this line (an operator, a
	// script, the tests) takes the daemon as up. Logged before the first heartbeat, a
	// start that then failed it (a database connection dropped at that moment) said
	// "listening" and exited.
	a.Log.Info("toolserverd listening", "addr", ln.Addr().String(), "data_dir", a.DataDir, "store", a.storeKind(),
		"tools", len(a.Tools.Names()), "replica_id", a.Config.ReplicaID, "config_file", a.Config.File)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	a.Log.Info("shutting down: draining in-flight calls", "timeout", a.Config.ShutdownTimeout.String())
	// Calls waiting for a person's decision or an external answer are kept by the
	// store, not by this process: leave them now rather than at the drain deadline.
	if n := a.Exec.ReleaseWaiting(); n > 0 {
		a.Log.Info("left calls waiting for a decision or an answer; they stay pending", "calls", n)
	}
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
	defer cancelDrain()
	drained := make(chan struct{})
	go func() {
		select {
		case <-a.Hurry:
			cancelDrain()
		case <-drained:
		}
	}()
	err = srv.Shutdown(drainCtx)
	close(drained)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		a.Log.Warn("drain deadline passed; cancelling the calls still running", abandoned(a.Exec.Unfinished())...)
	case errors.Is(err, context.Canceled):
		// The calls are cancelled as at the deadline: their records say the server shut
		// down, and calls waiting for a decision or an answer stay pending (released above).
		a.Log.Warn("stop signal again: ending the drain now, cancelling the calls still running", abandoned(a.Exec.Unfinished())...)
	}
	cancelBase(session.ErrShuttingDown)
	waitCtx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if err := a.Exec.Wait(waitCtx); err != nil {
		a.Log.Error("calls still running after cancellation", "err", err)
	}
	// Results the store refused stay unwritten; the next start's recovery marks them.
	a.Exec.Close()
	// The cancelled calls' messages and done are still on their way to the clients:
	// wait for those handlers to return (Shutdown again) before closing what is left.
	if err := srv.Shutdown(waitCtx); err != nil {
		a.Log.Error("responses still being written after cancellation", "err", err)
	}
	_ = srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	a.Log.Info("stopped serving; closing MCP servers, sandboxes and the store")
	return nil
}

// abandoned is what the log says of the calls a stop cancels: how many, and the ids of
// the first 100 (each call's record says the rest).
func abandoned(ids []string) []any {
	const named = 100
	attrs := []any{"calls", len(ids)}
	if len(ids) > named {
		ids = ids[:named]
	}
	return append(attrs, "call_ids", ids)
}

// permissions builds the policy engine and the notifier, gates the executor with them
// and starts the loop that expires approval requests nobody decided. calls counts the
// calls the approval store finishes (denied, expired).
func (a *App) permissions(ctx context.Context, calls callCounter) (*server.Approvals, error) {
	pc := approval.DefaultConfig()
	// Local commands run with the daemon's rights: naming its data dir asks.
	pc.PrivateDirs = []string{a.DataDir}
	pc.ReadDirs = a.Config.Permissions.ReadDirs
	for _, g := range []struct {
		key    string
		action approval.Outcome
		list   []string
	}{{"permissions.allow", approval.Allow, a.Config.Permissions.Allow}, {"permissions.ask", approval.Ask, a.Config.Permissions.Ask}, {"permissions.deny", approval.Deny, a.Config.Permissions.Deny}} {
		rules, err := approval.ParseRules(g.action, g.list)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", g.key, err)
		}
		pc.Rules = append(pc.Rules, rules...)
	}
	for risk, outcome := range a.Config.Permissions.RiskPolicy {
		pc.RiskPolicy[tool.Risk(risk)] = approval.Outcome(outcome)
	}
	for name, risk := range a.Config.Permissions.RiskOverrides {
		pc.RiskOverrides[name] = tool.Risk(risk)
	}
	a.providerSubjects(pc.Subjects)
	engine, err := approval.NewEngine(pc)
	if err != nil {
		return nil, fmt.Errorf("config: permissions: %w", err)
	}
	raw, ok := a.Store.(approvalStore)
	if !ok {
		return nil, fmt.Errorf("store %T cannot keep approvals", a.Store)
	}
	// Pending approvals are counted from the shared store on scrape (cached 5s, 2s timeout).
	var aps approvalStore = observedApprovals{approvalStore: raw, ops: a.StoreMetrics,
		approvals: telemetry.NewApprovalMetrics(a.Registry, countPending(raw), 5*time.Second, 2*time.Second), calls: calls}
	if w := a.Config.ApprovalWebhook; w.URL != "" {
		secret := ""
		if w.SecretEnv != "" {
			if secret = os.Getenv(w.SecretEnv); secret == "" {
				return nil, fmt.Errorf("config: approval_webhook.secret_env: the variable %s is not set", w.SecretEnv)
			}
		}
		hook, err := webhook.New(webhook.Config{URL: w.URL, Secret: secret, Timeout: w.Timeout}, a.Registry, a.Log)
		if err != nil {
			return nil, fmt.Errorf("config: approval_webhook: %w", err)
		}
		a.webhook = hook
		aps = notifiedApprovals{approvalStore: aps, hook: hook}
	}
	if a.storeKind() == "postgres" {
		// Its log says when the LISTEN connection drops (notifications sent meanwhile
		// are lost) and when it listens again.
		n, err := store.NewPGNotifierWithConfig(ctx, store.PGNotifierConfig{URL: a.Config.Store, Logger: a.Log})
		if err != nil {
			return nil, err
		}
		if err := n.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("notifier: %w", err)
		}
		a.Notifier, a.stopNotifier = n, n.Stop
	} else {
		a.Notifier = store.NewInProcessNotifier(0)
	}
	if a.Config.Permissions.AutoApprove {
		a.Log.Warn("permissions.auto_approve is on: calls that would ask a person run without asking")
	}
	a.Exec.UsePermissions(&session.Permissions{Policy: engine, Store: aps, Notifier: a.Notifier,
		TTL: a.Config.Permissions.ApprovalTTL, AutoApprove: a.Config.Permissions.AutoApprove})

	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stopExpiry, a.expiryDone = cancel, make(chan struct{})
	go func() {
		defer close(a.expiryDone)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ectx.Done():
				return
			case <-t.C:
			}
			if expired, err := aps.ExpireApprovals(ectx, time.Now().UTC()); err != nil {
				a.Log.Error("expiring approvals failed", "err", err)
			} else if len(expired) > 0 {
				a.Log.Info("approval requests expired", "count", len(expired))
				_ = a.Notifier.Notify(ectx, store.TopicApproval, "")
				_ = a.Notifier.Notify(ectx, store.TopicCall, "")
			}
			a.runApprovedUnclaimed(ectx, aps)
		}
	}()
	return &server.Approvals{Store: aps, Notifier: a.Notifier, Answers: aps, RunGrace: 300 * time.Millisecond}, nil
}

// approvedUnclaimedAfter is how long an approved call may stay unclaimed before any
// replica's sweep runs it: its waiting stream (or the deciding replica, after
// RunGrace) normally claims it within milliseconds.
const approvedUnclaimedAfter = 2 * time.Second

// runApprovedUnclaimed runs the approved calls nobody ran: the deciding replica
// stopped or died between the decision and the claim, or its run could not start.
// ClaimCall lets exactly one replica run each.
func (a *App) runApprovedUnclaimed(ctx context.Context, aps approvalStore) {
	ids, err := aps.ApprovedUnclaimed(ctx, time.Now().UTC().Add(-approvedUnclaimedAfter), 100)
	if err != nil {
		if ctx.Err() == nil {
			a.Log.Error("looking for approved calls nobody ran failed", "err", err)
		}
		return
	}
	for _, id := range ids {
		a.Log.Warn("running an approved call that nobody ran", "call_id", id)
		go func() {
			if err := a.Exec.RunApproved(context.WithoutCancel(ctx), a.Sessions, id); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, session.ErrShuttingDown) {
				a.Log.Error("running an approved call failed", "call_id", id, "err", err)
			}
		}()
	}
}

// Close stops jobs, flushes pending records and progress, and closes the store.
func (a *App) Close() {
	if a.Exec != nil {
		a.Exec.Close() // Run does when it drains; an App closed without running too
	}
	if a.MCPEndpoint != nil {
		a.MCPEndpoint.Close()
	}
	if a.openAPILoader != nil {
		a.openAPILoader.Stop() // a document still loading is given up
	}
	if a.stopExpiry != nil {
		a.stopExpiry()
		<-a.expiryDone
	}
	if a.webhook != nil {
		// What is queued gets a few seconds: a person may be waiting for the message.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.webhook.Stop(ctx)
		cancel()
	}
	if a.stopNotifier != nil {
		a.stopNotifier()
	}
	if a.retention != nil {
		a.retention.Stop() // before the sessions and the store it deletes from
	}
	if a.Sessions != nil {
		a.Sessions.Stop() // before the sandbox: the sweeper releases sandboxes
	}
	if a.MCP != nil {
		a.MCP.Stop()
	}
	if a.Skills != nil {
		a.Skills.Stop()
	}
	if a.Sandbox != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.Sandbox.Shutdown(ctx); err != nil {
			a.Log.Error("sandbox shutdown", "err", err)
		}
		cancel()
	}
	if a.Progress != nil {
		a.Progress.Stop()
	}
	if a.Exec != nil {
		// The hub's stop ended the output of every background job's call; their
		// records say so before the store closes.
		a.Exec.WaitOutputs(5 * time.Second)
	}
	if a.artifacts != nil {
		a.artifacts.Stop()
	}
	if a.Commits != nil {
		a.Commits.Stop()
	}
	if a.sessionLockPool != nil {
		a.sessionLockPool.Close()
	}
	if a.Tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.Tracing.Shutdown(ctx); err != nil {
			a.Log.Error("tracing shutdown: spans may be lost", "err", err)
		}
		cancel()
	}
	// After every record is written (Commits), before the id is free for another
	// process: that one's heartbeat would be undone.
	a.leaveCluster()
	if a.releaseReplica != nil {
		a.releaseReplica()
	}
	if a.Store != nil {
		_ = a.Store.Close()
	}
	if a.Log != nil {
		a.Log.Info("stopped")
	}
}

// mcpConfig: stdio servers run in dataDir/mcp/{name}, not in the daemon's working
// directory, which deployments make the data directory itself. ${NAME} in the
// servers' url, headers and env values is read from the environment through lookup. The
// daemon's own variables (TOOLSERVER_*, those its *_env keys name and the secrets
// a server's ${NAME} takes) are kept from stdio servers that do not name them.
func mcpConfig(cfg config.Config, dataDir string, lookup func(string) (string, bool)) (mcpproxy.Config, error) {
	mc := mcpproxy.Config{PrefixMode: cfg.MCP.PrefixMode, HealthInterval: cfg.MCP.HealthInterval,
		MinBackoff: cfg.MCP.MinBackoff, MaxBackoff: cfg.MCP.MaxBackoff, WorkDir: filepath.Join(dataDir, "mcp"),
		PrivateEnv: cfg.SecretEnvNames()}
	var errs []error
	for _, s := range cfg.MCPServers {
		enabled := s.Enabled == nil || *s.Enabled
		// A secret handed to one server with ${NAME} is that server's: other stdio
		// servers, those added through the API included, do not inherit it.
		for _, n := range (&mcpproxy.ServerConfig{URL: s.URL, Headers: s.Headers, Env: s.Env}).SecretEnvReferences() {
			if !slices.Contains(mc.PrivateEnv, n) {
				mc.PrivateEnv = append(mc.PrivateEnv, n)
			}
		}
		sc := mcpproxy.ServerConfig{Name: s.Name, Transport: s.Transport, Command: s.Command, Args: s.Args,
			Env: s.Env, URL: s.URL, Headers: s.Headers, ConnectTimeout: s.ConnectTimeout, CallTimeout: s.CallTimeout, Enabled: enabled, Prefix: s.Prefix,
			Pooling: s.Pooling, MaxSessions: s.MaxSessions, SessionIdleTimeout: s.SessionIdleTimeout, TrustAnnotations: s.TrustAnnotations,
			TaskInputWait: s.TaskInputWait, TaskPollMin: s.TaskPollMin, TaskPollMax: s.TaskPollMax, TaskPollDefault: s.TaskPollDefault}
		// A disabled server is never connected: it needs no secret until enabled.
		if err := sc.ExpandEnv(lookup); enabled && err != nil {
			errs = append(errs, err)
		}
		mc.Servers = append(mc.Servers, sc)
	}
	return mc, errors.Join(errs...)
}

func toolGroups(cfg config.Config) []session.Group {
	var out []session.Group
	for _, g := range cfg.ToolGroups {
		out = append(out, session.Group{Name: g.Name, Description: g.Description, Instructions: g.Instructions, Tools: g.Tools, MCPServers: g.MCPServers, Skills: g.Skills})
	}
	return out
}

// readinessChecks are /readyz's checks: the store answers, takes call records, and
// (PostgreSQL) this replica's lease holds.
func (a *App) readinessChecks() []server.ReadinessCheck {
	checks := []server.ReadinessCheck{{Name: "store", Check: a.Store.Ping}, {Name: "store_writes", Check: func(context.Context) error {
		return a.Commits.WriteRefused(storeWriteWindow)
	}}}
	if a.storeKind() == "postgres" {
		checks = append(checks, server.ReadinessCheck{Name: "replica_lease", Check: func(context.Context) error {
			if a.membership == nil { // not serving yet
				return nil
			}
			return a.membership.Current()
		}})
	}
	return checks
}

// storeWriteWindow is how long after a call record was refused by the store (disk
// full, I/O error, database unreachable) /readyz says so (check store_writes), unless a
// record is written meanwhile: long enough to cover the background retries of refused
// results (every 30 s at most), short enough that a daemon taken out of service gets
// traffic again soon after the cause was mended.
const storeWriteWindow = 30 * time.Second

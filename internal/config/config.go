// Package config loads toolserverd's configuration: defaults, then a YAML file
// (--config), then TOOLSERVER_* environment variables, then flags. Unknown keys and bad
// values stop start-up with a message naming the key.
package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Config is the whole configuration. The mapstructure tags are the YAML keys; the
// environment variable of a key is TOOLSERVER_ + the key upper-cased with dots as
// underscores (progress.flush_bytes → TOOLSERVER_PROGRESS_FLUSH_BYTES).
type Config struct {
	// Addr is the listen address; port 0 picks a free port (the log says which).
	Addr string `mapstructure:"addr"`
	// DataDir holds the embedded SQLite store, session workspaces and output logs.
	DataDir string `mapstructure:"data_dir"`
	// Store selects the store: empty for SQLite in DataDir, sqlite:PATH, or a
	// postgres:// URL.
	Store string `mapstructure:"store"`
	// StoreConnectTimeout is how long the daemon waits at start for a PostgreSQL that
	// cannot be reached yet, trying again with growing delays; 0 tries once.
	StoreConnectTimeout time.Duration `mapstructure:"store_connect_timeout"`
	// SQLite tunes the SQLite store (ignored with PostgreSQL).
	SQLite SQLiteConfig `mapstructure:"sqlite"`
	// ReplicaID names this process on call records; calls it left running are marked
	// failed when it starts again. Defaults to the host name.
	ReplicaID string `mapstructure:"replica_id"`
	// MaxBodyBytes caps request bodies.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// MaxListBytes bounds what one listing of calls or approvals reads of their
	// arguments and results; a listing that reaches it stops and says truncated.
	MaxListBytes int `mapstructure:"max_list_bytes"`
	// MaxToolResultTokens is the token budget of a result sent to the model; invalid or
	// ≤ 0 falls back to 12000.
	MaxToolResultTokens int `mapstructure:"max_tool_result_tokens"`
	// ShutdownTimeout is how long in-flight calls may run after SIGTERM before they are
	// cancelled.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// StreamKeepalive is how long an NDJSON stream may stay quiet before it writes a
	// keepalive line, for proxies that cut idle connections; 0: never.
	StreamKeepalive time.Duration `mapstructure:"stream_keepalive"`
	// ReadBodyTimeout bounds the time to receive a request's body, from the start of
	// its handling; past it the request is answered 408. 0: no limit.
	ReadBodyTimeout time.Duration `mapstructure:"read_body_timeout"`
	// WriteTimeout is how long a response may wait for its client to take any of its
	// bytes; past it the client is treated as gone. 0: no limit.
	WriteTimeout time.Duration `mapstructure:"write_timeout"`

	Log      LogConfig      `mapstructure:"log"`
	Tracing  TracingConfig  `mapstructure:"tracing"`
	Calls    CallsConfig    `mapstructure:"calls"`
	Sessions SessionsConfig `mapstructure:"sessions"`
	Progress ProgressConfig `mapstructure:"progress"`
	Sandbox  SandboxConfig  `mapstructure:"sandbox"`
	Web      WebConfig      `mapstructure:"web"`
	MCP      MCPConfig      `mapstructure:"mcp"`
	Skills   SkillsConfig   `mapstructure:"skills"`
	// MCPEndpoint serves sessions' tools to MCP clients at /mcp.
	MCPEndpoint MCPEndpointConfig `mapstructure:"mcp_endpoint"`
	// MCPServers are the upstream MCP servers whose tools are served as
	// mcp__{name}__{tool}. YAML only; servers can also be added at run time.
	MCPServers []MCPServerConfig `mapstructure:"mcp_servers"`
	// ToolGroups are bundles of tools a session switches on and off with reset_tools;
	// tools in no group are always available (the basic group). YAML only.
	ToolGroups []ToolGroupConfig `mapstructure:"tool_groups"`
	// ExternalTools are tools answered from outside the daemon (a person, a UI, another
	// system), like the built-in ask_user: their calls wait for POST
	// /v1/tool-calls/{id}/result. YAML only.
	ExternalTools []ExternalToolConfig `mapstructure:"external_tools"`
	Permissions   PermissionsConfig    `mapstructure:"permissions"`
	Auth          AuthConfig           `mapstructure:"auth"`
	CORS          CORSConfig           `mapstructure:"cors"`
	// OpenAPI are HTTP APIs whose operations are served as tools named
	// {prefix}__{operationId}. YAML only.
	OpenAPI []OpenAPIConfig `mapstructure:"openapi"`
	// ProviderTools are tools the model provider executes (hosted) or declares in its
	// own format (provider_defined, executed here by a handler). YAML only.
	ProviderTools []ProviderToolConfig `mapstructure:"provider_tools"`
	Chain         ChainConfig          `mapstructure:"chain"`
	// Retention deletes old call records and unused sessions; 0 keeps them forever.
	Retention RetentionConfig `mapstructure:"retention"`
	// ApprovalWebhook is told when an approval is requested and decided.
	ApprovalWebhook ApprovalWebhookConfig `mapstructure:"approval_webhook"`
	// Cluster is how replicas sharing one PostgreSQL find each other; unused with SQLite.
	Cluster ClusterConfig `mapstructure:"cluster"`

	// File is the config file that was read, if any (not a key).
	File string `mapstructure:"-"`
	// Warnings are problems that did not stop start-up (not a key).
	Warnings []string `mapstructure:"-"`
}

// AuthConfig configures API keys and per-key limits.
type AuthConfig struct {
	// Unauthenticated serves every request without a key, as an admin of the default
	// tenant. Refused unless addr is a loopback address.
	Unauthenticated bool `mapstructure:"unauthenticated"`
	// Keys declared here by SHA-256 (toolserverctl keys hash KEY prints it), next to
	// the keys created through the API. YAML only.
	Keys []AuthKeyConfig `mapstructure:"keys"`
	// RateLimit is a token bucket per key; 0 requests per second means no limit.
	RateLimit RateLimitConfig `mapstructure:"rate_limit"`
	// MaxConcurrentRequests caps the requests one key has in flight (NDJSON streams
	// included); 0 means no limit.
	MaxConcurrentRequests int `mapstructure:"max_concurrent_requests"`
}

// AuthKeyConfig is one key declared in the configuration.
type AuthKeyConfig struct {
	Name   string   `mapstructure:"name"`
	Tenant string   `mapstructure:"tenant"`
	Roles  []string `mapstructure:"roles"`
	SHA256 string   `mapstructure:"sha256"`
}

// RateLimitConfig is a token bucket.
type RateLimitConfig struct {
	RequestsPerSecond float64 `mapstructure:"requests_per_second"`
	Burst             int     `mapstructure:"burst"`
}

// CORSConfig lets web UIs on other origins call the API.
type CORSConfig struct {
	// AllowedOrigins lists origins (https://console.example.com, or * for any); none
	// disables CORS.
	AllowedOrigins []string `mapstructure:"allowed_origins"`
	// MaxAge is how long browsers may cache a preflight answer.
	MaxAge time.Duration `mapstructure:"max_age"`
}

// ClusterConfig configures replicas sharing one PostgreSQL database.
type ClusterConfig struct {
	// AdvertiseURL is the base URL other replicas reach this one at; empty derives it
	// from addr (an unspecified host becomes the host name).
	AdvertiseURL string `mapstructure:"advertise_url"`
	// Lease is how long a replica may go without a heartbeat before the others mark
	// its unfinished calls failed. It heartbeats every lease/3.
	Lease time.Duration `mapstructure:"lease"`
	// AnswerTimeout is how long a request forwarded to another replica waits for its
	// answer to begin before that replica is taken as out of reach.
	AnswerTimeout time.Duration `mapstructure:"answer_timeout"`
	// SessionLockConnections caps the connections holding sessions' advisory locks.
	SessionLockConnections int `mapstructure:"session_lock_connections"`
}

// LogConfig configures logging.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level"`
	// Format is json or text.
	Format string `mapstructure:"format"`
}

// TracingConfig turns on OpenTelemetry tracing (OTLP over HTTP); off by default.
type TracingConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Endpoint is the collector's OTLP/HTTP traces URL (no path: /v1/traces).
	Endpoint string `mapstructure:"endpoint"`
	// SampleRatio is the share of new traces recorded, 0 to 1; requests with a
	// traceparent follow their caller's decision.
	SampleRatio float64 `mapstructure:"sample_ratio"`
	// ServiceName is the service.name resource attribute.
	ServiceName string `mapstructure:"service_name"`
}

// CallsConfig bounds tool calls.
type CallsConfig struct {
	// DefaultTimeout is a call's deadline when neither its tool nor the request sets one.
	DefaultTimeout time.Duration `mapstructure:"default_timeout"`
	// MaxTimeout caps every call's deadline, whatever the tool or request asks.
	MaxTimeout time.Duration `mapstructure:"max_timeout"`
	// RecordFoldWindow is how long the record of a read-only call waits for the call's
	// result, so both are written as one row; 0 writes it when the call starts.
	RecordFoldWindow time.Duration `mapstructure:"record_fold_window"`
	// MaxBatchCalls caps the calls of one request; a larger batch is refused (400).
	MaxBatchCalls int `mapstructure:"max_batch_calls"`
}

// SQLiteConfig tunes the SQLite store.
type SQLiteConfig struct {
	// Synchronous is "full" (every commit synced: survives a power loss) or "normal"
	// (synced at checkpoints, every half second: survives the process dying, a power
	// loss can take back the last commits).
	Synchronous string `mapstructure:"synchronous"`
}

// SessionsConfig configures sessions.
type SessionsConfig struct {
	// WorkdirRoots are directories under which a session may set its workdir. Without
	// any, each session works in its own directory under data_dir/workspaces.
	WorkdirRoots []string `mapstructure:"workdir_roots"`
	// IdleTimeout drops a session from memory when nothing has used it for this long
	// (it is loaded from the store on its next use); 0 keeps every session in memory.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// MaxLive caps the sessions in memory (least recently used evicted first); 0: no cap.
	MaxLive int `mapstructure:"max_live"`
}

// ApprovalWebhookConfig is an HTTP endpoint told of approvals (Slack bridges, paging).
type ApprovalWebhookConfig struct {
	// URL receives the events; empty: none are sent.
	URL string `mapstructure:"url"`
	// SecretEnv names the environment variable holding the HMAC secret that signs them.
	SecretEnv string `mapstructure:"secret_env"`
	// Timeout bounds one delivery attempt.
	Timeout time.Duration `mapstructure:"timeout"`
}

// RetentionConfig bounds what the daemon keeps over time. 0 keeps forever (the default:
// turning retention on deletes data, so it is the operator's choice).
type RetentionConfig struct {
	// Calls: a finished call's record, and its decided approvals, are deleted this
	// long after the call finished.
	Calls time.Duration `mapstructure:"calls"`
	// Sessions: a session nothing used for this long is deleted, with its call
	// records, tasks and scratchpad and the workspace directory the daemon made for
	// it (never a workdir the client named).
	Sessions time.Duration `mapstructure:"sessions"`
}

// ProgressConfig configures the live tool_progress channel.
type ProgressConfig struct {
	// Enabled turns tool_progress events on.
	Enabled bool `mapstructure:"enabled"`
	// FlushIntervalMS is the coalescing window; 0 sends every write at once.
	FlushIntervalMS int `mapstructure:"flush_interval_ms"`
	// FlushBytes flushes a stream's buffer as soon as it holds this many bytes.
	FlushBytes int `mapstructure:"flush_bytes"`
}

// SandboxConfig configures where commands run.
type SandboxConfig struct {
	// Mode is local (commands start in the session's workdir as the daemon's user) or
	// isolated (namespaces: read-only host, writable workdir).
	Mode string `mapstructure:"mode"`
	// AllowNetwork lets isolated commands reach the network.
	AllowNetwork bool `mapstructure:"allow_network"`
	// OutputCapBytes caps each stream of a command's output log.
	OutputCapBytes int64 `mapstructure:"output_cap_bytes"`
	// Env ("NAME=value") is set for every command; EnvAllow names host variables
	// passed through.
	Env      []string `mapstructure:"env"`
	EnvAllow []string `mapstructure:"env_allow"`
	// WritableDirs are shared directories isolated commands may write (caches).
	WritableDirs []string `mapstructure:"writable_dirs"`
	// PidsLimit caps the tasks of one command where a pids cgroup is available;
	// -1 turns the limit off.
	PidsLimit int `mapstructure:"pids_limit"`
	// MemoryLimitBytes caps the memory of one command and all it starts where a
	// memory cgroup is available; 0 is half the memory the daemon may use, -1 turns
	// the limit off.
	MemoryLimitBytes int64 `mapstructure:"memory_limit_bytes"`
}

// SkillsConfig points at folders of Agent Skills (SKILL.md with frontmatter).
type SkillsConfig struct {
	// Dirs are scanned in order; a skill name found twice is taken from the first.
	Dirs []string `mapstructure:"dirs"`
	// Watch picks up changes on disk without a restart.
	Watch bool `mapstructure:"watch"`
	// PromptBudgetTokens bounds the skills part of a session's prompt fragment
	// (cl100k_base tokens): past it, skills are named without descriptions, then
	// counted in a closing line. At least 200.
	PromptBudgetTokens int `mapstructure:"prompt_budget_tokens"`
}

// MCPEndpointConfig configures the MCP endpoint (/mcp and /v1/sessions/{id}/mcp).
type MCPEndpointConfig struct {
	// Enabled serves the endpoint; off, its routes answer 404.
	Enabled bool `mapstructure:"enabled"`
	// SessionIdleTTL forgets MCP client sessions idle for this long (they
	// re-initialize); 0 keeps them until the client deletes them.
	SessionIdleTTL time.Duration `mapstructure:"session_idle_ttl"`
	// MaxSessions caps the MCP client sessions kept; past it the least recently
	// used of those with no request open are forgotten. 0: no cap.
	MaxSessions int `mapstructure:"max_sessions"`
	// ResumeWindow is how long a tools/call whose event stream broke runs on
	// without its client, for the client to resume the stream (Last-Event-ID) and
	// get its result; past it, the call is cancelled as by a client that went away.
	// 0 cancels at once.
	ResumeWindow time.Duration `mapstructure:"resume_window"`
}

// MCPConfig tunes the MCP proxy.
type MCPConfig struct {
	// PrefixMode names tools mcp__{server}__{tool} (always), only on a name clash
	// (on_collision), or never.
	PrefixMode string `mapstructure:"prefix_mode"`
	// HealthInterval is how often each server is pinged.
	HealthInterval time.Duration `mapstructure:"health_interval"`
	// MinBackoff is the delay before the first reconnection attempt of an outage; it
	// doubles with each failed attempt up to MaxBackoff.
	MinBackoff time.Duration `mapstructure:"min_backoff"`
	MaxBackoff time.Duration `mapstructure:"max_backoff"`
}

// MCPServerConfig declares one upstream MCP server.
type MCPServerConfig struct {
	Name           string            `mapstructure:"name"`
	Transport      string            `mapstructure:"transport"` // stdio, sse, streamable_http
	Command        string            `mapstructure:"command"`
	Args           []string          `mapstructure:"args"`
	Env            map[string]string `mapstructure:"env"`
	URL            string            `mapstructure:"url"`
	Headers        map[string]string `mapstructure:"headers"`
	ConnectTimeout time.Duration     `mapstructure:"connect_timeout"`
	CallTimeout    time.Duration     `mapstructure:"call_timeout"`
	Enabled        *bool             `mapstructure:"enabled"` // default true
	Prefix         string            `mapstructure:"prefix"`
	// Pooling is shared (default) or per_session; MaxSessions and
	// SessionIdleTimeout bound per_session upstream sessions.
	Pooling            string        `mapstructure:"pooling"`
	MaxSessions        int           `mapstructure:"max_sessions"`
	SessionIdleTimeout time.Duration `mapstructure:"session_idle_timeout"`
	// TrustAnnotations (default true) lets the server's readOnlyHint make its tools
	// read-only and low risk; false takes only destructiveHint from it.
	TrustAnnotations *bool `mapstructure:"trust_annotations"`
	// TaskInputWait, TaskPollMin, TaskPollMax and TaskPollDefault tune how a
	// task-required tool's task is followed (defaults 10s, 200ms, 5s, 1s).
	TaskInputWait   time.Duration `mapstructure:"task_input_wait"`
	TaskPollMin     time.Duration `mapstructure:"task_poll_min"`
	TaskPollMax     time.Duration `mapstructure:"task_poll_max"`
	TaskPollDefault time.Duration `mapstructure:"task_poll_default"`
}

// ToolGroupConfig declares one tool group.
type ToolGroupConfig struct {
	Name         string   `mapstructure:"name"`
	Description  string   `mapstructure:"description"`
	Instructions string   `mapstructure:"instructions"`
	Tools        []string `mapstructure:"tools"`       // tool name patterns
	MCPServers   []string `mapstructure:"mcp_servers"` // every tool of these servers
	Skills       []string `mapstructure:"skills"`      // skill name patterns
}

// ExternalToolConfig declares one external tool.
type ExternalToolConfig struct {
	Name        string         `mapstructure:"name"`
	Description string         `mapstructure:"description"`
	Parameters  map[string]any `mapstructure:"parameters"` // JSON Schema of the arguments
}

// OpenAPIConfig declares one OpenAPI source.
type OpenAPIConfig struct {
	Name             string            `mapstructure:"name"`
	Prefix           string            `mapstructure:"prefix"`   // default: name
	Spec             string            `mapstructure:"spec"`     // file path or http(s) URL
	BaseURL          string            `mapstructure:"base_url"` // overrides the document's servers
	Auth             OpenAPIAuthConfig `mapstructure:"auth"`
	Include          []string          `mapstructure:"include"` // operationId globs
	Exclude          []string          `mapstructure:"exclude"`
	Timeout          time.Duration     `mapstructure:"timeout"`
	FetchTimeout     time.Duration     `mapstructure:"fetch_timeout"`
	MaxResponseBytes int64             `mapstructure:"max_response_bytes"`
	// MaxFileBytes caps files sent from a session's working directory ({path}) and
	// binary answers saved in it.
	MaxFileBytes int64 `mapstructure:"max_file_bytes"`
}

// OpenAPIAuthConfig names the environment variables holding an API's credentials.
type OpenAPIAuthConfig struct {
	BearerTokenEnv string `mapstructure:"bearer_token_env"`
	APIKeyEnv      string `mapstructure:"api_key_env"`
	APIKeyHeader   string `mapstructure:"api_key_header"`
	APIKeyQuery    string `mapstructure:"api_key_query"`
	// HTTP Basic (Twilio: the account SID and the auth token).
	BasicUsernameEnv string `mapstructure:"basic_username_env"`
	BasicPasswordEnv string `mapstructure:"basic_password_env"`
	// OAuth2 client credentials grant: bearer tokens from token_url.
	OAuth2 OpenAPIOAuth2Config `mapstructure:"oauth2"`
}

// OpenAPIOAuth2Config is the OAuth2 client credentials grant of an OpenAPI source.
type OpenAPIOAuth2Config struct {
	TokenURL        string   `mapstructure:"token_url"`
	ClientIDEnv     string   `mapstructure:"client_id_env"`
	ClientSecretEnv string   `mapstructure:"client_secret_env"`
	Scopes          []string `mapstructure:"scopes"`
}

// ProviderToolConfig declares one hosted or provider-defined tool.
type ProviderToolConfig struct {
	Name        string `mapstructure:"name"`
	Kind        string `mapstructure:"kind"` // hosted or provider_defined
	Description string `mapstructure:"description"`
	// Specs are the native declarations by provider (openai, anthropic).
	Specs map[string]map[string]any `mapstructure:"specs"`
	// Handler executes a provider_defined tool: execute_command or external.
	Handler    string         `mapstructure:"handler"`
	Parameters map[string]any `mapstructure:"parameters"` // JSON Schema of the arguments
}

// PermissionsConfig is the operator's permission policy and approval settings.
type PermissionsConfig struct {
	// Allow, Ask and Deny are rules such as `execute_command(git status:*)`,
	// `write_file(src/**)` or `mcp__github__*`.
	Allow []string `mapstructure:"allow"`
	Ask   []string `mapstructure:"ask"`
	Deny  []string `mapstructure:"deny"`
	// RiskPolicy maps a risk level (safe, low, medium, high, critical) to allow, ask or
	// deny for calls no rule decided; missing levels keep their defaults.
	RiskPolicy map[string]string `mapstructure:"risk_policy"`
	// RiskOverrides sets the risk of tools by name or glob.
	RiskOverrides map[string]string `mapstructure:"risk_overrides"`
	// ApprovalTTL is how long an approval request waits for a decision before it
	// expires (the call is then denied).
	ApprovalTTL time.Duration `mapstructure:"approval_ttl"`
	// AutoApprove turns every ask into an allow. For development only.
	AutoApprove bool `mapstructure:"auto_approve"`
	// ReadDirs are absolute directories read-only commands may read without asking,
	// besides the session's working directory.
	ReadDirs []string `mapstructure:"read_dirs"`
}

// ChainConfig is the policy of tool_chain, the tool that runs a Starlark script calling
// the session's tools.
type ChainConfig struct {
	// Enabled registers tool_chain and artifact_read.
	Enabled bool `mapstructure:"enabled"`
	// MaxToolCalls is how many tool calls one script may make.
	MaxToolCalls int `mapstructure:"max_tool_calls"`
	// CallTimeout caps each chained call's deadline.
	CallTimeout time.Duration `mapstructure:"call_timeout"`
	// TotalTimeout bounds a whole script, calls and approval waits included.
	TotalTimeout time.Duration `mapstructure:"total_timeout"`
	// MaxInlineResultBytes: larger results are stored as artifacts (artifact_read).
	MaxInlineResultBytes int `mapstructure:"max_inline_result_bytes"`
	// ApprovalTimeout bounds how long a chained call waits for a person's decision.
	ApprovalTimeout time.Duration `mapstructure:"approval_timeout"`
	// MaxRiskWithoutApproval is the highest risk a chained call may run at without
	// approval, whatever rules and mode allow.
	MaxRiskWithoutApproval string `mapstructure:"max_risk_without_approval"`
	// MaxSteps bounds a script's own computation (Starlark execution steps).
	MaxSteps int64 `mapstructure:"max_steps"`
	// MaxMemoryBytes bounds what a script keeps; its worker process is bounded by the
	// kernel at twice this plus 64 MiB (docs/config.md).
	MaxMemoryBytes int64 `mapstructure:"max_memory_bytes"`
	// ArtifactBytesPerSession bounds the stored artifacts of one session.
	ArtifactBytesPerSession int64 `mapstructure:"artifact_bytes_per_session"`
	// ArtifactRetention is how long a session's artifacts are kept after their last
	// use (0: forever).
	ArtifactRetention time.Duration `mapstructure:"artifact_retention"`
}

// WebConfig configures web_fetch and web_search.
type WebConfig struct {
	Fetch  WebFetchConfig  `mapstructure:"fetch"`
	Search WebSearchConfig `mapstructure:"search"`
}

// WebFetchConfig configures web_fetch. Loopback, private, link-local and metadata
// addresses are refused unless allowed here.
type WebFetchConfig struct {
	// AllowHosts are host names (or *.suffix patterns, or IPs) web_fetch may reach even
	// when they resolve to internal addresses.
	AllowHosts []string `mapstructure:"allow_hosts"`
	// AllowCIDRs are internal address ranges web_fetch may reach.
	AllowCIDRs []string `mapstructure:"allow_cidrs"`
	// Proxy is an HTTP proxy URL for fetches; environment proxies are never used.
	Proxy string `mapstructure:"proxy"`
}

// WebSearchConfig selects web_search's provider; without one the tool is absent.
type WebSearchConfig struct {
	// Provider is searxng, brave, or empty (no web_search tool).
	Provider string `mapstructure:"provider"`
	// BaseURL is the SearXNG instance, or an override of Brave's API address.
	BaseURL string `mapstructure:"base_url"`
	// APIKey is Brave's subscription token (or a bearer token for SearXNG).
	APIKey string `mapstructure:"api_key"`
}

// Defaults returns the zero-configuration settings.
func Defaults() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "toolserverd"
	}
	return Config{
		Addr:                "127.0.0.1:8080",
		DataDir:             "data",
		ReplicaID:           host,
		StoreConnectTimeout: time.Minute,
		SQLite:              SQLiteConfig{Synchronous: "full"},
		MaxBodyBytes:        8 << 20,
		MaxListBytes:        32 << 20,
		MaxToolResultTokens: 12000,
		ShutdownTimeout:     30 * time.Second,
		StreamKeepalive:     15 * time.Second,
		ReadBodyTimeout:     time.Minute,
		WriteTimeout:        time.Minute,
		Log:                 LogConfig{Level: "info", Format: "json"},
		Tracing:             TracingConfig{Endpoint: "http://127.0.0.1:4318/v1/traces", SampleRatio: 1, ServiceName: "toolserverd"},
		Calls:               CallsConfig{DefaultTimeout: 2 * time.Minute, MaxTimeout: 30 * time.Minute, RecordFoldWindow: 50 * time.Millisecond, MaxBatchCalls: 256},
		Sessions:            SessionsConfig{IdleTimeout: 30 * time.Minute, MaxLive: 10000},
		Progress:            ProgressConfig{Enabled: true, FlushIntervalMS: 50, FlushBytes: 16384},
		Sandbox:             SandboxConfig{Mode: "local", OutputCapBytes: 64 << 20, PidsLimit: 1024},
		Permissions:         PermissionsConfig{ApprovalTTL: time.Hour},
		MCP:                 MCPConfig{PrefixMode: "always", HealthInterval: 15 * time.Second, MinBackoff: 250 * time.Millisecond, MaxBackoff: time.Minute},
		Skills:              SkillsConfig{Watch: true, PromptBudgetTokens: 4000},
		CORS:                CORSConfig{MaxAge: 10 * time.Minute},
		Chain: ChainConfig{Enabled: true, MaxToolCalls: 50, CallTimeout: 60 * time.Second, TotalTimeout: 300 * time.Second,
			MaxInlineResultBytes: 4096, ApprovalTimeout: 120 * time.Second, MaxRiskWithoutApproval: "medium",
			MaxSteps: 10_000_000, MaxMemoryBytes: 256 << 20, ArtifactBytesPerSession: 64 << 20, ArtifactRetention: 24 * time.Hour},
		MCPEndpoint:     MCPEndpointConfig{Enabled: true, SessionIdleTTL: 30 * time.Minute, MaxSessions: 10000, ResumeWindow: time.Minute},
		Cluster:         ClusterConfig{Lease: 30 * time.Second, AnswerTimeout: 10 * time.Second, SessionLockConnections: 32},
		ApprovalWebhook: ApprovalWebhookConfig{Timeout: 10 * time.Second},
	}
}

// ErrHelp is what Load returns when the flags ask for help (--help, -h); Usage is
// the answer.
var ErrHelp = errors.New("config: help requested")

// Usage describes the flags.
func Usage() string {
	fs, _ := flags()
	return "usage: toolserverd [flags]            serve\n" +
		"       toolserverd migrate [flags]    apply the store's pending migrations and exit\n\n" + fs.FlagUsages() +
		"\nEvery key is also read from the YAML file and from TOOLSERVER_* environment variables (docs/config.md).\n"
}

func flags() (*pflag.FlagSet, *string) {
	fs := pflag.NewFlagSet("toolserverd", pflag.ContinueOnError)
	fs.SetOutput(nopWriter{})
	file := fs.String("config", "", "YAML config file (TOOLSERVER_CONFIG)")
	fs.String("addr", "", "listen address (TOOLSERVER_ADDR)")
	fs.String("data-dir", "", "data directory (TOOLSERVER_DATA_DIR)")
	fs.String("store", "", "store: postgres://… or sqlite:PATH (TOOLSERVER_STORE)")
	fs.String("store-connect-timeout", "", "how long to wait at start for an unreachable PostgreSQL, e.g. 60s; 0 tries once (TOOLSERVER_STORE_CONNECT_TIMEOUT)")
	fs.String("log-level", "", "debug, info, warn or error (TOOLSERVER_LOG_LEVEL)")
	fs.String("log-format", "", "json or text (TOOLSERVER_LOG_FORMAT)")
	return fs, file
}

// Load reads the configuration from args (flags, without the program name) and the
// environment (as os.Environ returns it).
func Load(args, environ []string) (Config, error) {
	fs, file := flags()
	if err := fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
		return Config{}, ErrHelp
	} else if err != nil {
		return Config{}, fmt.Errorf("config: %w\n%s", err, fs.FlagUsages())
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}

	v := viper.New()
	setDefaults(v, "", reflect.ValueOf(Defaults()))
	var warnings []string
	env := envMap(environ)
	if *file == "" {
		*file = env["TOOLSERVER_CONFIG"]
	}
	if *file != "" {
		v.SetConfigFile(*file)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("config: read %s: %w", *file, err)
		}
	}
	known := map[string]bool{}
	for key := range keys(reflect.TypeOf(Config{}), "") {
		name := "TOOLSERVER_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		known[name] = true
		if val, ok := env[name]; ok {
			if key == "max_tool_result_tokens" {
				if n, err := strconv.Atoi(strings.TrimSpace(val)); err != nil || n <= 0 {
					warnings = append(warnings, fmt.Sprintf("%s=%q is not a positive integer; using %d", name, val, Defaults().MaxToolResultTokens))
					continue
				}
			}
			if _, isList := listKeys[key]; isList {
				v.Set(key, splitList(val))
				continue
			}
			v.Set(key, val)
		}
	}
	var stray []string
	for name := range env {
		if !known[name] && !otherVariables[name] {
			stray = append(stray, name)
		}
	}
	// The daemon is toolserverd, its variables' prefix TOOLSERVER_: a variable named
	// after the binary would otherwise be dropped without a word.
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if rest, ok := strings.CutPrefix(name, "TOOLSERVERD_"); ok && rest != "" {
			hint := ""
			if want := "TOOLSERVER_" + rest; known[want] || otherVariables[want] {
				hint = "; did you mean " + want + "?"
			}
			warnings = append(warnings, fmt.Sprintf("%s is ignored: configuration variables start with TOOLSERVER_, not TOOLSERVERD_%s", name, hint))
		}
	}
	sort.Strings(warnings)
	for flag, key := range map[string]string{"addr": "addr", "data-dir": "data_dir", "store": "store", "store-connect-timeout": "store_connect_timeout", "log-level": "log.level", "log-format": "log.format"} {
		if f := fs.Lookup(flag); f.Changed {
			v.Set(key, f.Value.String())
		}
	}

	var c Config
	if err := v.Unmarshal(&c, decoderOptions); err != nil {
		return Config{}, fmt.Errorf("config: %s", decodeErrorText(err))
	}
	if *file != "" {
		if err := keepCase(*file, &c); err != nil {
			return Config{}, err
		}
	}
	// A variable an *_env key names (approval_webhook.secret_env:
	// TOOLSERVER_WEBHOOK_SECRET) is read, not ignored.
	named := append(c.SecretEnvNames(), c.mcpEnvReferences()...)
	for _, name := range stray {
		if !slices.Contains(named, name) {
			warnings = append(warnings, fmt.Sprintf("%s is not a configuration key; ignored", name))
		}
	}
	sort.Strings(warnings)
	if c.MaxToolResultTokens <= 0 {
		warnings = append(warnings, fmt.Sprintf("max_tool_result_tokens %d is not positive; using %d", c.MaxToolResultTokens, Defaults().MaxToolResultTokens))
		c.MaxToolResultTokens = Defaults().MaxToolResultTokens
	}
	c.File = *file
	c.Warnings = warnings
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func decoderOptions(dc *mapstructure.DecoderConfig) {
	dc.ErrorUnused = true
	dc.WeaklyTypedInput = true
	dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
		strictOptionalBool,
		wholeNumber,
		bareNumberDuration,
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	)
}

// ownWildcard reports whether a cors.allowed_origins entry with a "*" stands for the
// names under one registrable domain (https://*.example.com, *.localhost), not for
// every host, or those under a public suffix (*.com, *.co.uk, *.github.io) where
// anyone can have a site.
func ownWildcard(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	d, ok := strings.CutPrefix(strings.ToLower(u.Hostname()), "*.")
	// A name with a trailing dot is the same name to DNS, and browsers send it as an
	// origin of its own (http://evil.com.), which the public suffix list does not know
	// in that form: *.com. is judged as *.com. An empty label (*.com..) is no name.
	d = strings.TrimSuffix(d, ".")
	if !ok || d == "" || strings.Contains(d, "*") || slices.Contains(strings.Split(d, "."), "") {
		return false
	}
	if d == "localhost" {
		return true // browsers resolve its names to loopback themselves
	}
	suffix, _ := publicsuffix.PublicSuffix(d)
	return suffix != d
}

// strictOptionalBool refuses anything but true or false for the optional switches
// (*bool: an MCP server's enabled and trust_annotations, which default to true):
// weak decoding read trust_annotations: 5 as true and "" as false, and a switch that
// decides whether approvals are asked should say what it means.
func strictOptionalBool(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf((*bool)(nil)) || data == nil || from.Kind() == reflect.Bool {
		return data, nil
	}
	what := fmt.Sprint(data)
	switch from.Kind() {
	case reflect.String:
		what = fmt.Sprintf("%q", data)
	case reflect.Slice, reflect.Array:
		what = "a list"
	case reflect.Map, reflect.Struct:
		what = "a map"
	}
	return nil, fmt.Errorf("must be true or false, not %s", what)
}

// wholeNumber refuses a fraction where an integer goes: weak decoding read
// max_body_bytes: 1.5 as 1 (and then blamed the 1) and 2048.9 as 2048.
func wholeNumber(from, to reflect.Type, data any) (any, error) {
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return data, nil
	}
	if to == reflect.TypeOf(time.Duration(0)) {
		return data, nil // bareNumberDuration's
	}
	if from.Kind() == reflect.Float32 || from.Kind() == reflect.Float64 {
		if f := reflect.ValueOf(data).Float(); f != math.Trunc(f) {
			return nil, fmt.Errorf("must be a whole number, not %v", data)
		}
	}
	return data, nil
}

// bareDecimal is a number as written without a unit ("30", "2.5"): "inf" or "1e3"
// are left to the duration parser, whose "1e3s" would be no advice.
var bareDecimal = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]*)?$`)

// bareNumberDuration refuses a number where a duration goes: YAML reads
// "approval_ttl: 3600" as a number, which would be 3600 nanoseconds, and the
// environment's and flags' "3600" got Go's "missing unit in duration". 0 needs none.
func bareNumberDuration(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(time.Duration(0)) || from == to {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		s := strings.TrimSpace(reflect.ValueOf(data).String())
		if f, err := strconv.ParseFloat(s, 64); err == nil && f != 0 && bareDecimal.MatchString(s) {
			return nil, fmt.Errorf("%s has no unit: write a duration such as %ss or %sm", s, s, s)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if !reflect.ValueOf(data).IsZero() {
			return nil, fmt.Errorf("%v has no unit: write a duration such as %vs or %vm", data, data, data)
		}
	}
	return data, nil
}

// keepCase decodes again, from the file as written, the YAML-only keys whose maps
// hold data rather than keys: viper lower-cases every map key it reads, which turned
// env: {GITHUB_TOKEN: …} into github_token, a JSON Schema's additionalProperties and
// camelCase property names into unknown words, and a risk override of pets__deletePet
// into one that matches no tool.
func keepCase(file string, c *Config) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("config: read %s: %w", file, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("config: read %s: %w", file, err)
	}
	// Keys above the data are matched as viper matched them, in any case.
	pick := func(m map[string]any, key string) (any, bool) {
		for k, v := range m {
			if strings.EqualFold(k, key) {
				return v, true
			}
		}
		return nil, false
	}
	var cased struct {
		MCPServers    []MCPServerConfig    `mapstructure:"mcp_servers"`
		ExternalTools []ExternalToolConfig `mapstructure:"external_tools"`
		ProviderTools []ProviderToolConfig `mapstructure:"provider_tools"`
		RiskOverrides map[string]string    `mapstructure:"risk_overrides"`
	}
	sections := map[string]any{}
	for _, key := range []string{"mcp_servers", "external_tools", "provider_tools"} {
		if v, ok := pick(raw, key); ok {
			sections[key] = v
		}
	}
	if p, ok := pick(raw, "permissions"); ok {
		if pm, ok := p.(map[string]any); ok {
			if v, ok := pick(pm, "risk_overrides"); ok {
				sections["risk_overrides"] = v
			}
		}
	}
	dc := &mapstructure.DecoderConfig{Result: &cased}
	decoderOptions(dc)
	d, err := mapstructure.NewDecoder(dc)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := d.Decode(sections); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if _, ok := sections["mcp_servers"]; ok {
		c.MCPServers = cased.MCPServers
	}
	if _, ok := sections["external_tools"]; ok {
		c.ExternalTools = cased.ExternalTools
	}
	if _, ok := sections["provider_tools"]; ok {
		c.ProviderTools = cased.ProviderTools
	}
	if _, ok := sections["risk_overrides"]; ok {
		c.Permissions.RiskOverrides = cased.RiskOverrides
	}
	return nil
}

// SecretEnvNames are the daemon's own environment variables that may hold secrets:
// TOOLSERVER_* (written as such: the store URL with its password, the web search
// key, toolserverctl's key), the variables the *_env keys name and, with a PostgreSQL
// store, libpq's PGPASSWORD, PGPASSFILE, PGSSLPASSWORD and PGSERVICEFILE (pgx
// reads them when the URL holds no password or key passphrase). Processes the
// daemon starts for others (stdio MCP servers) are not given them.
func (c *Config) SecretEnvNames() []string {
	names := []string{"TOOLSERVER_*"}
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if strings.HasPrefix(c.Store, "postgres://") || strings.HasPrefix(c.Store, "postgresql://") {
		add("PGPASSWORD")
		add("PGPASSFILE")
		// The passphrase of the client key (sslkey) of a store that authenticates
		// by certificate, and a service file, which may hold a password.
		add("PGSSLPASSWORD")
		add("PGSERVICEFILE")
	}
	add(c.ApprovalWebhook.SecretEnv)
	for _, o := range c.OpenAPI {
		a := o.Auth
		for _, n := range []string{a.BearerTokenEnv, a.APIKeyEnv, a.BasicUsernameEnv, a.BasicPasswordEnv, a.OAuth2.ClientIDEnv, a.OAuth2.ClientSecretEnv} {
			add(n)
		}
	}
	return names
}

// mcpEnvReferences are the variables the MCP servers' url, headers and env name as
// ${NAME} (mcpproxy.ExpandEnv reads them; $${ is a literal ${). They are not all
// secrets (PATH extended for one server), so SecretEnvNames leaves them to the proxy.
func (c *Config) mcpEnvReferences() []string {
	var names []string
	for _, m := range c.MCPServers {
		vals := append([]string{m.URL}, slices.Collect(maps.Values(m.Headers))...)
		for _, v := range append(vals, slices.Collect(maps.Values(m.Env))...) {
			for _, ref := range envReference.FindAllStringSubmatch(v, -1) {
				if ref[1] == "" {
					names = append(names, ref[2])
				}
			}
		}
	}
	return names
}

// envReference is a ${NAME} in an MCP server's values (mcpproxy.ExpandEnv reads them),
// with the $ before it when it is written $${NAME}, a literal.
var envReference = regexp.MustCompile(`(\$?)\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// otherVariables share the TOOLSERVER_ prefix without being keys: the config file's
// path and toolserverctl's.
var otherVariables = map[string]bool{"TOOLSERVER_CONFIG": true, "TOOLSERVER_URL": true, "TOOLSERVER_API_KEY": true}

// listKeys are the keys whose environment value is a comma-separated list.
var listKeys = map[string]struct{}{"sessions.workdir_roots": {}, "web.fetch.allow_hosts": {}, "web.fetch.allow_cidrs": {},
	"permissions.allow": {}, "permissions.ask": {}, "permissions.deny": {}, "permissions.read_dirs": {}, "skills.dirs": {}, "cors.allowed_origins": {},
	"sandbox.env": {}, "sandbox.env_allow": {}, "sandbox.writable_dirs": {}}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks every key, naming the first bad one.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil {
		bad("addr", "%q is not host:port (%v)", c.Addr, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("addr", "port %q is not a number from 0 to 65535", port)
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	if c.Store != "" && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") && !strings.HasPrefix(c.Store, "sqlite:") {
		bad("store", "%q must be empty (SQLite in data_dir), sqlite:PATH or a postgres:// URL", redact(c.Store))
	}
	if c.StoreConnectTimeout < 0 {
		bad("store_connect_timeout", "must not be negative (0 tries the store once)")
	}
	if c.SQLite.Synchronous != "full" && c.SQLite.Synchronous != "normal" {
		bad("sqlite.synchronous", "%q is not full or normal", c.SQLite.Synchronous)
	}
	if c.ReplicaID == "" {
		bad("replica_id", "must not be empty")
	}
	if c.MaxBodyBytes < 1024 {
		bad("max_body_bytes", "%d is below 1024", c.MaxBodyBytes)
	}
	if c.MaxListBytes < 1<<20 {
		bad("max_list_bytes", "%d is below 1048576 (1 MiB)", c.MaxListBytes)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must not be negative")
	}
	if c.StreamKeepalive < 0 {
		bad("stream_keepalive", "must not be negative")
	}
	if c.ReadBodyTimeout < 0 {
		bad("read_body_timeout", "must not be negative")
	}
	if c.WriteTimeout < 0 {
		bad("write_timeout", "must not be negative")
	}
	if u := c.Cluster.AdvertiseURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad("cluster.advertise_url", "%q is not an http(s) base URL like http://10.0.0.7:8080", u)
		}
	}
	if c.Cluster.Lease < time.Second {
		bad("cluster.lease", "%s is below 1s", c.Cluster.Lease)
	}
	if c.Cluster.AnswerTimeout < time.Second {
		bad("cluster.answer_timeout", "%s is below 1s", c.Cluster.AnswerTimeout)
	}
	if c.Cluster.SessionLockConnections < 1 {
		bad("cluster.session_lock_connections", "must be at least 1")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		bad("log.format", "%q is not json or text", c.Log.Format)
	}
	// Checked whether tracing is on or not: a wrong value should not wait for the day
	// someone turns tracing on to stop the daemon.
	if c.Tracing.SampleRatio < 0 || c.Tracing.SampleRatio > 1 {
		bad("tracing.sample_ratio", "%v is not between 0 and 1", c.Tracing.SampleRatio)
	}
	if c.Tracing.Enabled {
		if u, err := url.Parse(c.Tracing.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("tracing.endpoint", "%q is not an http(s) URL", c.Tracing.Endpoint)
		}
		if c.Tracing.ServiceName == "" {
			bad("tracing.service_name", "must not be empty")
		}
	}
	if c.Calls.DefaultTimeout <= 0 {
		bad("calls.default_timeout", "must be positive")
	}
	if c.Calls.RecordFoldWindow < 0 || c.Calls.RecordFoldWindow > 10*time.Second {
		bad("calls.record_fold_window", "%s must be from 0 to 10s", c.Calls.RecordFoldWindow)
	}
	if c.Calls.MaxTimeout < c.Calls.DefaultTimeout {
		bad("calls.max_timeout", "%s is below calls.default_timeout %s", c.Calls.MaxTimeout, c.Calls.DefaultTimeout)
	}
	if c.Calls.MaxBatchCalls < 1 {
		bad("calls.max_batch_calls", "%d is below 1", c.Calls.MaxBatchCalls)
	}
	// "idle_timeout: 30ms" would evict constantly.
	if d := c.Sessions.IdleTimeout; d < 0 || (d > 0 && d < time.Second) {
		bad("sessions.idle_timeout", "%s must be 0 (never evict) or at least 1s", d)
	}
	if w := c.ApprovalWebhook; w.URL != "" {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("approval_webhook.url", "%q: want an http or https URL", w.URL)
		}
	}
	if c.ApprovalWebhook.Timeout <= 0 {
		bad("approval_webhook.timeout", "%s: must be positive", c.ApprovalWebhook.Timeout)
	}
	// A retention of seconds would delete a call's record while its client still reads it.
	for _, r := range []struct {
		key string
		d   time.Duration
	}{{"retention.calls", c.Retention.Calls}, {"retention.sessions", c.Retention.Sessions}} {
		if r.d < 0 || (r.d > 0 && r.d < time.Minute) {
			bad(r.key, "%s must be 0 (keep forever) or at least 1m", r.d)
		}
	}
	if c.Skills.PromptBudgetTokens < 200 {
		bad("skills.prompt_budget_tokens", "%d is below 200 (the heading and closing line of the skills list need about 100 tokens)", c.Skills.PromptBudgetTokens)
	}
	if c.Sessions.MaxLive < 0 {
		bad("sessions.max_live", "%d is negative (0 means no cap)", c.Sessions.MaxLive)
	}
	for _, r := range c.Sessions.WorkdirRoots {
		if !filepath.IsAbs(r) {
			bad("sessions.workdir_roots", "%q is not an absolute path", r)
		}
	}
	if c.Progress.FlushIntervalMS < 0 {
		bad("progress.flush_interval_ms", "must not be negative")
	}
	if c.MCPEndpoint.SessionIdleTTL < 0 {
		bad("mcp_endpoint.session_idle_ttl", "must not be negative")
	}
	if c.MCPEndpoint.ResumeWindow < 0 {
		bad("mcp_endpoint.resume_window", "must not be negative")
	}
	if c.MCPEndpoint.MaxSessions < 0 {
		bad("mcp_endpoint.max_sessions", "%d is negative (0 means no cap)", c.MCPEndpoint.MaxSessions)
	}
	if c.Progress.FlushBytes < 1 {
		bad("progress.flush_bytes", "must be at least 1")
	}
	switch c.Sandbox.Mode {
	case "local", "isolated":
	default:
		bad("sandbox.mode", "%q is not local or isolated", c.Sandbox.Mode)
	}
	switch c.Web.Search.Provider {
	case "":
	case "searxng", "brave":
		if c.Web.Search.Provider == "searxng" && c.Web.Search.BaseURL == "" {
			bad("web.search.base_url", "is required for the searxng provider")
		}
		if c.Web.Search.Provider == "brave" && c.Web.Search.APIKey == "" {
			bad("web.search.api_key", "is required for the brave provider")
		}
	default:
		bad("web.search.provider", "%q is not searxng, brave or empty", c.Web.Search.Provider)
	}
	switch c.MCP.PrefixMode {
	case "always", "on_collision", "never":
	default:
		bad("mcp.prefix_mode", "%q is not always, on_collision or never", c.MCP.PrefixMode)
	}
	if c.MCP.HealthInterval <= 0 {
		bad("mcp.health_interval", "must be positive")
	}
	switch {
	case c.MCP.MinBackoff <= 0:
		bad("mcp.min_backoff", "must be positive")
	case c.MCP.MaxBackoff < c.MCP.MinBackoff:
		bad("mcp.max_backoff", "%s is below mcp.min_backoff %s", c.MCP.MaxBackoff, c.MCP.MinBackoff)
	}
	externals := map[string]int{}
	for i, t := range c.ExternalTools {
		if t.Name == "" || t.Description == "" {
			bad(fmt.Sprintf("external_tools[%d]", i), "needs a name and a description")
		}
		if j, dup := externals[t.Name]; dup && t.Name != "" {
			bad(fmt.Sprintf("external_tools[%d].name", i), "%q is also the name of external_tools[%d]", t.Name, j)
		}
		externals[t.Name] = i
	}
	seen := map[string]bool{}
	for i, o := range c.OpenAPI {
		if o.Name == "" || o.Spec == "" {
			bad(fmt.Sprintf("openapi[%d]", i), "needs a name and a spec (file path or URL)")
		}
		if seen[o.Name] {
			bad(fmt.Sprintf("openapi[%d]", i), "name %q is used twice", o.Name)
		}
		seen[o.Name] = true
	}
	// A malformed pattern would match nothing, silently: the tools meant stay in the
	// basic group, always on.
	for i, g := range c.ToolGroups {
		for _, f := range []struct {
			key  string
			pats []string
		}{{"tools", g.Tools}, {"skills", g.Skills}} {
			for j, p := range f.pats {
				if _, err := path.Match(p, ""); err != nil {
					bad(fmt.Sprintf("tool_groups[%d].%s[%d]", i, f.key, j), "%q is not a valid name pattern (* ? [a-z] \\x)", p)
				}
			}
		}
	}
	for i, p := range c.ProviderTools {
		if p.Name == "" || (p.Kind != "hosted" && p.Kind != "provider_defined") {
			bad(fmt.Sprintf("provider_tools[%d]", i), "needs a name and kind hosted or provider_defined")
		}
	}
	if c.Permissions.ApprovalTTL <= 0 {
		bad("permissions.approval_ttl", "must be positive")
	}
	for _, d := range c.Permissions.ReadDirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) == "/" {
			bad("permissions.read_dirs", "%q must be an absolute directory other than /", d)
		}
	}
	if c.Chain.MaxToolCalls < 1 {
		bad("chain.max_tool_calls", "must be at least 1")
	}
	for key, d := range map[string]time.Duration{"chain.call_timeout": c.Chain.CallTimeout, "chain.total_timeout": c.Chain.TotalTimeout, "chain.approval_timeout": c.Chain.ApprovalTimeout} {
		if d <= 0 {
			bad(key, "must be positive")
		}
	}
	if c.Chain.MaxMemoryBytes < 1<<20 {
		bad("chain.max_memory_bytes", "%d is below 1048576 (1 MiB)", c.Chain.MaxMemoryBytes)
	}
	if c.Chain.MaxInlineResultBytes < 256 {
		bad("chain.max_inline_result_bytes", "%d is below 256", c.Chain.MaxInlineResultBytes)
	}
	switch c.Chain.MaxRiskWithoutApproval {
	case "safe", "low", "medium", "high", "critical":
	default:
		bad("chain.max_risk_without_approval", "%q is not safe, low, medium, high or critical", c.Chain.MaxRiskWithoutApproval)
	}
	if c.Chain.MaxSteps < 1000 {
		bad("chain.max_steps", "%d is below 1000", c.Chain.MaxSteps)
	}
	if c.Chain.ArtifactBytesPerSession < int64(c.Chain.MaxInlineResultBytes) {
		bad("chain.artifact_bytes_per_session", "%d is below chain.max_inline_result_bytes", c.Chain.ArtifactBytesPerSession)
	}
	if c.Chain.ArtifactRetention < 0 {
		bad("chain.artifact_retention", "must not be negative")
	}
	if c.Sandbox.PidsLimit < -1 || c.Sandbox.PidsLimit == 0 {
		bad("sandbox.pids_limit", "%d: want a positive number, or -1 for no limit", c.Sandbox.PidsLimit)
	}
	if m := c.Sandbox.MemoryLimitBytes; m < -1 || (m > 0 && m < 16<<20) {
		bad("sandbox.memory_limit_bytes", "%d: want at least 16777216 (16 MiB), 0 for half the memory the daemon may use, or -1 for no limit", m)
	}
	if c.Sandbox.OutputCapBytes < 1024 {
		bad("sandbox.output_cap_bytes", "%d is below 1024", c.Sandbox.OutputCapBytes)
	}
	if c.Auth.Unauthenticated {
		if host, _, err := net.SplitHostPort(c.Addr); err == nil && !isLoopback(host) {
			bad("auth.unauthenticated", "is only allowed on a loopback addr (127.0.0.1, ::1, localhost), not %q", c.Addr)
		}
	}
	if c.Auth.RateLimit.RequestsPerSecond < 0 || c.Auth.RateLimit.Burst < 0 {
		bad("auth.rate_limit", "must not be negative")
	}
	if c.Auth.MaxConcurrentRequests < 0 {
		bad("auth.max_concurrent_requests", "must not be negative")
	}
	for i, k := range c.Auth.Keys {
		if len(k.SHA256) != 64 || len(k.Roles) == 0 {
			bad(fmt.Sprintf("auth.keys[%d]", i), "needs sha256 (64 hex digits) and roles")
		}
	}
	for _, o := range c.CORS.AllowedOrigins {
		// Browsers send scheme://host[:port]; go-chi/cors allows one * in the host.
		if u, err := url.Parse(o); o != "*" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.Count(o, "*") > 1 ||
			// A * stands for whole leading labels: https://*example.com would let
			// https://evilexample.com in.
			strings.Contains(u.Hostname(), "*") && !strings.HasPrefix(u.Hostname(), "*.")) {
			bad("cors.allowed_origins", "%q is not an origin like https://console.example.com or https://*.example.com (no path, not even /; one * at most, standing for the labels before a dot) or *", o)
			continue
		}
		if o == "*" {
			continue
		}
		// As browsers send it, or it matches nothing: a host in ASCII (punycode), the
		// default port left out.
		u, _ := url.Parse(o)
		if host := u.Hostname(); !isASCII(host) {
			ascii, err := idna.Lookup.ToASCII(strings.ReplaceAll(host, "*", "x"))
			if err == nil && strings.HasPrefix(host, "*") {
				ascii = "*" + ascii[1:]
			}
			bad("cors.allowed_origins", "%q names its host in Unicode; browsers send its ASCII form (%s), so write that", o, ascii)
		}
		if strings.HasSuffix(u.Host, ":") {
			// url.Parse takes an empty port; browsers never send the colon.
			bad("cors.allowed_origins", "%q ends its host with a colon and no port, which no browser sends: write %s://%s", o, u.Scheme, u.Hostname())
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			switch {
			case err != nil || n < 1 || n > 65535:
				bad("cors.allowed_origins", "%q has port %q, which no browser sends: a port is a number from 1 to 65535", o, p)
			case (u.Scheme == "https" && n == 443) || (u.Scheme == "http" && n == 80):
				bad("cors.allowed_origins", "%q names the scheme's default port, which browsers leave out of an origin: write %s://%s", o, u.Scheme, u.Hostname())
			case strconv.Itoa(n) != p:
				// Browsers send the port as a plain number: :080 would match nothing.
				bad("cors.allowed_origins", "%q writes its port with leading zeros, which browsers leave out: write %s://%s:%d", o, u.Scheme, u.Hostname(), n)
			}
		}
	}
	if c.Auth.Unauthenticated && slices.Contains(c.CORS.AllowedOrigins, "*") {
		// Without keys, every request is an admin's: any page the user opens could
		// run commands through the daemon.
		bad("cors.allowed_origins", "* is refused with auth.unauthenticated: every web page a browser on this machine opens could call the daemon as an admin (run commands, decide approvals); list the origins of your own pages instead, or use keys")
	}
	if c.Auth.Unauthenticated {
		for _, o := range c.CORS.AllowedOrigins {
			if o != "*" && strings.Contains(o, "*") && !ownWildcard(o) {
				// As wide as *: https://* is every https page, https://*.com every
				// .com site's, https://*.github.io anyone's GitHub Pages.
				bad("cors.allowed_origins", "%q is refused with auth.unauthenticated: its * matches pages of sites anyone can make, which could call the daemon as an admin; with auth.unauthenticated a * may only stand for the names under a domain of your own (https://*.example.com)", o)
			}
		}
	}
	if c.CORS.MaxAge < 0 {
		bad("cors.max_age", "must not be negative")
	}
	return errors.Join(errs...)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redact hides a password in a URL for messages.
func redact(s string) string {
	if i := strings.Index(s, "@"); i > 0 {
		if j := strings.Index(s, "://"); j > 0 && j < i {
			return s[:j+3] + "…@" + s[i+1:]
		}
	}
	return s
}

// Keys lists every configuration key, for the config reference and its test.
func Keys() []string {
	var out []string
	for k := range keys(reflect.TypeOf(Config{}), "") {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func keys(t reflect.Type, prefix string) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" || tag == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			for k := range keys(f.Type, prefix+tag+".") {
				out[k] = true
			}
			continue
		}
		out[prefix+tag] = true
	}
	return out
}

func setDefaults(v *viper.Viper, prefix string, val reflect.Value) {
	t := val.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" || tag == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			setDefaults(v, prefix+tag+".", val.Field(i))
			continue
		}
		v.SetDefault(prefix+tag, val.Field(i).Interface())
	}
}

func envMap(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "TOOLSERVER_") {
			m[k] = v
		}
	}
	return m
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// invalidKeysRE matches mapstructure's report of unknown keys: "'calls' has invalid
// keys: timeout, x" ('config.Config' for the top level).
var invalidKeysRE = regexp.MustCompile(`^'([^']*)' has invalid keys: (.+)$`)

// decodeErrorText is a decoding error as an operator reads it: one line per problem,
// joined, without mapstructure's preamble, and an unknown key named by its full path
// ("unknown key calls.timeout") rather than as the Go type it would go in.
func decodeErrorText(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "decoding failed due to the following error(s)") {
			continue
		}
		m := invalidKeysRE.FindStringSubmatch(line)
		if m == nil {
			out = append(out, line)
			continue
		}
		prefix := m[1] + "."
		if m[1] == "config.Config" || m[1] == "" {
			prefix = ""
		}
		for _, k := range strings.Split(m[2], ", ") {
			out = append(out, "unknown key "+prefix+k)
		}
	}
	if len(out) == 0 {
		return err.Error()
	}
	return strings.Join(out, "; ")
}

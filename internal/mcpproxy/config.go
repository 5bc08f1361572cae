// Package mcpproxy connects toolserverd to upstream MCP servers (stdio, SSE and
// streamable HTTP, through mark3labs/mcp-go) and registers their tools in a
// toolmgr.Manager: one supervisor goroutine per server connects, health-checks,
// reconnects with backoff and keeps the registry in step with the server's tool list.
//
// A server that goes down keeps its tools registered: they answer with an
// "unavailable" error at once until the server is back. Session whitelists, the
// schemas a model was given and prompt caches therefore stay stable across an
// upstream crash, and the model learns that the tool is down rather than unknown.
// Tools of a server that never connected are not known, so nothing is registered
// for it; Remove unregisters a server's tools.
package mcpproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Transports.
const (
	TransportStdio          = "stdio"
	TransportSSE            = "sse"
	TransportStreamableHTTP = "streamable_http"
)

// Prefix modes: how upstream tool names become registry names.
const (
	// PrefixAlways names every tool mcp__{server}__{tool} (or Prefix + tool).
	PrefixAlways = "always"
	// PrefixOnCollision uses the bare tool name unless it is taken, then the prefixed one.
	PrefixOnCollision = "on_collision"
	// PrefixNever uses bare names and refuses a tool whose name is taken.
	PrefixNever = "never"
)

// Defaults.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	DefaultHealthInterval = 15 * time.Second
	DefaultMinBackoff     = 250 * time.Millisecond
	DefaultMaxBackoff     = time.Minute
)

var serverName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// ServerConfig declares one upstream MCP server.
type ServerConfig struct {
	// Name identifies the server: [a-z0-9_-]+, unique. It appears in tool names
	// (mcp__{name}__{tool}), in tool sources (mcp:{name}) and in metrics.
	Name string `json:"name"`
	// Transport is stdio, sse or streamable_http.
	Transport string `json:"transport"`
	// Command, Args and Env start a stdio server. Env is added to the daemon's
	// environment, less the variables of Config.PrivateEnv the server does not name.
	// In the configuration file, values of Env and Headers may take the daemon's
	// variables as ${NAME} (see ExpandEnv).
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach an HTTP server: the /sse endpoint for sse, the MCP
	// endpoint (usually /mcp) for streamable_http.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// ConnectTimeout bounds one connection attempt (start, initialize, list tools).
	ConnectTimeout time.Duration `json:"-"`
	// CallTimeout bounds every tool call; a shorter deadline of the call wins.
	CallTimeout time.Duration `json:"-"`
	// Enabled servers are connected; disabled ones are listed in Status only.
	Enabled bool `json:"enabled"`
	// Prefix, when set, replaces the whole "mcp__{name}__" prefix of tool names.
	Prefix string `json:"prefix,omitempty"`
	// Pooling is shared (default: one upstream session serves every daemon session)
	// or per_session (each daemon session gets its own upstream session — for stdio,
	// its own process — for servers that keep per-client state).
	Pooling string `json:"pooling,omitempty"`
	// MaxSessions caps the upstream sessions of a per_session server (default 32).
	MaxSessions int `json:"max_sessions,omitempty"`
	// SessionIdleTimeout closes a per_session upstream session unused this long
	// (default 10m).
	SessionIdleTimeout time.Duration `json:"-"`
	// Dir is a stdio server's working directory (from Config.WorkDir); "" for the
	// daemon's.
	Dir string `json:"-"`
	// TrustAnnotations (nil: true) lets the server's tool annotations lower what
	// the permission check asks for: readOnlyHint makes a tool read-only,
	// concurrency-safe and low risk. MCP tells clients to treat annotations as
	// untrusted unless the server is; set false for a server whose word on that is
	// not to be taken. destructiveHint raises a tool's risk either way.
	TrustAnnotations *bool `json:"trust_annotations,omitempty"`
	// TaskInputWait is how long a task may stay input_required before it is
	// cancelled (default 10s; see callTask).
	TaskInputWait time.Duration `json:"-"`
	// TaskPollMin and TaskPollMax bound the interval of tasks/get, the server's
	// pollInterval when it gives one, TaskPollDefault when it does not (defaults
	// 200ms, 5s, 1s).
	TaskPollMin     time.Duration `json:"-"`
	TaskPollMax     time.Duration `json:"-"`
	TaskPollDefault time.Duration `json:"-"`

	// fromEnv are the values ExpandEnv took from the environment: redacted like
	// the values of headers, whatever key holds them.
	fromEnv []string
	// privateEnv is the Config's PrivateEnv (set by the Manager).
	privateEnv []string
}

// trustsAnnotations reports whether the server's readOnlyHint is taken at its word.
func (c *ServerConfig) trustsAnnotations() bool {
	return c.TrustAnnotations == nil || *c.TrustAnnotations
}

// Pooling modes.
const (
	PoolShared     = "shared"
	PoolPerSession = "per_session"
)

// Per-session pooling defaults.
const (
	DefaultMaxSessions        = 32
	DefaultSessionIdleTimeout = 10 * time.Minute
)

// Task defaults (see callTask).
const (
	DefaultTaskInputWait   = 10 * time.Second
	DefaultTaskPollMin     = 200 * time.Millisecond
	DefaultTaskPollMax     = 5 * time.Second
	DefaultTaskPollDefault = time.Second
)

// serverConfigJSON is ServerConfig on the wire and in the store: durations as Go
// duration strings ("30s"), so that a stored config reads well.
// A missing "enabled" means enabled.
type serverConfigJSON struct {
	serverConfigFields
	ConnectTimeout     string `json:"connect_timeout,omitempty"`
	CallTimeout        string `json:"call_timeout,omitempty"`
	SessionIdleTimeout string `json:"session_idle_timeout,omitempty"`
	TaskInputWait      string `json:"task_input_wait,omitempty"`
	TaskPollMin        string `json:"task_poll_min,omitempty"`
	TaskPollMax        string `json:"task_poll_max,omitempty"`
	TaskPollDefault    string `json:"task_poll_default,omitempty"`
	Enabled            *bool  `json:"enabled,omitempty"`
}

// serverConfigFields has ServerConfig's fields without its JSON methods.
type serverConfigFields ServerConfig

// MarshalJSON writes durations as strings.
func (c ServerConfig) MarshalJSON() ([]byte, error) {
	j := serverConfigJSON{serverConfigFields: serverConfigFields(c), Enabled: &c.Enabled}
	if c.ConnectTimeout > 0 {
		j.ConnectTimeout = c.ConnectTimeout.String()
	}
	if c.CallTimeout > 0 {
		j.CallTimeout = c.CallTimeout.String()
	}
	for _, d := range []struct {
		v   time.Duration
		dst *string
	}{{c.SessionIdleTimeout, &j.SessionIdleTimeout}, {c.TaskInputWait, &j.TaskInputWait}, {c.TaskPollMin, &j.TaskPollMin},
		{c.TaskPollMax, &j.TaskPollMax}, {c.TaskPollDefault, &j.TaskPollDefault}} {
		if d.v > 0 {
			*d.dst = d.v.String()
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *ServerConfig) UnmarshalJSON(b []byte) error {
	var j serverConfigJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	return c.fromJSON(j)
}

// ServerConfigShape is the type DecodeServerConfig decodes a client's configuration
// into, for jsontext.FindDuplicateIn: its env and headers are maps, their keys taken
// as written.
var ServerConfigShape = reflect.TypeFor[serverConfigJSON]()

// DecodeServerConfig reads a configuration a client sent: as UnmarshalJSON does, but
// a field it does not know (a misspelt call_timeout) is an error, not ignored.
func DecodeServerConfig(b []byte) (ServerConfig, error) {
	var j serverConfigJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return ServerConfig{}, err
	}
	var c ServerConfig
	return c, c.fromJSON(j)
}

func (c *ServerConfig) fromJSON(j serverConfigJSON) error {
	*c = ServerConfig(j.serverConfigFields)
	c.Enabled = j.Enabled == nil || *j.Enabled
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{j.ConnectTimeout, &c.ConnectTimeout}, {j.CallTimeout, &c.CallTimeout}, {j.SessionIdleTimeout, &c.SessionIdleTimeout},
		{j.TaskInputWait, &c.TaskInputWait}, {j.TaskPollMin, &c.TaskPollMin}, {j.TaskPollMax, &c.TaskPollMax}, {j.TaskPollDefault, &c.TaskPollDefault}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return fmt.Errorf("mcp server %q: %w", c.Name, err)
		}
		*d.dst = v
	}
	return nil
}

// Validate checks the fields the transport needs.
func (c *ServerConfig) Validate() error {
	if !serverName.MatchString(c.Name) {
		return fmt.Errorf("mcp server name %q must match [a-z0-9_-]+", c.Name)
	}
	if strings.Contains(c.Name, "__") {
		// mcp__a__b__x would read as tool b__x of server a: the names, whitelists
		// and permission rules written for a (mcp__a__*) would cover it.
		return fmt.Errorf(`mcp server name %q must not contain "__", which separates the server from the tool in mcp__{server}__{tool}`, c.Name)
	}
	var errs []error
	switch c.Transport {
	case TransportStdio:
		if c.Command == "" {
			errs = append(errs, errors.New("command is required for transport stdio"))
		}
		if c.URL != "" {
			errs = append(errs, errors.New("url is not used by transport stdio"))
		}
	case TransportSSE, TransportStreamableHTTP:
		if c.URL == "" {
			errs = append(errs, fmt.Errorf("url is required for transport %s", c.Transport))
		} else if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("url %q must be an absolute http or https URL", c.shownURL())) // the error is logged and answered
		}
		if c.Command != "" {
			errs = append(errs, fmt.Errorf("command is not used by transport %s", c.Transport))
		}
	default:
		errs = append(errs, fmt.Errorf("transport %q must be stdio, sse or streamable_http", c.Transport))
	}
	if c.ConnectTimeout < 0 || c.CallTimeout < 0 || c.SessionIdleTimeout < 0 {
		errs = append(errs, errors.New("timeouts must not be negative"))
	}
	switch c.Pooling {
	case "", PoolShared, PoolPerSession:
	default:
		errs = append(errs, fmt.Errorf("pooling %q must be shared or per_session", c.Pooling))
	}
	if c.MaxSessions < 0 {
		errs = append(errs, errors.New("max_sessions must not be negative"))
	}
	// One header in any case: which value the server got would depend on map order.
	names := slices.Sorted(maps.Keys(c.Headers))
	seen := map[string]string{}
	for _, k := range names {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if first, ok := seen[ck]; ok {
			errs = append(errs, fmt.Errorf("headers %q and %q name one header: send it once", first, k))
			continue
		}
		seen[ck] = k
	}
	errs = append(errs, c.validateTasks()...)
	if c.Prefix != "" && !validToolName.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q may only contain [a-zA-Z0-9_-]", c.Prefix))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mcp server %s: %w", c.Name, err)
	}
	return nil
}

// validateTasks checks the task settings: none negative, and, with the defaults
// filled in, task_poll_min ≤ task_poll_default ≤ task_poll_max. tasks/get is bounded
// by task_poll_max too, so it must leave a request time to be answered.
func (c *ServerConfig) validateTasks() []error {
	var errs []error
	if c.TaskInputWait < 0 || c.TaskPollMin < 0 || c.TaskPollMax < 0 || c.TaskPollDefault < 0 {
		return []error{errors.New("task_input_wait and task_poll_min, task_poll_max, task_poll_default must not be negative")}
	}
	d := c.withDefaults()
	if d.TaskPollMin < minTaskPoll {
		errs = append(errs, fmt.Errorf("task_poll_min %s must be at least %s (a server's tasks/get must not be asked in a busy loop)", d.TaskPollMin, minTaskPoll))
	}
	if d.TaskPollMin > d.TaskPollMax {
		errs = append(errs, fmt.Errorf("task_poll_min %s must not be above task_poll_max %s", d.TaskPollMin, d.TaskPollMax))
	}
	if d.TaskPollDefault < d.TaskPollMin || d.TaskPollDefault > d.TaskPollMax {
		errs = append(errs, fmt.Errorf("task_poll_default %s must lie within task_poll_min %s and task_poll_max %s", d.TaskPollDefault, d.TaskPollMin, d.TaskPollMax))
	}
	return errs
}

// minTaskPoll is the shortest task_poll_min taken.
const minTaskPoll = 10 * time.Millisecond

// withDefaults fills zero timeouts.
func (c ServerConfig) withDefaults() ServerConfig {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Pooling == "" {
		c.Pooling = PoolShared
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.SessionIdleTimeout == 0 {
		c.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if c.TaskInputWait == 0 {
		c.TaskInputWait = DefaultTaskInputWait
	}
	// A bound left out gives way to the other one given (task_poll_max: 100ms alone
	// polls every 100ms), and the default lies within them.
	switch {
	case c.TaskPollMin == 0 && c.TaskPollMax == 0:
		c.TaskPollMin, c.TaskPollMax = DefaultTaskPollMin, DefaultTaskPollMax
	case c.TaskPollMin == 0:
		c.TaskPollMin = min(DefaultTaskPollMin, c.TaskPollMax)
	case c.TaskPollMax == 0:
		c.TaskPollMax = max(DefaultTaskPollMax, c.TaskPollMin)
	}
	if c.TaskPollDefault == 0 {
		c.TaskPollDefault = min(max(DefaultTaskPollDefault, c.TaskPollMin), c.TaskPollMax)
	}
	return c
}

// namespaceClash says why two servers cannot run side by side: one's prefix begins
// the other's (mcp__ev__ and mcp__ev_x__ do not; mcp__ev__ and a prefix set to
// mcp__ev__ or mcp__ev__x_ do), so that the names, whitelists and permission rules
// written for one (mcp__ev__*) would cover tools of the other, and tool names
// would go to whichever server sorts first. "" if they can.
func namespaceClash(a, b *ServerConfig) string {
	pa, pb := a.prefix(), b.prefix()
	wide := pa
	switch {
	case strings.HasPrefix(pb, pa):
	case strings.HasPrefix(pa, pb):
		wide = pb
	default:
		return ""
	}
	return fmt.Sprintf("the tool names of mcp server %s (%s…) and of mcp server %s (%s…) overlap: "+
		"names, session whitelists and permission rules written for %s* would cover tools of both; choose another name or prefix",
		a.Name, pa, b.Name, pb, wide)
}

// prefix is what PrefixAlways puts before the upstream tool name.
func (c *ServerConfig) prefix() string {
	if c.Prefix != "" {
		return c.Prefix
	}
	return "mcp__" + c.Name + "__"
}

// Config is the proxy's configuration.
type Config struct {
	// Servers declared by the operator. Servers added at run time are persisted in
	// the ServerStore, if one is given, and loaded again at Start.
	Servers []ServerConfig
	// PrefixMode is always (default), on_collision or never.
	PrefixMode string
	// HealthInterval is how often a connected server is pinged (default 15s).
	HealthInterval time.Duration
	// MinBackoff is the delay before the first retry of an outage (default 250ms);
	// it doubles with each failed attempt, up to MaxBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps the delay between reconnection attempts (default 1m).
	MaxBackoff time.Duration
	// WorkDir holds the working directories of stdio servers: each runs in
	// WorkDir/{name}, made when it starts. Empty: they run in the daemon's, which
	// deployments make the data directory (the store, every session's workspace),
	// where a tool writing files relative to its own (Playwright's browser_snapshot
	// with a filename, marked read-only) would write.
	WorkDir string
	// PrivateEnv names the daemon's own variables, which stdio servers do not
	// inherit unless their env names them: NAME, or PREFIX* for every variable that
	// begins with PREFIX (TOOLSERVER_*). Its store URL, keys and the secrets its
	// other keys read are no server's business; the rest of the environment (PATH,
	// HOME, the API keys set for the servers) is passed on, as servers rely on it.
	PrivateEnv []string
}

// Validate checks the configuration, every server in it, and that names are unique.
func (c *Config) Validate() error {
	var errs []error
	switch c.PrefixMode {
	case "", PrefixAlways, PrefixOnCollision, PrefixNever:
	default:
		errs = append(errs, fmt.Errorf("mcp prefix mode %q must be always, on_collision or never", c.PrefixMode))
	}
	if c.HealthInterval < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 {
		errs = append(errs, errors.New("mcp health interval and backoffs must not be negative"))
	}
	if c.MinBackoff > 0 && c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff {
		errs = append(errs, fmt.Errorf("mcp min backoff %s is above max backoff %s", c.MinBackoff, c.MaxBackoff))
	}
	seen := map[string]bool{}
	for i := range c.Servers {
		s := &c.Servers[i]
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("mcp server %q is declared twice", s.Name))
			continue
		}
		seen[s.Name] = true
		for j := range i {
			if o := &c.Servers[j]; o.Name != s.Name {
				if clash := namespaceClash(o, s); clash != "" {
					errs = append(errs, fmt.Errorf("mcp server %q: %s", s.Name, clash))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.PrefixMode == "" {
		c.PrefixMode = PrefixAlways
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = min(DefaultMinBackoff, c.MaxBackoff)
	}
	return c
}

// State is where a server is in its life.
type State string

const (
	// StateConnecting: a connection attempt is under way (first, or after a failure).
	StateConnecting State = "connecting"
	// StateReady: connected; its tools answer.
	StateReady State = "ready"
	// StateFailed: the last attempt failed or the connection was lost; a retry is
	// scheduled with backoff (ServerStatus.NextAttempt). Calls fail at once.
	StateFailed State = "failed"
	// StateDisabled: configured with enabled: false.
	StateDisabled State = "disabled"
	// StateSkipped: a server in the store that is not run: its stored configuration
	// does not parse or validate, or its tool names overlap a server's there is
	// (LastError says which). It stays so until it is deleted (DELETE removes it).
	StateSkipped State = "skipped"
)

// ServerStatus is what Status reports for one server.
type ServerStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	State     State  `json:"state"`
	Tools     int    `json:"tools"`
	// LastError is why the last connection attempt failed or the last connection
	// ended; it stays after the server recovers.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when LastError happened, so a recovered server's old error is
	// not read as a current one.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Since is when State last changed: during an outage, the latest attempt.
	Since time.Time `json:"since"`
	// DownSince is when the server was last ready (when it was added, if it never
	// was), over every attempt of the outage; zero while it is ready or disabled.
	DownSince time.Time `json:"down_since,omitzero"`
	Restarts  int       `json:"restarts"`
	// NextAttempt is when a failed server is tried again (zero unless failed).
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// Notes are naming decisions and refusals: renamed on collision, refused
	// under prefix mode never, a schema the registry rejected.
	Notes []string `json:"notes,omitempty"`
	// Persisted servers were added at run time and are kept in the store.
	Persisted bool `json:"persisted,omitempty"`
	// UpstreamSessions counts the open upstream sessions of a per_session server.
	UpstreamSessions int `json:"upstream_sessions,omitempty"`
	// TrustAnnotations says whether the server's readOnlyHint annotations are
	// trusted (its configuration's trust_annotations).
	TrustAnnotations bool `json:"trust_annotations"`
}

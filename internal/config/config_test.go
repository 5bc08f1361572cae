package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultsAreValid(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.DataDir != "data" || c.Store != "" || c.MaxToolResultTokens != 12000 || !c.Progress.Enabled || c.Progress.FlushIntervalMS != 50 {
		t.Fatalf("defaults = %+v", c)
	}
}

// TestStoreConnectTimeout: a minute by default; the file, the environment and the flag
// set it, in that order of precedence; 0 is allowed (try once).
func TestStoreConnectTimeout(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("store_connect_timeout: 2m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want time.Duration
	}{
		{"default", nil, nil, time.Minute},
		{"file", []string{"--config", file}, nil, 2 * time.Minute},
		{"env over file", []string{"--config", file}, []string{"TOOLSERVER_STORE_CONNECT_TIMEOUT=0"}, 0},
		{"flag over env", []string{"--config", file, "--store-connect-timeout", "5s"}, []string{"TOOLSERVER_STORE_CONNECT_TIMEOUT=0"}, 5 * time.Second},
	} {
		c, err := Load(tc.args, tc.env)
		if err != nil || c.StoreConnectTimeout != tc.want {
			t.Errorf("%s: store_connect_timeout %s, %v; want %s", tc.name, c.StoreConnectTimeout, err, tc.want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "addr: 127.0.0.1:9000\ndata_dir: /var/lib/x\ncalls:\n  default_timeout: 45s\nprogress:\n  flush_bytes: 1024\nsessions:\n  workdir_roots: [/srv/a, /srv/b]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TOOLSERVER_ADDR=127.0.0.1:9001", "TOOLSERVER_PROGRESS_FLUSH_INTERVAL_MS=0", "TOOLSERVER_PROGRESS_ENABLED=false", "TOOLSERVER_SESSIONS_WORKDIR_ROOTS=/srv/c, /srv/d", "TOOLSERVER_MCP_MAX_BACKOFF=10s", "OTHER=1"}
	c, err := Load([]string{"--config", file, "--addr", "127.0.0.1:0"}, env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"flag beats env and file", c.Addr, "127.0.0.1:0"},
		{"file beats default", c.DataDir, "/var/lib/x"},
		{"file duration", c.Calls.DefaultTimeout, 45 * time.Second},
		{"file nested int", c.Progress.FlushBytes, 1024},
		{"env int zero", c.Progress.FlushIntervalMS, 0},
		{"env bool", c.Progress.Enabled, false},
		{"env list beats file", strings.Join(c.Sessions.WorkdirRoots, "|"), "/srv/c|/srv/d"},
		{"default kept", c.Calls.MaxTimeout, 30 * time.Minute},
		{"default duration kept", c.Chain.ArtifactRetention, 24 * time.Hour},
		{"default backoff kept", c.MCP.MinBackoff, 250 * time.Millisecond},
		{"env backoff", c.MCP.MaxBackoff, 10 * time.Second},
		{"file recorded", c.File, file},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	c, err = Load([]string{"--data-dir", "/tmp/d", "--store", "postgres://u:p@127.0.0.1/db"}, []string{"TOOLSERVER_DATA_DIR=/nope"})
	if err != nil || c.DataDir != "/tmp/d" || c.Store != "postgres://u:p@127.0.0.1/db" {
		t.Fatalf("flags: %+v %v", c, err)
	}
	c, err = Load(nil, []string{"TOOLSERVER_CONFIG=" + file})
	if err != nil || c.Addr != "127.0.0.1:9000" {
		t.Fatalf("TOOLSERVER_CONFIG: %v %v", c.Addr, err)
	}
}

func TestInvalidConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(s string) string {
		f := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+time.Now().Format("150405.000000000")+".yaml")
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad addr", []string{"--addr", "localhost"}, nil, "addr"},
		{"bad port", nil, []string{"TOOLSERVER_ADDR=127.0.0.1:99999"}, "addr"},
		{"bad store", []string{"--store", "mysql://x"}, nil, "store"},
		{"bad level", []string{"--log-level", "loud"}, nil, "log.level"},
		{"negative store wait", nil, []string{"TOOLSERVER_STORE_CONNECT_TIMEOUT=-1s"}, "store_connect_timeout"},
		{"bare store wait", []string{"--store-connect-timeout", "60"}, nil, "store_connect_timeout"},
		{"bad duration", nil, []string{"TOOLSERVER_CALLS_DEFAULT_TIMEOUT=soon"}, "calls.default_timeout"},
		{"max below default", nil, []string{"TOOLSERVER_CALLS_MAX_TIMEOUT=1s"}, "calls.max_timeout"},
		{"relative root", nil, []string{"TOOLSERVER_SESSIONS_WORKDIR_ROOTS=rel/dir"}, "sessions.workdir_roots"},
		{"bad sandbox", nil, []string{"TOOLSERVER_SANDBOX_MODE=docker"}, "sandbox.mode"},
		{"tiny answer timeout", nil, []string{"TOOLSERVER_CLUSTER_ANSWER_TIMEOUT=100ms"}, "cluster.answer_timeout"},
		{"tiny list budget", nil, []string{"TOOLSERVER_MAX_LIST_BYTES=65536"}, "max_list_bytes"},
		{"tiny memory limit", nil, []string{"TOOLSERVER_SANDBOX_MEMORY_LIMIT_BYTES=1048576"}, "sandbox.memory_limit_bytes"},
		{"negative interval", nil, []string{"TOOLSERVER_PROGRESS_FLUSH_INTERVAL_MS=-1"}, "progress.flush_interval_ms"},
		{"unknown key in file", []string{"--config", write("adr: 1\n")}, nil, "config: unknown key adr"},
		{"unknown nested key", []string{"--config", write("calls:\n  timeout: 1s\n")}, nil, "config: unknown key calls.timeout"},
		{"unknown key in a list", []string{"--config", write("mcp_servers:\n  - {name: a, transport: stdio, command: x, comand: y}\n")}, nil, "config: unknown key mcp_servers[0].comand"},
		{"wrong type in file", []string{"--config", write("max_body_bytes: lots\n")}, nil, "max_body_bytes"},
		{"missing file", []string{"--config", "/nonexistent.yaml"}, nil, "nonexistent.yaml"},
		{"unknown flag", []string{"--nope"}, nil, "nope"},
		{"unauthenticated off loopback", []string{"--addr", "0.0.0.0:8080"}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "auth.unauthenticated"},
		{"unauthenticated on all interfaces", []string{"--addr", ":8080"}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "auth.unauthenticated"},
		{"unauthenticated for any page", []string{"--config", write("cors:\n  allowed_origins: [\"https://console.example.com\", \"*\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins: * is refused with auth.unauthenticated"},
		// A wildcard as wide as *: every page of a scheme, of a top-level domain, or of a
		// suffix anyone can host pages under.
		{"unauthenticated for any https page", []string{"--config", write("cors:\n  allowed_origins: [\"https://*\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"unauthenticated for any http page on a port", []string{"--config", write("cors:\n  allowed_origins: [\"http://*:3000\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"unauthenticated for any .com page", []string{"--config", write("cors:\n  allowed_origins: [\"https://*.com\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"unauthenticated for any github.io page", []string{"--config", write("cors:\n  allowed_origins: [\"https://*.GitHub.io\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"unauthenticated for any co.uk page", []string{"--config", write("cors:\n  allowed_origins: [\"https://*.co.uk\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		// A name with a trailing dot is the same name to DNS, and browsers send it as its
		// own origin (http://evil.com.): *.com. is as wide as *.com.
		{"unauthenticated for any .com. page", []string{"--config", write("cors:\n  allowed_origins: [\"http://*.com.\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"unauthenticated for any github.io. page", []string{"--config", write("cors:\n  allowed_origins: [\"https://*.github.io.\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"unauthenticated for any .com.. page", []string{"--config", write("cors:\n  allowed_origins: [\"https://*.com..\"]\n")}, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true"}, "cors.allowed_origins"},
		{"short key hash", []string{"--config", write("auth:\n  keys:\n    - {name: x, roles: [agent], sha256: abc}\n")}, nil, "auth.keys[0]"},
		{"negative rate", nil, []string{"TOOLSERVER_AUTH_RATE_LIMIT_REQUESTS_PER_SECOND=-1"}, "auth.rate_limit"},
		{"chain risk", nil, []string{"TOOLSERVER_CHAIN_MAX_RISK_WITHOUT_APPROVAL=extreme"}, "chain.max_risk_without_approval"},
		{"chain steps", []string{"--config", write("chain:\n  max_steps: 10\n")}, nil, "chain.max_steps"},
		{"chain timeout", nil, []string{"TOOLSERVER_CHAIN_TOTAL_TIMEOUT=0s"}, "chain.total_timeout"},
		{"negative artifact retention", nil, []string{"TOOLSERVER_CHAIN_ARTIFACT_RETENTION=-1h"}, "chain.artifact_retention"},
		{"batch cap zero", nil, []string{"TOOLSERVER_CALLS_MAX_BATCH_CALLS=0"}, "calls.max_batch_calls"},
		{"batch cap not a number", nil, []string{"TOOLSERVER_CALLS_MAX_BATCH_CALLS=many"}, "calls.max_batch_calls"},
		{"negative idle timeout", nil, []string{"TOOLSERVER_SESSIONS_IDLE_TIMEOUT=-1m"}, "sessions.idle_timeout"},
		{"idle timeout without unit", []string{"--config", write("sessions:\n  idle_timeout: 30\n")}, nil, "sessions.idle_timeout"},
		{"negative live cap", nil, []string{"TOOLSERVER_SESSIONS_MAX_LIVE=-1"}, "sessions.max_live"},
		{"negative call retention", nil, []string{"TOOLSERVER_RETENTION_CALLS=-1h"}, "retention.calls"},
		{"call retention of seconds", nil, []string{"TOOLSERVER_RETENTION_CALLS=30s"}, "retention.calls"},
		{"call retention not a duration", nil, []string{"TOOLSERVER_RETENTION_CALLS=weekly"}, "retention.calls"},
		{"session retention of seconds", []string{"--config", write("retention:\n  sessions: 59s\n")}, nil, "retention.sessions"},
		{"negative session retention", nil, []string{"TOOLSERVER_RETENTION_SESSIONS=-720h"}, "retention.sessions"},
		{"negative body read timeout", nil, []string{"TOOLSERVER_READ_BODY_TIMEOUT=-1s"}, "read_body_timeout"},
		{"body read timeout without unit", []string{"--config", write("read_body_timeout: 60\n")}, nil, "read_body_timeout"},
		{"negative write timeout", nil, []string{"TOOLSERVER_WRITE_TIMEOUT=-1s"}, "write_timeout"},
		{"negative resume window", nil, []string{"TOOLSERVER_MCP_ENDPOINT_RESUME_WINDOW=-1s"}, "mcp_endpoint.resume_window"},
		{"zero min backoff", nil, []string{"TOOLSERVER_MCP_MIN_BACKOFF=0s"}, "mcp.min_backoff"},
		{"max backoff below min", []string{"--config", write("mcp:\n  min_backoff: 5s\n  max_backoff: 1s\n")}, nil, "mcp.max_backoff"},
		{"fraction for an integer", []string{"--config", write("max_body_bytes: 1.5\n")}, nil, "'max_body_bytes' must be a whole number, not 1.5"},
		{"large fraction for an integer", []string{"--config", write("max_body_bytes: 2048.9\n")}, nil, "max_body_bytes"},
		{"sample ratio with tracing off", []string{"--config", write("tracing:\n  sample_ratio: 2\n")}, nil, "tracing.sample_ratio"},
		{"relative read dir", nil, []string{"TOOLSERVER_PERMISSIONS_READ_DIRS=/usr/local/go,src"}, "permissions.read_dirs"},
		{"root as read dir", []string{"--config", write("permissions:\n  read_dirs: [/]\n")}, nil, "permissions.read_dirs"},
		{"bad tool group pattern", []string{"--config", write("tool_groups:\n  - {name: files, description: f, tools: [write_file, \"read_[file\"]}\n")}, nil, "tool_groups[0].tools[1]"},
		{"bad tool group skill pattern", []string{"--config", write("tool_groups:\n  - {name: docs, description: d, skills: [\"pdf\\\\\"]}\n")}, nil, "tool_groups[0].skills[0]"},
		{"external tool twice", []string{"--config", write("external_tools:\n  - {name: ask, description: a}\n  - {name: ask, description: b}\n")}, nil, "external_tools[1].name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.args, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v does not name %q", err, c.want)
			}
		})
	}
}

// TestBatchCapDefault: a batch holds at most 256 calls unless configured otherwise.
func TestBatchCapDefault(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, nil)
	if err != nil || c.Calls.MaxBatchCalls != 256 {
		t.Fatalf("max_batch_calls %d (%v), want 256", c.Calls.MaxBatchCalls, err)
	}
	c, err = Load(nil, []string{"TOOLSERVER_CALLS_MAX_BATCH_CALLS=1000"})
	if err != nil || c.Calls.MaxBatchCalls != 1000 {
		t.Fatalf("max_batch_calls %d (%v), want 1000", c.Calls.MaxBatchCalls, err)
	}
}

// TestSessionEvictionDefaults: sessions leave memory after 30 idle minutes and at most
// 10000 stay; 0 turns eviction and the cap off.
func TestSessionEvictionDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, nil)
	if err != nil || c.Sessions.IdleTimeout != 30*time.Minute || c.Sessions.MaxLive != 10000 {
		t.Fatalf("idle_timeout %s, max_live %d (%v)", c.Sessions.IdleTimeout, c.Sessions.MaxLive, err)
	}
	c, err = Load(nil, []string{"TOOLSERVER_SESSIONS_IDLE_TIMEOUT=0", "TOOLSERVER_SESSIONS_MAX_LIVE=0"})
	if err != nil || c.Sessions.IdleTimeout != 0 || c.Sessions.MaxLive != 0 {
		t.Fatalf("0 not accepted: %+v %v", c.Sessions, err)
	}
	c, err = Load(nil, []string{"TOOLSERVER_SESSIONS_IDLE_TIMEOUT=1s"})
	if err != nil || c.Sessions.IdleTimeout != time.Second {
		t.Fatalf("1s not accepted: %+v %v", c.Sessions, err)
	}
}

// TestRetentionDefaultsKeepForever: without the keys nothing is deleted (an upgrade
// must not delete anyone's data), and the keys read as durations from the file and
// the environment.
func TestRetentionDefaultsKeepForever(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, nil)
	if err != nil || c.Retention.Calls != 0 || c.Retention.Sessions != 0 {
		t.Fatalf("defaults: %+v, %v; want 0 and 0", c.Retention, err)
	}
	f := filepath.Join(t.TempDir(), "r.yaml")
	if err := os.WriteFile(f, []byte("retention:\n  calls: 168h\n  sessions: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load([]string{"--config", f}, []string{"TOOLSERVER_RETENTION_SESSIONS=720h"})
	if err != nil || c.Retention.Calls != 168*time.Hour || c.Retention.Sessions != 720*time.Hour {
		t.Fatalf("from file and env: %+v, %v", c.Retention, err)
	}
}

// TestReadBodyTimeoutDefault: a request has a minute to arrive; 0 lifts the limit.
func TestReadBodyTimeoutDefault(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, nil)
	if err != nil || c.ReadBodyTimeout != time.Minute {
		t.Fatalf("read_body_timeout %s (%v), want 1m", c.ReadBodyTimeout, err)
	}
	c, err = Load(nil, []string{"TOOLSERVER_READ_BODY_TIMEOUT=0"})
	if err != nil || c.ReadBodyTimeout != 0 {
		t.Fatalf("0 not accepted: %s %v", c.ReadBodyTimeout, err)
	}
}

func TestArtifactRetentionZeroKeepsForever(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, []string{"TOOLSERVER_CHAIN_ARTIFACT_RETENTION=0"})
	if err != nil || c.Chain.ArtifactRetention != 0 {
		t.Fatalf("retention %v, err %v; want 0 accepted", c.Chain.ArtifactRetention, err)
	}
}

func TestMaxToolResultTokensFallsBack(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"abc", "0", "-5", ""} {
		c, err := Load(nil, []string{"TOOLSERVER_MAX_TOOL_RESULT_TOKENS=" + v})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if c.MaxToolResultTokens != 12000 || len(c.Warnings) != 1 {
			t.Errorf("%q: tokens %d warnings %v", v, c.MaxToolResultTokens, c.Warnings)
		}
	}
	c, err := Load(nil, []string{"TOOLSERVER_MAX_TOOL_RESULT_TOKENS=3000"})
	if err != nil || c.MaxToolResultTokens != 3000 {
		t.Fatalf("valid value: %d %v", c.MaxToolResultTokens, err)
	}
}

// TestSkillsPromptBudget: skills.prompt_budget_tokens defaults to 4000, is read from
// the environment, and one too small for the list's heading and closing line stops
// start-up naming the key.
func TestSkillsPromptBudget(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, nil)
	if err != nil || c.Skills.PromptBudgetTokens != 4000 || c.Validate() != nil {
		t.Fatalf("default: %d %v %v", c.Skills.PromptBudgetTokens, err, c.Validate())
	}
	c, err = Load(nil, []string{"TOOLSERVER_SKILLS_PROMPT_BUDGET_TOKENS=8000"})
	if err != nil || c.Skills.PromptBudgetTokens != 8000 || c.Validate() != nil {
		t.Fatalf("8000: %d %v %v", c.Skills.PromptBudgetTokens, err, c.Validate())
	}
	if _, err = Load(nil, []string{"TOOLSERVER_SKILLS_PROMPT_BUDGET_TOKENS=100"}); err == nil || !strings.Contains(err.Error(), "skills.prompt_budget_tokens") {
		t.Fatalf("100: %v", err)
	}
}

// TestReferenceDocumentsEveryKey keeps docs/config.md and deploy/config.example.yaml
// in step with the Config struct.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"../../docs/config.md", "../../deploy/config.example.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range Keys() {
			leaf := k[strings.LastIndex(k, ".")+1:]
			if f == "../../docs/config.md" && !strings.Contains(string(b), "`"+k+"`") {
				t.Errorf("%s does not document %s", f, k)
			}
			if f != "../../docs/config.md" && !strings.Contains(string(b), leaf+":") {
				t.Errorf("%s has no %s", f, k)
			}
		}
	}
}

func TestOpenAPIAndProviderToolsFromYAML(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `openapi:
  - name: pets
    spec: https://example.com/openapi.json
    auth: {api_key_env: PETS_KEY, api_key_header: X-API-Key}
    include: ["get*"]
    timeout: 5s
    max_file_bytes: 1048576
provider_tools:
  - name: web_search
    kind: hosted
    specs:
      anthropic: {type: web_search_20250305, max_uses: 5}
  - name: bash
    kind: provider_defined
    handler: execute_command
    specs: {anthropic: {type: bash_20250124}}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := c.OpenAPI[0]
	if o.Name != "pets" || o.Auth.APIKeyHeader != "X-API-Key" || o.Timeout != 5*time.Second || o.Include[0] != "get*" || o.MaxFileBytes != 1<<20 {
		t.Errorf("openapi = %+v", o)
	}
	p := c.ProviderTools[0]
	if p.Kind != "hosted" || p.Specs["anthropic"]["type"] != "web_search_20250305" || c.ProviderTools[1].Handler != "execute_command" {
		t.Errorf("provider_tools = %+v", c.ProviderTools)
	}
	if err := os.WriteFile(file, []byte("openapi:\n  - name: a\n  - name: a\n    spec: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--config", file}, nil); err == nil || !strings.Contains(err.Error(), "openapi[0]") || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("bad openapi entries: %v", err)
	}
}

// TestYAMLOnlyMapsKeepTheirCase: viper lower-cases every key it reads, but in these
// maps the keys are data: environment variable names, JSON Schema keywords and
// property names, tool names.
func TestYAMLOnlyMapsKeepTheirCase(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `permissions:
  risk_overrides: {pets__deletePet: critical, "mcp__GitHub__*": high}
mcp_servers:
  - name: gh
    transport: stdio
    command: /bin/true
    env: {GITHUB_TOKEN: x}
    headers: {X-Api-Key: y}
external_tools:
  - name: review
    description: Ask a reviewer.
    parameters: {type: object, required: [prURL], additionalProperties: false, properties: {prURL: {type: string, minLength: 1}}}
provider_tools:
  - name: computer
    kind: provider_defined
    handler: external
    specs: {anthropic: {type: computer_20250124, displayWidthPx: 1024}}
    parameters: {type: object, properties: {screenShot: {type: boolean}}}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	params := c.ExternalTools[0].Parameters
	props, _ := params["properties"].(map[string]any)
	checks := []struct {
		name string
		ok   bool
	}{
		{"risk override of a camelCase tool", c.Permissions.RiskOverrides["pets__deletePet"] == "critical"},
		{"risk override glob", c.Permissions.RiskOverrides["mcp__GitHub__*"] == "high"},
		{"MCP server env name", c.MCPServers[0].Env["GITHUB_TOKEN"] == "x"},
		{"JSON Schema keyword", params["additionalProperties"] == false},
		{"JSON Schema property", props["prURL"] != nil},
		{"provider spec field", c.ProviderTools[0].Specs["anthropic"]["displayWidthPx"] == 1024},
		{"provider tool parameters", c.ProviderTools[0].Parameters["properties"].(map[string]any)["screenShot"] != nil},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: case lost\n%+v\n%+v\n%+v\n%+v", ch.name, c.Permissions.RiskOverrides, c.MCPServers, c.ExternalTools, c.ProviderTools)
		}
	}
}

// TestDurationsNeedAUnit: a bare number in YAML is not read as nanoseconds (which made
// "approval_ttl: 3600" expire every approval at once and "health_interval: 15" ping
// MCP servers in a loop); it stops start-up naming the key, as it does in the
// environment. 0 needs no unit.
func TestDurationsNeedAUnit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct{ yaml, key string }{
		{"shutdown_timeout: 30\n", "shutdown_timeout"},
		{"permissions:\n  approval_ttl: 3600\n", "permissions.approval_ttl"},
		{"mcp:\n  health_interval: 15\n", "mcp.health_interval"},
		{"cors:\n  max_age: 1.5\n", "cors.max_age"},
		{"retention:\n  calls: 86400\n", "retention.calls"},
		{"retention:\n  sessions: 720\n", "retention.sessions"},
		{"mcp_servers:\n  - {name: a, transport: stdio, command: x, connect_timeout: 5}\n", "connect_timeout"},
		{"openapi:\n  - {name: a, spec: x, timeout: 30}\n", "timeout"},
	}
	for i, c := range cases {
		f := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		if err := os.WriteFile(f, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", f}, nil)
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), "unit") {
			t.Errorf("%q: error %v, want one naming %s and asking for a unit", c.yaml, err, c.key)
		}
	}
	// The environment and flags hold strings: "30" there gets the same answer
	// rather than Go's "time: missing unit in duration".
	for _, env := range []string{"TOOLSERVER_SHUTDOWN_TIMEOUT=30", "TOOLSERVER_CALLS_DEFAULT_TIMEOUT=2.5"} {
		_, err := Load(nil, []string{env})
		if err == nil || !strings.Contains(err.Error(), "has no unit: write a duration such as") {
			t.Errorf("%s: error %v, want one asking for a unit", env, err)
		}
	}
	for _, env := range []string{"TOOLSERVER_SHUTDOWN_TIMEOUT=inf", "TOOLSERVER_SHUTDOWN_TIMEOUT=1e3"} {
		if _, err := Load(nil, []string{env}); err == nil || strings.Contains(err.Error(), "write a duration such as") {
			t.Errorf("%s: error %v, want the duration parser's refusal, not advice to add a unit", env, err)
		}
	}
	if _, err := Load([]string{"--store-connect-timeout", "45"}, nil); err == nil || !strings.Contains(err.Error(), "has no unit") {
		t.Errorf("--store-connect-timeout 45: error %v, want one asking for a unit", err)
	}
	f := filepath.Join(dir, "zero.yaml")
	if err := os.WriteFile(f, []byte("chain:\n  artifact_retention: 0\nsessions:\n  idle_timeout: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load([]string{"--config", f}, nil); err != nil || c.Chain.ArtifactRetention != 0 || c.Sessions.IdleTimeout != 0 {
		t.Errorf("bare 0: %v %v %v", err, c.Chain.ArtifactRetention, c.Sessions.IdleTimeout)
	}
}

// TestMCPServerSwitchesAreBooleans: an MCP server's trust_annotations (and enabled)
// default to true, and anything but true or false stops start-up naming the key: weak
// decoding read "trust_annotations: 5" as true and "" as false.
func TestMCPServerSwitchesAreBooleans(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	load := func(name, entry string) (Config, error) {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte("mcp_servers:\n  - {name: a, transport: stdio, command: x"+entry+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load([]string{"--config", f}, nil)
	}
	c, err := load("default", "")
	if err != nil || c.MCPServers[0].TrustAnnotations != nil {
		t.Fatalf("no trust_annotations: %v %v, want it unset (true)", err, c.MCPServers)
	}
	c, err = load("false", ", trust_annotations: false")
	if err != nil || c.MCPServers[0].TrustAnnotations == nil || *c.MCPServers[0].TrustAnnotations {
		t.Fatalf("trust_annotations: false: %v %v", err, c.MCPServers)
	}
	for i, v := range []string{"5", "0", "1.5", `""`, `"false"`, "no", "[true]", "{a: 1}"} {
		for _, key := range []string{"trust_annotations", "enabled"} {
			_, err := load(fmt.Sprintf("bad%d%s", i, key), ", "+key+": "+v)
			if err == nil || !strings.Contains(err.Error(), "mcp_servers[0]."+key) || !strings.Contains(err.Error(), "true or false") {
				t.Errorf("%s: %s: error %v, want one naming mcp_servers[0].%s and asking for true or false", key, v, err, key)
			}
		}
	}
}

// TestUnknownEnvironmentVariableIsReported: a misspelt TOOLSERVER_ variable (here one
// meant to isolate commands) is named in a start-up warning instead of being dropped
// silently; toolserverctl's variables, which share the prefix, are not.
func TestUnknownEnvironmentVariableIsReported(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, []string{"TOOLSERVER_SANDBOX_MOD=isolated", "TOOLSERVER_URL=http://127.0.0.1:8080", "TOOLSERVER_API_KEY=tsk_x", "TOOLSERVER_CONFIG="})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "TOOLSERVER_SANDBOX_MOD") {
		t.Fatalf("warnings %q, want one naming TOOLSERVER_SANDBOX_MOD", c.Warnings)
	}
}

// TestDaemonNamedPrefixIsReported: TOOLSERVERD_ADDR (the binary's name as the prefix)
// is not read; the warning names the variable that would be.
func TestDaemonNamedPrefixIsReported(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, []string{"TOOLSERVERD_ADDR=127.0.0.1:9", "TOOLSERVERD_NOPE=1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != Defaults().Addr {
		t.Errorf("addr %q, want the default: TOOLSERVERD_ADDR is not a configuration variable", c.Addr)
	}
	if len(c.Warnings) != 2 || !strings.Contains(c.Warnings[0], "did you mean TOOLSERVER_ADDR?") ||
		!strings.Contains(c.Warnings[1], "TOOLSERVERD_NOPE is ignored") || strings.Contains(c.Warnings[1], "did you mean") {
		t.Fatalf("warnings %q, want TOOLSERVERD_ADDR pointed at TOOLSERVER_ADDR and TOOLSERVERD_NOPE named", c.Warnings)
	}
}

// TestCORSOriginsAreOrigins: a browser's Origin is scheme://host[:port], nothing
// more; an entry with a path (a trailing slash) or without a scheme never matches one,
// so it stops start-up instead of leaving the UI refused for no visible reason.
func TestCORSOriginsAreOrigins(t *testing.T) {
	t.Parallel()
	for _, o := range []string{"https://console.example.com/", "console.example.com", "https://console.example.com/app", "ftp://x.example.com", "https://x.example.com?a=1", "https://*.*.example.com", "https://*example.com", "https://console*.example.com",
		// Browsers send a host in its ASCII (punycode) form, and leave the default port out.
		"https://bücher.example", "https://*.bücher.example", "https://app.example.net:443", "http://app.example.net:80",
		// Browsers send a port as a plain number from 1 to 65535.
		"http://app:080", "https://app.example.net:0443", "http://app.example.net:0", "http://app.example.net:65536",
		// nor a colon without one.
		"http://app.example.net:", "https://*.example.net:"} {
		_, err := Load(nil, []string{"TOOLSERVER_CORS_ALLOWED_ORIGINS=http://localhost:3000," + o})
		if err == nil || !strings.Contains(err.Error(), "cors.allowed_origins") || !strings.Contains(err.Error(), o) {
			t.Errorf("%q: error %v, want one naming cors.allowed_origins and the origin", o, err)
		}
	}
	c, err := Load(nil, []string{"TOOLSERVER_CORS_ALLOWED_ORIGINS=https://console.example.com,http://127.0.0.1:5173,https://*.example.com,*"})
	if err != nil || len(c.CORS.AllowedOrigins) != 4 {
		t.Fatalf("valid origins: %v %v", c.CORS.AllowedOrigins, err)
	}
	// Without keys, a wildcard under one's own domain (and *.localhost) still loads.
	c, err = Load(nil, []string{"TOOLSERVER_AUTH_UNAUTHENTICATED=true", "TOOLSERVER_CORS_ALLOWED_ORIGINS=https://*.example.com,http://*.localhost:5173,https://*.corp.example.co.uk,https://*.example.com."})
	if err != nil || len(c.CORS.AllowedOrigins) != 4 {
		t.Fatalf("unauthenticated with narrow wildcards: %v %v", c.CORS.AllowedOrigins, err)
	}
}

// TestOpenAPIAuthDecoded: every way an OpenAPI source's credentials are written in the
// file reaches the config, the nested oauth2 block included.
func TestOpenAPIAuthDecoded(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `openapi:
  - name: tw
    spec: /x.yaml
    auth: {basic_username_env: TW_SID, basic_password_env: TW_TOKEN}
  - name: graph
    spec: /y.yaml
    auth:
      oauth2:
        token_url: https://login.example.com/token
        client_id_env: G_ID
        client_secret_env: G_SECRET
        scopes: [Mail.Read, "https://graph.example.com/.default"]
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.OpenAPI[0].Auth; a.BasicUsernameEnv != "TW_SID" || a.BasicPasswordEnv != "TW_TOKEN" {
		t.Errorf("basic: %+v", a)
	}
	o := c.OpenAPI[1].Auth.OAuth2
	if o.TokenURL != "https://login.example.com/token" || o.ClientIDEnv != "G_ID" || o.ClientSecretEnv != "G_SECRET" ||
		strings.Join(o.Scopes, " ") != "Mail.Read https://graph.example.com/.default" {
		t.Errorf("oauth2: %+v", o)
	}
}

// TestSecretEnvNames: the daemon's own variables are TOOLSERVER_* and those its *_env
// keys name; ${NAME} in mcp_servers values reaches the proxy as written (with the
// header's case), for it to expand.
func TestSecretEnvNames(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `approval_webhook: {url: "http://127.0.0.1:9/hook", secret_env: HOOK_SECRET}
openapi:
  - {name: gh, spec: spec.yaml, auth: {bearer_token_env: GH_TOKEN}}
  - {name: tw, spec: spec.yaml, auth: {basic_username_env: TW_SID, basic_password_env: TW_TOKEN}}
  - {name: o, spec: spec.yaml, auth: {oauth2: {token_url: "http://127.0.0.1:9/t", client_id_env: O_ID, client_secret_env: O_SECRET}}}
mcp_servers:
  - {name: gh, transport: streamable_http, url: "http://127.0.0.1:9/mcp", headers: {Authorization: "Bearer ${GH_TOKEN}"}}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.SecretEnvNames(), ",")
	if want := "TOOLSERVER_*,HOOK_SECRET,GH_TOKEN,TW_SID,TW_TOKEN,O_ID,O_SECRET"; got != want {
		t.Errorf("SecretEnvNames = %s, want %s", got, want)
	}
	// With a PostgreSQL store, the password pgx may take from libpq's variables is
	// the daemon's too; with SQLite a postgres MCP server keeps its PGPASSWORD.
	c.Store = "postgres://app@127.0.0.1/db"
	// PGSSLPASSWORD decrypts the client key of a store that authenticates by
	// certificate (sslkey), and PGSERVICEFILE may hold a password as a passfile does.
	if got, want := strings.Join(c.SecretEnvNames(), ","), "TOOLSERVER_*,PGPASSWORD,PGPASSFILE,PGSSLPASSWORD,PGSERVICEFILE,HOOK_SECRET"; !strings.HasPrefix(got, want) {
		t.Errorf("SecretEnvNames with PostgreSQL = %s, want it to start %s", got, want)
	}
	if h := c.MCPServers[0].Headers; h["Authorization"] != "Bearer ${GH_TOKEN}" {
		t.Errorf("headers = %v, want Authorization as written", h)
	}
}

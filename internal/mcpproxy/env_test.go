package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

func lookupIn(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

// TestExpandEnv: ${NAME} in headers and env values takes the variable, trimmed;
// $${ is a literal ${; a variable not set, or empty, or a ${ without a name is an
// error naming the server, the key and the variable, never a value.
func TestExpandEnv(t *testing.T) {
	t.Parallel()
	vars := lookupIn(map[string]string{"GH_TOKEN": "ghp-secret-1\n", "HOST": "db", "EMPTY": " "})
	for _, tc := range []struct {
		name    string
		url     string
		headers map[string]string
		env     map[string]string
		want    map[string]string // key (headers.X or env.X) → value
		wantErr []string
	}{
		{name: "header and env", headers: map[string]string{"Authorization": "Bearer ${GH_TOKEN}"},
			env:  map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_TOKEN}", "URL": "postgres://${HOST}:5432/x", "PLAIN": "a$b $HOST"},
			want: map[string]string{"headers.Authorization": "Bearer ghp-secret-1", "env.GITHUB_PERSONAL_ACCESS_TOKEN": "ghp-secret-1", "env.URL": "postgres://db:5432/x", "env.PLAIN": "a$b $HOST"}},
		{name: "url", url: "https://${HOST}.example/mcp?key=${GH_TOKEN}", want: map[string]string{"url": "https://db.example/mcp?key=ghp-secret-1"}},
		{name: "url unset", url: "https://h/mcp?key=${NOPE}", wantErr: []string{"url:", "NOPE", "not set"}},
		{name: "escape", env: map[string]string{"T": "$${HOST} is ${HOST}"}, want: map[string]string{"env.T": "${HOST} is db"}},
		{name: "unset", headers: map[string]string{"X-Api-Key": "${NOT_THERE}"},
			wantErr: []string{"mcp server srv", "headers.X-Api-Key", "NOT_THERE", "not set"}},
		{name: "empty", env: map[string]string{"K": "${EMPTY}"}, wantErr: []string{"env.K", "EMPTY", "not set"}},
		{name: "no name", env: map[string]string{"K": "${1X}"}, wantErr: []string{"env.K", "$${"}},
		{name: "unclosed", headers: map[string]string{"A": "Bearer ${GH_TOKEN"}, wantErr: []string{"headers.A", "variable name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ServerConfig{Name: "srv", URL: tc.url, Headers: tc.headers, Env: tc.env}
			err := c.ExpandEnv(vars)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; headers %v env %v", c.Headers, c.Env)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "ghp-secret-1") {
					t.Errorf("error %q shows a value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				field, key, _ := strings.Cut(k, ".")
				got := map[string]map[string]string{"headers": c.Headers, "env": c.Env, "url": {"": c.URL}}[field][key]
				if got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestStdioEnvFromDaemon: a stdio server (server-everything's get-env prints its
// environment) gets ${NAME} of its env from the daemon's environment, keeps what
// it inherited (PATH, a key set for the servers), and does not get the daemon's
// private variables (TOOLSERVER_*, a webhook secret) unless its env names them.
func TestStdioEnvFromDaemon(t *testing.T) {
	// t.Setenv: the child inherits the test's real environment.
	t.Setenv("TOOLSERVER_TEST_STORE", "postgres://u:store-pw-123@db/x")
	t.Setenv("TOOLSERVER_TEST_GIVEN", "given-to-server")
	t.Setenv("TEST_HOOK_SECRET", "hook-secret-456")
	t.Setenv("TEST_PLAIN_API_KEY", "plain-key-789")
	t.Setenv("TEST_SRC_TOKEN", "src-token-abc")
	sc := stdioEverything(t, "envsrv")
	sc.Env = map[string]string{"GH_PAT": "${TEST_SRC_TOKEN}", "TOOLSERVER_TEST_GIVEN": "${TOOLSERVER_TEST_GIVEN}", "LITERAL": "$${TEST_SRC_TOKEN}"}
	if err := sc.ExpandEnv(os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Servers: []ServerConfig{sc}, PrivateEnv: []string{"TOOLSERVER_*", "TEST_HOOK_SECRET"}})
	h.start(t)
	h.waitState(t, "envsrv", StateReady, 30*time.Second)
	res := h.call(t.Context(), t, "mcp__envsrv__get-env", `{}`, nil)
	wantText(t, res, "PATH")
	var env map[string]string
	if err := json.Unmarshal([]byte(res.Text()), &env); err != nil {
		t.Fatalf("get-env: %v: %s", err, res.Text())
	}
	for k, want := range map[string]string{"GH_PAT": "src-token-abc", "TOOLSERVER_TEST_GIVEN": "given-to-server", "LITERAL": "${TEST_SRC_TOKEN}",
		"TEST_PLAIN_API_KEY": "plain-key-789", "TEST_SRC_TOKEN": "src-token-abc", "PATH": os.Getenv("PATH")} {
		if env[k] != want {
			t.Errorf("server's %s = %q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"TOOLSERVER_TEST_STORE", "TEST_HOOK_SECRET"} {
		if v, ok := env[k]; ok {
			t.Errorf("server inherited the daemon's private %s=%q", k, v)
		}
	}
}

// TestProcessVarsNotRedacted: ${HOME} or ${PATH} in a value extends the process's
// own variable, no secret: errors that name a path under the home directory keep it.
func TestProcessVarsNotRedacted(t *testing.T) {
	t.Parallel()
	sc := ServerConfig{Name: "files", Env: map[string]string{"ROOT": "${HOME}/work", "TOKEN": "${FILES_TOKEN}"}}
	if err := sc.ExpandEnv(lookupIn(map[string]string{"HOME": "/home/alice", "FILES_TOKEN": "tok-0123456789"})); err != nil {
		t.Fatal(err)
	}
	r := newRedactor(&sc)
	if got := r.text("open /home/alice/work/a.txt: no such file (token tok-0123456789)"); got != "open /home/alice/work/a.txt: no such file (token "+redactedText+")" {
		t.Errorf("redacted: %q", got)
	}
}

// TestStdioEnvSecretRedacted: a value taken from the environment is redacted from
// what the proxy shows of the server (last_error, quoting its stderr), even under
// a key that does not look like a credential's.
func TestStdioEnvSecretRedacted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-from-env-value"
	sc := ServerConfig{Name: "leaky", Transport: TransportStdio, Command: "sh", Enabled: true,
		// It reads the initialize request before it exits, so that the proxy's
		// write does not meet a closed pipe: the end of its stdout then waits for
		// its last words.
		Args: []string{"-c", `echo "cannot log in as $UPSTREAM_LOGIN" >&2; read -r line; exit 3`},
		Env:  map[string]string{"UPSTREAM_LOGIN": "${LEAKY_LOGIN}"}}
	if err := sc.ExpandEnv(lookupIn(map[string]string{"LEAKY_LOGIN": secret})); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Servers: []ServerConfig{sc}, MinBackoff: time.Minute})
	h.start(t)
	st := h.waitState(t, "leaky", StateFailed, 30*time.Second)
	if strings.Contains(st.LastError, secret) || !strings.Contains(st.LastError, "cannot log in as "+redactedText) {
		t.Fatalf("last_error %q: want the stderr line with the value REDACTED", st.LastError)
	}
}

// TestHTTPHeaderFromEnv: an HTTP MCP server (mcp-go, on loopback, over streamable
// HTTP and SSE) that takes only its bearer token gets it from ${NAME} in headers.
func TestHTTPHeaderFromEnv(t *testing.T) {
	t.Parallel()
	const token = "tok-from-env-0123456789"
	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			srv := newAuthServer(t, transport, "Bearer "+token)
			name := strings.ReplaceAll(transport, "_", "")
			sc := ServerConfig{Name: name, Transport: transport, URL: srv.url, Enabled: true,
				Headers: map[string]string{"Authorization": "Bearer ${TEST_MCP_TOKEN}"}, ConnectTimeout: 10 * time.Second}
			if err := sc.ExpandEnv(lookupIn(map[string]string{"TEST_MCP_TOKEN": token + "\n"})); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, Config{Servers: []ServerConfig{sc}, MinBackoff: time.Minute})
			h.start(t)
			st := h.waitState(t, name, StateReady, 30*time.Second)
			if st.LastError != "" {
				t.Errorf("last_error %q", st.LastError)
			}
			wantText(t, h.call(t.Context(), t, "mcp__"+name+"__whoami", `{}`, nil), "authorized")
			if got := srv.seen(); len(got) == 0 || got[0] != "Bearer "+token {
				t.Errorf("Authorization headers received: %q, want %q", got, "Bearer "+token)
			}
		})
	}
}

// authServer is an mcp-go server on loopback that answers 401 to a request without
// the Authorization header it wants.
type authServer struct {
	url  string
	mu   sync.Mutex
	auth []string
}

func (a *authServer) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

func newAuthServer(t *testing.T, transport, want string) *authServer {
	t.Helper()
	a := &authServer{}
	s := mcpserver.NewMCPServer("auth-test", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("whoami"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("authorized"), nil
	})
	var h http.Handler
	var shutdown func(context.Context) error
	path := "/mcp"
	if transport == TransportSSE {
		sse := mcpserver.NewSSEServer(s)
		h, shutdown, path = sse, sse.Shutdown, "/sse"
	} else {
		st := mcpserver.NewStreamableHTTPServer(s)
		h, shutdown = st, st.Shutdown
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		a.mu.Lock()
		a.auth = append(a.auth, got)
		a.mu.Unlock()
		if got != want {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
	})
	a.url = ts.URL + path
	return a
}

func TestSecretEnvReferences(t *testing.T) {
	c := ServerConfig{URL: "https://h/mcp?k=${A}", Headers: map[string]string{"X": "$${LIT} ${B}${A}", "Y": "${ not a ref"},
		Env: map[string]string{"E": "pre${C}post", "GITHUB_TOKEN": "${GH}", "PATH": "${PATH}:/opt/bin", "ROOT": "${HOME}/w", "L": "${LC_ALL}"}}
	if got, want := strings.Join(c.SecretEnvReferences(), ","), "A,B,C,GH"; got != want {
		t.Errorf("SecretEnvReferences = %s, want %s", got, want)
	}
}

// TestValidateHidesValuesFromEnv: a URL made invalid by the value ${NAME} put in it
// (a password with a "/", which ends the URL's authority) is quoted in the error
// start-up logs without that value.
func TestValidateHidesValuesFromEnv(t *testing.T) {
	c := ServerConfig{Name: "remote", Transport: TransportStreamableHTTP, URL: "https://user:${TEST_PASS}@mcp.example.com/mcp"}
	lookup := func(string) (string, bool) { return "s3cr/et-pass", true }
	if err := c.ExpandEnv(lookup); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	if err == nil {
		t.Fatalf("url %s passed", c.URL)
	}
	if strings.Contains(err.Error(), "s3cr") || strings.Contains(err.Error(), "et-pass") {
		t.Errorf("error quotes the variable's value: %v", err)
	}
}

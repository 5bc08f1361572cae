package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// everythingJS is server-everything's entry point (testdata/npm, npm ci).
func everythingJS(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MCP test server missing (%v): scripts/test.sh runs npm ci in testdata/npm", err)
		}
		t.Skip("MCP test server not installed: run npm ci in testdata/npm")
	}
	return p
}

// TestMCPServerEnvFromDaemon: a stdio server of the configuration gets ${NAME} of its
// env from the daemon's environment, and not the daemon's own variables: TOOLSERVER_*
// and the one approval_webhook.secret_env names (server-everything's get-env prints
// what it got).
func TestMCPServerEnvFromDaemon(t *testing.T) {
	js := everythingJS(t)
	t.Setenv("TOOLSERVER_TEST_MCPENV_STORE", "postgres://u:store-pw@db/x") // t.Setenv: the daemon runs in this process
	t.Setenv("TEST_MCPENV_HOOK_SECRET", "hook-secret")
	t.Setenv("TEST_MCPENV_GH_TOKEN", "gh-token-value")
	t.Setenv("TEST_MCPENV_OTHER", "other-value")
	hooks := receiveHooks(t, "hook-secret")
	d := testdaemon.Start(t, func(c *config.Config) {
		c.ApprovalWebhook = config.ApprovalWebhookConfig{URL: hooks.URL, SecretEnv: "TEST_MCPENV_HOOK_SECRET", Timeout: 5 * time.Second}
		c.MCPServers = []config.MCPServerConfig{{Name: "everything", Transport: "stdio", Command: "node", Args: []string{js, "stdio"},
			Env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${TEST_MCPENV_GH_TOKEN}"}}}
	})
	env := getEnv(t, d.URL, "everything")
	if got := env["GITHUB_PERSONAL_ACCESS_TOKEN"]; got != "gh-token-value" {
		t.Errorf("GITHUB_PERSONAL_ACCESS_TOKEN = %q, want the value of TEST_MCPENV_GH_TOKEN", got)
	}
	if env["PATH"] == "" || env["TEST_MCPENV_OTHER"] != "other-value" {
		t.Errorf("the rest of the environment is not inherited: PATH %q, TEST_MCPENV_OTHER %q", env["PATH"], env["TEST_MCPENV_OTHER"])
	}
	// TEST_MCPENV_GH_TOKEN reaches the server as the variable its env names only.
	for _, k := range []string{"TOOLSERVER_TEST_MCPENV_STORE", "TEST_MCPENV_HOOK_SECRET", "TEST_MCPENV_GH_TOKEN"} {
		if v, ok := env[k]; ok {
			t.Errorf("the stdio server inherited the daemon's %s=%q", k, v)
		}
	}
}

// TestMCPServerEnvUnset: a variable that ${NAME} names and that is not set stops
// start-up with an error naming the server, the key and the variable; a disabled
// server's does not.
func TestMCPServerEnvUnset(t *testing.T) {
	t.Parallel()
	const unset = "TEST_MCPENV_SURELY_UNSET_VARIABLE"
	for _, tc := range []struct {
		name    string
		enabled bool
		wantErr bool
	}{{"enabled", true, true}, {"disabled", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Defaults()
			cfg.Addr = "127.0.0.1:0"
			cfg.Auth.Unauthenticated = true
			cfg.DataDir = t.TempDir()
			cfg.MCPServers = []config.MCPServerConfig{{Name: "github", Transport: "streamable_http", URL: "http://127.0.0.1:1/mcp",
				Headers: map[string]string{"Authorization": "Bearer ${" + unset + "}"}, Enabled: &tc.enabled}}
			a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				a.Close()
				if tc.wantErr {
					t.Fatal("the daemon started without the variable")
				}
				return
			}
			if !tc.wantErr {
				t.Fatalf("a disabled server's variable stopped start-up: %v", err)
			}
			for _, w := range []string{"mcp_servers", "mcp server github", "headers.Authorization", unset, "not set"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestMCPServerEnvReferencesNotInherited: a variable the configuration file hands to
// one server through ${NAME} (a token meant for that server's headers) is not given
// to every other stdio server, nor to one an API client adds at run time, which
// could otherwise read it back with a tool such as server-everything's get-env.
func TestMCPServerEnvReferencesNotInherited(t *testing.T) {
	js := everythingJS(t)
	t.Setenv("TEST_MCPENV_REMOTE_TOKEN", "remote-token-value")
	t.Setenv("TEST_MCPENV_GH2", "gh2-value")
	t.Setenv("TEST_MCPENV_PLAIN", "plain-value")
	off := false
	d := testdaemon.Start(t, func(c *config.Config) {
		c.MCPServers = []config.MCPServerConfig{{Name: "remote", Transport: "streamable_http", URL: "http://127.0.0.1:1/mcp",
			Headers: map[string]string{"Authorization": "Bearer ${TEST_MCPENV_REMOTE_TOKEN}"}},
			// A variable taken into env is that server's too; PATH extended for one
			// server is no secret.
			{Name: "local", Transport: "stdio", Command: "node", Enabled: &off, Env: map[string]string{
				"GITHUB_PERSONAL_ACCESS_TOKEN": "${TEST_MCPENV_GH2}", "PATH": "${PATH}:/opt/extra/bin"}}}
	})
	code, out := post(t, d.URL+"/v1/mcp/servers", map[string]any{"name": "added", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}})
	if code != http.StatusCreated {
		t.Fatalf("add: %d %s", code, out)
	}
	env := getEnv(t, d.URL, "added")
	if v, ok := env["TEST_MCPENV_REMOTE_TOKEN"]; ok {
		t.Errorf("a stdio server added through the API inherited TEST_MCPENV_REMOTE_TOKEN=%q, which the config gives server remote only", v)
	}
	if v, ok := env["TEST_MCPENV_GH2"]; ok {
		t.Errorf("a stdio server added through the API inherited TEST_MCPENV_GH2=%q, which the config gives server local", v)
	}
	if env["PATH"] != os.Getenv("PATH") || env["TEST_MCPENV_PLAIN"] != "plain-value" {
		t.Errorf("variables no server takes are not inherited: PATH %q, TEST_MCPENV_PLAIN %q", env["PATH"], env["TEST_MCPENV_PLAIN"])
	}
}

// getEnv waits for server to be ready and returns what its get-env tool prints.
func getEnv(t *testing.T, base, server string) map[string]string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/v1/mcp/servers")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Servers []struct{ Name, State string }
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = json.Unmarshal(b, &list)
		ready := false
		for _, s := range list.Servers {
			ready = ready || s.Name == server && s.State == "ready"
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s not ready: %s", server, b)
		}
	}
	tool := "mcp__" + server + "__get-env"
	code, out := post(t, base+"/v1/tool-calls", map[string]any{"session": map[string]any{"available_tools": []string{tool}},
		"calls": []any{map[string]any{"id": "c", "name": tool, "arguments": map[string]any{}}}})
	if code != http.StatusOK {
		t.Fatalf("call: %d %s", code, out)
	}
	var env map[string]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type    string
			Message struct {
				Content string
				IsError bool `json:"is_error"`
			}
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "message" {
			if ev.Message.IsError {
				t.Fatalf("get-env failed: %s", ev.Message.Content)
			}
			if err := json.Unmarshal([]byte(ev.Message.Content), &env); err != nil {
				t.Fatalf("get-env: %v: %s", err, ev.Message.Content)
			}
		}
	}
	if env == nil {
		t.Fatalf("no message in %s", out)
	}
	return env
}

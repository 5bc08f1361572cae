package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

func everythingServer(t *testing.T) string {
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

// TestMCPServersThroughTheAPI adds a real MCP server (stdio) at run time, calls its
// tools through a session whitelist pattern, restarts and removes it.
func TestMCPServersThroughTheAPI(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = append(c.Permissions.Allow, "mcp__everything__*") }})
	code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "everything", "transport": "stdio", "command": "node", "args": []string{js, "stdio"},
		"env": map[string]string{"SECRET_TOKEN": "hunter2"}})
	if code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	validate(t, "MCPServerStatus", body)
	waitFor(t, 30*time.Second, "the MCP server is ready", func() bool {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		return strings.Contains(string(body), `"state":"ready"`)
	})
	_, _, list := d.do("GET", "/v1/mcp/servers", nil)
	if strings.Contains(string(list), "hunter2") {
		t.Fatal("the server's secrets are shown")
	}
	if code, _, _ := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "everything", "transport": "stdio", "command": "node"}); code != 409 {
		t.Fatalf("duplicate name: %d", code)
	}
	if code, _, _ := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "Bad Name", "transport": "stdio"}); code != 400 {
		t.Fatalf("bad config: %d", code)
	}
	// A server whose tools would fall under mcp__everything__* (and take its names)
	// is refused, naming the server it would overlap.
	if code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "everything__evil", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}}); code != 400 || !strings.Contains(string(body), `\"__\"`) {
		t.Fatalf("name with __: %d %s, want 400 saying why", code, body)
	}
	if code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "e", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}, "prefix": "mcp__everything__"}); code != 409 || !strings.Contains(string(body), "mcp server everything ") {
		t.Fatalf("prefix in another server's name space: %d %s, want 409 naming everything", code, body)
	}

	s := d.createSession(map[string]any{"available_tools": []string{"mcp__everything__*"}})
	tools := strings.Join(toStrings(s["tools"]), ",")
	if !strings.Contains(tools, "mcp__everything__echo") || !strings.Contains(tools, "mcp__everything__get-sum") {
		t.Fatalf("session tools: %s", tools)
	}
	_, evs := d.stream("/v1/sessions/"+s["id"].(string)+"/tool-calls", `{"calls":[
		{"id":"e","name":"mcp__everything__echo","arguments":{"message":"hello mcp"}},
		{"id":"s","name":"mcp__everything__get-sum","arguments":{"a":2,"b":40}},
		{"id":"bad","name":"mcp__everything__get-sum","arguments":{"a":"x"}}]}`)
	msgs := messages(t, evs)
	if !strings.Contains(string(msgs["e"].raw), "hello mcp") || !strings.Contains(string(msgs["s"].raw), "42") || msgs["bad"].str("error_kind") != "invalid_args" {
		t.Fatalf("mcp calls: %s\n%s\n%s", msgs["e"].raw, msgs["s"].raw, msgs["bad"].raw)
	}
	code, _, body = d.do("GET", "/readyz", nil)
	var ready struct{ Info map[string]json.RawMessage }
	_ = json.Unmarshal(body, &ready)
	if code != 200 || !strings.Contains(string(ready.Info["mcp"]), `"servers":1`) {
		t.Fatalf("readyz: %d %s", code, body)
	}
	if code, _, body := d.do("POST", "/v1/mcp/servers/everything/restart", nil); code != 202 {
		t.Fatalf("restart: %d %s", code, body)
	}
	if code, _, _ := d.do("DELETE", "/v1/mcp/servers/everything", nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	if code, _, _ := d.do("DELETE", "/v1/mcp/servers/everything", nil); code != 404 {
		t.Fatalf("delete twice: %d", code)
	}
	_, evs = d.stream("/v1/sessions/"+s["id"].(string)+"/tool-calls", `{"calls":[{"id":"e","name":"mcp__everything__echo","arguments":{"message":"x"}}]}`)
	if m := messages(t, evs)["e"]; m.str("error_kind") != "not_found" {
		t.Fatalf("after delete: %s", m.raw)
	}
	// The audit trail has the three changes, newest first (the 404 and 409 are not changes).
	code, _, body = d.do("GET", "/v1/audit?subject=everything", nil)
	var audit struct {
		Entries []struct{ Action, Actor string }
	}
	if err := json.Unmarshal(body, &audit); code != 200 || err != nil {
		t.Fatalf("GET /v1/audit: %d %s", code, body)
	}
	var actions []string
	for _, e := range audit.Entries {
		actions = append(actions, e.Action+" by "+e.Actor)
	}
	if got, want := strings.Join(actions, ", "), "mcp_server.removed by api, mcp_server.restarted by api, mcp_server.added by api"; got != want {
		t.Errorf("audit trail of the server: %s, want %s", got, want)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestRestartDisabledMCPServer: restarting a server added with "enabled": false is a
// conflict that says how to enable it, not an internal error; its state stays
// disabled, and an unknown server is still a 404.
func TestRestartDisabledMCPServer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "dis", "transport": "stdio", "command": "node", "enabled": false})
	if code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	code, _, body = d.do("POST", "/v1/mcp/servers/dis/restart", nil)
	if code != 409 {
		t.Fatalf("restart of a disabled server: %d %s, want 409", code, body)
	}
	validate(t, "Error", body)
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "conflict" ||
		!strings.Contains(e.Error.Message, "dis is disabled") || !strings.Contains(e.Error.Message, `"enabled": true`) {
		t.Fatalf("restart of a disabled server: %s (%v), want code conflict and how to enable it", body, err)
	}
	_, _, list := d.do("GET", "/v1/mcp/servers", nil)
	if !strings.Contains(string(list), `"state":"disabled"`) {
		t.Fatalf("servers after the refused restart: %s", list)
	}
	if code, _, body := d.do("POST", "/v1/mcp/servers/nope/restart", nil); code != 404 {
		t.Fatalf("restart of an unknown server: %d %s", code, body)
	}
}

// TestMCPBackoffFromConfig: mcp.min_backoff sets how long a failed server waits before
// its next attempt (the status says when).
func TestMCPBackoffFromConfig(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.MCP.MinBackoff, c.MCP.MaxBackoff = 10*time.Minute, time.Hour
	}})
	missing := filepath.Join(t.TempDir(), "no-such-server")
	if code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "dead", "transport": "stdio", "command": missing}); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	var next time.Time
	waitFor(t, 30*time.Second, "the failed server's next attempt", func() bool {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		var list struct {
			Servers []struct {
				NextAttempt time.Time `json:"next_attempt"`
			} `json:"servers"`
		}
		if json.Unmarshal(body, &list) != nil || len(list.Servers) != 1 || list.Servers[0].NextAttempt.IsZero() {
			return false
		}
		next = list.Servers[0].NextAttempt
		return true
	})
	// The first delay is drawn from the upper half of min_backoff: 5 to 10 minutes.
	if wait := time.Until(next); wait < 4*time.Minute || wait > 11*time.Minute {
		t.Fatalf("next attempt in %s, want 5m to 10m (mcp.min_backoff 10m)", wait)
	}
}

// TestToolListingIncludesMCPTools: GET /v1/tools ("every registered tool") lists the
// tools of the connected MCP servers too, as sessions see them.
func TestToolListingIncludesMCPTools(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	d := startDaemon(t, daemonOpts{})
	addEverything(t, d, js)
	for _, f := range []string{"native", "openai"} {
		code, _, body := d.do("GET", "/v1/tools?format="+f, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", f, code, body)
		}
		validate(t, "ToolList", body)
		if !strings.Contains(string(body), `"mcp__everything__echo"`) || !strings.Contains(string(body), `"read_file"`) {
			t.Fatalf("GET /v1/tools?format=%s lacks the MCP server's or the built-in tools: %.600s", f, body)
		}
	}
}

// TestAddMCPServerRefusesUnknownFields checks a misspelt field of a server's
// configuration is refused, as in every other request body, not silently dropped (the
// server would run without the timeout its operator asked for).
func TestAddMCPServerRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "typo", "transport": "stdio", "command": "/bin/true", "call_timout": "5s"})
	if code != 400 || !strings.Contains(string(body), `"invalid_json"`) || !strings.Contains(string(body), "call_timout") {
		t.Fatalf("add with a misspelt field: %d %s", code, body)
	}
	validate(t, "Error", body)
	if _, _, body := d.do("GET", "/v1/mcp/servers", nil); strings.Contains(string(body), "typo") {
		t.Fatalf("the server was added: %s", body)
	}
	code, _, body = d.do("POST", "/v1/mcp/servers", map[string]any{"name": "notbool", "transport": "stdio", "command": "/bin/true", "trust_annotations": "no"})
	if code != 400 || !strings.Contains(string(body), `"invalid_json"`) || !strings.Contains(string(body), "trust_annotations") {
		t.Fatalf("add with a trust_annotations that is not a boolean: %d %s", code, body)
	}
	code, _, body = d.do("POST", "/v1/mcp/servers", map[string]any{"name": "ok", "transport": "stdio", "command": "/bin/true", "call_timeout": "5s", "enabled": false, "trust_annotations": false})
	if code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	if !strings.Contains(string(body), `"trust_annotations":false`) {
		t.Fatalf("added server's status: %s, want trust_annotations false", body)
	}
}

// TestUntrustedMCPServerAsks: server-everything's echo says readOnlyHint: true. From a
// server trusted as by default it runs without asking (default mode) and is allowed
// in explore mode; from one configured with trust_annotations false (in the config
// file's mcp_servers or through POST /v1/mcp/servers) it waits for a person's
// approval as a medium-risk tool, and explore mode denies it.
func TestUntrustedMCPServerAsks(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	no := false
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.MCPServers = []config.MCPServerConfig{{Name: "cfgshy", Transport: "stdio", Command: "node", Args: []string{js, "stdio"}, TrustAnnotations: &no}}
	}})
	for _, body := range []map[string]any{
		{"name": "trusted", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}},
		{"name": "apishy", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}, "trust_annotations": false},
	} {
		if code, _, resp := d.do("POST", "/v1/mcp/servers", body); code != 201 {
			t.Fatalf("add %s: %d %s", body["name"], code, resp)
		}
	}
	var list struct {
		Servers []struct {
			Name             string `json:"name"`
			State            string `json:"state"`
			TrustAnnotations *bool  `json:"trust_annotations"`
		} `json:"servers"`
	}
	waitFor(t, 30*time.Second, "the MCP servers are ready", func() bool {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		if json.Unmarshal(body, &list) != nil || len(list.Servers) != 3 {
			return false
		}
		for _, s := range list.Servers {
			if s.State != "ready" {
				return false
			}
		}
		return true
	})
	_, _, body := d.do("GET", "/v1/mcp/servers", nil)
	validateResponse(t, "GET", "/v1/mcp/servers", "200", "application/json", body)
	for _, s := range list.Servers {
		if s.TrustAnnotations == nil || *s.TrustAnnotations != (s.Name == "trusted") {
			t.Errorf("%s: trust_annotations %v in %s", s.Name, s.TrustAnnotations, body)
		}
	}

	id := d.createSession(map[string]any{"available_tools": []string{"mcp__*__echo"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	_, evs := d.stream(calls, `{"calls":[{"id":"t","name":"mcp__trusted__echo","arguments":{"message":"trusted"}}]}`)
	if m := messages(t, evs)["t"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "Echo: trusted") {
		t.Fatalf("trusted read-only echo: %s", m.raw)
	}
	for _, server := range []string{"apishy", "cfgshy"} {
		apr, rest, stop := streamUntilApproval(t, d, calls, `{"calls":[{"id":"u","name":"mcp__`+server+`__echo","arguments":{"message":"untrusted"}}]}`)
		if apr["risk"] != "medium" {
			t.Errorf("%s: approval %v, want medium risk", server, apr)
		}
		if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
			t.Fatalf("decide: %d %s", code, body)
		}
		if m := restMessages(t, <-rest)["u"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "Echo: untrusted") {
			t.Fatalf("%s: approved echo: %s", server, m.raw)
		}
		stop()
	}

	explore := d.createSession(map[string]any{"available_tools": []string{"mcp__*__echo"}, "permission_mode": "explore"})["id"].(string)
	_, evs = d.stream("/v1/sessions/"+explore+"/tool-calls", `{"calls":[
		{"id":"t","name":"mcp__trusted__echo","arguments":{"message":"explored"}},
		{"id":"u","name":"mcp__cfgshy__echo","arguments":{"message":"explored"}}]}`)
	msgs := messages(t, evs)
	if m := msgs["t"]; m.m["is_error"] != false {
		t.Errorf("explore mode, trusted echo: %s", m.raw)
	}
	if m := msgs["u"]; m.str("error_kind") != "denied" || !strings.Contains(string(m.raw), "explore") {
		t.Errorf("explore mode, untrusted echo: %s, want denied", m.raw)
	}
}

// TestMCPProgressLines: an upstream server's notifications/progress reach the call's
// info stream one line each, with their total, both as tool_progress events and to a
// poller. They come faster than the coalescing window here (10 steps in 0.3 s), so
// several share one event and one log read: without line ends they read "1/102/10…".
func TestMCPProgressLines(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.MCPServers = []config.MCPServerConfig{{Name: "everything", Transport: "stdio", Command: "node", Args: []string{js, "stdio"}}}
	}})
	waitFor(t, 30*time.Second, "the MCP server is ready", func() bool {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		return strings.Contains(string(body), `"state":"ready"`)
	})
	id := d.createSession(map[string]any{"available_tools": []string{"mcp__everything__trigger-long-running-operation"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"p","name":"mcp__everything__trigger-long-running-operation","arguments":{"duration":0.3,"steps":10}}]}`)
	m := messages(t, evs)["p"]
	if m.m["is_error"] != false || !strings.Contains(string(m.raw), "Long running operation completed") {
		t.Fatalf("message: %s", m.raw)
	}
	var want []string
	for i := 1; i <= 10; i++ {
		want = append(want, fmt.Sprintf("%d/10", i))
	}
	wantText := strings.Join(want, "\n") + "\n"
	var streamed strings.Builder
	for _, e := range evs {
		if e.str("type") == "tool_progress" && e.str("stream") == "info" {
			streamed.WriteString(e.str("text"))
		}
	}
	if streamed.String() != wantText {
		t.Errorf("tool_progress info text %q, want %q", streamed.String(), wantText)
	}
	code, _, body := d.do("GET", "/v1/tool-calls/"+m.str("call_id")+"/progress?stream=info", nil)
	validate(t, "ProgressChunk", body)
	var chunk struct {
		Data     string `json:"data"`
		Finished bool   `json:"finished"`
	}
	if err := json.Unmarshal(body, &chunk); code != 200 || err != nil || chunk.Data != wantText || !chunk.Finished {
		t.Errorf("progress poll: %d %s, want the lines %q", code, body, wantText)
	}
}

// TestMCPServerSecretsNotShown: the token in a server's URL and its headers stay
// out of the listing's last_error, which quotes the failed request (Go's HTTP
// client writes the whole URL into its error).
func TestMCPServerSecretsNotShown(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	closed := testnet.RefusedAddr(t)
	code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "tok", "transport": "streamable_http",
		"url": "http://" + closed + "/mcp?api_key=MODELSEESTHIS", "headers": map[string]string{"Authorization": "Bearer HEADERSECRET"}})
	if code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	var list []byte
	waitFor(t, 30*time.Second, "the server failed", func() bool {
		_, _, list = d.do("GET", "/v1/mcp/servers", nil)
		return strings.Contains(string(list), `"last_error"`)
	})
	if strings.Contains(string(list), "MODELSEESTHIS") || strings.Contains(string(list), "HEADERSECRET") || !strings.Contains(string(list), closed+"/mcp?REDACTED") {
		t.Fatalf("listing %s: want the URL with its query REDACTED", list)
	}
}

// TestAddMCPServerRefusesEnvReferences: ${NAME} takes a value from the daemon's
// environment only in the configuration file. Through the API it would send the
// daemon's variables (its TOOLSERVER_STORE with the password) to a URL of the
// client's choosing, so it is refused, naming the key, and nothing is added.
func TestAddMCPServerRefusesEnvReferences(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"name": "leak", "transport": "streamable_http", "url": "http://127.0.0.1:1/mcp",
			"headers": map[string]string{"Authorization": "Bearer ${TOOLSERVER_STORE}"}}, "headers.Authorization"},
		{map[string]any{"name": "leak", "transport": "stdio", "command": "/bin/true", "env": map[string]string{"DB": "${TOOLSERVER_STORE}"}}, "env.DB"},
		{map[string]any{"name": "leak", "transport": "sse", "url": "http://127.0.0.1:1/sse?key=${TOOLSERVER_STORE}"}, "url:"},
	} {
		code, _, body := d.do("POST", "/v1/mcp/servers", tc.cfg)
		if code != 400 || !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), "configuration file") {
			t.Fatalf("add with %s = ${…}: %d %s, want 400 naming the key", tc.want, code, body)
		}
		validate(t, "Error", body)
		if _, _, body := d.do("GET", "/v1/mcp/servers", nil); strings.Contains(string(body), "leak") {
			t.Fatalf("the server was added: %s", body)
		}
	}
}

// addEverything adds server-everything (js, over stdio) to d as "everything" through
// the API and waits until it is ready.
func addEverything(t *testing.T, d *daemon, js string) {
	t.Helper()
	if code, _, body := d.do("POST", "/v1/mcp/servers", map[string]any{"name": "everything", "transport": "stdio", "command": "node", "args": []string{js, "stdio"}}); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the MCP server is ready", func() bool {
		_, _, body := d.do("GET", "/v1/mcp/servers", nil)
		return strings.Contains(string(body), `"state":"ready"`)
	})
}

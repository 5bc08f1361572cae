package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// keyed sends one request with an API key ("" for none) and returns status, headers
// and body.
func keyed(t *testing.T, d *daemon, key, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func wantStatus(t *testing.T, what string, got, want int, body []byte) {
	t.Helper()
	if got != want {
		t.Errorf("%s: HTTP %d, want %d: %s", what, got, want, body)
	}
}

// TestAuthTenantsAndRoles starts the daemon the way a zero-configuration start does
// (keys required, none declared): the first start writes an admin key; the admin makes
// keys for two tenants, and every cross-tenant read or decision is refused.
func TestAuthTenantsAndRoles(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Auth.Unauthenticated = false
		c.Permissions.Allow = []string{"echo", "memory_*"} // execute_command asks
	}})
	raw, err := os.ReadFile(filepath.Join(d.dataDir, "admin.key"))
	if err != nil {
		t.Fatalf("no bootstrap key: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(d.dataDir, "admin.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.key mode %v, want 0600", fi.Mode().Perm())
	}
	admin := strings.TrimSpace(string(raw))
	ctx := t.Context()

	// Without a key, or with a wrong one: 401 everywhere under /v1; probes stay open.
	for _, k := range []string{"", "tsk_wrong", admin + "x"} {
		st, h, b := keyed(t, d, k, "GET", "/v1/tools", "")
		wantStatus(t, "GET /v1/tools with key "+strconv.Quote(k), st, 401, b)
		if !strings.Contains(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without WWW-Authenticate: %v", h)
		}
		validate(t, "Error", b)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		st, _, b := keyed(t, d, "", "GET", p, "")
		wantStatus(t, "GET "+p+" without a key", st, 200, b)
	}
	// The scheme is case-insensitive (RFC 9110 §11.1) and may be followed by several
	// spaces; another scheme is a bad key.
	for h, want := range map[string]int{"bearer " + admin: 200, "BEARER  " + admin: 200, "Bearer\t" + admin: 401, "Basic " + admin: 401, "Bearer": 401} {
		req, _ := http.NewRequest("GET", d.url+"/v1/tools", nil)
		req.Header.Set("Authorization", h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantStatus(t, "Authorization: "+strings.Replace(h, admin, "<admin key>", 1), resp.StatusCode, want, b)
	}

	ac := client.New(d.url, client.WithAPIKey(admin))
	mk := func(tenant string, roles ...string) *client.Client {
		k, err := ac.CreateKey(ctx, tenant+" "+strings.Join(roles, "+"), tenant, roles)
		if err != nil {
			t.Fatalf("CreateKey(%s, %v): %v", tenant, roles, err)
		}
		if !strings.HasPrefix(k.Key, "tsk_") || k.Tenant != tenant {
			t.Fatalf("created key %+v", k)
		}
		return client.New(d.url, client.WithAPIKey(k.Key))
	}
	agentA, approverA, agentB, approverB := mk("acme", "agent"), mk("acme", "approver"), mk("globex", "agent"), mk("globex", "approver")
	if p, err := agentA.Whoami(ctx); err != nil || p.Tenant != "acme" || strings.Join(p.Roles, ",") != "agent" {
		t.Fatalf("whoami = %+v, %v", p, err)
	}

	// Roles.
	forbidden := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 403 || ce.Code != "forbidden" {
			t.Errorf("%s: %v, want 403 forbidden", what, err)
		}
	}
	_, err = approverA.CreateSession(ctx, client.SessionSpec{})
	forbidden("an approver creating a session", err)
	_, err = agentA.Approvals(ctx, "pending", 0)
	forbidden("an agent listing approvals", err)
	_, err = agentA.CreateKey(ctx, "x", "acme", []string{"admin"})
	forbidden("an agent creating a key", err)
	_, err = approverA.MCPServers(ctx)
	forbidden("an approver listing MCP servers", err)
	if _, err := ac.CreateKey(ctx, "x", "acme", []string{"root"}); err == nil {
		t.Error("a key with an unknown role was created")
	}

	// Tenant acme: a session, a call that ran, a memory, a pending approval.
	sa, err := agentA.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"echo", "execute_command", "memory_save", "memory_search"}})
	if err != nil {
		t.Fatal(err)
	}
	var echoCall string
	err = agentA.Run(ctx, sa.ID, "", client.Batch{Calls: []client.Call{
		{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"text":"acme secret"}`)},
		{ID: "c2", Name: "memory_save", Arguments: json.RawMessage(`{"content":"the acme launch code is 1234","key":"launch"}`)},
	}}, func(ev client.Event) error {
		if ev.Type == "message" && ev.Name == "echo" {
			echoCall = ev.CallID
		}
		return nil
	})
	if err != nil || echoCall == "" {
		t.Fatalf("acme run: %v (call %q)", err, echoCall)
	}
	rctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	aprID := runUntilApproval(t, rctx, agentA, sa.ID, client.Call{ID: "c3", Name: "execute_command",
		Arguments: json.RawMessage(`{"command":"echo approved-run >> ran.txt"}`)})

	// globex sees none of it.
	notFound := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 404 {
			t.Errorf("%s: %v, want 404", what, err)
		}
	}
	_, err = agentB.GetSession(ctx, sa.ID)
	notFound("globex reading acme's session", err)
	_, err = agentB.GetCall(ctx, echoCall)
	notFound("globex reading acme's call", err)
	notFound("globex running in acme's session", agentB.Run(ctx, sa.ID, "", client.Batch{Calls: []client.Call{{ID: "x", Name: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}}}, func(client.Event) error { return nil }))
	notFound("globex cancelling acme's call", agentB.CancelCall(ctx, echoCall))
	bKey := agentB.APIKey()
	for _, p := range []string{"/v1/sessions/" + sa.ID + "/tool-calls", "/v1/tool-calls/" + echoCall + "/progress", "/v1/tool-calls/" + echoCall + "/events"} {
		st, _, b := keyed(t, d, bKey, "GET", p, "")
		wantStatus(t, "globex GET "+p, st, 404, b)
	}
	// Nor can it page from acme's records: their ids are as unknown to it as ids never made.
	st, _, b := keyed(t, d, bKey, "GET", "/v1/tool-calls?before="+echoCall, "")
	wantStatus(t, "globex paging from acme's call", st, 404, b)
	st, _, b = keyed(t, d, approverB.APIKey(), "GET", "/v1/approvals?before="+aprID, "")
	wantStatus(t, "globex paging from acme's approval", st, 404, b)
	if as, err := approverB.Approvals(ctx, "pending", 0); err != nil || len(as) != 0 {
		t.Errorf("globex's approver sees %d pending approvals (%v), want 0", len(as), err)
	}
	_, err = approverB.GetApproval(ctx, aprID)
	notFound("globex reading acme's approval", err)
	_, err = approverB.Decide(ctx, aprID, client.Decision{Decision: "approve"})
	notFound("globex deciding acme's approval", err)

	// A memory search finds acme's memory for acme only.
	search := func(c *client.Client, sessionID string) string {
		t.Helper()
		var found string
		err := c.Run(ctx, sessionID, "", client.Batch{Calls: []client.Call{{ID: "m", Name: "memory_search", Arguments: json.RawMessage(`{"query":"launch code"}`)}}},
			func(ev client.Event) error {
				if ev.Type == "message" {
					if ev.IsError {
						t.Errorf("memory_search failed: %s", ev.Content())
					}
					found = ev.Content()
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if found := search(agentA, sa.ID); !strings.Contains(found, "1234") {
		t.Errorf("acme's memory search did not find acme's memory: %s", found)
	}
	sb, err := agentB.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"memory_search"}})
	if err != nil {
		t.Fatal(err)
	}
	if found := search(agentB, sb.ID); strings.Contains(found, "1234") {
		t.Errorf("globex's memory search found acme's memory: %s", found)
	}

	// acme's approver decides; the call runs.
	if as, err := approverA.Approvals(ctx, "pending", 0); err != nil || len(as) != 1 || as[0].ID != aprID {
		t.Fatalf("acme's approver sees %+v (%v), want the one approval", as, err)
	}
	if a, err := approverA.Decide(ctx, aprID, client.Decision{Decision: "approve", Actor: "bob"}); err != nil || a.Status != "approved" {
		t.Fatalf("acme's decision: %+v %v", a, err)
	}
	// The decision names the key that took it, with the person the client named.
	if a, err := d.app.Store.(store.ApprovalStore).GetApproval(ctx, aprID); err != nil || a.Decision == nil || !strings.HasPrefix(a.Decision.Actor, "bob via key acme approver (") {
		t.Errorf("decided approval: %+v %v; want its actor to name bob and the approver's key", a, err)
	}

	// Revoking a key shuts it out at once.
	keys, err := ac.Keys(ctx, "globex")
	if err != nil || len(keys) != 2 {
		t.Fatalf("globex keys: %+v %v", keys, err)
	}
	for _, k := range keys {
		if err := ac.RevokeKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err = agentB.GetSession(ctx, sb.ID)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 401 {
		t.Errorf("a revoked key: %v, want 401", err)
	}
}

// TestBootstrapKeyReplacesStaleFile: a data dir can hold an admin.key from an earlier
// store (wiped, or another daemon's). The new bootstrap key must not inherit that
// file's looser mode or follow a symlink put in its place: admin.key is a new 0600 file.
func TestBootstrapKeyReplacesStaleFile(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"loose mode", "symlink"} {
		dir, elsewhere := t.TempDir(), filepath.Join(t.TempDir(), "elsewhere")
		path := filepath.Join(dir, "admin.key")
		if kind == "symlink" {
			if err := os.WriteFile(elsewhere, []byte("not a key\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, path); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(path, []byte("tsk_stale\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, daemonOpts{dataDir: dir, mutate: func(c *config.Config) { c.Auth.Unauthenticated = false }})
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: admin.key is %v, want a regular file with mode 0600", kind, fi.Mode())
		}
		if b, _ := os.ReadFile(elsewhere); kind == "symlink" && string(b) != "not a key\n" {
			t.Errorf("%s: the key was written through the link: %q", kind, b)
		}
		raw, _ := os.ReadFile(path)
		st, _, b := keyed(t, d, strings.TrimSpace(string(raw)), "GET", "/v1/whoami", "")
		wantStatus(t, kind+": whoami with the key in admin.key", st, 200, b)
		d.stop()
	}
}

// TestUnauthenticatedRefusesWebPages: unauthenticated mode listens on loopback only,
// but a browser on the same machine reaches loopback for any web site: with a body
// without Content-Type a page's no-cors POST needs no preflight, and a name rebound to
// 127.0.0.1 makes the page same-origin. Requests from other sites' pages (Origin) and
// to other host names (Host) are refused; local clients and the console are served.
func TestUnauthenticatedRefusesWebPages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	port := d.url[strings.LastIndexByte(d.url, ':')+1:]
	send := func(method, path, host, origin, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:" + port, "", 200},
		{"localhost:" + port, "", 200},
		{"[::1]:" + port, "", 200},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port, 200}, // the console
		{"127.0.0.1:" + port, "http://localhost:3000", 200},    // a local dev server's page
		{"127.0.0.1:" + port, "https://evil.example", 403},
		{"127.0.0.1:" + port, "null", 403},
		{"rebound.evil.example:" + port, "http://rebound.evil.example:" + port, 403},
		{"rebound.evil.example:" + port, "", 403},
	} {
		st, b := send("GET", "/v1/whoami", tc.host, tc.origin, "")
		wantStatus(t, "GET /v1/whoami, Host "+tc.host+", Origin "+strconv.Quote(tc.origin), st, tc.want, b)
	}
	// The probes tell what runs (tool names and counts, the sandbox's host): a rebound
	// name reads them no more than the API; local scrapers do.
	for _, p := range []string{"/metrics", "/readyz"} {
		st, b := send("GET", p, "rebound.evil.example:"+port, "", "")
		wantStatus(t, "GET "+p+" through a rebound name", st, 403, b)
		st, b = send("GET", p, "127.0.0.1:"+port, "", "")
		wantStatus(t, "GET "+p+" on loopback", st, 200, b)
	}
	// What such a page would send: a command run without asking.
	marker := filepath.Join(t.TempDir(), "pwned")
	body := `{"session":{"available_tools":["execute_command"],"permission_mode":"bypass"},` +
		`"calls":[{"id":"1","name":"execute_command","arguments":{"command":"touch ` + marker + `"}}]}`
	st, b := send("POST", "/v1/tool-calls", "127.0.0.1:"+port, "https://evil.example", body)
	wantStatus(t, "POST /v1/tool-calls from another site's page", st, 403, b)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command of another site's page ran")
	}
}

// TestAuthLimitsAndCORS: per-key rate and concurrency limits answer 429 with
// Retry-After; CORS answers preflights for configured origins only.
func TestAuthLimitsAndCORS(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Auth.RateLimit.RequestsPerSecond = 0.01 // no refill while the test runs, however slow
		c.Auth.RateLimit.Burst = 3
		c.CORS.AllowedOrigins = []string{"https://console.example.com"}
	}})
	var limited bool
	for i := range 6 {
		st, h, b := keyed(t, d, "", "GET", "/v1/tools", "")
		if st == 429 {
			limited = true
			if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("429 with Retry-After %q", h.Get("Retry-After"))
			}
			validate(t, "Error", b)
			break
		}
		wantStatus(t, "request "+strconv.Itoa(i), st, 200, b)
	}
	if !limited {
		t.Error("6 requests within a 3-request burst at 0.01/s were all served")
	}

	preWith := func(origin, headers string) http.Header {
		req, _ := http.NewRequest("OPTIONS", d.url+"/v1/tools", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", headers)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header
	}
	pre := func(origin string) http.Header { return preWith(origin, "authorization") }
	if h := pre("https://console.example.com"); h.Get("Access-Control-Allow-Origin") != "https://console.example.com" ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Errorf("preflight from an allowed origin: %v", h)
	}
	if h := pre("https://evil.example.net"); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin allowed: %v", h)
	}
	// A browser UI traced with OpenTelemetry's fetch instrumentation adds the W3C
	// trace headers the daemon continues (tracing.enabled); a preflight refusing them
	// fails every request of that UI.
	if h := preWith("https://console.example.com", "authorization,content-type,traceparent,tracestate"); h.Get("Access-Control-Allow-Origin") != "https://console.example.com" ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "traceparent") {
		t.Errorf("preflight with W3C trace headers from an allowed origin: %v", h)
	}

	// Concurrency: one stream in flight per key.
	d2 := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Auth.MaxConcurrentRequests = 1 }})
	sess := d2.createSession(map[string]any{"available_tools": []string{"block"}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d2.url+"/v1/sessions/"+sess["id"].(string)+"/tool-calls",
		strings.NewReader(`{"calls":[{"id":"b","name":"block","arguments":{}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadBytes('\n'); err != nil { // tool_start: the stream is open
		t.Fatal(err)
	}
	st, _, b := keyed(t, d2, "", "GET", "/v1/tools", "")
	wantStatus(t, "a second request while a stream is open", st, 429, b)
	close(d2.tools.release)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !eventuallyOK(func() bool { st, _, _ := keyed(t, d2, "", "GET", "/v1/tools", ""); return st == 200 }) {
		t.Error("requests still refused after the stream ended")
	}
}

func eventuallyOK(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestRevokedKeyEndsEventStreams: an event stream opened with a key ends once the key
// is revoked; a stream of another key of the same tenant stays open.
func TestRevokedKeyEndsEventStreams(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Auth.Unauthenticated = false
	}})
	ctx := t.Context()
	ac, _ := bootstrapAdmin(t, d)
	revoked, err := ac.CreateKey(ctx, "leaked", "acme", []string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := ac.CreateKey(ctx, "kept", "acme", []string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.New(d.url, client.WithAPIKey(kept.Key)).CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	// open starts a stream and reports when its body ends.
	open := func(key, path string, h http.Header) <-chan error {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", d.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h != nil {
			req.Header = h.Clone()
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("GET %s: HTTP %d: %s", path, resp.StatusCode, b)
		}
		ended := make(chan error, 1)
		go func() {
			defer resp.Body.Close()
			_, err := io.Copy(io.Discard, resp.Body)
			ended <- err
		}()
		return ended
	}
	events := "/v1/sessions/" + sess.ID + "/events"
	leakedEvents, keptEvents := open(revoked.Key, events, nil), open(kept.Key, events, nil)
	// An MCP client's GET stream (server-to-client messages) of its MCP session.
	mcpHdr := mcpHeaders(sess.ID, "")
	mcpHdr.Set("Authorization", "Bearer "+revoked.Key)
	code, hdr, body := send(t, http.DefaultClient, http.MethodPost, d.url+"/mcp", mcpHdr, mcpInitializeBody)
	if code != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Fatalf("MCP initialize: %d %s", code, body)
	}
	mcpHdr.Set("Mcp-Session-Id", hdr.Get("Mcp-Session-Id"))
	if code, _, body := send(t, http.DefaultClient, http.MethodPost, d.url+"/mcp", mcpHdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", code, body)
	}
	mcpHdr.Set("Accept", "text/event-stream")
	leakedMCP := open(revoked.Key, "/mcp", mcpHdr)

	if err := ac.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	for what, ended := range map[string]<-chan error{"session events": leakedEvents, "MCP stream": leakedMCP} {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Errorf("%s opened with a revoked key still open 10s after the revocation", what)
		}
	}
	select {
	case err := <-keptEvents:
		t.Errorf("the stream of a key still valid ended: %v", err)
	default:
	}
	st, _, b := keyed(t, d, revoked.Key, "GET", events, "")
	wantStatus(t, "reopening with the revoked key", st, 401, b)
}

// TestClientWhitelists: through the Go client, an empty whitelist means no tool (no
// skill), a nil one every tool (every skill), and the session says which it has.
func TestClientWhitelists(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	ctx := t.Context()
	c := client.New(d.url)
	none, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{}, AvailableSkills: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(none.Tools) != 0 || none.AvailableTools == nil || len(none.AvailableTools) != 0 || none.AvailableSkills == nil || len(none.AvailableSkills) != 0 {
		t.Errorf("empty whitelists: tools %v, available_tools %#v, available_skills %#v; want no tool, [] and []",
			none.Tools, none.AvailableTools, none.AvailableSkills)
	}
	all, err := c.CreateSession(ctx, client.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Tools) == 0 || all.AvailableTools != nil || all.AvailableSkills != nil {
		t.Errorf("no whitelists: %d tools, available_tools %#v, available_skills %#v; want every tool, null and null",
			len(all.Tools), all.AvailableTools, all.AvailableSkills)
	}
	for _, s := range []*client.Session{none, all} {
		got, err := c.GetSession(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got.AvailableSkills == nil) != (s.AvailableSkills == nil) || (got.AvailableTools == nil) != (s.AvailableTools == nil) {
			t.Errorf("GET session %s: available_tools %#v, available_skills %#v; created with %#v, %#v",
				s.ID, got.AvailableTools, got.AvailableSkills, s.AvailableTools, s.AvailableSkills)
		}
	}
}

// TestWildcardOriginUnauthenticated: an origin matched by a wildcard entry of
// cors.allowed_origins is served in unauthenticated mode as CORS serves it (it used to
// be matched exactly there, so such a page got 403 while its preflight passed).
func TestWildcardOriginUnauthenticated(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.CORS.AllowedOrigins = []string{"https://*.apps.example.com"}
	}})
	get := func(origin string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", d.url+"/v1/whoami", nil)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header
	}
	st, h := get("https://ui.apps.example.com")
	if st != 200 || h.Get("Access-Control-Allow-Origin") != "https://ui.apps.example.com" {
		t.Errorf("page on a matching origin: %d, Access-Control-Allow-Origin %q; want 200 and the origin", st, h.Get("Access-Control-Allow-Origin"))
	}
	if st, h := get("https://apps.example.com.evil.net"); st != 403 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("page on another site: %d, Access-Control-Allow-Origin %q; want 403 and none", st, h.Get("Access-Control-Allow-Origin"))
	}
}

// bootstrapAdmin is a client with the admin key a daemon requiring keys wrote on its
// first start, and who that key is.
func bootstrapAdmin(t *testing.T, d *daemon) (*client.Client, *client.Principal) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.dataDir, "admin.key"))
	if err != nil {
		t.Fatalf("no bootstrap key: %v", err)
	}
	admin := client.New(d.url, client.WithAPIKey(strings.TrimSpace(string(raw))))
	me, err := admin.Whoami(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return admin, me
}

// runUntilApproval runs one call through c in the background until ctx ends and
// returns the id of the approval it waits for.
func runUntilApproval(t *testing.T, ctx context.Context, c *client.Client, sessionID string, call client.Call) string {
	t.Helper()
	ids := make(chan string, 1)
	go func() {
		_ = c.Run(ctx, sessionID, "", client.Batch{Calls: []client.Call{call}}, func(ev client.Event) error {
			if ev.Type == "approval_required" {
				var a struct{ ID string }
				_ = json.Unmarshal(ev.Approval, &a)
				select {
				case ids <- a.ID:
				default:
				}
			}
			return nil
		})
	}()
	select {
	case id := <-ids:
		return id
	case <-time.After(30 * time.Second):
		t.Fatalf("no approval_required for %s", call.Name)
		return ""
	}
}

package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// TestOAuthClientIsToldToSendKey: desktop clients that speak OAuth (mcp-remote, the
// MCP Inspector: the TypeScript SDK with an OAuth client provider) answer a 401 by
// looking for OAuth metadata and then registering at /register, and show what that
// last request answered. toolserverd takes API keys, not OAuth: what the client shows
// must say to send the key in the Authorization header, not "no route for POST
// /register" (which the SDK could not even parse as an OAuth error, and showed inside
// a schema validation error).
func TestOAuthClientIsToldToSendKey(t *testing.T) {
	t.Parallel()
	script := sdkScript(t, "sdk-oauth-client.mjs")
	d, admin := startWithKeys(t)
	var s sessionResp
	d.doHeaders(http.MethodPost, "/v1/sessions", admin,
		map[string]any{"available_tools": []string{"read_file"}}, http.StatusCreated, &s)

	const hint = "Authorization: Bearer"
	for _, u := range []string{d.URL + "/v1/sessions/" + s.ID + "/mcp", d.URL + "/mcp"} {
		for _, key := range []string{"", "tsk_wrong"} {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			args := []string{script, u}
			if key != "" {
				args = append(args, key)
			}
			out, err := exec.CommandContext(ctx, "node", args...).Output()
			cancel()
			if err != nil {
				t.Fatalf("sdk-oauth-client: %v: %s", err, out)
			}
			var r struct {
				Connected bool   `json:"connected"`
				Error     string `json:"error"`
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("sdk-oauth-client output is not JSON: %v: %s", err, out)
			}
			if r.Connected || !strings.Contains(r.Error, hint) || strings.Contains(r.Error, "Invalid OAuth error response") {
				t.Errorf("OAuth client at %s with key %q: %+v; want an error that says to send the key as %q", u, key, r, hint)
			}
		}
	}
	// The metadata a client asks for first is not there (404, so that clients move
	// on), and says so too.
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		body := d.doRaw(http.MethodGet, p, nil, http.StatusNotFound)
		if !strings.Contains(body, hint) {
			t.Errorf("GET %s: %s; want it to say to send the key as %q", p, body, hint)
		}
	}
	// With the key, the same client connects.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "node", script, d.URL+"/v1/sessions/"+s.ID+"/mcp", strings.TrimPrefix(admin["Authorization"], "Bearer ")).Output(); err != nil || !strings.Contains(string(out), `"connected":true`) {
		t.Errorf("OAuth client with the key: %v: %s", err, out)
	}
}

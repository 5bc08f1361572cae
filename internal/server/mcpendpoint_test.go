package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// mcpInitializeBody is an MCP client's first message.
const mcpInitializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`

// mcpHeaders are the headers of an MCP client's POST for a toolserverd session;
// mcpSessionID continues an MCP session when not empty.
func mcpHeaders(sessionID, mcpSessionID string) http.Header {
	h := http.Header{}
	h.Set("X-Toolserver-Session", sessionID)
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", "2025-11-25")
	if mcpSessionID != "" {
		h.Set("Mcp-Session-Id", mcpSessionID)
	}
	return h
}

// mcpInitialize opens an MCP session for the toolserverd session at url (an MCP
// endpoint) and returns its Mcp-Session-Id.
func mcpInitialize(t testing.TB, c *http.Client, url, sessionID string) string {
	t.Helper()
	code, hdr, body := send(t, c, http.MethodPost, url, mcpHeaders(sessionID, ""), mcpInitializeBody)
	var resp struct {
		ID     int `json:"id"`
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &resp) != nil || resp.ID != 1 || resp.Result.ProtocolVersion == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	mcpSID := hdr.Get("Mcp-Session-Id")
	if mcpSID == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	code, _, body = send(t, c, http.MethodPost, url, mcpHeaders(sessionID, mcpSID), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", code, body)
	}
	return mcpSID
}

// TestMCPEndpointBodyLimit: the MCP endpoint caps POST bodies at max_body_bytes like
// the REST routes. One byte over is 413 with the API's error body before mcp-go reads
// anything; a body of exactly the limit reaches mcp-go whole.
func TestMCPEndpointBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 4096
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.MaxBodyBytes = limit }})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	// The message padded with trailing spaces (valid JSON) to n bytes.
	padded := func(msg string, n int) string { return msg + strings.Repeat(" ", n-len(msg)) }
	mcpSID := mcpInitialize(t, http.DefaultClient, d.url+"/mcp", sess)
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"within the limit"}}}`

	for _, path := range []string{"/mcp", "/v1/sessions/" + sess + "/mcp"} {
		code, _, body := send(t, http.DefaultClient, http.MethodPost, d.url+path, mcpHeaders(sess, mcpSID), padded(call, limit+1))
		if code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: a body of %d bytes: %d %s, want 413", path, limit+1, code, body)
		}
		validate(t, "Error", body)
		if !bytes.Contains(body, []byte(`"code":"body_too_large"`)) {
			t.Fatalf("%s: 413 body %s", path, body)
		}
		code, _, body = send(t, http.DefaultClient, http.MethodPost, d.url+path, mcpHeaders(sess, mcpSID), padded(call, limit))
		var resp struct {
			ID     int `json:"id"`
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &resp) != nil || resp.ID != 9 ||
			len(resp.Result.Content) != 1 || resp.Result.Content[0].Text != "within the limit" {
			t.Fatalf("%s: a body of %d bytes: %d %s, want the echo result", path, limit, code, body)
		}
	}
	// The REST route of the same session answers the same size the same way.
	calls := `{"calls":[{"id":"a","name":"echo","arguments":{"text":"x"}}]}`
	if code, _, body := send(t, http.DefaultClient, http.MethodPost, d.url+"/v1/sessions/"+sess+"/tool-calls", nil, padded(calls, limit+1)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("REST tool-calls with %d bytes: %d %s", limit+1, code, body)
	}
}

// TestMCPEndpointErrorBodies: the errors mcp-go answers in plain text (a wrong content
// type) come back with the API's error body and their status, on both MCP paths, and
// so does an unknown MCP session (answered before mcp-go, saying what to do); a body
// that is not JSON-RPC keeps its JSON-RPC parse error.
func TestMCPEndpointErrorBodies(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	mcpSID := mcpInitialize(t, http.DefaultClient, d.url+"/mcp", sess)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	textHeaders := mcpHeaders(sess, mcpSID)
	textHeaders.Set("Content-Type", "text/plain")
	for _, path := range []string{"/mcp", "/v1/sessions/" + sess + "/mcp"} {
		for _, tc := range []struct {
			name   string
			method string
			hdr    http.Header
			body   string
			status int
			code   string
			want   string
		}{
			{"unknown MCP session", http.MethodPost, mcpHeaders(sess, "mcp-session-unknown"), list, http.StatusNotFound, "not_found", "initialize a new one"},
			{"wrong content type", http.MethodPost, textHeaders, list, http.StatusBadRequest, "bad_request", "MCP endpoint: "},
		} {
			code, hdr, body := send(t, http.DefaultClient, tc.method, d.url+path, tc.hdr, tc.body)
			if code != tc.status || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
				t.Fatalf("%s %s: %d %q %s, want %d with a JSON body", path, tc.name, code, hdr.Get("Content-Type"), body, tc.status)
			}
			validate(t, "Error", body)
			if !bytes.Contains(body, []byte(`"code":"`+tc.code+`"`)) || !bytes.Contains(body, []byte(tc.want)) {
				t.Fatalf("%s %s: body %s, want code %s and %q", path, tc.name, body, tc.code, tc.want)
			}
		}
		code, _, body := send(t, http.DefaultClient, http.MethodPost, d.url+path, mcpHeaders(sess, mcpSID), `{"jsonrpc":`)
		if code != http.StatusBadRequest || !bytes.Contains(body, []byte(`"code":-32700`)) {
			t.Fatalf("%s: a body that is not JSON: %d %s, want 400 with a JSON-RPC parse error", path, code, body)
		}
		validate(t, "JSONRPCError", body)
	}
	// The session still works, and its answers are untouched.
	code, _, body := send(t, http.DefaultClient, http.MethodPost, d.url+"/mcp", mcpHeaders(sess, mcpSID), list)
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"echo"`)) {
		t.Fatalf("tools/list after the errors: %d %s", code, body)
	}
}

// TestMCPEndpointListenNeedsALiveSession: the GET event stream belongs to an MCP
// session. Without Mcp-Session-Id it is a 400, and with an id that is not live (made
// up, deleted, or from before a restart) a 404, so the client initializes again
// instead of listening on a stream nothing will ever reach; a live session's stream
// opens.
func TestMCPEndpointListenNeedsALiveSession(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	live := mcpInitialize(t, http.DefaultClient, d.url+"/mcp", sess)
	deleted := mcpInitialize(t, http.DefaultClient, d.url+"/mcp", sess)
	if code, _, body := send(t, http.DefaultClient, http.MethodDelete, d.url+"/mcp", mcpHeaders(sess, deleted), nil); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	listen := func(path, mcpSID string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, d.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = mcpHeaders(sess, mcpSID)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s (%q): %v", path, mcpSID, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, nil // a stream: not read to its end
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	for _, path := range []string{"/mcp", "/v1/sessions/" + sess + "/mcp"} {
		for _, tc := range []struct {
			name   string
			mcpSID string
			status int
		}{
			{"no MCP session", "", http.StatusBadRequest},
			{"made-up MCP session", "mcp-session-MADEUP", http.StatusNotFound},
			{"deleted MCP session", deleted, http.StatusNotFound},
			{"live MCP session", live, http.StatusOK},
		} {
			code, body := listen(path, tc.mcpSID)
			if code != tc.status {
				t.Fatalf("GET %s, %s: %d %s, want %d", path, tc.name, code, body, tc.status)
			}
			if code != http.StatusOK {
				validate(t, "Error", body)
			}
		}
	}
}

// TestMCPEndpointEndNeedsALiveSession: DELETE ends an MCP session. Without
// Mcp-Session-Id it is a 400 and with one that is not live (made up, or ended already)
// a 404, as MCP's transport requires for ended sessions and as GET answers: a client
// is not told it ended a session that never was.
func TestMCPEndpointEndNeedsALiveSession(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for _, path := range []string{"/mcp", "/v1/sessions/" + sess + "/mcp"} {
		live := mcpInitialize(t, http.DefaultClient, d.url+path, sess)
		for _, tc := range []struct {
			name   string
			mcpSID string
			status int
		}{
			{"no MCP session", "", http.StatusBadRequest},
			{"made-up MCP session", "mcp-session-MADEUP", http.StatusNotFound},
			{"live MCP session", live, http.StatusOK},
			{"ended MCP session", live, http.StatusNotFound},
		} {
			code, _, body := send(t, http.DefaultClient, http.MethodDelete, d.url+path, mcpHeaders(sess, tc.mcpSID), nil)
			if code != tc.status {
				t.Fatalf("DELETE %s, %s: %d %s, want %d", path, tc.name, code, body, tc.status)
			}
			if code != http.StatusOK {
				validate(t, "Error", body)
			}
		}
	}
}

// TestMCPEndpointMessageNeedsASession: a message other than initialize without
// Mcp-Session-Id is a 400 that says to send it (MCP's transport: a server that needs
// sessions answers such requests 400), as GET and DELETE answer; mcp-go said 404
// "Session terminated", for a session the client never named. One with an id that is
// not live (ended, made up, from before a restart) stays a 404, on which clients start
// a new session, and says so.
func TestMCPEndpointMessageNeedsASession(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for _, path := range []string{"/mcp", "/v1/sessions/" + sess + "/mcp"} {
		live := mcpInitialize(t, http.DefaultClient, d.url+path, sess)
		for _, tc := range []struct {
			name, mcpSID, body string
			status             int
			want               string
		}{
			{"request, no MCP session", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusBadRequest, "Mcp-Session-Id"},
			{"notification, no MCP session", "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusBadRequest, "Mcp-Session-Id"},
			{"request, made-up MCP session", "mcp-session-MADEUP", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusNotFound, "initialize a new one"},
			{"request, live MCP session", live, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, http.StatusOK, "echo"},
		} {
			code, _, body := send(t, http.DefaultClient, http.MethodPost, d.url+path, mcpHeaders(sess, tc.mcpSID), tc.body)
			if code != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("POST %s, %s: %d %s, want %d mentioning %q", path, tc.name, code, body, tc.status, tc.want)
			}
			if code != http.StatusOK {
				validate(t, "Error", body)
			}
		}
	}
}

// TestMCPEndpointCORS: a browser MCP client on an allowed origin can run a session on
// either endpoint: its preflights allow the headers the transport sends (Mcp-Session-Id,
// Mcp-Protocol-Version, Last-Event-ID, the session header of /mcp), and the answers
// let it read Mcp-Session-Id, which it must send back. Other origins get nothing.
func TestMCPEndpointCORS(t *testing.T) {
	t.Parallel()
	const origin = "https://console.example.com"
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.CORS.AllowedOrigins = []string{origin} }})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	preflight := func(path, from, method, headers string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodOptions, d.url+path, nil)
		req.Header.Set("Origin", from)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", headers)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	allows := func(resp *http.Response, method, headers string) bool {
		h := resp.Header
		if resp.StatusCode/100 != 2 || h.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), method) {
			return false
		}
		granted := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
		for _, want := range strings.Split(headers, ",") {
			if !strings.Contains(granted, strings.TrimSpace(want)) {
				return false
			}
		}
		return true
	}
	exposes := func(h http.Header, header string) bool {
		for _, e := range strings.Split(h.Get("Access-Control-Expose-Headers"), ",") {
			if strings.EqualFold(strings.TrimSpace(e), header) {
				return true
			}
		}
		return false
	}
	for _, path := range []string{"/mcp", "/v1/sessions/" + sess + "/mcp"} {
		// initialize: the preflight, then the POST, whose answer shows Mcp-Session-Id.
		const initHeaders = "content-type,mcp-protocol-version,x-toolserver-session"
		if resp := preflight(path, origin, "POST", initHeaders); !allows(resp, "POST", initHeaders) {
			t.Fatalf("%s: preflight of initialize: %d %v", path, resp.StatusCode, resp.Header)
		}
		h := mcpHeaders(sess, "")
		h.Set("Origin", origin)
		code, hdr, body := send(t, http.DefaultClient, "POST", d.url+path, h, mcpInitializeBody)
		mcpSID := hdr.Get("Mcp-Session-Id")
		if code != http.StatusOK || mcpSID == "" {
			t.Fatalf("%s: initialize: %d %s", path, code, body)
		}
		if hdr.Get("Access-Control-Allow-Origin") != origin || !exposes(hdr, "Mcp-Session-Id") {
			t.Fatalf("%s: initialize from %s: the browser may not read Mcp-Session-Id: %v", path, origin, hdr)
		}
		// The requests that carry it back: messages, the listening stream, the end.
		for _, tc := range []struct{ method, headers string }{
			{"POST", "content-type,mcp-protocol-version,mcp-session-id,x-toolserver-session"},
			{"GET", "last-event-id,mcp-protocol-version,mcp-session-id,x-toolserver-session"},
			{"DELETE", "mcp-protocol-version,mcp-session-id,x-toolserver-session"},
		} {
			if resp := preflight(path, origin, tc.method, tc.headers); !allows(resp, tc.method, tc.headers) {
				t.Errorf("%s: preflight of %s: %d %v", path, tc.method, resp.StatusCode, resp.Header)
			}
		}
		h = mcpHeaders(sess, mcpSID)
		h.Set("Origin", origin)
		code, hdr, body = send(t, http.DefaultClient, "POST", d.url+path, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if code != http.StatusAccepted || hdr.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%s: notifications/initialized: %d %v %s", path, code, hdr, body)
		}
		code, hdr, body = send(t, http.DefaultClient, "POST", d.url+path, h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from a page"}}}`)
		if code != http.StatusOK || !strings.Contains(string(body), "from a page") || hdr.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%s: tools/call: %d %v %s", path, code, hdr, body)
		}
		listen, _ := http.NewRequestWithContext(t.Context(), "GET", d.url+path, nil)
		listen.Header = h.Clone()
		stream, err := http.DefaultClient.Do(listen)
		if err != nil {
			t.Fatal(err)
		}
		stream.Body.Close() // the head is what matters
		if stream.StatusCode != http.StatusOK || stream.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%s: GET stream: %d %v", path, stream.StatusCode, stream.Header)
		}
		code, hdr, body = send(t, http.DefaultClient, "DELETE", d.url+path, h, nil)
		if code != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%s: DELETE: %d %v %s", path, code, hdr, body)
		}
		// Another site's page gets no grant.
		if resp := preflight(path, "https://evil.example.net", "POST", initHeaders); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: preflight from another origin allowed: %v", path, resp.Header)
		}
	}
}

package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m,
		// Idle keep-alive connections of the test clients' transports.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// waitLimit bounds every wait; it only matters when a test fails.
const waitLimit = 60 * time.Second

type daemon struct {
	*testdaemon.Daemon
	t *testing.T

	mu       sync.Mutex
	handlers []func(mcp.JSONRPCNotification)
}

// onNotification receives the notifications of every client of the test; it must
// be registered before the client connects.
func (d *daemon) onNotification(h func(mcp.JSONRPCNotification)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handlers = append(d.handlers, h)
}

func start(t *testing.T, mutate func(*config.Config)) *daemon {
	t.Helper()
	return &daemon{Daemon: testdaemon.Start(t, mutate), t: t}
}

// do sends a REST request and decodes the JSON answer into out (if not nil).
func (d *daemon) do(method, path string, body any, wantStatus int, out any) {
	d.t.Helper()
	d.doHeaders(method, path, nil, body, wantStatus, out)
}

// doRaw sends a request and returns the body unparsed (an NDJSON stream, say).
func (d *daemon) doRaw(method, path string, body any, wantStatus int) string {
	d.t.Helper()
	var raw json.RawMessage
	d.doHeaders(method, path, nil, body, wantStatus, &rawBody{&raw})
	return string(raw)
}

type rawBody struct{ p *json.RawMessage }

func (d *daemon) doHeaders(method, path string, headers map[string]string, body any, wantStatus int, out any) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.URL+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		d.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, wantStatus, raw)
	}
	if rb, ok := out.(*rawBody); ok {
		*rb.p = raw
		return
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			d.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

type sessionResp struct {
	ID    string   `json:"id"`
	Tools []string `json:"tools"`
}

func (d *daemon) session(spec map[string]any) sessionResp {
	d.t.Helper()
	var s sessionResp
	d.do(http.MethodPost, "/v1/sessions", spec, http.StatusCreated, &s)
	return s
}

// connect starts an initialized mcp-go client for a session over /mcp (the header
// names the session); it is closed when the test ends.
func (d *daemon) connect(sessionID string, opts ...client.ClientOption) *client.Client {
	d.t.Helper()
	c, err := d.dial(d.URL+"/mcp", map[string]string{"X-Toolserver-Session": sessionID}, opts...)
	if err != nil {
		d.t.Fatalf("connect: %v", err)
	}
	return c
}

func (d *daemon) dial(url string, headers map[string]string, opts ...client.ClientOption) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers), transport.WithContinuousListening())
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, opts...)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, h := range d.handlers {
			h(n)
		}
	})
	// Start's context lives as long as the client: it carries the listening stream.
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	d.t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "toolserverd-test", Version: "0"}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, err
	}
	return c, nil
}

func callReq(name string, args map[string]any) mcp.CallToolRequest {
	var r mcp.CallToolRequest
	r.Params.Name = name
	r.Params.Arguments = args
	return r
}

func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func metaString(r *mcp.CallToolResult, key string) string {
	if r.Meta == nil {
		return ""
	}
	s, _ := r.Meta.AdditionalFields[key].(string)
	return s
}

// waitFor polls cond until it holds or the wait limit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawMCP returns a POST to /mcp as a client of the toolserverd session speaking
// protocol version: it sends body with the MCP session id mcpSID ("" for none) and
// returns the status, headers and body. A failed request is a test error.
func (d *daemon) rawMCP(session, version string) func(mcpSID, body string) (int, http.Header, string) {
	return func(mcpSID, body string) (int, http.Header, string) {
		req, err := http.NewRequest(http.MethodPost, d.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			d.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Toolserver-Session", session)
		req.Header.Set("Mcp-Protocol-Version", version)
		if mcpSID != "" {
			req.Header.Set("Mcp-Session-Id", mcpSID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			d.t.Errorf("POST %s: %v", body, err)
			return 0, nil, ""
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(raw)
	}
}

// rawSession initializes an MCP session of the toolserverd session with raw HTTP, as
// a client speaking protocol version, and returns its Mcp-Session-Id.
func (d *daemon) rawSession(session, version string) string {
	d.t.Helper()
	return d.rawSessionWith(session, version, `{}`)
}

// rawSessionWith is rawSession for a client declaring capabilities (a JSON object).
func (d *daemon) rawSessionWith(session, version, capabilities string) string {
	d.t.Helper()
	post := d.rawMCP(session, version)
	code, hdr, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":`+capabilities+`,"clientInfo":{"name":"raw","version":"0"}}}`)
	mcpSID := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || mcpSID == "" {
		d.t.Fatalf("initialize: %d %s", code, body)
	}
	if code, _, body := post(mcpSID, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		d.t.Fatalf("notifications/initialized: %d %s", code, body)
	}
	return mcpSID
}

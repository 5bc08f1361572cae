package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
)

// headerTransport adds headers to every request of a go-sdk client and, while drop is
// set, answers its notifications/cancelled itself (202) without sending it.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper

	mu   sync.Mutex
	drop bool
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	h.mu.Lock()
	drop := h.drop
	h.mu.Unlock()
	if drop && r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
			return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return h.next.RoundTrip(r)
}

// TestGoSDKClient: the official MCP Go SDK (github.com/modelcontextprotocol/go-sdk)
// as a client of /mcp with API keys: it negotiates a protocol version (server/discover
// on 2026-07-28 first, which the endpoint refuses, then initialize), lists the
// session's tools, calls one watching its progress, has a risky call approved by
// answering the elicitation, resumes a call whose stream broke, and closes its
// session (DELETE) and opens another.
// A call it cancels and then closes its session on is cancelled by request: go-sdk
// sends notifications/cancelled on its own goroutine, best effort, and Close does not
// wait for it, so the DELETE may be all the endpoint hears (here it is: the client's
// transport drops the notification).
func TestGoSDKClient(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.Auth.Unauthenticated = false })
	raw, err := os.ReadFile(filepath.Join(d.App.DataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	admin := map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(raw))}
	mkKey := func(roles ...string) string {
		var k struct{ Key string }
		d.doHeaders(http.MethodPost, "/v1/keys", admin, map[string]any{"roles": roles}, http.StatusCreated, &k)
		return k.Key
	}
	person, agent := mkKey("agent", "approver"), mkKey("agent")
	var s sessionResp
	d.doHeaders(http.MethodPost, "/v1/sessions", map[string]string{"Authorization": "Bearer " + agent},
		map[string]any{"available_tools": []string{"execute_command", "read_file"}, "permission_mode": "default"}, http.StatusCreated, &s)

	var connectAt func(endpoint, key string) (*gosdk.ClientSession, *headerTransport)
	var mu sync.Mutex
	var progress []string
	var elicited []string
	connect := func(key string) (*gosdk.ClientSession, *headerTransport) {
		t.Helper()
		return connectAt(d.URL+"/mcp", key)
	}
	connectAt = func(endpoint, key string) (*gosdk.ClientSession, *headerTransport) {
		t.Helper()
		own := http.DefaultTransport.(*http.Transport).Clone()
		ht := &headerTransport{headers: map[string]string{"Authorization": "Bearer " + key, "X-Toolserver-Session": s.ID}, next: own}
		c := gosdk.NewClient(&gosdk.Implementation{Name: "gosdk-test", Version: "0"}, &gosdk.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *gosdk.ProgressNotificationClientRequest) {
				mu.Lock()
				progress = append(progress, r.Params.Message)
				mu.Unlock()
			},
			ElicitationHandler: func(_ context.Context, r *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
				mu.Lock()
				elicited = append(elicited, r.Params.Message)
				mu.Unlock()
				return &gosdk.ElicitResult{Action: "accept", Content: map[string]any{"reason": "fine by me"}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
		defer cancel()
		cs, err := c.Connect(ctx, &gosdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: ht}}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() {
			_ = cs.Close()
			own.CloseIdleConnections()
		})
		return cs, ht
	}
	call := func(ctx context.Context, cs *gosdk.ClientSession, command string) (*gosdk.CallToolResult, error) {
		p := &gosdk.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": command}}
		p.SetProgressToken("tok")
		return cs.CallTool(ctx, p)
	}
	text := func(r *gosdk.CallToolResult) string {
		var parts []string
		for _, c := range r.Content {
			if tc, ok := c.(*gosdk.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return strings.Join(parts, "\n")
	}

	cs, _ := connect(person)
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated protocol version %q, want 2025-11-25", v)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "execute_command" {
			if schema, _ := json.Marshal(tl.InputSchema); !strings.Contains(string(schema), `"command"`) {
				t.Errorf("execute_command's inputSchema lacks command: %s", schema)
			}
		}
	}
	if strings.Join(names, ",") != "execute_command,read_file" {
		t.Errorf("tools/list = %v, want the session's execute_command and read_file", names)
	}

	res, err := call(t.Context(), cs, "for i in 1 2 3; do echo line$i; sleep 0.2; done")
	if err != nil || res.IsError || !strings.Contains(text(res), "line3") {
		t.Fatalf("tools/call: err=%v result=%+v", err, res)
	}
	mu.Lock()
	got := strings.Join(progress, "")
	mu.Unlock()
	if !strings.Contains(got, "line1") {
		t.Errorf("progress before the result = %q, want the first line", got)
	}

	res, err = call(t.Context(), cs, riskyCommand)
	if err != nil || res.IsError || !strings.Contains(text(res), "removed") {
		t.Fatalf("risky call: err=%v result=%+v", err, res)
	}
	mu.Lock()
	if len(elicited) != 1 || !strings.Contains(elicited[0], "rm -rf build-output") {
		t.Errorf("elicitations = %q, want one asking about the risky call", elicited)
	}
	mu.Unlock()

	// A call whose stream a proxy breaks after its first event: go-sdk resumes it
	// (a GET with Last-Event-ID) and gets the result.
	p := startStreamCutter(t, strings.TrimPrefix(d.URL, "http://"))
	resuming, _ := connectAt("http://"+p.ln.Addr().String()+"/mcp", person)
	res, err = call(t.Context(), resuming, "echo started && sleep 1 && echo finished")
	if err != nil || res.IsError || !strings.Contains(text(res), "finished") {
		t.Fatalf("call through a broken stream: err=%v result=%+v", err, res)
	}
	// How go-sdk got the result back (a GET with Last-Event-ID, mostly) is its own
	// affair and, on a loaded machine, not always the same way: what counts is that a
	// cut stream did not lose the result.
	if !p.cut.Load() {
		t.Fatal("the proxy did not cut the stream")
	}
	t.Logf("the stream was cut; the client resumed it with Last-Event-ID: %v", p.resumed.Load())

	// Close ends the MCP session (DELETE): it is gone, and a new one works.
	sid := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+person)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of the closed MCP session: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}

	// An agent-only key is not asked: the call waits for a person. The client gives
	// up on it and closes its session at once, the notification lost.
	cs, ht := connect(agent)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, cs, riskyCommand)
		errc <- err
	}()
	var pending struct {
		Approvals []approvalRec `json:"approvals"`
	}
	waitFor(t, "a pending approval", func() bool {
		d.doHeaders(http.MethodGet, "/v1/approvals?status=pending&wait=30s&session_id="+s.ID, admin, nil, http.StatusOK, &pending)
		return len(pending.Approvals) > 0
	})
	apr := pending.Approvals[0]
	ht.mu.Lock()
	ht.drop = true
	ht.mu.Unlock()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Withdrawn at once; left pending, an approval given later would run the call.
	var rec approvalRec
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.doHeaders(http.MethodGet, "/v1/approvals/"+apr.ID, admin, nil, http.StatusOK, &rec)
		if rec.Status != "pending" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval request of a call whose client cancelled it and closed its session is still pending")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var call2 callRecord
	d.doHeaders(http.MethodGet, "/v1/tool-calls/"+apr.CallID, admin, nil, http.StatusOK, &call2)
	if call2.ErrorKind != "cancelled" && call2.ErrorKind != "denied" {
		t.Fatalf("record of the call its client cancelled: %+v", call2)
	}
	d.doHeaders(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision", admin, map[string]any{"decision": "approve"}, http.StatusConflict, nil)
}

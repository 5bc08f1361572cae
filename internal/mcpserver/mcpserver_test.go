package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

func listNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func TestToolsListIsTheSessionsTools(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command", "read_file", "grep*"}})
	if len(s.Tools) < 3 {
		t.Fatalf("session tools %v: want execute_command, read_file and the grep tools", s.Tools)
	}
	want := slices.Sorted(slices.Values(s.Tools))
	if got := listNames(t, d.connect(s.ID)); !slices.Equal(got, want) {
		t.Fatalf("tools/list over /mcp = %v, want the session's tools %v", got, want)
	}
	// The session-scoped URL needs no header.
	c, err := d.dial(d.URL+"/v1/sessions/"+s.ID+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, c); !slices.Equal(got, want) {
		t.Fatalf("tools/list over the session URL = %v, want %v", got, want)
	}
	// Another session sees its own tools through the same endpoint.
	other := d.session(map[string]any{"available_tools": []string{"read_file"}})
	if got := listNames(t, d.connect(other.ID)); !slices.Equal(got, []string{"read_file"}) {
		t.Fatalf("tools/list of the second session = %v, want [read_file]", got)
	}
}

func TestCallBuiltinRecordsTheCall(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command", "read_file"}})
	c := d.connect(s.ID)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": "echo hello-from-mcp"}))
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError || !strings.Contains(resultText(res), "hello-from-mcp") {
		t.Fatalf("result: is_error=%v text=%q", res.IsError, resultText(res))
	}
	callID := metaString(res, "toolserverd/call_id")
	if !strings.HasPrefix(callID, "tc_") {
		t.Fatalf("result _meta has no call id: %+v", res.Meta)
	}
	var rec struct {
		SessionID string `json:"session_id"`
		Name      string `json:"name"`
		Status    string `json:"status"`
	}
	d.do(http.MethodGet, "/v1/tool-calls/"+callID, nil, http.StatusOK, &rec)
	if rec.SessionID != s.ID || rec.Name != "execute_command" || rec.Status != "succeeded" {
		t.Fatalf("call record %+v", rec)
	}

	// A tool outside the whitelist is not callable; bad arguments are a result the
	// model can fix.
	if _, err := c.CallTool(ctx, callReq("write_file", map[string]any{"path": "x", "content": "y"})); err == nil {
		t.Fatal("calling a tool outside the session's whitelist succeeded")
	}
	res, err = c.CallTool(ctx, callReq("read_file", map[string]any{"path": 42}))
	if err != nil {
		t.Fatalf("tools/call with bad arguments: %v", err)
	}
	if !res.IsError || metaString(res, "toolserverd/error_kind") != "invalid_args" {
		t.Fatalf("bad arguments: is_error=%v kind=%q text=%q", res.IsError, metaString(res, "toolserverd/error_kind"), resultText(res))
	}
}

// progressLog collects the progress notifications of one token.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) handler(token string) func(mcp.JSONRPCNotification) {
	return func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) || fmt.Sprint(n.Params.AdditionalFields["progressToken"]) != token {
			return
		}
		msg, _ := n.Params.AdditionalFields["message"].(string)
		p.mu.Lock()
		p.msgs = append(p.msgs, msg)
		p.mu.Unlock()
	}
}

func (p *progressLog) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

func TestProgressNotifications(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	c := d.connect(s.ID)
	var log progressLog
	c.OnNotification(log.handler("tok-1"))

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req := callReq("execute_command", map[string]any{"command": "for i in 1 2 3 4; do echo line$i; sleep 0.3; done"})
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError || !strings.Contains(resultText(res), "line4") {
		t.Fatalf("result: is_error=%v text=%q", res.IsError, resultText(res))
	}
	// Notifications of a request arrive on its stream before its response. mcp-go
	// may drop the very last one, so only the first lines are asserted.
	got := strings.Join(log.snapshot(), "")
	if !strings.Contains(got, "line1") {
		t.Fatalf("no progress with the first line before the result; got %q", got)
	}
	if i, j := strings.Index(got, "line1"), strings.Index(got, "line2"); j >= 0 && j < i {
		t.Fatalf("progress out of order: %q", got)
	}
}

type callRecord struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Status    string         `json:"status"`
	ErrorKind string         `json:"error_kind"`
	Arguments map[string]any `json:"arguments"`
}

func (d *daemon) calls(sessionID string) []callRecord {
	var out struct {
		Calls []callRecord `json:"calls"`
	}
	d.do(http.MethodGet, "/v1/sessions/"+sessionID+"/tool-calls", nil, http.StatusOK, &out)
	return out.Calls
}

// TestCancellationCancelsTheCall: mcp-go's Go client gives up on a call by dropping
// its request (it sends no notifications/cancelled over HTTP); the call is cancelled
// once mcp_endpoint.resume_window passes without the client resuming its stream.
func TestCancellationCancelsTheCall(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.MCPEndpoint.ResumeWindow = time.Second })
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	c := d.connect(s.ID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": "sleep 120"}))
		errc <- err
	}()
	var id string
	waitFor(t, "the call to run", func() bool {
		for _, r := range d.calls(s.ID) {
			if r.Status == "running" {
				id = r.ID
				return true
			}
		}
		return false
	})
	cancel() // mcp-go drops the request
	if err := <-errc; err == nil {
		t.Fatal("a cancelled tools/call returned no error")
	}
	var rec callRecord
	waitFor(t, "the call to be cancelled", func() bool {
		d.do(http.MethodGet, "/v1/tool-calls/"+id, nil, http.StatusOK, &rec)
		return rec.Status != "running" && rec.Status != "pending"
	})
	if rec.ErrorKind != "cancelled" {
		t.Fatalf("cancelled call record: %+v", rec)
	}
}

type approvalRec struct {
	ID       string `json:"id"`
	CallID   string `json:"call_id"`
	Status   string `json:"status"`
	Decision *struct {
		Kind     string `json:"kind"`
		Actor    string `json:"actor"`
		Reason   string `json:"reason"`
		ByPolicy bool   `json:"by_policy"`
	} `json:"decision"`
}

func (d *daemon) pendingApproval(sessionID string) approvalRec {
	d.t.Helper()
	var out struct {
		Approvals []approvalRec `json:"approvals"`
	}
	waitFor(d.t, "a pending approval", func() bool {
		d.do(http.MethodGet, "/v1/approvals?status=pending&wait=30s&session_id="+sessionID, nil, http.StatusOK, &out)
		return len(out.Approvals) > 0
	})
	return out.Approvals[0]
}

const riskyCommand = "rm -rf build-output && echo removed"

func TestApprovalDecidedThroughREST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		decision  string
		wantError bool
	}{{"approve", false}, {"deny", true}} {
		t.Run(tc.decision, func(t *testing.T) {
			t.Parallel()
			d := start(t, nil)
			s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
			c := d.connect(s.ID)
			type outcome struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				res, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": riskyCommand}))
				done <- outcome{res, err}
			}()
			apr := d.pendingApproval(s.ID)
			d.do(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision",
				map[string]any{"decision": tc.decision, "reason": "checked by a person"}, http.StatusOK, nil)
			out := <-done
			if out.err != nil {
				t.Fatalf("tools/call: %v", out.err)
			}
			if out.res.IsError != tc.wantError {
				t.Fatalf("%s: is_error=%v text=%q", tc.decision, out.res.IsError, resultText(out.res))
			}
			if tc.wantError {
				if k := metaString(out.res, "toolserverd/error_kind"); k != "denied" || !strings.Contains(resultText(out.res), "checked by a person") {
					t.Fatalf("denied call: kind=%q text=%q", k, resultText(out.res))
				}
			} else if !strings.Contains(resultText(out.res), "removed") {
				t.Fatalf("approved call did not run: %q", resultText(out.res))
			}
		})
	}
}

func TestApprovalDecidedByElicitation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action    mcp.ElicitationResponseAction
		wantError bool
		wantKind  string
	}{{mcp.ElicitationResponseActionAccept, false, "approve"}, {mcp.ElicitationResponseActionDecline, true, "deny"}} {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			d := start(t, nil)
			s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
			asked := make(chan string, 1)
			c := d.connect(s.ID, client.WithElicitationHandler(elicitFunc(func(req mcp.ElicitationRequest) *mcp.ElicitationResult {
				select {
				case asked <- req.Params.Message:
				default:
				}
				return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: tc.action,
					Content: map[string]any{"reason": "answered in the IDE"}}}
			})))
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			res, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": riskyCommand}))
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			msg := <-asked
			if !strings.Contains(msg, "execute_command") || !strings.Contains(msg, "rm -rf build-output") {
				t.Fatalf("elicitation message does not describe the call: %q", msg)
			}
			// A person reads the arguments: "&&" as written, not JSON's HTML escape.
			if want := "Arguments: {\n  \"command\": \"" + riskyCommand + "\"\n}"; !strings.Contains(msg, want) {
				t.Fatalf("elicitation message lacks the arguments as written %q: %q", want, msg)
			}
			if res.IsError != tc.wantError {
				t.Fatalf("is_error=%v text=%q", res.IsError, resultText(res))
			}
			if tc.wantError && resultText(res) != "denied by the user: answered in the IDE" {
				t.Errorf("the model reads %q, want the user's reason", resultText(res))
			}
			var apr approvalRec
			var list struct {
				Approvals []approvalRec `json:"approvals"`
			}
			d.do(http.MethodGet, "/v1/approvals?session_id="+s.ID, nil, http.StatusOK, &list)
			if len(list.Approvals) != 1 {
				t.Fatalf("approvals of the session: %+v", list.Approvals)
			}
			apr = list.Approvals[0]
			if apr.Decision == nil || apr.Decision.Kind != tc.wantKind || apr.Decision.Actor != "mcp-client" || apr.Decision.Reason != "answered in the IDE" {
				t.Fatalf("recorded decision: %+v", apr.Decision)
			}
		})
	}
}

// TestElicitationNeedsApproverRole: deciding an approval takes the approver role, on
// REST and by elicitation alike. A client with an agent-only key is not asked: its
// "accept" would let an agent key approve its own calls.
func TestElicitationNeedsApproverRole(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.Auth.Unauthenticated = false })
	raw, err := os.ReadFile(filepath.Join(d.App.DataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	admin := bearer(strings.TrimSpace(string(raw)))
	mkKey := func(roles ...string) map[string]string {
		var k struct{ Key string }
		d.doHeaders(http.MethodPost, "/v1/keys", admin, map[string]any{"tenant": "acme", "roles": roles}, http.StatusCreated, &k)
		return bearer(k.Key)
	}
	agent, approver := mkKey("agent"), mkKey("approver")
	var s sessionResp
	d.doHeaders(http.MethodPost, "/v1/sessions", agent,
		map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"}, http.StatusCreated, &s)
	asked := make(chan struct{}, 1)
	c, err := d.dial(d.URL+"/v1/sessions/"+s.ID+"/mcp", agent, client.WithElicitationHandler(elicitFunc(func(mcp.ElicitationRequest) *mcp.ElicitationResult {
		select {
		case asked <- struct{}{}:
		default:
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}
	})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, _ := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": riskyCommand}))
		done <- res
	}()
	var list struct {
		Approvals []approvalRec `json:"approvals"`
	}
	waitFor(t, "the approval request", func() bool {
		d.doHeaders(http.MethodGet, "/v1/approvals?session_id="+s.ID, approver, nil, http.StatusOK, &list)
		return len(list.Approvals) == 1
	})
	select {
	case <-asked:
		t.Error("a client with an agent-only key was asked to decide the approval")
	case <-time.After(500 * time.Millisecond):
	}
	d.doHeaders(http.MethodGet, "/v1/approvals/"+list.Approvals[0].ID, approver, nil, http.StatusOK, &list.Approvals[0])
	if apr := list.Approvals[0]; apr.Status != "pending" {
		t.Fatalf("approval %s is %s (decision %+v), want pending: only an approver decides", apr.ID, apr.Status, apr.Decision)
	}
	d.doHeaders(http.MethodPost, "/v1/approvals/"+list.Approvals[0].ID+"/decision", approver, map[string]any{"decision": "deny"}, http.StatusOK, nil)
	if res := <-done; res == nil || !res.IsError || resultText(res) != "denied by the approver" {
		t.Errorf("the denied call: %+v; want an error that names no key", res)
	}
	d.doHeaders(http.MethodGet, "/v1/approvals/"+list.Approvals[0].ID, approver, nil, http.StatusOK, &list.Approvals[0])
	if dec := list.Approvals[0].Decision; dec == nil || !strings.Contains(dec.Actor, "key ") {
		t.Errorf("recorded decision %+v: the audit trail should name the approver's key", dec)
	}
}

type elicitFunc func(mcp.ElicitationRequest) *mcp.ElicitationResult

func (f elicitFunc) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(req), nil
}

func TestUnknownOrMissingSession(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.ProtocolVersion20250618, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "curl", "version": "0"}}}
	for _, tc := range []struct {
		path    string
		headers map[string]string
		status  int
		want    string
	}{
		{"/mcp", map[string]string{"X-Toolserver-Session": "ses_doesnotexist"}, http.StatusNotFound, "session not found"},
		{"/v1/sessions/ses_doesnotexist/mcp", nil, http.StatusNotFound, "session not found"},
		{"/mcp", nil, http.StatusBadRequest, "X-Toolserver-Session"},
	} {
		// A real client fails to connect…
		if _, err := d.dial(d.URL+tc.path, tc.headers); err == nil {
			t.Errorf("%s %v: an mcp-go client connected", tc.path, tc.headers)
		}
		// …and the answer says why, in the API's error shape.
		var body struct {
			Error struct{ Code, Message string }
		}
		d.doHeaders(http.MethodPost, tc.path, tc.headers, initialize, tc.status, &body)
		if !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%s %v: error %+v, want one mentioning %q", tc.path, tc.headers, body.Error, tc.want)
		}
	}
}

func TestEndpointDisabled(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.MCPEndpoint.Enabled = false })
	s := d.session(map[string]any{"available_tools": []string{"read_file"}})
	d.do(http.MethodPost, "/v1/sessions/"+s.ID+"/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, http.StatusNotFound, nil)
}

func TestListChangedWhenGroupsSwitch(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) {
		c.ToolGroups = []config.ToolGroupConfig{{Name: "files", Description: "Read files", Tools: []string{"read_file"}}}
	})
	s := d.session(map[string]any{"available_tools": []string{"execute_command", "read_file"}})
	changed := make(chan struct{}, 8)
	d.onNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	c := d.connect(s.ID)
	if got := listNames(t, c); slices.Contains(got, "read_file") || !slices.Contains(got, "reset_tools") {
		t.Fatalf("before switching groups: %v", got)
	}
	// The groups change outside this MCP client (REST), as when another client or an
	// upstream MCP server changes the set.
	stream := d.doRaw(http.MethodPost, "/v1/sessions/"+s.ID+"/tool-calls",
		map[string]any{"calls": []map[string]any{{"id": "c1", "name": "reset_tools", "arguments": map[string]any{"files": true}}}}, http.StatusOK)
	if !strings.Contains(stream, "Active groups: basic, files") {
		t.Fatalf("reset_tools over REST: %s", stream)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after the session's groups changed")
	}
	if got := listNames(t, c); !slices.Contains(got, "read_file") {
		t.Fatalf("after switching the files group on: %v", got)
	}
}

// TestEndpointWithAPIKeys: with keys required, the endpoint wants an agent key, and
// a key of another tenant cannot reach a session (not found, as in the REST API).
func TestEndpointWithAPIKeys(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.Auth.Unauthenticated = false })
	raw, err := os.ReadFile(filepath.Join(d.App.DataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	admin := map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(raw))}
	mkKey := func(tenant string, roles ...string) string {
		var k struct{ Key string }
		d.doHeaders(http.MethodPost, "/v1/keys", admin, map[string]any{"tenant": tenant, "roles": roles}, http.StatusCreated, &k)
		return k.Key
	}
	acme, globex, approver := mkKey("acme", "agent"), mkKey("globex", "agent"), mkKey("acme", "approver")
	var s sessionResp
	d.doHeaders(http.MethodPost, "/v1/sessions", map[string]string{"Authorization": "Bearer " + acme},
		map[string]any{"available_tools": []string{"read_file"}}, http.StatusCreated, &s)

	c, err := d.dial(d.URL+"/v1/sessions/"+s.ID+"/mcp", map[string]string{"Authorization": "Bearer " + acme})
	if err != nil {
		t.Fatalf("acme's agent key: %v", err)
	}
	if names := listNames(t, c); !slices.Contains(names, "read_file") {
		t.Errorf("tools/list = %v, want read_file", names)
	}
	for _, tc := range []struct {
		who     string
		headers map[string]string
	}{
		{"no key", nil},
		{"globex's agent", map[string]string{"Authorization": "Bearer " + globex}},
		{"acme's approver", map[string]string{"Authorization": "Bearer " + approver}},
	} {
		if _, err := d.dial(d.URL+"/v1/sessions/"+s.ID+"/mcp", tc.headers); err == nil {
			t.Errorf("%s connected to acme's session", tc.who)
		}
	}
	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.ProtocolVersion20250618, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "curl", "version": "0"}}}
	d.doHeaders(http.MethodPost, "/mcp", map[string]string{"X-Toolserver-Session": s.ID}, initialize, http.StatusUnauthorized, nil)
	d.doHeaders(http.MethodPost, "/mcp", map[string]string{"X-Toolserver-Session": s.ID, "Authorization": "Bearer " + globex}, initialize, http.StatusNotFound, nil)
	d.doHeaders(http.MethodPost, "/mcp", map[string]string{"X-Toolserver-Session": s.ID, "Authorization": "Bearer " + approver}, initialize, http.StatusForbidden, nil)
}

// TestCancelledNotificationWithdrawsTheApproval: a client that sends
// notifications/cancelled for a call waiting for approval, keeping its request open
// (as the TypeScript SDK does), cancels the call: the request is withdrawn, the
// result says the call was cancelled, and an approval given afterwards cannot run it.
func TestCancelledNotificationWithdrawsTheApproval(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
	post := d.rawMCP(s.ID, mcp.ProtocolVersion20250618)
	mcpSID := d.rawSession(s.ID, mcp.ProtocolVersion20250618)
	result := make(chan string, 1)
	go func() {
		_, _, body := post(mcpSID, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"`+riskyCommand+`"}}}`)
		result <- body
	}()
	apr := d.pendingApproval(s.ID)
	if code, _, body := post(mcpSID, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"the user pressed stop"}}`); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", code, body)
	}
	var out string
	select {
	case out = <-result:
	case <-time.After(waitLimit):
		t.Fatal("the cancelled call did not end")
	}
	if !strings.Contains(out, `"toolserverd/error_kind":"cancelled"`) || !strings.Contains(out, "cancelled by request") {
		t.Fatalf("result of the cancelled call: %s", out)
	}
	var got approvalRec
	d.do(http.MethodGet, "/v1/approvals/"+apr.ID, nil, http.StatusOK, &got)
	if got.Status == "pending" {
		t.Fatalf("the approval of the cancelled call is still pending: %+v", got)
	}
	d.do(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision", map[string]any{"decision": "approve"}, http.StatusConflict, nil)
	var rec callRecord
	d.do(http.MethodGet, "/v1/tool-calls/"+apr.CallID, nil, http.StatusOK, &rec)
	if rec.ErrorKind != "cancelled" && rec.ErrorKind != "denied" {
		t.Fatalf("record of the cancelled call: %+v", rec)
	}
}

// TestIdleTTLSparesConnectedClients: mcp_endpoint.session_idle_ttl forgets MCP
// sessions nobody uses, not a connected client's: one listening on its event stream,
// or one whose call runs longer than the TTL, keeps its session and calls on; a
// session with neither is forgotten (404, the client initializes again).
func TestIdleTTLSparesConnectedClients(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d := &daemon{Daemon: testdaemon.StartWithLog(t, func(c *config.Config) { c.MCPEndpoint.SessionIdleTTL = ttl }, log), t: t}
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	call := func(c *client.Client, command string) error {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": command}))
		return err
	}
	listening := d.connect(s.ID)
	time.Sleep(4 * ttl) // the sweep runs every 2s
	if err := call(listening, "echo still here"); err != nil {
		t.Fatalf("a client listening on its event stream, after %s without requests: %v", 4*ttl, err)
	}
	// A client without the event stream: its call outlasts the TTL.
	tr, err := transport.NewStreamableHTTP(d.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"X-Toolserver-Session": s.ID}))
	if err != nil {
		t.Fatal(err)
	}
	quiet := client.NewClient(tr)
	t.Cleanup(func() { _ = quiet.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := quiet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if _, err := quiet.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if err := call(quiet, "sleep 4"); err != nil {
		t.Fatalf("a call that outlasts the TTL: %v", err)
	}
	if err := call(quiet, "echo next"); err != nil {
		t.Fatalf("the call after one that outlasted the TTL: %v", err)
	}
	// Wait until the sweep forgets it (its log line says so) rather than sleeping a
	// fixed time: on a loaded machine the sweep may come later. The call must then
	// find it gone.
	id := tr.GetSessionId()
	idle := time.Now()
	waitFor(t, "the idle quiet session to be forgotten", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "forgot an idle MCP session") && strings.Contains(line, `"mcp_session_id":"`+id+`"`) {
				return true
			}
		}
		return false
	})
	t.Logf("quiet session %s forgotten %s after its last call (ttl %s)", id, time.Since(idle).Round(time.Millisecond), ttl)
	if err := call(quiet, "echo forgotten"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a call to a session forgotten as idle without an event stream: %v, want 404", err)
	}
}

// TestMaxSessionsBoundsClientSessions: every initialize leaves an MCP session (with a
// copy of its session's tools) in memory until the client deletes it or the idle TTL
// passes, so a client that initializes in a loop grew the daemon without bound for
// the TTL (30 minutes by default). mcp_endpoint.max_sessions caps them: past it the
// least recently used session with no request open is forgotten (404: its client
// initializes again), never a connected client's.
func TestMaxSessionsBoundsClientSessions(t *testing.T) {
	t.Parallel()
	const limit = 20
	d := start(t, func(c *config.Config) { c.MCPEndpoint.MaxSessions = limit })
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	listening := d.connect(s.ID) // its event stream stays open: never forgotten
	post := func(mcpSID string, msg map[string]any) (int, string) {
		t.Helper()
		b, _ := json.Marshal(msg)
		req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/sessions/"+s.ID+"/mcp", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if mcpSID != "" {
			req.Header.Set("Mcp-Session-Id", mcpSID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	initialize := func() string {
		t.Helper()
		status, id := post("", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": mcp.ProtocolVersion20250326, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "loop", "version": "0"}}})
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize: status %d, session id %q", status, id)
		}
		return id
	}
	list := func(mcpSID string) int {
		status, _ := post(mcpSID, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
		return status
	}
	ids := make([]string, 5*limit)
	for i := range ids {
		ids[i] = initialize()
	}
	if got := list(ids[len(ids)-1]); got != http.StatusOK {
		t.Errorf("tools/list of the newest session: status %d, want 200", got)
	}
	if got := list(ids[0]); got != http.StatusNotFound {
		t.Errorf("tools/list of the oldest of %d sessions past a cap of %d: status %d, want 404 (forgotten)", len(ids), limit, got)
	}
	live := 0
	for _, id := range ids {
		if list(id) == http.StatusOK {
			live++
		}
	}
	if live > limit-1 { // the listening client's session is the other one
		t.Errorf("%d of %d sessions still answer with a cap of %d", live, len(ids), limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := listening.CallTool(ctx, callReq("execute_command", map[string]any{"command": "echo kept"})); err != nil {
		t.Fatalf("the connected client, after %d newer sessions: %v", 5*limit, err)
	}
}

package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// sprayTokens is how many progress tokens the spray tool writes to: far more than
// the calls a test makes, so that it covers every token the proxy has handed out.
const sprayTokens = 3000

// addSprayTool adds "spray", a hostile tool: it sends notifications/progress for the
// tokens tsd-1 … tsd-3000 (the proxy's, in other calls), then one for its own call.
func addSprayTool(s *mcpserver.MCPServer) {
	s.AddTool(mcp.NewTool("spray", mcp.WithDescription("Sends progress for the tokens of other calls.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			send := func(token any, message string) error {
				params := map[string]any{"progressToken": token, "progress": 1, "message": message}
				// A full notification queue is an error, not a wait: try again.
				for s.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params) != nil {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(time.Millisecond):
					}
				}
				return nil
			}
			for i := 1; i <= sprayTokens; i++ {
				if err := send("tsd-"+strconv.Itoa(i), "sprayed"); err != nil {
					return nil, err
				}
			}
			if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
				if err := send(req.Params.Meta.ProgressToken, "own progress"); err != nil {
					return nil, err
				}
			}
			// Let the notifications reach the client before the answer ends the call.
			time.Sleep(200 * time.Millisecond)
			return mcp.NewToolResultText("sprayed"), nil
		})
}

// TestProgressStaysOnItsConnection: a server that sends progress for tokens of calls
// it was never given (here every token the proxy could have handed out) reaches
// none of them, over stdio and streamable HTTP; the legitimate progress of the
// victim call (server-everything over stdio) and the sprayer's progress for its own
// call still arrive.
func TestProgressStaysOnItsConnection(t *testing.T) {
	t.Parallel()
	g := mcpserver.NewMCPServer("spray", "1.0.0")
	addSprayTool(g)
	hs := mcpserver.NewStreamableHTTPServer(g)
	ts := httptest.NewServer(hs)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	sprayStdio := statefulServer(t, "spray_stdio")
	sprayStdio.Pooling = PoolShared
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		stdioEverything(t, "victim"),
		sprayStdio,
		{Name: "spray_http", Transport: TransportStreamableHTTP, URL: ts.URL + "/mcp", Enabled: true},
	}})
	h.start(t)
	for _, name := range []string{"victim", "spray_stdio", "spray_http"} {
		h.waitState(t, name, StateReady, 30*time.Second)
	}

	for _, sprayer := range []string{"spray_stdio", "spray_http"} {
		t.Run(sprayer, func(t *testing.T) {
			victimLog := &progressLog{}
			victimRes := make(chan string, 1)
			go func() {
				res := h.call(t.Context(), t, "mcp__victim__trigger-long-running-operation", `{"duration":3,"steps":3}`, victimLog)
				victimRes <- res.Text()
			}()
			if !eventually(10*time.Second, func() bool { return len(victimLog.all()) > 0 }) {
				t.Fatal("the victim call reported no progress")
			}

			sprayLog := &progressLog{}
			wantText(t, h.call(t.Context(), t, "mcp__"+sprayer+"__spray", `{}`, sprayLog), "sprayed")
			if got := sprayLog.all(); !slices.Contains(got, "own progress\n") {
				t.Errorf("the sprayer's progress for its own call did not arrive: %d lines, last %q", len(got), got[max(0, len(got)-3):])
			}

			select {
			case text := <-victimRes:
				if !strings.Contains(text, "Long running operation completed") || !slices.Contains(victimLog.all(), "1/3\n") {
					t.Errorf("victim result %q, progress %q", text, victimLog.all())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the victim call did not end")
			}
			if got := victimLog.all(); slices.Contains(got, "sprayed\n") {
				n := 0
				for _, l := range got {
					if l == "sprayed\n" {
						n++
					}
				}
				t.Errorf("%s wrote %d progress lines into a call on another server", sprayer, n)
			}
		})
	}
}

// TestProgressGate: a connection admits progress for the tokens of its requests in
// flight, in each shape mcp-go gives tools/call params, and for nothing else.
func TestProgressGate(t *testing.T) {
	t.Parallel()
	meta := &mcp.Meta{ProgressToken: "tsd-7"}
	tests := []struct {
		name   string
		method string
		params any
		admit  bool
	}{
		{"params value", string(mcp.MethodToolsCall), mcp.CallToolParams{Name: "x", Meta: meta}, true},
		{"params pointer", string(mcp.MethodToolsCall), &mcp.CallToolParams{Name: "x", Meta: meta}, true},
		{"2026 field map", string(mcp.MethodToolsCall), map[string]json.RawMessage{"name": json.RawMessage(`"x"`),
			"_meta": json.RawMessage(`{"progressToken":"tsd-7","io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)}, true},
		{"no token", string(mcp.MethodToolsCall), mcp.CallToolParams{Name: "x"}, false},
		{"not a tools/call", string(mcp.MethodToolsList), map[string]any{"_meta": map[string]any{"progressToken": "tsd-7"}}, false},
	}
	note := func(token any) mcp.JSONRPCNotification {
		var n mcp.JSONRPCNotification
		n.Method = string(mcp.MethodNotificationProgress)
		n.Params.AdditionalFields = map[string]any{"progressToken": token, "progress": 1.0}
		return n
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g progressGate
			var got []any
			h := g.filter(func(n mcp.JSONRPCNotification) { got = append(got, n.Params.AdditionalFields["progressToken"]) })
			forget := g.track(transport.JSONRPCRequest{Method: tt.method, Params: tt.params})
			h(note("tsd-7"))
			h(note("tsd-8"))
			h(note(nil))
			forget()
			h(note("tsd-7"))
			want := []any{}
			if tt.admit {
				want = append(want, "tsd-7")
			}
			if !slices.Equal(got, want) {
				t.Errorf("admitted %v, want %v", got, want)
			}
		})
	}
	// Other notifications pass untouched.
	var g progressGate
	passed := false
	g.filter(func(mcp.JSONRPCNotification) { passed = true })(mcp.JSONRPCNotification{Notification: mcp.Notification{Method: mcp.MethodNotificationToolsListChanged}})
	if !passed {
		t.Error("tools/list_changed was filtered out")
	}
}

// reportLog records a call's text and numeric progress.
type reportLog struct {
	progressLog
	reports []string
}

func (r *reportLog) Report(progress, total float64, message string) {
	r.mu.Lock()
	r.reports = append(r.reports, fmt.Sprintf("%v/%v %s", progress, total, message))
	r.mu.Unlock()
	r.Emit("info", tool.ProgressLine(progress, total, message))
}

// TestProgressNumbers: an upstream notification's numbers become the call's numeric
// progress when they are finite, not negative and above the last ones; the others keep
// only their line.
func TestProgressNumbers(t *testing.T) {
	t.Parallel()
	r := newProgressRouter()
	log := &reportLog{}
	token := r.add(&tool.Context{Context: t.Context(), Progress: log})
	defer r.remove(token)
	send := func(fields map[string]any) {
		var n mcp.JSONRPCNotification
		n.Method = string(mcp.MethodNotificationProgress)
		n.Params.AdditionalFields = map[string]any{"progressToken": token}
		maps.Copy(n.Params.AdditionalFields, fields)
		r.handle(n)
	}
	send(map[string]any{"progress": 1.0, "total": 3.0})                       // reported
	send(map[string]any{"progress": 0.5, "total": 3.0, "message": "back"})    // regression: text only
	send(map[string]any{"progress": 1.0, "total": 3.0})                       // not above: text only
	send(map[string]any{"progress": math.Inf(1), "total": 3.0})               // not finite
	send(map[string]any{"progress": 2.0, "total": -3.0, "message": "neg"})    // negative total
	send(map[string]any{"progress": 2.0, "total": "three", "message": "str"}) // total not a number
	send(map[string]any{"progress": 2.0, "total": 3.0, "message": "copying"}) // reported
	send(map[string]any{"progress": 7.0, "message": "no total"})              // reported, total unknown
	send(map[string]any{"message": "only a message"})                         // text only
	wantReports := []string{"1/3 ", "2/3 copying", "7/0 no total"}
	if !slices.Equal(log.reports, wantReports) {
		t.Errorf("reports %q, want %q", log.reports, wantReports)
	}
	wantText := []string{"1/3\n", "back (0.5/3)\n", "1/3\n", "+Inf/3\n", "neg (2/-3)\n", "str\n", "copying (2/3)\n", "no total\n", "only a message\n"}
	if got := log.all(); !slices.Equal(got, wantText) {
		t.Errorf("lines %q, want %q", got, wantText)
	}
}

package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// goServer is an mcp-go MCP server over streamable HTTP on a loopback port: a real
// server whose tool list the test can change and whose traffic it can see.
type goServer struct {
	mcp *mcpserver.MCPServer
	url string

	mu      sync.Mutex
	methods []string // JSON-RPC methods received, in order
	ended   []string // sessions its clients ended (DELETE with Mcp-Session-Id)

	slowCancelled chan time.Time // when a "slow" call's context ended
}

func newGoServer(t *testing.T) *goServer {
	t.Helper()
	g := &goServer{slowCancelled: make(chan time.Time, 4)}
	g.mcp = mcpserver.NewMCPServer("go-test", "1.0.0", mcpserver.WithToolCapabilities(true))
	g.mcp.AddTool(mcp.NewTool("slow", mcp.WithDescription("Waits until cancelled.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				g.slowCancelled <- time.Now()
				return nil, ctx.Err()
			case <-time.After(30 * time.Second):
				return mcp.NewToolResultText("done"), nil
			}
		})
	g.mcp.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("the widget is broken"), nil
		})
	g.mcp.AddTool(mcp.NewTool("danger", mcp.WithDescription("Deletes things."),
		mcp.WithTitleAnnotation("Danger Zone"), mcp.WithDestructiveHintAnnotation(true),
		mcp.WithReadOnlyHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(true),
		mcp.WithString("target", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("deleted " + req.GetString("target", "")), nil
		})
	g.mcp.AddTool(mcp.NewTool("report", mcp.WithDescription("Reports progress with messages.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
				for i, msg := range []string{"cloning", "building"} {
					_ = g.mcp.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
						"progressToken": req.Params.Meta.ProgressToken, "progress": i + 1, "total": 2, "message": msg})
				}
			}
			// Let the notifications reach the client before the answer ends the call.
			time.Sleep(200 * time.Millisecond)
			return mcp.NewToolResultText("reported"), nil
		})
	for _, name := range []string{"files.read", "files_read", strings.Repeat("long_name_", 7)} {
		g.mcp.AddTool(mcp.NewTool(name), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("I am " + req.Params.Name), nil
		})
	}
	h := mcpserver.NewStreamableHTTPServer(g.mcp)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
				g.mu.Lock()
				g.methods = append(g.methods, msg.Method)
				g.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodDelete && id != "" {
			g.mu.Lock()
			g.ended = append(g.ended, id)
			g.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	g.url = ts.URL + "/mcp"
	return g
}

// endedSessions is how many sessions its clients ended.
func (g *goServer) endedSessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ended)
}

func (g *goServer) received(method string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.methods {
		if m == method {
			return true
		}
	}
	return false
}

// TestGoServer covers, against an mcp-go server: annotations, name sanitizing and
// cutting, isError, the per-server call timeout, notifications/cancelled over HTTP
// and tools/list_changed.
func TestGoServer(t *testing.T) {
	t.Parallel()
	g := newGoServer(t)
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		{Name: "go", Transport: TransportStreamableHTTP, URL: g.url, CallTimeout: 2 * time.Second, Enabled: true}}})
	h.start(t)
	st := h.waitState(t, "go", StateReady, 10*time.Second)

	t.Run("names", func(t *testing.T) {
		long := "mcp__go__" + strings.Repeat("long_name_", 7)
		cut := toolmgr.CapName(long)
		if len(cut) != 64 || !strings.HasPrefix(cut, long[:55]) {
			t.Fatalf("toolmgr.CapName(%q) = %q", long, cut)
		}
		for _, name := range []string{"mcp__go__files_read", "mcp__go__slow", cut} {
			if _, ok := h.tools.Lookup(name); !ok {
				t.Errorf("%s is not registered; have %v", name, h.tools.Names())
			}
		}
		// "files.read" sanitizes to the name "files_read" holds: the later one in
		// sort order ("files_read" > "files.read") gets a hash suffix, and it is reported.
		alt := "mcp__go__files_read_" + toolmgr.ShortHash("go/files_read")
		wantText(t, h.call(t.Context(), t, alt, `{}`, nil), "I am files_read")
		wantText(t, h.call(t.Context(), t, "mcp__go__files_read", `{}`, nil), "I am files.read")
		if len(st.Notes) != 1 || !strings.Contains(st.Notes[0], alt) {
			t.Errorf("notes = %q, want one about %s", st.Notes, alt)
		}
	})

	t.Run("annotations", func(t *testing.T) {
		e, ok := h.tools.Lookup("mcp__go__danger")
		if !ok {
			t.Fatal("danger is not registered")
		}
		s := e.Spec
		if s.Risk != tool.RiskHigh || s.ReadOnly || s.ConcurrencySafe || s.Label != "Danger Zone" || s.Source != "mcp:go" || s.Timeout != 2*time.Second {
			t.Errorf("danger spec = %+v", s)
		}
		if !strings.Contains(s.Documentation, "open-world (reaches outside systems): true") {
			t.Errorf("documentation %q does not note openWorldHint", s.Documentation)
		}
		wantText(t, h.call(t.Context(), t, "mcp__go__danger", `{"target":"build/"}`, nil), "deleted build/")
		wantKind(t, h.call(t.Context(), t, "mcp__go__danger", `{}`, nil), tool.KindInvalidArgs)
	})

	t.Run("progress with messages", func(t *testing.T) {
		prog := &progressLog{}
		wantText(t, h.call(t.Context(), t, "mcp__go__report", `{}`, prog), "reported")
		// mcp-go's streamable HTTP server hands a session's notifications to whichever
		// of its open streams reads them first (this call's POST, or the session's GET
		// stream), so two quick ones may reach the proxy in either order; the proxy
		// passes them on in the order they arrive.
		got := prog.all()
		slices.Sort(got)
		if !reflect.DeepEqual(got, []string{"building (2/2)\n", "cloning (1/2)\n"}) {
			t.Errorf("progress = %q, want one line per notification with its message and progress/total", got)
		}
	})

	t.Run("isError", func(t *testing.T) {
		res := h.call(t.Context(), t, "mcp__go__fail", `{}`, nil)
		wantKind(t, res, tool.KindFailed)
		if !strings.Contains(res.Text(), "the widget is broken") {
			t.Errorf("text = %q", res.Text())
		}
	})

	t.Run("call timeout", func(t *testing.T) {
		start := time.Now()
		res := h.call(t.Context(), t, "mcp__go__slow", `{}`, nil)
		wantKind(t, res, tool.KindTimeout)
		took := time.Since(start)
		t.Logf("timed out after %s (call timeout 2s): %s", took, res.Text())
		// Ended by the server's 2s call timeout, and not before it (a lower bound
		// cannot flake from load); the upper bound is a hang guard below the slow
		// tool's own 30s.
		if !strings.Contains(res.Text(), "did not finish within 2s (timeout of mcp server go)") {
			t.Errorf("timeout error %q does not name the server's 2s call timeout", res.Text())
		}
		if took < 2*time.Second || took > 20*time.Second {
			t.Errorf("timed out after %s, want the 2s call timeout", took)
		}
		if got := h.calls("go", outcomeTimeout); got != 1 {
			t.Errorf("calls_total{outcome=timeout} = %v, want 1", got)
		}
	})

	t.Run("notifications/cancelled over HTTP", func(t *testing.T) {
		drain(g.slowCancelled)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(200*time.Millisecond, cancel)
		wantKind(t, h.call(ctx, t, "mcp__go__slow", `{}`, nil), tool.KindCancelled)
		// Hang guards below the slow tool's own 30s.
		if !eventually(20*time.Second, func() bool { return g.received("notifications/cancelled") }) {
			t.Fatal("the server never received notifications/cancelled")
		}
		select {
		case <-g.slowCancelled:
		case <-time.After(20 * time.Second):
			t.Fatal("the server's handler was not cancelled")
		}
	})

	t.Run("tools/list_changed", func(t *testing.T) {
		g.mcp.AddTool(mcp.NewTool("late", mcp.WithDescription("Added at run time.")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("late but here"), nil
			})
		if !eventually(20*time.Second, func() bool { _, ok := h.tools.Lookup("mcp__go__late"); return ok }) {
			t.Fatalf("a tool added upstream was not registered; have %v", h.tools.Names())
		}
		wantText(t, h.call(t.Context(), t, "mcp__go__late", `{}`, nil), "late but here")
		g.mcp.DeleteTools("late")
		if !eventually(20*time.Second, func() bool { _, ok := h.tools.Lookup("mcp__go__late"); return !ok }) {
			t.Fatal("a tool deleted upstream is still registered")
		}
	})

	t.Run("output schemas", func(t *testing.T) {
		weather := `{"type":"object","title":"Weather","properties":{"t":{"type":"number"}},"required":["t"],"not":{"required":["error"]}}`
		g.mcp.AddTools(
			mcpserver.ServerTool{Tool: mcp.NewTool("weather", mcp.WithRawOutputSchema(json.RawMessage(weather))),
				Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultStructured(map[string]any{"t": 21.5}, `{"t":21.5}`), nil
				}},
			// An outputSchema MCP clients would refuse (the TypeScript SDK's, with the
			// whole tool list): the tool passes, without it.
			mcpserver.ServerTool{Tool: mcp.NewTool("rows", mcp.WithRawOutputSchema(json.RawMessage(`{"type":"array","items":{"type":"string"}}`))),
				Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("a, b"), nil
				}})
		var w, r *toolmgr.Entry
		if !eventually(20*time.Second, func() bool {
			var okW, okR bool
			w, okW = h.tools.Lookup("mcp__go__weather")
			r, okR = h.tools.Lookup("mcp__go__rows")
			return okW && okR
		}) {
			t.Fatalf("the tools with output schemas were not registered; have %v", h.tools.Names())
		}
		if string(w.Spec.OutputSchema) != weather {
			t.Errorf("weather output schema = %s, want the server's %s", w.Spec.OutputSchema, weather)
		}
		res := h.call(t.Context(), t, "mcp__go__weather", `{}`, nil)
		if res.IsError || string(res.Structured) != `{"t":21.5}` {
			t.Errorf("weather result: is_error %v structured %s", res.IsError, res.Structured)
		}
		if r.Spec.OutputSchema != nil {
			t.Errorf("rows output schema = %s, want none", r.Spec.OutputSchema)
		}
		wantText(t, h.call(t.Context(), t, "mcp__go__rows", `{}`, nil), "a, b")
		notes := strings.Join(h.status(t, "go").Notes, "\n")
		if !strings.Contains(notes, `tool "rows": its outputSchema is not passed on`) || strings.Contains(notes, "weather") {
			t.Errorf("notes = %q, want one on rows' outputSchema", notes)
		}
	})
}

func drain(ch chan time.Time) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestToolsChangeTogether checks that a reader of the registry sees a server's tools
// all at once: on connect, when the server adds tools, and when it changes one (never
// a part of them, never a changed tool missing for a moment).
func TestToolsChangeTogether(t *testing.T) {
	t.Parallel()
	g := newGoServer(t)
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		{Name: "go", Transport: TransportStreamableHTTP, URL: g.url, Enabled: true}}})

	var mu sync.Mutex
	seen := map[int]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := 0
			for _, name := range h.tools.Names() {
				if strings.HasPrefix(name, "mcp__go__") {
					n++
				}
			}
			mu.Lock()
			seen[n] = true
			mu.Unlock()
		}
	}()
	h.start(t)
	h.waitState(t, "go", StateReady, 10*time.Second)
	count := func() int {
		n := 0
		for _, name := range h.tools.Names() {
			if strings.HasPrefix(name, "mcp__go__") {
				n++
			}
		}
		return n
	}
	base := count()
	// Two tools in one change, then a changed description, each awaited.
	noop := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	g.mcp.AddTools(mcpserver.ServerTool{Tool: mcp.NewTool("new_a"), Handler: noop},
		mcpserver.ServerTool{Tool: mcp.NewTool("new_b"), Handler: noop})
	if !eventually(10*time.Second, func() bool { return count() == base+2 }) {
		t.Fatalf("the added tools never appeared: %v", h.tools.Names())
	}
	g.mcp.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails, now said differently.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("still broken"), nil
		})
	if !eventually(10*time.Second, func() bool {
		e, ok := h.tools.Lookup("mcp__go__fail")
		return ok && strings.Contains(e.Spec.Description, "differently")
	}) {
		t.Fatal("the changed description never arrived")
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	for n := range seen {
		if n != 0 && n != base && n != base+2 {
			t.Errorf("a reader saw %d of the server's tools; only 0, %d and %d are whole sets (seen %v)", n, base, base+2, seen)
		}
	}
}

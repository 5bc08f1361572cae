package mcpproxy

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// lateTaskServer is an mcp-go server with one tool that must run as a task and runs
// until cancelled, whose tools/call (the task's creation) is answered late: after
// createDelay. It records the tasks it created and those it was asked to cancel
// (tasks/cancel).
type lateTaskServer struct {
	cancelLog // task ids
}

func newLateTaskServer(t *testing.T, transport string, createDelay time.Duration) (*lateTaskServer, string) {
	t.Helper()
	l := &lateTaskServer{}
	hooks := &mcpserver.Hooks{}
	hooks.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) {
		if req.Params.Task != nil {
			time.Sleep(createDelay)
		}
	})
	hooks.AddAfterCallTool(func(_ context.Context, _ any, _ *mcp.CallToolRequest, res any) {
		if r, ok := res.(*mcp.CreateTaskResult); ok {
			l.started(r.Task.TaskId)
		}
	})
	// Asked to cancel, whatever the task's state then: mcp-go's server ends a task
	// tool's context with the HTTP request that created it.
	hooks.AddBeforeCancelTask(func(_ context.Context, _ any, req *mcp.CancelTaskRequest) {
		l.cancel(req.Params.TaskId)
	})
	s := mcpserver.NewMCPServer("late-task", "1.0.0", mcpserver.WithToolCapabilities(true),
		mcpserver.WithTaskCapabilities(true, true, true), mcpserver.WithHooks(hooks))
	s.AddTool(mcp.NewTool("crawl", mcp.WithDescription("Crawls until cancelled."), mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return mcp.NewToolResultText("crawled"), nil
			}
		})
	var url string
	switch transport {
	case TransportSSE:
		// The SSE server names its message endpoint by its base URL: the
		// listener's address, known before the server starts.
		ts := httptest.NewUnstartedServer(nil)
		ts.Config.Handler = mcpserver.NewSSEServer(s, mcpserver.WithBaseURL("http://"+ts.Listener.Addr().String()))
		ts.Start()
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
		url = ts.URL + "/sse"
	default:
		h := mcpserver.NewStreamableHTTPServer(s)
		ts := httptest.NewServer(h)
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
		url = ts.URL + "/mcp"
	}
	return l, url
}

// TestTaskCreatedLate: a task whose creation is answered only after the call's
// deadline is still cancelled upstream (tasks/cancel), over both HTTP transports:
// mcp-go drops an answer that arrives after its request's context ended.
func TestTaskCreatedLate(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{TransportSSE, TransportStreamableHTTP} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			l, url := newLateTaskServer(t, transport, time.Second)
			h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
				{Name: "lt", Transport: transport, URL: url, Enabled: true}}})
			h.start(t)
			h.waitState(t, "lt", StateReady, 10*time.Second)

			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			res := h.call(ctx, t, "mcp__lt__crawl", `{}`, nil)
			wantKind(t, res, tool.KindTimeout)

			var created int
			var left []string
			if !eventually(10*time.Second, func() bool {
				created, left = l.uncancelled()
				return created == 1 && len(left) == 0
			}) {
				t.Fatalf("the server created %d tasks; not cancelled: %v (want 1, cancelled)", created, left)
			}
		})
	}
}

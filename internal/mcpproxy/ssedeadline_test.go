package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// sseSlowServer is an mcp-go server over HTTP+SSE on a loopback port with one tool,
// "slow", that runs until cancelled. It records the ids of the tools/call requests
// it received and of those it was told were cancelled (notifications/cancelled).
type sseSlowServer struct {
	url       string
	cancelLog // tools/call request ids
}

func newSSESlowServer(t *testing.T) *sseSlowServer {
	t.Helper()
	g := &sseSlowServer{}
	stop := make(chan struct{})
	s := mcpserver.NewMCPServer("sse-slow", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Runs until cancelled.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-stop:
				return nil, fmt.Errorf("test over")
			}
		})
	// The SSE server names its message endpoint by its base URL: the listener's
	// address, known before the server starts.
	ts := httptest.NewUnstartedServer(nil)
	sse := mcpserver.NewSSEServer(s, mcpserver.WithBaseURL("http://"+ts.Listener.Addr().String()))
	ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil {
				switch msg.Method {
				case string(mcp.MethodToolsCall):
					g.started(string(msg.ID))
				case string(mcp.MethodNotificationCancelled):
					g.cancel(string(msg.Params.RequestID))
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sse.ServeHTTP(w, r)
	})
	ts.Start()
	t.Cleanup(func() {
		close(stop)
		ts.CloseClientConnections()
		ts.Close()
	})
	g.url = ts.URL + "/sse"
	return g
}

// TestSSEDeadline: a plain call over HTTP+SSE whose deadline passes, the server's
// call timeout or the caller's own, is a timeout and the server is told it was
// cancelled, every time. mcp-go's SSE transport arms its own response timer at the
// request context's remaining time; when that timer beat the context, the call read
// as one that failed ("timeout waiting for SSE response") and no
// notifications/cancelled went out. The race is lost now and then, so many calls.
func TestSSEDeadline(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 4, 10
	for _, tc := range []struct {
		name        string
		callTimeout time.Duration // the server's
		deadline    time.Duration // the caller's; 0 for none
	}{
		{"server call timeout", 300 * time.Millisecond, 0},
		{"caller deadline", time.Minute, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newSSESlowServer(t)
			h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
				{Name: "slow", Transport: TransportSSE, URL: g.url, CallTimeout: tc.callTimeout, Enabled: true}}})
			h.start(t)
			h.waitState(t, "slow", StateReady, 10*time.Second)

			var mu sync.Mutex
			wrong := map[string]int{} // kind: text of the first, and count
			var first []string
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range perWorker {
						ctx, cancel := t.Context(), context.CancelFunc(func() {})
						if tc.deadline > 0 {
							ctx, cancel = context.WithTimeout(ctx, tc.deadline)
						}
						res := h.call(ctx, t, "mcp__slow__slow", `{}`, nil)
						cancel()
						if res.IsError && res.ErrorKind == tool.KindTimeout {
							continue
						}
						mu.Lock()
						k := string(res.ErrorKind)
						if wrong[k] == 0 {
							first = append(first, fmt.Sprintf("%q: %s", k, res.Text()))
						}
						wrong[k]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(wrong) > 0 {
				t.Errorf("of %d calls past their deadline, not timeouts: %v; first of each: %q", workers*perWorker, wrong, first)
			}
			var calls int
			var left []string
			if !eventually(20*time.Second, func() bool {
				calls, left = g.uncancelled()
				return calls == workers*perWorker && len(left) == 0
			}) {
				t.Errorf("the server received %d tools/call (want %d); %d of them were never cancelled: %v",
					calls, workers*perWorker, len(left), left)
			}
		})
	}
}

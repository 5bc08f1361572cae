package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
)

// everythingServer is the reference MCP server (testdata/npm), which the daemon
// proxies over stdio.
func everythingServer(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MCP test server missing (%v): scripts/test.sh runs npm ci in testdata/npm", err)
		}
		t.Skip("MCP test server not installed: run npm ci in testdata/npm")
	}
	return p
}

// numericNote is one notifications/progress as the client got it.
type numericNote struct {
	progress, total float64 // total 0: absent
	message         string
}

type numericLog struct {
	mu    sync.Mutex
	notes []numericNote
}

func (l *numericLog) handler(token string) func(mcp.JSONRPCNotification) {
	return func(n mcp.JSONRPCNotification) {
		f := n.Params.AdditionalFields
		if n.Method != string(mcp.MethodNotificationProgress) || fmt.Sprint(f["progressToken"]) != token {
			return
		}
		var note numericNote
		note.progress, _ = f["progress"].(float64)
		note.total, _ = f["total"].(float64)
		note.message, _ = f["message"].(string)
		l.mu.Lock()
		l.notes = append(l.notes, note)
		l.mu.Unlock()
	}
}

func (l *numericLog) snapshot() []numericNote {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]numericNote(nil), l.notes...)
}

// TestNumericProgressToMCPClient: an mcp-go client calling, through /mcp, a tool of a
// proxied MCP server that reports steps of a known total (server-everything's
// long-running operation, over stdio) receives that progress with its total, rising.
// When the call first waits for an approval, the text notification about it comes
// first and the values still rise: a step not above it goes out as text.
func TestNumericProgressToMCPClient(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	const tool = "mcp__everything__trigger-long-running-operation"
	for _, tc := range []struct {
		name string
		ask  bool
	}{{"allowed", false}, {"after an approval", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := start(t, func(c *config.Config) {
				c.MCPServers = []config.MCPServerConfig{{Name: "everything", Transport: "stdio", Command: "node", Args: []string{js, "stdio"}}}
				c.Progress.FlushIntervalMS = 10
				if tc.ask {
					c.Permissions.Ask = append(c.Permissions.Ask, tool)
				} else {
					c.Permissions.Allow = append(c.Permissions.Allow, tool)
				}
			})
			waitFor(t, "the MCP server is ready", func() bool {
				return strings.Contains(d.doRaw(http.MethodGet, "/v1/mcp/servers", nil, http.StatusOK), `"state":"ready"`)
			})
			s := d.session(map[string]any{"available_tools": []string{tool}})
			c := d.connect(s.ID)
			var log numericLog
			c.OnNotification(log.handler("tok-n"))

			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				req := callReq(tool, map[string]any{"duration": 1.2, "steps": 4})
				req.Params.Meta = &mcp.Meta{ProgressToken: "tok-n"}
				res, err := c.CallTool(ctx, req)
				if err == nil && (res.IsError || !strings.Contains(resultText(res), "Long running operation completed")) {
					err = fmt.Errorf("result: is_error=%v text=%q", res.IsError, resultText(res))
				}
				done <- err
			}()
			if tc.ask {
				apr := d.pendingApproval(s.ID)
				d.do(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision", map[string]any{"decision": "approve"}, http.StatusOK, nil)
			}
			if err := <-done; err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			notes := log.snapshot()
			// Sent rising; they may arrive out of order (mcp-go hands a session's
			// notifications to whichever of its streams reads first; see
			// TestQuietCallKeepsProgressGoing): no value may come twice.
			values := make([]float64, len(notes))
			for i, n := range notes {
				values[i] = n.progress
			}
			slices.Sort(values)
			for i := 1; i < len(values); i++ {
				if values[i] <= values[i-1] {
					t.Fatalf("progress value sent twice: %+v", notes)
				}
			}
			steps := map[float64]bool{}
			for i, n := range notes {
				if n.total != 0 {
					if n.total != 4 || n.message != "" {
						t.Fatalf("note %d = %+v, want total 4 and no message", i, n)
					}
					steps[n.progress] = true
				}
			}
			// mcp-go may drop the notification sent just before the result, so step 4
			// is not asserted. With an approval first, step 1 may not rise above it.
			for _, step := range []float64{2, 3} {
				if !steps[step] {
					t.Fatalf("step %v/4 did not arrive as numeric progress: %+v", step, notes)
				}
			}
			if !tc.ask && !steps[1] {
				t.Fatalf("step 1/4 did not arrive: %+v", notes)
			}
			if tc.ask && (len(notes) == 0 || !strings.Contains(notes[0].message, "waiting for approval") || notes[0].total != 0) {
				t.Fatalf("the approval note did not come first as text: %+v", notes)
			}
		})
	}
}

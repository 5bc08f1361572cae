package telemetry_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// toolSeries counts the series of the per-tool families labelled tool=name.
func toolSeries(fams map[string]*dto.MetricFamily, name string) int {
	n := 0
	for _, f := range []string{"toolserverd_tool_calls_total", "toolserverd_tool_call_duration_seconds", "toolserverd_tool_call_queue_wait_seconds"} {
		if fams[f] == nil {
			continue
		}
		for _, m := range fams[f].Metric {
			for _, l := range m.Label {
				if l.GetName() == "tool" && l.GetValue() == name {
					n++
				}
			}
		}
	}
	return n
}

// TestRemovedToolsLeaveMetrics: the per-tool series of an MCP server's tools go when
// the server is removed, so /metrics does not keep a series per tool that ever
// existed; a tool still registered keeps its series.
func TestRemovedToolsLeaveMetrics(t *testing.T) {
	ms := server.NewMCPServer("up", "1.0.0")
	ms.AddTool(mcp.NewTool("ping", mcp.WithDescription("answers pong")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	upstream := servertest.NewTestStreamableHTTPServer(ms)
	t.Cleanup(upstream.Close) // after the daemon stops

	d := testdaemon.Start(t, func(c *config.Config) {
		c.MCPServers = []config.MCPServerConfig{{Name: "up", Transport: "streamable_http", URL: upstream.URL}}
	})
	const mcpTool = "mcp__up__ping"
	eventually(t, "the MCP server up", func() bool {
		return value(series(scrape(t, d.URL), "toolserverd_mcp_server_up", map[string]string{"server": "up"})) == 1
	})
	sid := createSession(t, d.URL, `{"permission_mode":"bypass","available_tools":["execute_command","`+mcpTool+`"]}`)
	calls := d.URL + "/v1/sessions/" + sid + "/tool-calls"
	code, _, b := request(t, "POST", calls, `{"calls":[{"id":"p","name":"`+mcpTool+`","arguments":{}},{"id":"e","name":"execute_command","arguments":{"command":"echo hi"}}]}`, nil)
	if m := message(t, ndjson(t, b), "p"); code != 200 || m["is_error"] != false {
		t.Fatalf("MCP call: %d %v", code, m)
	}
	if n := toolSeries(scrape(t, d.URL), mcpTool); n < 2 {
		t.Fatalf("%s has %d series after its call, want its count and duration", mcpTool, n)
	}

	if code, _, b := request(t, "DELETE", d.URL+"/v1/mcp/servers/up", "", nil); code != 204 && code != 200 {
		t.Fatalf("remove the MCP server: %d %s", code, b)
	}
	eventually(t, "no series of the removed tool", func() bool {
		return toolSeries(scrape(t, d.URL), mcpTool) == 0
	})
	if n := toolSeries(scrape(t, d.URL), "execute_command"); n < 2 {
		t.Errorf("execute_command, still registered, has %d series, want its count and duration", n)
	}
}

// TestApprovalsPendingWhenTheStoreFails: a count of pending approvals the store does
// not give is not shown as the last one it gave: toolserverd_approvals_pending is
// absent and toolserverd_approvals_pending_up is 0 until the store answers again.
func TestApprovalsPendingWhenTheStoreFails(t *testing.T) {
	d := testdaemon.Start(t, nil)
	sq, ok := d.App.Store.(*store.SQLite)
	if !ok {
		t.Skipf("the test daemon's store is %T, not SQLite", d.App.Store)
	}
	eventually(t, "toolserverd_approvals_pending 0 and _up 1", func() bool {
		fams := scrape(t, d.URL)
		return value(series(fams, "toolserverd_approvals_pending", nil)) == 0 && value(series(fams, "toolserverd_approvals_pending_up", nil)) == 1
	})
	// Another connection takes the table away: the daemon's count fails for real.
	db, err := sql.Open("sqlite", "file:"+sq.Path()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ALTER TABLE approvals RENAME TO approvals_away`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no toolserverd_approvals_pending and _up 0", func() bool {
		fams := scrape(t, d.URL)
		return series(fams, "toolserverd_approvals_pending", nil) == nil && value(series(fams, "toolserverd_approvals_pending_up", nil)) == 0
	})
	if _, err := db.Exec(`ALTER TABLE approvals_away RENAME TO approvals`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "toolserverd_approvals_pending 0 and _up 1 again", func() bool {
		fams := scrape(t, d.URL)
		return value(series(fams, "toolserverd_approvals_pending", nil)) == 0 && value(series(fams, "toolserverd_approvals_pending_up", nil)) == 1
	})
}

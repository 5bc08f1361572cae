package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, b := request(t, "GET", base+"/metrics", "", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// series finds the metric of family name whose labels include labels; nil if none.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m == nil:
		return -1
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}

func count(m *dto.Metric) uint64 {
	if m == nil || m.Histogram == nil {
		return 0
	}
	return m.Histogram.GetSampleCount()
}

// TestMetricsFromADaemon drives every observed path through a real daemon (calls of an
// unsafe tool, an approval asked and decided, an upstream MCP server, the store) and
// reads /metrics as Prometheus would.
func TestMetricsFromADaemon(t *testing.T) {
	ms := server.NewMCPServer("up", "1.0.0")
	ms.AddTool(mcp.NewTool("ping", mcp.WithDescription("answers pong")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	upstream := servertest.NewTestStreamableHTTPServer(ms)
	t.Cleanup(upstream.Close) // after the daemon stops

	d := testdaemon.Start(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.MCPServers = []config.MCPServerConfig{{Name: "up", Transport: "streamable_http", URL: upstream.URL}}
	})
	sid := createSession(t, d.URL, `{"available_tools":["execute_command"]}`)
	calls := d.URL + "/v1/sessions/" + sid + "/tool-calls"

	// A read-only command runs at once.
	code, _, b := request(t, "POST", calls, `{"calls":[{"id":"ro","name":"execute_command","arguments":{"command":"echo hi"}}]}`, nil)
	if m := message(t, ndjson(t, b), "ro"); code != 200 || m["is_error"] != false {
		t.Fatalf("read-only call: %d %v", code, m)
	}

	// A writing command asks; it waits while the approval is pending.
	streamed := make(chan []byte, 1)
	go func() {
		_, _, b := request(t, "POST", calls, `{"calls":[{"id":"w1","name":"execute_command","arguments":{"command":"echo ran >> ran.txt"}}]}`, nil)
		streamed <- b
	}()
	var aprID string
	eventually(t, "the approval request", func() bool {
		_, _, b := request(t, "GET", d.URL+"/v1/approvals?status=pending", "", nil)
		var list struct{ Approvals []struct{ ID string } }
		if json.Unmarshal(b, &list) == nil && len(list.Approvals) == 1 {
			aprID = list.Approvals[0].ID
		}
		return aprID != ""
	})
	eventually(t, "toolserverd_approvals_pending 1", func() bool {
		return value(series(scrape(t, d.URL), "toolserverd_approvals_pending", nil)) == 1
	})
	if code, _, b := request(t, "POST", d.URL+"/v1/approvals/"+aprID+"/decision", `{"decision":"approve"}`, nil); code != 200 {
		t.Fatalf("decide: %d %s", code, b)
	}
	if m := message(t, ndjson(t, <-streamed), "w1"); m["is_error"] != false {
		t.Fatalf("approved call: %v", m)
	}

	var fams map[string]*dto.MetricFamily
	eventually(t, "no approval pending and the MCP server up", func() bool {
		fams = scrape(t, d.URL)
		return value(series(fams, "toolserverd_approvals_pending", nil)) == 0 &&
			value(series(fams, "toolserverd_mcp_server_up", map[string]string{"server": "up"})) == 1
	})

	exec := map[string]string{"tool": "execute_command"}
	checks := []struct {
		name string
		ok   bool
	}{
		{"toolserverd_tool_calls_total{execute_command,ok} = 2", value(series(fams, "toolserverd_tool_calls_total", map[string]string{"tool": "execute_command", "outcome": "ok"})) == 2},
		{"toolserverd_tool_call_duration_seconds count 2", count(series(fams, "toolserverd_tool_call_duration_seconds", exec)) == 2},
		{"toolserverd_tool_calls_in_flight = 0", value(series(fams, "toolserverd_tool_calls_in_flight", nil)) == 0},
		// The approved call runs under the lock when its waiter takes it, or without
		// the stream when the deciding side runs it: at least the first call waited.
		{"toolserverd_tool_call_queue_wait_seconds count >= 1", count(series(fams, "toolserverd_tool_call_queue_wait_seconds", exec)) >= 1},
		{"toolserverd_approval_decision_duration_seconds{approve} count 1", count(series(fams, "toolserverd_approval_decision_duration_seconds", map[string]string{"decision": "approve"})) == 1},
		{"toolserverd_approval_decision_duration_seconds sum > 0", series(fams, "toolserverd_approval_decision_duration_seconds", nil) != nil &&
			series(fams, "toolserverd_approval_decision_duration_seconds", nil).Histogram.GetSampleSum() > 0},
		{"toolserverd_store_operation_duration_seconds{write_calls} count >= 2", count(series(fams, "toolserverd_store_operation_duration_seconds", map[string]string{"operation": "write_calls"})) >= 2},
		{"toolserverd_store_operation_duration_seconds{create_approval} count 1", count(series(fams, "toolserverd_store_operation_duration_seconds", map[string]string{"operation": "create_approval"})) == 1},
		{"toolserverd_store_operation_duration_seconds{decide_approval} count 1", count(series(fams, "toolserverd_store_operation_duration_seconds", map[string]string{"operation": "decide_approval"})) == 1},
		{"toolserverd_progress_events_dropped_total = 0", value(series(fams, "toolserverd_progress_events_dropped_total", nil)) == 0},
		{"toolserverd_progress_events_total > 0", value(series(fams, "toolserverd_progress_events_total", nil)) > 0},
		{"toolserverd_http_requests_total{POST tool-calls 200} = 2", value(series(fams, "toolserverd_http_requests_total",
			map[string]string{"route": "/v1/sessions/{sessionID}/tool-calls", "method": "POST", "code": "200"})) == 2},
		{"go_goroutines > 0", value(series(fams, "go_goroutines", nil)) > 0},
		{"process_resident_memory_bytes > 0", value(series(fams, "process_resident_memory_bytes", nil)) > 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("metric check failed: %s", c.name)
		}
	}

	// Made-up methods share one label value: nobody can grow /metrics by inventing them.
	for _, m := range []string{"BREW", "BREW2", "X-ANY"} {
		request(t, m, d.URL+"/nope", "", nil)
	}
	fams = scrape(t, d.URL)
	if s := series(fams, "toolserverd_http_requests_total", map[string]string{"method": "BREW"}); s != nil {
		t.Errorf("a made-up method got its own series: %v", s)
	}
	if v := value(series(fams, "toolserverd_http_requests_total", map[string]string{"route": "unmatched", "method": "other"})); v != 3 {
		t.Errorf("toolserverd_http_requests_total{unmatched,other} = %v, want 3", v)
	}

	// The whole registry passes Prometheus' naming lint.
	problems, err := testutil.GatherAndLint(d.App.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

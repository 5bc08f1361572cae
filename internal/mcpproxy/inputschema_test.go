package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func rootKeys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestInputSchemaAsListed: server-everything's tools keep the root keywords of
// their inputSchema as the server listed them ($schema among them, which mcp-go's
// typed reading drops).
func TestInputSchemaAsListed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{stdioEverything(t, "ev")}})
	h.start(t)
	h.waitState(t, "ev", StateReady, 30*time.Second)
	c := h.m.server("ev").liveConn()
	c.listing.mu.Lock()
	listed := c.listing.schemas
	c.listing.mu.Unlock()
	if len(listed) == 0 {
		t.Fatal("no listing")
	}
	for name, s := range listed {
		e, ok := h.tools.Lookup("mcp__ev__" + name)
		if !ok {
			continue // a tool left out (a task tool the test does not need, say)
		}
		got, want := rootKeys(t, e.Spec.Parameters), rootKeys(t, s.input)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: root keys %v, the server listed %v", name, got, want)
		}
	}
	e, ok := h.tools.Lookup("mcp__ev__echo")
	if !ok {
		t.Fatal("echo is not listed")
	}
	if !strings.Contains(string(e.Spec.Parameters), `"$schema":"http://json-schema.org/draft-07/schema#"`) {
		t.Errorf("echo's parameters %s lost the $schema the server declared", e.Spec.Parameters)
	}
}

// TestInputSchemaRootAnyOf: a tool whose inputSchema has anyOf, dependentRequired
// and minProperties at its root (an mcp-go server over streamable HTTP) has its
// arguments checked against all of it before the call is sent, while the provider
// exports leave the root anyOf out and MCP keeps it. A schema the registry cannot
// compile as written (an unknown $schema dialect) falls back to its typed reading,
// with a note, rather than losing the tool.
func TestInputSchemaRootAnyOf(t *testing.T) {
	t.Parallel()
	const schema = `{"type":"object","description":"Who to look up.",` +
		`"properties":{"email":{"type":"string"},"id":{"type":"integer"},"team":{"type":"string"}},` +
		`"anyOf":[{"required":["email"]},{"required":["id"]}],` +
		`"dependentRequired":{"email":["team"]},"minProperties":1,"additionalProperties":false}`
	var calls atomic.Int32
	s := mcpserver.NewMCPServer("schemas", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcp.NewToolWithRawSchema("lookup", "Looks a user up.", json.RawMessage(schema)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return mcp.NewToolResultText("found"), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("odd", "Its own dialect.",
		json.RawMessage(`{"$schema":"https://example.com/private-dialect","type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("odd"), nil
		})
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		{Name: "sc", Transport: TransportStreamableHTTP, URL: ts.URL + "/mcp", Enabled: true}}})
	h.start(t)
	st := h.waitState(t, "sc", StateReady, 10*time.Second)

	for _, c := range []struct {
		args  string
		valid bool
	}{
		{`{"email":"a@example.com","team":"red"}`, true},
		{`{"id":7}`, true},
		{`{"team":"red"}`, false},             // neither email nor id (anyOf)
		{`{"email":"a@example.com"}`, false},  // email wants team (dependentRequired)
		{`{}`, false},                         // minProperties, anyOf
		{`{"id":7,"colour":"blue"}`, false},   // additionalProperties
		{`{"id":"seven","email":"x"}`, false}, // id's type; email without team
		{`{"id":7,"email":"b@e.c","team":"x"}`, true},
	} {
		before := calls.Load()
		res := h.call(t.Context(), t, "mcp__sc__lookup", c.args, nil)
		sent := calls.Load() != before
		switch {
		case c.valid && (res.IsError || !sent):
			t.Errorf("%s: is_error=%v sent=%v (%s), want it sent and answered", c.args, res.IsError, sent, res.Text())
		case !c.valid && (res.ErrorKind != tool.KindInvalidArgs || sent):
			t.Errorf("%s: kind=%q sent=%v (%s), want invalid_args before sending", c.args, res.ErrorKind, sent, res.Text())
		}
	}

	e, _ := h.tools.Lookup("mcp__sc__lookup")
	specs := []tool.Spec{e.Spec}
	if in := toolmgr.Export(specs, toolmgr.FormatMCP); !strings.Contains(mustJSON(t, in), `"anyOf":[{"required":["email"]},{"required":["id"]}]`) {
		t.Errorf("mcp export lost the root anyOf: %s", mustJSON(t, in))
	}
	for _, f := range []toolmgr.Format{toolmgr.FormatOpenAI, toolmgr.FormatOpenAIResponses, toolmgr.FormatAnthropic, toolmgr.FormatGemini} {
		out := mustJSON(t, toolmgr.Export(specs, f))
		if strings.Contains(out, `"anyOf"`) || !strings.Contains(out, `"dependentRequired"`) || !strings.Contains(out, `"description":"Who to look up."`) {
			t.Errorf("%s export: %s; want no root anyOf, the other root keywords kept", f, out)
		}
	}

	odd, ok := h.tools.Lookup("mcp__sc__odd")
	if !ok {
		t.Fatalf("the tool with an unknown $schema dialect was dropped (notes %v)", st.Notes)
	}
	if strings.Contains(string(odd.Spec.Parameters), "$schema") || !strings.Contains(string(odd.Spec.Parameters), `"required":["q"]`) {
		t.Errorf("odd's parameters %s: want its typed reading", odd.Spec.Parameters)
	}
	if !strings.Contains(strings.Join(st.Notes, "\n"), `tool "odd": its inputSchema as written is refused`) {
		t.Errorf("notes %v do not say odd's schema was refused as written", st.Notes)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

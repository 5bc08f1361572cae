package mcpserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestUnofferedToolSaysToExpand: with a ranked listing the turn's tools are narrowed
// (README "400 tools"), and tools/list over /mcp shows only those. Calling an allowed
// tool left out of it was answered JSON-RPC -32602 "tool not found", while the REST
// API says to expand it first: the MCP client gets the same hint, as a tool result
// with isError, recorded like any refused call. Once expanded, it runs.
func TestUnofferedToolSaysToExpand(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{}) // every tool
	d.doRaw(http.MethodGet, "/v1/sessions/"+s.ID+"/tools?query=read+the+contents+of+a+file&limit=3", nil, http.StatusOK)
	c := d.connect(s.ID)
	listed := listNames(t, c)
	if !slices.Contains(s.Tools, "execute_command") || slices.Contains(listed, "execute_command") || !slices.Contains(listed, "tool_expand_tools") {
		t.Fatalf("session tools %v, narrowed tools/list %v: want tool_expand_tools listed and execute_command allowed but not listed", s.Tools, listed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": "echo hi-from-mcp"}))
	if err != nil {
		t.Fatalf("tools/call of an allowed tool not offered this turn: %v; want a result saying to expand it", err)
	}
	if text := resultText(res); !res.IsError || !strings.Contains(text, "tool_expand_tools") || !strings.Contains(text, `"execute_command"`) ||
		metaString(res, "toolserverd/error_kind") != "not_found" {
		t.Fatalf("unoffered tool: is_error=%v kind=%q text=%q", res.IsError, metaString(res, "toolserverd/error_kind"), text)
	}
	// The listing did not grow with it.
	if got := listNames(t, c); !slices.Equal(got, listed) {
		t.Fatalf("tools/list after the refused call = %v, want %v", got, listed)
	}
	// A name the session does not have stays a protocol error.
	if _, err := c.CallTool(ctx, callReq("no_such_tool", nil)); err == nil {
		t.Fatal("calling an unknown tool succeeded")
	}
	res, err = c.CallTool(ctx, callReq("tool_expand_tools", map[string]any{"tool_names": []string{"execute_command"}}))
	if err != nil || res.IsError {
		t.Fatalf("tool_expand_tools: %v %q", err, resultText(res))
	}
	res, err = c.CallTool(ctx, callReq("execute_command", map[string]any{"command": "echo hi-from-mcp"}))
	if err != nil || res.IsError || !strings.Contains(resultText(res), "hi-from-mcp") {
		t.Fatalf("execute_command after expanding: %v %+v", err, res)
	}
}

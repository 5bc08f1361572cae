package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestOutputSchemaInToolSets: a tool's advertised output schema is part of what a
// client was told (a change sends tools/list_changed, since the client holds results
// to the schema it has), and a background tool, whose result is a handle, advertises
// none.
func TestOutputSchemaInToolSets(t *testing.T) {
	t.Parallel()
	base := tool.Spec{Name: "count", Description: "counts", Parameters: json.RawMessage(`{"type":"object","properties":{}}`), Mode: tool.ModeDirect}
	v1, v2 := base, base
	v1.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	v2.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"string"}}}`)
	if fingerprint([]tool.Spec{base}) == fingerprint([]tool.Spec{v1}) || fingerprint([]tool.Spec{v1}) == fingerprint([]tool.Spec{v2}) {
		t.Error("a tool set whose only change is an output schema has the same fingerprint")
	}
	if got := toMCPTool(v1).RawOutputSchema; string(got) != string(v1.OutputSchema) {
		t.Errorf("outputSchema = %s, want %s", got, v1.OutputSchema)
	}
	bg, bgWithout := v1, base
	bg.Mode, bgWithout.Mode = tool.ModeBackground, tool.ModeBackground
	if got := toMCPTool(bg).RawOutputSchema; got != nil {
		t.Errorf("a background tool advertises outputSchema %s", got)
	}
	if fingerprint([]tool.Spec{bg}) != fingerprint([]tool.Spec{bgWithout}) {
		t.Error("a background tool's output schema, never advertised, counts in the fingerprint")
	}
}

// TestToolHintsPassOn: an upstream MCP tool's idempotentHint and openWorldHint reach
// the endpoint's clients as the tool gave them; a tool without them says nothing.
func TestToolHintsPassOn(t *testing.T) {
	t.Parallel()
	no := false
	sp := tool.Spec{Name: "fetch", Description: "fetches", Parameters: json.RawMessage(`{"type":"object"}`),
		Flags: tool.Flags{ReadOnly: true, Idempotent: true, OpenWorld: &no}, Risk: tool.RiskLow}
	a := toMCPTool(sp).Annotations
	if a.IdempotentHint == nil || !*a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("annotations %+v: want idempotentHint true, openWorldHint false", a)
	}
	sp.Flags = tool.Flags{}
	if a := toMCPTool(sp).Annotations; a.IdempotentHint != nil || a.OpenWorldHint != nil {
		t.Errorf("annotations of a tool without hints %+v: want neither hint", a)
	}
}

// TestResourceLinkPassesOn: a resource given by link reaches the endpoint's clients
// under the name and with the description its server gave it; a link without a name
// is named by its URI, as MCP requires a name.
func TestResourceLinkPassesOn(t *testing.T) {
	t.Parallel()
	res := &tool.Result{Content: []tool.Content{
		{Type: tool.ContentResource, URI: "file:///r/7", MimeType: "text/plain", Name: "report.txt", Description: "The quarterly report"},
		{Type: tool.ContentResource, URI: "file:///c"},
	}}
	b, err := json.Marshal(toCallToolResult("tc_1", res).Content)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"resource_link","uri":"file:///r/7","name":"report.txt","description":"The quarterly report","mimeType":"text/plain"},` +
		`{"type":"resource_link","uri":"file:///c","name":"file:///c","description":"","mimeType":""}]`
	if string(b) != want {
		t.Errorf("content:\n got %s\nwant %s", b, want)
	}
}

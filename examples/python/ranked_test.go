package python_test

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestPythonClientRankedTools: tools(session, query=…, limit=…) asks for the turn's
// ranked listing (scenario 5): the best limit tools and tool_expand_tools.
func TestPythonClientRankedTools(t *testing.T) {
	t.Parallel()
	stdout := pyScript(t, `
s = ts.create_session(["*"])  # every tool: ranking applies past 15
print(json.dumps([t["function"]["name"] for t in ts.tools(s, "openai", query="read the contents of a file&", limit=3)]))
`)
	var names []string
	if err := json.Unmarshal(stdout, &names); err != nil {
		t.Fatalf("output %q: %v", string(stdout), err)
	}
	if len(names) != 4 || !slices.Contains(names, "read_file") || !slices.Contains(names, "tool_expand_tools") {
		t.Fatalf("ranked tools %v, want 3 with read_file, and tool_expand_tools", names)
	}
}

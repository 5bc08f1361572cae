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

// TestPythonClientToolsEmptyQuery: tools(session, query="") lifts an earlier ranked
// listing's narrowing (?query=), as the API says of an empty query; it sent no query
// and got the narrowed list back again.
func TestPythonClientToolsEmptyQuery(t *testing.T) {
	t.Parallel()
	stdout := pyScript(t, `
s = ts.create_session(["*"])
every = len(ts.tools(s))
ts.tools(s, query="read the contents of a file", limit=3)
print(json.dumps([every, len(ts.tools(s)), len(ts.tools(s, query=""))]))
`)
	var n []int
	if err := json.Unmarshal(stdout, &n); err != nil || len(n) != 3 {
		t.Fatalf("output %q: %v", string(stdout), err)
	}
	if n[0] <= 4 || n[1] != 4 || n[2] != n[0] {
		t.Fatalf("every tool %d, after ranking %d (want 4), with query=\"\" %d (want every tool)", n[0], n[1], n[2])
	}
}

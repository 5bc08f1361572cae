package python_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPythonClientResponses: run() with OpenAI Responses function_call items returns
// one function_call_output per call, under its call_id, in the calls' order. It
// looked each message up by the item's id (fc_…), which the daemon does not answer
// under, and returned []: the calls ran and the model never saw their results.
func TestPythonClientResponses(t *testing.T) {
	t.Parallel()
	script := `
s = ts.create_session(["execute_command", "read_file"])
items = [
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "execute_command",
     "arguments": json.dumps({"command": "echo first"}), "status": "completed"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "read_file",
     "arguments": json.dumps({"path": 5}), "status": "completed"},
]
print(json.dumps(ts.run(s, items, "openai_responses")))
`
	var msgs []struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output any    `json:"output"`
	}
	stdout := pyScript(t, script)
	if err := json.Unmarshal(stdout, &msgs); err != nil {
		t.Fatalf("output %q: %v", string(stdout), err)
	}
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2: %s", len(msgs), string(stdout))
	}
	for i, want := range []struct{ callID, text string }{{"call_a", "first"}, {"call_b", "path"}} {
		m := msgs[i]
		if out, _ := m.Output.(string); m.Type != "function_call_output" || m.CallID != want.callID || !strings.Contains(out, want.text) {
			t.Errorf("message %d = %+v, want the function_call_output of %s with %q", i, m, want.callID, want.text)
		}
	}
}

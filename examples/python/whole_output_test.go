package python_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPythonClientWholeOutput: run() given a model's whole output as it came (an
// Anthropic content list with text and thinking blocks around its tool_use blocks, a
// Responses output list with reasoning and message items around its function_call
// items, Gemini parts with text) returns the results of the calls only, in the
// calls' order: the daemon leaves the other entries out and gives them no event.
func TestPythonClientWholeOutput(t *testing.T) {
	t.Parallel()
	script := `
s = ts.create_session(["execute_command", "read_file"])
anthropic = [
    {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
    {"type": "text", "text": "I will run two commands."},
    {"type": "tool_use", "id": "toolu_1", "name": "execute_command", "input": {"command": "echo first"}},
    {"type": "text", "text": "and then"},
    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": 5}},
]
responses = [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "execute_command",
     "arguments": json.dumps({"command": "echo first"}), "status": "completed"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Running.", "annotations": []}]},
    {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "read_file",
     "arguments": json.dumps({"path": 5}), "status": "completed"},
]
gemini = [
    {"text": "Running two."},
    {"functionCall": {"name": "execute_command", "args": {"command": "echo first"}}},
    {"functionCall": {"name": "read_file", "args": {"path": 5}}},
]
print(json.dumps({"anthropic": ts.run(s, anthropic, "anthropic"),
                  "responses": ts.run(s, responses, "openai_responses"),
                  "gemini": ts.run(s, gemini, "gemini")}))
`
	var out struct {
		Anthropic []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ToolUseID string `json:"tool_use_id"`
				IsError   bool   `json:"is_error"`
				Content   any    `json:"content"`
			} `json:"content"`
		} `json:"anthropic"`
		Responses []struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output any    `json:"output"`
		} `json:"responses"`
		Gemini []struct {
			FunctionResponse struct {
				Name     string         `json:"name"`
				ID       string         `json:"id"`
				Response map[string]any `json:"response"`
			} `json:"functionResponse"`
		} `json:"gemini"`
	}
	stdout := pyScript(t, script)
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("output %q: %v", string(stdout), err)
	}
	text := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	if len(out.Anthropic) != 2 {
		t.Fatalf("anthropic: got %d messages, want 2 (one per tool_use): %s", len(out.Anthropic), stdout)
	}
	for i, want := range []struct{ id, text string }{{"toolu_1", "first"}, {"toolu_2", "path"}} {
		m := out.Anthropic[i]
		if len(m.Content) != 1 || m.Content[0].Type != "tool_result" || m.Content[0].ToolUseID != want.id || !strings.Contains(text(m.Content[0].Content), want.text) {
			t.Errorf("anthropic message %d = %+v, want the tool_result of %s with %q", i, m, want.id, want.text)
		}
	}
	if len(out.Responses) != 2 {
		t.Fatalf("responses: got %d items, want 2 (one per function_call): %s", len(out.Responses), stdout)
	}
	for i, want := range []struct{ callID, text string }{{"call_a", "first"}, {"call_b", "path"}} {
		m := out.Responses[i]
		if m.Type != "function_call_output" || m.CallID != want.callID || !strings.Contains(text(m.Output), want.text) {
			t.Errorf("responses item %d = %+v, want the function_call_output of %s with %q", i, m, want.callID, want.text)
		}
	}
	if len(out.Gemini) != 2 {
		t.Fatalf("gemini: got %d parts, want 2 (one per functionCall): %s", len(out.Gemini), stdout)
	}
	for i, want := range []struct{ name, text string }{{"execute_command", "first"}, {"read_file", "path"}} {
		r := out.Gemini[i].FunctionResponse
		if r.Name != want.name || r.ID != "" || !strings.Contains(text(r.Response), want.text) {
			t.Errorf("gemini part %d = %+v, want %s's functionResponse (no id) with %q", i, r, want.name, want.text)
		}
	}
}

package python_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// TestPythonClientGemini: run() with Gemini functionCall parts returns one
// functionResponse per call, in the calls' order, with or without the call's id. It
// returned [] for them: the calls ran, and the model never saw their results.
func TestPythonClientGemini(t *testing.T) {
	t.Parallel()
	script := `
s = ts.create_session(["execute_command", "read_file"])
parts = [
    {"functionCall": {"id": "g1", "name": "execute_command", "args": {"command": "echo first"}}},
    {"functionCall": {"name": "read_file", "args": {"path": 5}}},
    {"functionCall": {"name": "execute_command", "args": {"command": "echo third"}}},
]
print(json.dumps(ts.run(s, parts, "gemini")))
`
	stdout := pyScript(t, script)
	var msgs []struct {
		FunctionResponse struct {
			ID       string         `json:"id"`
			Name     string         `json:"name"`
			Response map[string]any `json:"response"`
		} `json:"functionResponse"`
	}
	if err := json.Unmarshal(stdout, &msgs); err != nil {
		t.Fatalf("output %q: %v", string(stdout), err)
	}
	if len(msgs) != 3 {
		t.Fatalf("got %d messages, want 3: %s", len(msgs), string(stdout))
	}
	if r := msgs[0].FunctionResponse; r.ID != "g1" || r.Name != "execute_command" || !bytes.Contains(mustJSON(t, r.Response), []byte("first")) {
		t.Errorf("message 0 = %+v, want execute_command g1 printing first", r)
	}
	if r := msgs[1].FunctionResponse; r.Name != "read_file" || r.Response["error"] == nil {
		t.Errorf("message 1 = %+v, want read_file's error", r)
	}
	if r := msgs[2].FunctionResponse; r.Name != "execute_command" || !bytes.Contains(mustJSON(t, r.Response), []byte("third")) {
		t.Errorf("message 2 = %+v, want execute_command printing third", r)
	}
}

// pyScript runs a Python script against a daemon of its own, with ts a ToolServer
// client of it, and returns what it printed.
func pyScript(t *testing.T, script string) []byte {
	t.Helper()
	py := python3(t)
	base, key := daemon(t)
	script = "import json, sys, toolserverd\nts = toolserverd.ToolServer(sys.argv[1], sys.argv[2])\n" + script
	cmd := exec.Command(py, "-c", script, base, key)
	cmd.Env = os.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	return stdout.Bytes()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPythonClientGeminiSameToolOrder: two id-less functionCall parts of one tool,
// the second of which is answered first (its arguments are invalid, so it ends
// before the first ran). run() matched id-less messages to calls by name in the
// order the messages came, so each call got the other's answer.
func TestPythonClientGeminiSameToolOrder(t *testing.T) {
	t.Parallel()
	py := python3(t)
	base, key := daemon(t)
	script := `
import json, sys, toolserverd
ts = toolserverd.ToolServer(sys.argv[1], sys.argv[2])
s = ts.create_session(["grep"])
parts = [
    {"functionCall": {"name": "grep", "args": {"pattern": "zzzz", "path": "/usr"}}},
    {"functionCall": {"name": "grep", "args": {"pattern": 5}}},
]
print(json.dumps({"messages": ts.run(s, parts, "gemini"), "parts": parts}))
`
	cmd := exec.Command(py, "-c", script, base, key)
	cmd.Env = os.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var out struct {
		Messages []struct {
			FunctionResponse map[string]any `json:"functionResponse"`
		} `json:"messages"`
		Parts []map[string]map[string]any `json:"parts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Messages) != 2 {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	first, second := string(mustJSON(t, out.Messages[0])), string(mustJSON(t, out.Messages[1]))
	if !bytes.Contains([]byte(first), []byte("/usr")) || !bytes.Contains([]byte(second), []byte("/pattern")) {
		t.Errorf("messages:\n%s\n%s\nwant the first call's (about /usr) first, the second's (invalid pattern) second", first, second)
	}
	for i, m := range out.Messages {
		if _, ok := m.FunctionResponse["id"]; ok {
			t.Errorf("message %d names an id, for a call that named none: %v", i, m.FunctionResponse)
		}
	}
	for i, p := range out.Parts {
		if _, ok := p["functionCall"]["id"]; ok {
			t.Errorf("run() changed the caller's part %d: %v", i, p)
		}
	}
}

// TestPythonClientGeminiBareWithoutArgs: an SDK's list of FunctionCall objects holds,
// for a function without parameters, one with neither args nor id ({"name": …}).
// run() gave an id of its own only to bare calls with args, so that call's message
// was answered under the daemon's id and left out of what run() returned.
func TestPythonClientGeminiBareWithoutArgs(t *testing.T) {
	t.Parallel()
	script := `
s = ts.create_session(["task_list", "execute_command"])
calls = [{"name": "task_list"}, {"name": "execute_command", "args": {"command": "echo second"}}]
print(json.dumps({"messages": ts.run(s, calls, "gemini"), "calls": calls}))
`
	var out struct {
		Messages []struct {
			FunctionResponse map[string]any `json:"functionResponse"`
		} `json:"messages"`
		Calls []map[string]any `json:"calls"`
	}
	stdout := pyScript(t, script)
	if err := json.Unmarshal(stdout, &out); err != nil || len(out.Messages) != 2 {
		t.Fatalf("want 2 messages: %q: %v", string(stdout), err)
	}
	for i, name := range []string{"task_list", "execute_command"} {
		r := out.Messages[i].FunctionResponse
		if _, hasID := r["id"]; r["name"] != name || hasID {
			t.Errorf("message %d = %v, want %s's functionResponse without an id", i, r, name)
		}
		if _, hasID := out.Calls[i]["id"]; hasID {
			t.Errorf("run() changed the caller's call %d: %v", i, out.Calls[i])
		}
	}
}

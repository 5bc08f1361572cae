package python_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pyScriptWith runs script as pyScript does, against a daemon started with the
// configuration file config, and returns its stdout and stderr.
func pyScriptWith(t *testing.T, config, script string) ([]byte, string) {
	t.Helper()
	py := python3(t)
	file := filepath.Join(t.TempDir(), "toolserverd.yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	base, key := daemon(t, "--config", file)
	script = "import json, sys, toolserverd\nts = toolserverd.ToolServer(sys.argv[1], sys.argv[2])\n" + script
	cmd := exec.Command(py, "-c", script, base, key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	return stdout.Bytes(), stderr.String()
}

// TestPythonClientToolsSaysWhatIsLeftOut: a tool the asked format cannot carry (a
// hosted tool of OpenAI's in format openai, which takes functions only) is named in
// the listing's omitted, with why. tools() returned the tools alone: the backend's
// model silently lacked a tool the session allows. It now says so on stderr, as
// create_session does for the warnings.
func TestPythonClientToolsSaysWhatIsLeftOut(t *testing.T) {
	t.Parallel()
	config := `
provider_tools:
  - name: web_search
    kind: hosted
    description: Search the web.
    specs:
      openai: {type: web_search}
`
	script := `
s = ts.create_session(["read_file", "web_search"])
print(json.dumps({"openai": ts.tools(s, "openai"), "responses": ts.tools(s, "openai_responses")}))
`
	stdout, stderr := pyScriptWith(t, config, script)
	var out struct {
		OpenAI    []map[string]any `json:"openai"`
		Responses []map[string]any `json:"responses"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if len(out.OpenAI) != 1 || len(out.Responses) != 2 {
		t.Fatalf("tools: openai %v, openai_responses %v; want read_file, and read_file with web_search", out.OpenAI, out.Responses)
	}
	if !strings.Contains(stderr, "web_search") || !strings.Contains(stderr, "openai_responses") || strings.Count(stderr, "web_search") != 1 {
		t.Errorf("stderr %q: want one line naming web_search, left out of format openai, and why (it runs in openai_responses)", stderr)
	}
}

// TestPythonClientPrompt: prompt() returns the session's system-prompt fragment, which
// names the skills the session may open (with their descriptions) for the backend to
// add to its system prompt.
func TestPythonClientPrompt(t *testing.T) {
	t.Parallel()
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "release-notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: release-notes\ndescription: Writes release notes from the git log since the last tag.\n---\n# Release notes\nRun git log.\n"
	if err := os.WriteFile(filepath.Join(skills, "release-notes", "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	config := "skills:\n  dirs: [" + strconv.Quote(skills) + "]\n"
	script := `
s = ts.create_session(["skill", "read_file"])
print(json.dumps(ts.prompt(s)))
`
	stdout, stderr := pyScriptWith(t, config, script)
	var prompt string
	if err := json.Unmarshal(stdout, &prompt); err != nil {
		t.Fatalf("output %q (%s): %v", stdout, stderr, err)
	}
	if !strings.Contains(prompt, "release-notes") || !strings.Contains(prompt, "Writes release notes") {
		t.Errorf("prompt %q: want the skill named with its description", prompt)
	}
}

package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestAgentEditsARepository works on a small checkout the way a coding agent does:
// read, edit (unique match), grep, write a new file, read back — with the guards:
// writing a file it never read is refused, and paths out of the checkout get nothing.
func TestAgentEditsARepository(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	files := map[string]string{
		"go.mod":          "module example.com/demo\n\ngo 1.26\n",
		"main.go":         "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(greeting())\n}\n",
		"greet.go":        "package main\n\nfunc greeting() string {\n\treturn \"hello\"\n}\n",
		".gitignore":      "build/\n",
		"build/out.txt":   "greeting() in a build artifact\n",
		"docs/README.txt": "Call greeting() to greet.\n",
	}
	for name, body := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Sessions.WorkdirRoots = []string{root}
		c.Permissions.Allow = append(c.Permissions.Allow, "edit_file", "write_file")
	}})
	id := d.createSession(map[string]any{"workdir": repo, "available_tools": []string{"read_file", "edit_file", "grep", "write_file", "glob"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	run := func(body string) map[string]event {
		t.Helper()
		code, evs := d.stream(calls, body)
		if code != 200 {
			t.Fatalf("%d %s", code, evs[0].raw)
		}
		return messages(t, evs)
	}
	content := func(e event) string { return e.m["message"].(map[string]any)["content"].(string) }

	// Editing a file it has not read is refused, and nothing changes.
	m := run(`{"calls":[{"id":"e0","name":"edit_file","arguments":{"path":"greet.go","old_string":"\"hello\"","new_string":"\"hi\""}}]}`)
	if m["e0"].str("error_kind") != "denied" || !strings.Contains(strings.ToLower(content(m["e0"])), "read") {
		t.Fatalf("edit before read: %s", m["e0"].raw)
	}
	m = run(`{"strategy":"sequential","calls":[
		{"id":"r","name":"read_file","arguments":{"path":"greet.go"}},
		{"id":"e","name":"edit_file","arguments":{"path":"greet.go","old_string":"\"hello\"","new_string":"\"hello, world\""}},
		{"id":"g","name":"grep","arguments":{"pattern":"greeting\\(\\)"}},
		{"id":"w","name":"write_file","arguments":{"path":"greet_test.go","content":"package main\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif greeting() != \"hello, world\" {\n\t\tt.Fatal(greeting())\n\t}\n}\n"}},
		{"id":"back","name":"read_file","arguments":{"path":"greet.go"}},
		{"id":"esc","name":"read_file","arguments":{"path":"../../../../etc/passwd"}},
		{"id":"abs","name":"read_file","arguments":{"path":"/etc/passwd"}}]}`)
	for _, id := range []string{"r", "e", "g", "w", "back"} {
		if m[id].m["is_error"] != false {
			t.Fatalf("%s: %s", id, m[id].raw)
		}
	}
	if !strings.Contains(content(m["r"]), "return \"hello\"") {
		t.Fatalf("read: %s", content(m["r"]))
	}
	grep := content(m["g"])
	if !strings.Contains(grep, "main.go") || !strings.Contains(grep, "docs/README.txt") || strings.Contains(grep, "build/out.txt") {
		t.Fatalf("grep (must honour .gitignore): %s", grep)
	}
	if !strings.Contains(content(m["back"]), "hello, world") {
		t.Fatalf("read back: %s", content(m["back"]))
	}
	for _, id := range []string{"esc", "abs"} {
		if m[id].m["is_error"] != true || strings.Contains(content(m[id]), "root:") {
			t.Fatalf("%s escaped the checkout: %s", id, m[id].raw)
		}
	}
	got, _ := os.ReadFile(filepath.Join(repo, "greet.go"))
	if !strings.Contains(string(got), "\"hello, world\"") {
		t.Fatalf("greet.go on disk: %s", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "greet_test.go")); err != nil {
		t.Fatalf("greet_test.go not written: %v", err)
	}
	// A file changed on disk since it was read must be read again.
	if err := os.WriteFile(filepath.Join(repo, "greet.go"), []byte("package main\n\nfunc greeting() string { return \"changed\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = run(`{"calls":[{"id":"e2","name":"edit_file","arguments":{"path":"greet.go","old_string":"changed","new_string":"again"}}]}`)
	if m["e2"].str("error_kind") != "denied" || !strings.Contains(strings.ToLower(content(m["e2"])), "read") {
		t.Fatalf("edit after an outside change: %s", m["e2"].raw)
	}
}

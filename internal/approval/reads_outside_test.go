package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadsOutsideWorkdir: a read-only command runs at once while what it names lies
// in the working directory (or a read dir), and asks when it names an existing path
// outside it, through .., an absolute path, a glob, a home directory or a symlink.
func TestReadsOutsideWorkdir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	work := filepath.Join(root, "repo")
	outside := filepath.Join(root, "secrets")
	shared := filepath.Join(root, "shared")
	for _, d := range []string{filepath.Join(work, "src"), outside, shared} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(work, "src", "a.go"), filepath.Join(outside, "passwd"), filepath.Join(shared, "data.csv")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"passwd-link": filepath.Join(outside, "passwd"), "out-dir": outside, "inner": "src"} {
		if err := os.Symlink(to, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.ReadDirs = []string{shared}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		ask     string // a word the reason names; "" = allowed at once
	}{
		{"cat src/a.go && ls -la src", ""},
		{"cat ./inner/a.go", ""},
		{"grep -rn /api/v1 src", ""}, // names nothing: a pattern
		{"echo /etc/passwd; uname -a", ""},
		{"cat src/a.go 2>/dev/null", ""},
		{"head " + filepath.Join(shared, "data.csv"), ""},
		{"wc -l < src/a.go", ""},
		{"cat ../secrets/passwd", `"../secrets/passwd"`},
		{"cat " + filepath.Join(outside, "passwd"), "passwd"},
		{"cat passwd-link", `"passwd-link" (a link to`},
		{"head out-dir/passwd", `"out-dir/passwd" (a link to`},
		{"ls ../secrets/*", `"../secrets/*"`},
		{"cat ~/.bashrc", "known only when it runs"},
		{"cat $HOME/.ssh/id_rsa", "known only when it runs"},
		{"cd .. && cat secrets/passwd", `".."`},
		{"wc -l < ../secrets/passwd", `"../secrets/passwd"`},
		{"grep --file=../secrets/passwd x src", `"../secrets/passwd"`},
		{"find .. -name passwd", `".."`},
	} {
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command)})
		switch {
		case tc.ask == "" && d.Outcome != Allow:
			t.Errorf("%q: %s (%s); want it run at once", tc.command, d.Outcome, d.Reason)
		case tc.ask != "" && (d.Outcome != Ask || !strings.Contains(d.Reason, tc.ask) || !strings.Contains(d.Reason, "outside the session's working directory")):
			t.Errorf("%q: %s (%s); want an ask naming %s", tc.command, d.Outcome, d.Reason, tc.ask)
		}
	}

	// Approving for the session accepts the suggested rule: the exact command, which
	// then runs; a prefix rule does not cover reads outside.
	cmd := "cat ../secrets/passwd"
	d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(cmd)})
	if len(d.Suggestions) != 1 || d.Suggestions[0].Pattern != cmd {
		t.Fatalf("suggestions %v, want the exact command", d.Suggestions)
	}
	if d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(cmd), SessionRules: d.Suggestions}); d.Outcome != Allow {
		t.Errorf("with the suggested rule: %s (%s)", d.Outcome, d.Reason)
	}
	prefix := mustRules(t, Allow, "execute_command(cat:*)")
	if d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(cmd), SessionRules: prefix}); d.Outcome != Ask {
		t.Errorf("a prefix rule covered a read outside: %s (%s)", d.Outcome, d.Reason)
	}
	// Other modes: bypass runs it, dont_ask denies it, explore asks (it is read-only).
	for mode, want := range map[Mode]Outcome{ModeBypass: Allow, ModeDontAsk: Deny, ModeExplore: Ask} {
		if d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(cmd)}); d.Outcome != want {
			t.Errorf("%s mode: %s (%s), want %s", mode, d.Outcome, d.Reason, want)
		}
	}
}

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
		{"cat ~+/src/a.go", ""}, // ~+ is the folder the shell stands in
		{"cat ~+/../secrets/passwd", `"~+/../secrets/passwd"`},
		{"cat ~+/../secrets/*", `"~+/../secrets/*"`},
		{"ls ~+/src/*.go", ""},
		{"cat ~-/passwd", "the folder cd - goes back to"},
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

// TestPathListsFromFiles: a program that reads the paths it works on from a file
// or its input (tar -T, rsync --files-from, cpio -o, wc --files0-from, zip -@)
// reads paths known only when it runs, as xargs cat does: it asks, no prefix rule
// covers it (an exact rule does), bypass mode lets it through. The same programs
// over paths they name run under a prefix rule as before.
func TestPathListsFromFiles(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	for _, f := range []string{"list", "src/a.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), []byte("src/a.go\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := testEngine(t, DefaultConfig())
	prefix := mustRules(t, Allow, "execute_command(tar:*)", "execute_command(rsync:*)", "execute_command(cpio:*)",
		"execute_command(wc:*)", "execute_command(du:*)", "execute_command(zip:*)", "execute_command(find:*)")
	for _, tc := range []struct {
		command string
		ask     string // a word the reason names; "" = allowed at once
	}{
		{"tar -czf out.tgz src", ""},
		{"tar -xzf out.tgz", ""},
		{"tar -tzf out.tgz", ""},
		{"rsync -a src/ dest/", ""},
		{"wc -l src/a.go", ""},
		{"zip -r out.zip src", ""},
		{"cpio -i < out.cpio", ""},
		{"tar -czf out.tgz -T list", `"list"`},
		{"tar -cz -f out.tgz -Tlist", `"list"`},
		{"tar --create --file=out.tgz --files-from=list", `"list"`},
		{"tar -czf out.tgz --files-from list", `"list"`},
		{"tar -czf out.tgz -T - < list", "input"},
		{"rsync -a --files-from=list . dest/", `"list"`},
		{"rsync -a --files-from list . dest/", `"list"`},
		{"find src | cpio -o > out.cpio", "input"},
		{"cpio -ov < list > out.cpio", "input"},
		{"cpio --pass-through dest < list", "input"},
		{"wc -l --files0-from=list", `"list"`},
		{"du -s --files0-from list", `"list"`},
		{"find src | zip out.zip -@", "input"},
		// getopt_long takes an abbreviation: sort --files0=list ran at once.
		{"sort --files0=list", `"list"`},
		{"wc -c --f=list", `"list"`},
		{"wc -c --files0 list", `"list"`},
		{"du -s --files0-f=list", `"list"`},
		{"tar -czf out.tgz --files=list", `"list"`},
		{"tar -czf out.tgz --file=x.tgz src", ""},
		{"sort --field-separator=, src/a.go", ""},
	} {
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command), SessionRules: prefix})
		switch {
		case tc.ask == "" && d.Outcome != Allow:
			t.Errorf("%q: %s (%s); want it run at once", tc.command, d.Outcome, d.Reason)
		case tc.ask != "" && (d.Outcome != Ask || d.Immune || !strings.Contains(d.Reason, tc.ask) || !strings.Contains(d.Reason, "known only when it runs")):
			t.Errorf("%q: %s (immune %v, %s); want an ask naming %s", tc.command, d.Outcome, d.Immune, d.Reason, tc.ask)
		}
		if tc.ask == "" {
			continue
		}
		exact := mustRules(t, Allow, "execute_command("+tc.command+")")
		if strings.Contains(tc.command, "|") || strings.Contains(tc.command, "<") || strings.Contains(tc.command, ">") {
			exact = nil // a pipeline or redirection: no single exact rule
		}
		if exact != nil {
			if d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command), SessionRules: exact}); d.Outcome != Allow {
				t.Errorf("%q with its exact rule: %s (%s)", tc.command, d.Outcome, d.Reason)
			}
		}
		if d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeBypass, Workdir: work, Args: commandArgs(tc.command)}); d.Outcome != Allow {
			t.Errorf("%q in bypass mode: %s (%s)", tc.command, d.Outcome, d.Reason)
		}
	}
}

package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSourceScript: sourcing a script of the working directory is judged like
// running it there (bash ./env.sh): an ask that a rule or bypass mode may let
// through, not an immune one. The words after it are read as after a cd to $VAR,
// since the script may cd or set variables: a read there asks, and a word climbing
// out of that folder asks; but only as a path outside the working directory does,
// not as one that may name the daemon's private files, which the script itself
// could read anyway. A script outside, through a link that leads out, known only
// when it runs or without a slash (bash looks it up in PATH first) keeps the
// immune ask, and no prefix rule covers its source.
func TestSourceScript(t *testing.T) {
	t.Parallel()
	root, work := cdTree(t)
	for name, content := range map[string]string{"env.sh": "export A=1\n", "away.sh": "cd /etc\n", "sub/env.sh": "export B=1\n"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "x"), filepath.Join(work, "olink.sh")); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "k"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PrivateDirs = []string{data}
	e := testEngine(t, cfg)
	rules := mustRules(t, Allow, "execute_command(source:*)", "execute_command(.:*)", "execute_command(pytest:*)", "execute_command(cat:*)")
	const allow, ask, immune = "allow", "ask", "immune"
	for _, tc := range []struct {
		command string
		mode    Mode
		want    string // allow, ask (not immune) or immune
		names   string // a word the reason names
	}{
		// A script of the working directory: like bash ./env.sh.
		{command: "source ./env.sh", want: allow},
		{command: "source ./env.sh && pytest tests", want: allow},
		{command: "source ./env.sh && pytest ../tests", want: ask, names: "pytest ../tests"},
		{command: ". ./env.sh && pytest ../tests", want: ask, names: "pytest ../tests"},
		{command: "source ./env.sh && pytest ../tests", mode: ModeBypass, want: allow},
		{command: "source sub/env.sh && pytest ../tests", want: ask},
		{command: "cd sub && source ./env.sh && pytest ../tests", want: ask},
		{command: "cd sub && source ../env.sh && pytest ../x", want: ask, names: "pytest ../x"},
		{command: "builtin source ./env.sh && pytest ../tests", want: ask},
		// What follows it runs in a folder known only when it runs.
		{command: "source ./env.sh && cat x", want: ask, names: "known only when it runs"},
		{command: "source ./away.sh && cat passwd", want: ask, names: "known only when it runs"},
		{command: "source ./env.sh && cat ../../etc/passwd", want: ask, names: "../../etc/passwd"},
		{command: "source ./env.sh && cd .. && cat x", want: ask},
		{command: "x=/etc; source ./env.sh; cat $x/passwd", want: ask, names: "$x/passwd"},
		// Still the daemon's private files, where a word names them from a known folder.
		{command: "source ./env.sh && cat ../data/k", want: immune, names: "../data/k"},
		// Not a script of the working directory.
		{command: "source env.sh && pytest ../tests", want: immune, names: "../tests"},
		{command: "source env.sh", want: ask, names: "source env.sh"},
		{command: "source ./olink.sh && pytest ../tests", want: immune},
		{command: "source ./olink.sh", want: ask},
		{command: "source elink/../x", want: ask},
		{command: "source /etc/profile", want: ask},
		{command: "source /etc/profile && cat x", want: ask, names: "known only when it runs"},
		{command: "source /etc/profile && pytest ../tests", want: immune},
		{command: "source ../x", want: ask},
		{command: "source $X", want: ask, names: "source $X"},
		{command: ". $X && pytest ../tests", want: immune},
		// ./env.sh sourced again from where the first may have led is not known.
		{command: "source ./env.sh && source ./env.sh && pytest ../tests", want: immune},
		{command: "cd $HOME && source ./env.sh && pytest ../tests", want: immune},
		{command: "source ./env.sh && source /etc/profile && pytest ../tests", want: immune},
		{command: "source ./env.sh && cd $HOME && pytest ../tests", want: immune},
	} {
		mode := tc.mode
		if mode == "" {
			mode = ModeDefault
		}
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(tc.command), SessionRules: rules})
		got := string(d.Outcome)
		if d.Outcome == Ask && d.Immune {
			got = immune
		}
		if got != tc.want || !strings.Contains(d.Reason, tc.names) {
			t.Errorf("%q (%s): %s (%s); want %s naming %q", tc.command, mode, got, d.Reason, tc.want, tc.names)
		}
	}
}

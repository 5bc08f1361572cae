package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// cdTree lays out a working directory and the folder around it, with files of the
// same names inside and outside, so that a word read from the wrong folder names an
// existing file on the other side of the working directory's edge:
//
//	root/{file,x,c,f,etc/passwd}       outside
//	root/work/{file,x,c,f,a}           the working directory
//	root/work/sub/{a,deep/}            root/work/other/deep/, root/work/other/f -> root/f
//	root/work/elink -> root/etc, root/work/rlink -> root/work
func cdTree(t *testing.T) (root, work string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	work = filepath.Join(root, "work")
	for _, d := range []string{"etc", "work/sub/deep", "work/other/deep", "work/.git/hooks"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"file", "x", "c", "f", "etc/passwd", "work/file", "work/x", "work/c", "work/f", "work/a", "work/sub/a"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "f"), filepath.Join(work, "other", "f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "etc"), filepath.Join(work, "elink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(work, filepath.Join(work, "rlink")); err != nil {
		t.Fatal(err)
	}
	return root, work
}

// TestCommandWordsFollowCd: a relative word is read from the folder the shell
// stands in where the word stands: after the cds that run before it in the same
// shell, not those of a subshell ( … ) or another pipeline stage; from every folder
// it may stand in when a cd may or may not have run. Read from every folder any cd
// names instead, `cd sub && cat ../file` asked because ../file, read from where the
// line starts, lies outside the working directory.
func TestCommandWordsFollowCd(t *testing.T) {
	t.Parallel()
	_, work := cdTree(t)
	e := testEngine(t, DefaultConfig())
	for _, tc := range []struct {
		command string
		rules   []string // session allow rules
		ask     string   // a word the ask's reason names; "" = runs at once
		immune  bool
		// parts, when set, are what each simple command reads outside the working
		// directory: "" nothing, else a word its reason names.
		parts []string
	}{
		{command: "cd sub && cat ../file", parts: []string{"", ""}},
		{command: "cat ../file", ask: "../file"},
		{command: "cd sub && cat ../file; cat ../file", ask: "../file", parts: []string{"", "", "../file"}},
		// A subshell's commands are judged like any others, from where its own cds
		// lead; its cd stays in it.
		{command: "(cd sub && true) && cat ../x", ask: "../x", parts: []string{"", "", "../x"}},
		{command: "(cd sub) && cat ../../x", parts: []string{"", ""}},
		{command: "(cd sub && cat a ../file)", parts: []string{"", ""}},
		{command: "(cd sub && ls) && cat x"},
		{command: "(cd sub; cat ../../etc/passwd)", ask: "../../etc/passwd"},
		{command: "(cat ../etc/passwd)", ask: "../etc/passwd"},
		{command: "(cd sub && (cd deep && cat ../../../x))", ask: "../../../x", parts: []string{"", "", "../../../x"}},
		{command: "(rm -rf build)", ask: "rm -rf build"},
		{command: "(cd sub && make -C ../other)", rules: []string{"execute_command(make:*)"}},
		{command: "(cd sub && make -C ../../x)", rules: []string{"execute_command(make:*)"}, ask: "make"},
		{command: "coproc (cd sub && cat a)"},
		{command: "(cd .git && echo x > hooks/pre-commit)", ask: "hooks/pre-commit", immune: true},
		{command: "(cd sub && echo X=1 >> ../.env)", ask: ".env", immune: true},
		{command: "(cd sub && rm -rf ../.git)", ask: ".git", immune: true},
		{command: "cd sub; cat ../../etc/passwd", ask: "../../etc/passwd"},
		{command: "cd /etc && cat passwd", ask: "/etc", parts: []string{"/etc", "passwd"}},
		// After ||, the cd may or may not have run: every folder is judged.
		{command: "cd sub || cd other && cat ../f", parts: []string{"", "", ""}},
		{command: "cd sub || cd other/deep && cat ../f", ask: "../f", parts: []string{"", "", `"../f" (a link to`}},
		{command: "cd sub || cd . && cat ../f", ask: "../f"},
		{command: "if true; then cd sub; fi; cat ../x", ask: "../x"},
		{command: "if cd sub; then cat ../x; fi"},
		{command: "cd sub; cat ../x", ask: "../x"}, // the cd may fail
		{command: "cd sub && cd deep && cat ../../x"},
		// Every stage of a pipeline runs where the pipeline does, and a stage's cd
		// stays in its subshell.
		{command: "cd sub && cat a | grep b ../c", parts: []string{"", "", ""}},
		{command: "cd sub | cat ../../x", parts: []string{"", ""}},
		{command: "cd sub | cat ../x", ask: "../x"},
		{command: "pushd sub && cat ../x"},
		{command: "pushd sub && popd && cat ../x", ask: "../x"},
		{command: "cd sub && cat ../x > /dev/null < ../c"},
		{command: "cd sub; cat < ../c", ask: "../c"},
		// A cd to a folder known only when it runs: its target asks, and so does
		// every command after it that may read a file or its folder, since that
		// folder may lie outside (cd $VAR, cd -, cd ~, cd).
		{command: "cd $HOME && cat x", ask: "$HOME", parts: []string{`"$HOME"`, "cat x"}},
		{command: "cd $HOME && cat ../x", ask: "$HOME", parts: []string{`"$HOME"`, "cat ../x"}},
		{command: "cd sub && cd $HOME; cat ../x", ask: "$HOME", parts: []string{"", `"$HOME"`, "cat ../x"}},
		{command: "cd sub && cd $HOME && cd /etc && cat passwd", ask: "$HOME", parts: []string{"", `"$HOME"`, "/etc", "passwd"}},
		{command: "cd - && cat x", ask: "cat x"},
		{command: "cd - && ls", ask: "ls"},
		{command: "cd && git status", ask: "git status"},
		{command: "cd - && pwd && echo x"},
		{command: "cd sub && ls && cd - && cat file", parts: []string{"", "", "", ""}},
		{command: "cd sub && cd - && cat ../x", ask: "../x"},
		{command: "cd sub/deep && cd ../.. && cd - && cat ../../x"},
		// .. after a link goes to the parent of where the link points, as the
		// kernel reads it; a cd's own .. is logical (bash's cd -L).
		{command: "cat elink/../x", ask: "elink/../x"},
		{command: "cat rlink/../x", ask: "rlink/../x"},
		{command: "cd rlink && cat ../x", ask: "../x", parts: []string{"", `"../x" (a link to`}},
		{command: "cd rlink && cd .. && cat x"},
		{command: "cat sub/../x"},
		{command: "CDPATH=/ cd etc && cat passwd", ask: "known only when it runs"},
		{command: "export CDPATH=/; cd etc && cat passwd", ask: "known only when it runs"},
		// Writes too: a prefix rule covers an argument inside the working directory
		// from where the command runs, and a protected path is seen through a cd.
		{command: "cd sub && make -C ../other", rules: []string{"execute_command(make:*)"}},
		{command: "make -C ../other", rules: []string{"execute_command(make:*)"}, ask: "make"},
		{command: "cd .git && echo x > hooks/pre-commit", ask: "hooks/pre-commit", immune: true},
	} {
		req := Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command)}
		if tc.rules != nil {
			req.SessionRules = mustRules(t, Allow, tc.rules...)
		}
		d := e.Check(req)
		switch {
		case tc.ask == "" && d.Outcome != Allow:
			t.Errorf("%q: %s (%s); want it run at once", tc.command, d.Outcome, d.Reason)
		case tc.ask != "" && (d.Outcome != Ask || d.Immune != tc.immune || !strings.Contains(d.Reason, tc.ask)):
			t.Errorf("%q: %s (immune %v, %s); want an ask (immune %v) naming %s", tc.command, d.Outcome, d.Immune, d.Reason, tc.immune, tc.ask)
		}
		if tc.parts == nil {
			continue
		}
		c := e.prepare(req)
		c.readsOutside()
		if len(c.outsideOf) != len(tc.parts) {
			t.Errorf("%q: %d parts judged, want %d", tc.command, len(c.outsideOf), len(tc.parts))
			continue
		}
		for i, want := range tc.parts {
			if got := c.outsideOf[i]; (want == "") != (got == "") || !strings.Contains(got, want) {
				t.Errorf("%q, part %d (%q): reads outside %q, want %q", tc.command, i, c.cmd.Commands[i].Text, got, want)
			}
		}
	}
}

// TestAnalyzeCommandDirs: the folders each simple command may run in ("." the start,
// "?" one known only when it runs), and the constructs this check does not follow,
// which force an immune ask.
func TestAnalyzeCommandDirs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		command string
		dirs    []string // per simple command, its folders joined by " "
		immune  string   // a finding that forces an ask
	}{
		{"cd a && ls", []string{".", "a"}, ""},
		{"cd a; ls", []string{".", "a ."}, ""},
		{"cd a || cd b && ls", []string{".", ".", "a b"}, ""},
		{"cd a || ls", []string{".", "."}, ""},
		{"! cd a || ls", []string{".", "a"}, ""},
		{"cd a && cd ../b && cd /etc/x && cd .. && ls", []string{".", "a", "b", "/etc/x", "/etc"}, ""},
		{"builtin cd a && command cd b && ls", []string{".", "a", "a/b"}, ""},
		{"command -v cd && ls", []string{".", "."}, ""},
		{"env cd a && ls", []string{".", "."}, ""}, // another process: no change here
		{"cd a & ls", []string{".", "."}, ""},
		{"{ cd a; } && ls", []string{".", "a"}, ""},
		{"if cd a; then ls; elif cd b; then pwd; else cd c; fi; ls", []string{".", "a", ".", "b", ".", "a b c ."}, ""},
		{"while read d; do cd /a; done; ls", []string{". /a", ". /a", ". /a"}, ""},
		{"case x in a) cd a;; b) cd b;& c) ls;; esac; ls", []string{".", ".", ". b", ". a b"}, ""},
		{"echo $(cd a && ls) && ls", []string{".", ".", "a", "."}, ""},
		{"(cd a && ls) && ls", []string{".", "a", "."}, ""},
		{"(cd a; (cd b && ls); ls) | cat ../x", []string{".", "a .", "a/b b", "a .", "."}, ""}, // cd a may fail
		{"coproc { cd a && ls; }; ls", []string{".", "a", "."}, ""},
		{"pushd a && pushd /b && popd && popd && ls", []string{".", "a", "/b", "a", "."}, ""},
		{"pushd a && pushd && ls", []string{".", "a", "."}, ""},
		{"popd && ls", []string{".", "?"}, ""},
		{"cd && ls; cd ~ && ls; cd - && ls; cd $D && cd x && ls", []string{".", "?", "? .", "?", "? .", "? .", "? .", "?", "?"}, ""},
		// cd - goes back to the folder the line's last cd, pushd or popd left;
		// before one, to what the run inherits; in a line naming OLDPWD, not followed.
		{"cd a && cd - && ls", []string{".", "a", "."}, ""},
		{"cd a && cd b && cd - && cd - && ls", []string{".", "a", "a/b", "a", "a/b"}, ""},
		{"cd a; cd - && ls", []string{".", "a .", ". ?"}, ""},
		{"cd a && cd $D && cd - && ls", []string{".", "a", "?", "a"}, ""},
		{"pushd a && popd && cd - && ls", []string{".", "a", ".", "a"}, ""},
		{"(cd a) && cd - && ls", []string{".", ".", "?"}, ""},
		{"cd a && unset OLDPWD; cd - && ls", []string{".", "a", "a .", "?"}, ""},
		{"cd -P a/.. && ls", []string{".", "?"}, ""},
		{"cd -L a/.. && ls", []string{".", "."}, ""},
		{"cd -PL a/.. && ls", []string{".", "."}, ""},
		{"cd -LP a/.. && ls", []string{".", "?"}, ""},
		// set -P makes every cd and pushd physical; read for the whole line.
		{"set -P; cd a/.. && ls", []string{".", ".", "?"}, ""},
		{"set -o physical; cd a/.. && ls", []string{".", ".", "?"}, ""},
		{"set -eP && cd a/.. && ls", []string{".", ".", "?"}, ""},
		{"builtin set -P; cd a/.. && ls", []string{".", ".", "?"}, ""},
		{"set $opts; cd a/.. && ls", []string{".", ".", "?"}, ""},
		{"set -P; pushd a/.. && ls", []string{".", ".", "?"}, ""},
		{"cd a/.. && ls; set -P", []string{".", "?", "? ."}, ""},
		{"set -P; cd -L a/.. && ls", []string{".", ".", "."}, ""},
		{"set +P; cd a/.. && ls", []string{".", ".", "."}, ""},
		{"set -- -P; cd a/.. && ls", []string{".", ".", "."}, ""},
		{"grep -P x y; cd a/.. && ls", []string{".", ".", "."}, ""},
		{"source env.sh && ls", []string{".", ". ?"}, ""},
		{"sh -c 'cd a && ls' && ls", []string{".", "."}, "runs a string as shell code"},
		{"f() { cat x; }; cd a && f", []string{". a", ".", "a"}, "defines a shell function"}, // the body runs where f is called
		{"f() { cd a; }; f && ls", nil, "defines a function that changes folder"},
		{"for i in 1 2 3 4 5 6; do cd ..; done; cat etc/passwd", nil, "in a loop"},
		{"while read d; do cd a; done; ls", nil, "in a loop"},
		{"cd a || cd b; cd c || cd d; cd e || cd f; cd g || cd h; cd i || cd j; ls", nil, "more ways"},
	} {
		a := AnalyzeCommand(tc.command)
		if tc.dirs != nil {
			var got []string
			for _, sc := range a.Commands {
				var ds []string
				for _, d := range sc.Dirs {
					if d.Vague {
						ds = append(ds, "?")
					} else {
						ds = append(ds, d.Path)
					}
				}
				got = append(got, strings.Join(ds, " "))
			}
			if strings.Join(got, "|") != strings.Join(tc.dirs, "|") {
				t.Errorf("%q: dirs %q, want %q", tc.command, got, tc.dirs)
			}
		}
		found := false
		for _, f := range a.Findings {
			found = found || strings.Contains(f.What, tc.immune) && (f.Immune || tc.immune == "defines a shell function")
		}
		if tc.immune != "" && !found {
			t.Errorf("%q: findings %v, want one saying %q", tc.command, a.Findings, tc.immune)
		}
	}
}

// TestFollowDirsBounded: a line that branches at every step, changes folder many
// times or nests loops is followed within bounds: each statement starts in at most
// maxLocations places, with a pushd stack no deeper, and at most maxFollowed
// statements are followed in all; past them the line asks. Followed unbounded, the
// places doubled with each `cd a || cd b;`, grew by one with each `cd a;` and each
// nested loop multiplied the passes: a line of a few hundred bytes took minutes.
func TestFollowDirsBounded(t *testing.T) {
	t.Parallel()
	nested := func(open, body, close string, n int) string {
		return strings.Repeat(open, n) + body + strings.Repeat(close, n)
	}
	for _, tc := range []struct{ name, command string }{
		{"branches", strings.Repeat("cd a || cd b; ", 12) + "ls"},
		{"steps", strings.Repeat("cd a; ls ../x; ", 40)},
		{"pushes", strings.Repeat("pushd a; ", 40) + "ls"},
		{"nested loops", nested("for i in 1; do ", "cd a; ", "done; ", 6)},
		{"nested whiles", nested("while cd a; do ", "cd ..; ", "done; ", 6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(tc.command), "")
			if err != nil {
				t.Fatal(err)
			}
			a := &analyzer{src: tc.command, cfg: newExpandConfig()}
			a.followDirs(f)
			if n := len(a.flow.at); n > maxFollowed {
				t.Errorf("%d statements followed, want at most %d", n, maxFollowed)
			}
			for _, e := range a.flow.at {
				if len(e.locs) > maxLocations {
					t.Fatalf("%q starts in %d places, want at most %d", a.text(e.s), len(e.locs), maxLocations)
				}
				for _, l := range e.locs {
					if len(l.stack) > maxLocations {
						t.Fatalf("%q has a pushd stack of %d", a.text(e.s), len(l.stack))
					}
				}
			}
			found := false
			for _, fd := range AnalyzeCommand(tc.command).Findings {
				found = found || fd.Immune && strings.Contains(fd.What, "folder")
			}
			if !found {
				t.Errorf("no finding that forces an ask for the folders not followed")
			}
		})
	}
}

// TestSetPhysical: after set -P (set -o physical, set -eP …) bash's cd and pushd
// resolve symbolic links before .., as cd -P does. Read as logical, `cd rlink && cd
// .. && cat x` was judged to read the working directory's x, which the shell reads
// from the folder above it; a rule for set let it run.
func TestSetPhysical(t *testing.T) {
	t.Parallel()
	_, work := cdTree(t)
	e := testEngine(t, DefaultConfig())
	rules := mustRules(t, Allow, "execute_command(set:*)")
	for _, tc := range []struct {
		command string
		ask     string // a word the ask's reason names; "" = runs at once
	}{
		{"cd rlink/.. && cat x", ""},
		{"cd rlink && cd .. && cat x", ""},
		{"set -P; cd rlink/.. && cat x", "rlink/.."},
		{"set -P; cd elink/.. && cat x", "elink/.."},
		{"set -o physical; cd rlink && cd .. && cat x", `".."`},
		{"set -eu -o physical; cd rlink && cd .. && cat x", `".."`},
		{"set -eP; cd rlink && cd .. && cat x", `".."`},
		{"set -P; pushd rlink && cd .. && cat x", `".."`},
		{"set -P; cd sub/.. && cat x", "cat x"}, // physical .. is where only the disk knows
		{"set -P; cd -L rlink/.. && cat x", ""},
		{"set +P; cd rlink/.. && cat x", ""},
		{"pwd -P", ""},
		{"cd -P rlink/.. && cat x", "rlink/.."},
		// An option held in a variable: o=-P; cd $o elink/.. went to the folder
		// above the checkout and cat x read its x unasked.
		{"o=-P; cd $o elink/.. && cat x", "cat x"},
		{"for o in -L -P; do cd $o rlink/.. && cat x; done", "cat x"},
		// env -C changes folder (physically) as cd does: env -C .. cat x read the
		// x above the checkout unasked.
		{"env -C .. cat x", "cat x"},
		{"env --chdir=elink/.. cat x", "cat x"},
		{"env -C sub cat a", ""},
	} {
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command), SessionRules: rules})
		switch {
		case tc.ask == "" && d.Outcome != Allow:
			t.Errorf("%q: %s (%s); want it run at once", tc.command, d.Outcome, d.Reason)
		case tc.ask != "" && (d.Outcome != Ask || !strings.Contains(d.Reason, tc.ask)):
			t.Errorf("%q: %s (%s); want an ask naming %s", tc.command, d.Outcome, d.Reason, tc.ask)
		}
	}
}

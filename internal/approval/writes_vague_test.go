package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWritesFromVagueFolder: after a cd to a folder known only when it runs (cd $X,
// cd ~, cd -, pushd $X, a popd past the stack, a sourced script), a delete of a
// relative path (rm, rmdir, unlink, shred -u, find -delete, git clean -f, a git
// command that discards uncommitted work), or of one under ~- or $OLDPWD, is
// critical and immune, as `cd / && rm -rf usr` is, and another write of a relative path asks as a read there does: no prefix
// rule covers it, an exact rule does (a redirection, which no rule shows, asks
// every time), bypass mode lets it through. An absolute word is judged on its own;
// a folder a variable the line sets leads to, a known folder and a cd that stayed in
// a subshell or did not run change nothing. After a script of the working directory,
// trusted as much as running it there, a delete asks without being immune.
func TestWritesFromVagueFolder(t *testing.T) {
	t.Parallel()
	root, work := cdTree(t)
	if err := os.WriteFile(filepath.Join(work, "env.sh"), []byte("export A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "out.sh"), []byte("cd /\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := testEngine(t, DefaultConfig())
	prefix := []string{"execute_command(rm:*)", "execute_command(touch:*)", "execute_command(sed:*)", "execute_command(cp:*)",
		"execute_command(mv:*)", "execute_command(tee:*)", "execute_command(echo:*)", "execute_command(find:*)",
		"execute_command(git clean:*)", "execute_command(source:*)", "execute_command(pytest:*)"}
	const allow, ask, immune = "allow", "ask", "immune"
	for _, tc := range []struct {
		command string
		mode    Mode
		rules   []string // session allow rules; nil: prefix
		want    string   // allow, ask (not immune) or immune
		names   string   // a word the reason names
	}{
		// Recursive or forced deletes from an unknown folder: critical and immune.
		{command: "cd - && rm -rf build", rules: []string{"execute_command(rm -rf build)"}, want: immune, names: `"build"`},
		{command: "cd - && rm -rf build", mode: ModeBypass, want: immune, names: "known only when it runs"},
		{command: "cd - && rm -rf .", mode: ModeBypass, want: immune, names: `"."`},
		{command: "cd $HOME && rm -rf *", mode: ModeBypass, want: immune, names: `"*"`},
		{command: `cd "$X" && rm -rf .git`, mode: ModeBypass, want: immune, names: `".git"`},
		{command: "cd ~ && rm -f notes.txt", mode: ModeBypass, want: immune, names: "notes.txt"},
		{command: "cd ~ && rm --force notes.txt", mode: ModeBypass, want: immune, names: "notes.txt"},
		{command: "cd $X && rm -r build", want: immune},
		{command: "cd; rm -rf build", mode: ModeBypass, want: immune},
		{command: "(cd $X && rm -rf build)", mode: ModeBypass, want: immune},
		{command: "(cd $X; rm -rf build)", want: immune},
		{command: "cd $X || true; rm -rf build", mode: ModeBypass, want: immune},
		{command: "cd sub || cd $X && rm -rf build", mode: ModeBypass, want: immune},
		{command: "pushd $X && rm -rf build; popd", mode: ModeBypass, want: immune},
		{command: "popd && rm -rf build", mode: ModeBypass, want: immune},
		{command: "cd ~ && find . -name '*.o' -delete", mode: ModeBypass, want: immune},
		{command: "cd ~ && find -name '*.o' -delete", mode: ModeBypass, want: immune},
		{command: "cd ~ && find . -exec rm -f {} +", mode: ModeBypass, want: immune},
		{command: "cd $X && git clean -fdx", mode: ModeBypass, want: immune},
		{command: "cd $X && git clean -fdx", rules: []string{"execute_command(git clean -fdx)"}, want: immune},
		{command: "cd $X && ls | xargs rm -rf", mode: ModeBypass, want: immune},
		{command: "cd $X && sudo rm -rf build", mode: ModeBypass, want: immune},
		{command: "source /etc/profile && rm -rf build", mode: ModeBypass, want: immune},
		{command: "source ../out.sh && rm -rf build", mode: ModeBypass, want: immune},
		{command: "source $S && rm -rf build", mode: ModeBypass, want: immune},
		// CDPATH sends cd where the check cannot tell: CDPATH=/ cd usr && rm -rf lib
		// deleted /usr/lib unasked in bypass mode.
		{command: "CDPATH=/ cd usr && rm -rf lib", mode: ModeBypass, want: immune},
		{command: "export CDPATH=/; cd usr; rm -rf lib", mode: ModeBypass, want: immune},
		{command: "CDPATH=/ pushd usr && rm -f lib", mode: ModeBypass, want: immune},
		{command: "CDPATH=/ cd ./sub && rm -rf build", mode: ModeBypass, want: allow},
		// env -C: env -C / rm -rf usr deleted /usr unasked in bypass mode.
		{command: "env -C / rm -rf usr", mode: ModeBypass, want: immune, names: "/usr"},
		{command: "env -C $X rm -rf build", mode: ModeBypass, want: immune},
		{command: "env -C sub rm -rf build", mode: ModeBypass, want: allow},
		{command: "d=/; env -C $d rm -rf usr", mode: ModeBypass, want: immune, names: "/usr"},
		// Other writes from an unknown folder: an ask no prefix rule covers.
		{command: "cd - && echo x >> .bash_aliases", want: ask, names: ".bash_aliases"},
		{command: "cd - && echo x >> .bash_aliases", rules: []string{"execute_command(echo x)"}, want: ask, names: ".bash_aliases"},
		{command: "cd ~ && echo x >> .bash_aliases", mode: ModeBypass, want: allow},
		{command: "cd ~ && > .bashrc", mode: ModeBypass, want: immune, names: "protected path"},
		{command: "cd - && touch new.txt", want: ask, names: "new.txt"},
		{command: "cd - && touch new.txt", rules: []string{"execute_command(touch new.txt)"}, want: allow},
		{command: "cd - && touch new.txt", mode: ModeBypass, want: allow},
		{command: "cd - && sed -i s/a/b/ conf", want: ask, names: "known only when it runs"},
		{command: "cd - && cp a b", want: ask},
		{command: "cd - && mv a b", want: ask},
		{command: "cd - && echo x | tee log", want: ask, names: "log"},
		// Every delete there is one: rm without -f, rmdir, unlink, shred -u, xargs rm
		// (they asked without being immune while rm -f was).
		{command: "cd - && rm stale.log", want: immune, names: "stale.log"},
		{command: "cd - && rm stale.log", rules: []string{"execute_command(rm stale.log)"}, want: immune},
		{command: "cd $X && rmdir y", mode: ModeBypass, want: immune, names: `"y"`},
		{command: "cd $X && unlink y", mode: ModeBypass, want: immune, names: `"y"`},
		{command: "cd $X && shred -u y", mode: ModeBypass, want: immune, names: `"y"`},
		{command: "cd $X && shred -n 3 --remove=wipe y", mode: ModeBypass, want: immune, names: `"y"`},
		{command: "cd $X && shred y", mode: ModeBypass, want: allow}, // overwrites, keeps the file: a write
		{command: "cd $X && ls | xargs rm", mode: ModeBypass, want: immune},
		{command: "cd $X && ls | xargs rmdir", mode: ModeBypass, want: immune},
		// Reads there ask without being immune, through xargs too.
		{command: "cd $X && ls | xargs cat", want: ask, names: "known only when it runs"},
		{command: "cd $X && ls | xargs cat", mode: ModeBypass, want: allow},
		// git commands that discard uncommitted work there are deletes too.
		{command: "cd $X && git reset --hard", mode: ModeBypass, want: immune, names: "uncommitted"},
		{command: "cd $X && git checkout -- .", mode: ModeBypass, want: immune, names: "uncommitted"},
		{command: "cd $X && git checkout .", mode: ModeBypass, want: immune},
		{command: "cd $X && git checkout -f main", mode: ModeBypass, want: immune},
		{command: "cd $X && git restore .", mode: ModeBypass, want: immune},
		{command: "cd $X && git restore --staged --worktree src", mode: ModeBypass, want: immune},
		{command: "cd $X && git switch --discard-changes main", mode: ModeBypass, want: immune},
		{command: "cd $X && git restore --staged .", mode: ModeBypass, want: allow}, // unstages, keeps the work
		{command: "cd $X && git restore --staged -- .", mode: ModeBypass, want: allow},
		{command: "cd $X && git restore -SW -- .", mode: ModeBypass, want: immune},
		{command: "cd $X && git restore --pathspec-from-file=list", mode: ModeBypass, want: immune},
		{command: "cd $X && git checkout --theirs -- a.go", mode: ModeBypass, want: immune},
		{command: "cd $X && git stash -u", mode: ModeBypass, want: allow}, // keeps it in the stash
		{command: "cd $X && git checkout main", mode: ModeBypass, want: allow},
		{command: "cd $X && git checkout '*.go'", mode: ModeBypass, want: immune},
		{command: "cd $X && git checkout HEAD 'src/*'", mode: ModeBypass, want: immune},
		{command: "cd $X && git checkout --pathspec-from-file=list", mode: ModeBypass, want: immune},
		{command: "cd $X && git checkout ':(glob)**/*.go'", mode: ModeBypass, want: immune},
		{command: "cd $X && git checkout feature/x", mode: ModeBypass, want: allow},
		{command: "cd $X && git checkout HEAD~1", mode: ModeBypass, want: allow},
		{command: "git checkout '*.go'", mode: ModeBypass, want: allow},
		{command: "cd $X && git reset HEAD~1", mode: ModeBypass, want: allow},
		{command: "cd - && git -C " + work + " reset --hard", mode: ModeBypass, want: allow},
		{command: "cd sub && git checkout -- . && git reset --hard", mode: ModeBypass, want: allow},
		// git -C or --work-tree naming a folder known only when it runs is a cd
		// there: git -C "$X" reset --hard ran unasked in bypass mode.
		{command: `git -C "$X" reset --hard`, mode: ModeBypass, want: immune, names: `"$X"`},
		{command: "git -C $X clean -fdx", mode: ModeBypass, want: immune, names: "untracked"},
		{command: "git --work-tree=$X checkout -- .", mode: ModeBypass, want: immune},
		{command: "git -c core.x=1 --work-tree $X restore .", mode: ModeBypass, want: immune},
		{command: "git -C ~-/repo switch -f main", mode: ModeBypass, want: immune},
		{command: "git -C $X checkout main", mode: ModeBypass, want: allow},
		{command: "git -C $X status", mode: ModeBypass, want: allow},
		{command: "git -C sub reset --hard", mode: ModeBypass, want: allow},
		// git rm and rsync --delete or --remove-source-files delete too.
		{command: "cd $X && git rm -r build", mode: ModeBypass, want: immune, names: `"build"`},
		{command: "cd $X && git rm --cached -r build", mode: ModeBypass, want: allow},
		{command: "cd $X && git rm -r " + work + "/build", mode: ModeBypass, want: allow},
		{command: "cd $X && rsync -a --delete src/ dst/", mode: ModeBypass, want: immune, names: `"dst/"`},
		{command: "cd $X && rsync -a --delete-after src/ " + work + "/dst/", mode: ModeBypass, want: allow},
		{command: "cd $X && rsync -a --remove-source-files out/ host:backup/", mode: ModeBypass, want: immune, names: `"out/"`},
		{command: "cd $X && rsync -a --delete src/ host:dst/", mode: ModeBypass, want: allow},
		{command: "cd $X && rsync -a src/ dst/", mode: ModeBypass, want: allow},
		// ~- and $OLDPWD name the folder cd - goes to: a delete of a path under
		// them is one in a folder known only when it runs; so is ~+ (the current
		// folder) after a vague cd.
		{command: "rm -rf ~-/build", mode: ModeBypass, want: immune, names: "~-/build"},
		{command: "rm -f $OLDPWD/notes.txt", mode: ModeBypass, want: immune, names: "OLDPWD"},
		{command: "cd sub && rm -rf ${OLDPWD}/build", mode: ModeBypass, want: immune},
		{command: "cd $X && rm -rf ~+/build", mode: ModeBypass, want: immune},
		{command: "cd $X && rm -rf $PWD/build", mode: ModeBypass, want: immune},
		{command: "rm -rf ~+/build", mode: ModeBypass, want: allow},
		{command: "echo x >> ~-/notes", want: ask, names: "~-/notes"},
		{command: "touch ~-/new", mode: ModeBypass, want: allow},
		{command: "cat ~-/passwd", want: ask},
		{command: "cat ~-/passwd", mode: ModeBypass, want: allow},
		{command: "(cd -; touch a) && touch b", want: ask},
		{command: "pushd $X && touch a", want: ask},
		// An absolute word is judged on its own.
		{command: "cd - && touch " + work + "/new", want: allow},
		{command: "cd - && rm -rf " + work + "/build", want: allow},
		{command: "cd $X && rm -rf " + work + "/build", mode: ModeBypass, want: allow},
		{command: "cd - && git -C " + work + " clean -fdx", mode: ModeBypass, want: allow},
		{command: "cd - && git -C " + work + " clean -fdx", want: ask, names: `"clean"`}, // its words are still read from cd's folder
		{command: "cd $X && rm -rf /usr", want: immune, names: "/usr"},
		// Known folders, and cds that did not lead there, change nothing.
		{command: "for d in sub other; do (cd $d && rm -rf build); done", want: allow},
		{command: "for d in sub other; do (cd $d && rm -rf build); done", mode: ModeBypass, want: allow},
		{command: "d=sub; cd $d && echo x > out", want: allow},
		{command: "cd .skills/x && rm -rf tmp", want: allow},
		{command: "cd sub && echo x > out && rm -rf build", want: allow},
		{command: "(cd - && true) && rm -rf build", want: allow},
		{command: "(cd -) ; touch a", want: allow},
		{command: "cd - || rm -rf build", want: allow},
		{command: "cd - | rm -rf build", want: allow},
		{command: "pushd sub && popd && rm -rf build", want: allow},
		{command: "pushd sub && pushd $X && popd && popd && rm -rf build", want: immune}, // $X may be +1: the stack is not followed
		// A script of the working directory: a delete after it asks, not immune.
		{command: "source ./env.sh && rm -rf build", want: ask, names: "known only when it runs"},
		{command: "source ./env.sh && rm -rf build", rules: []string{"execute_command(source ./env.sh)", "execute_command(rm -rf build)"}, want: allow},
		{command: "source ./env.sh && rm -rf build", mode: ModeBypass, want: allow},
		{command: "source ./env.sh && pytest tests", want: allow},
		{command: "source ./env.sh && cd $X && rm -rf build", mode: ModeBypass, want: immune},
	} {
		mode := tc.mode
		if mode == "" {
			mode = ModeDefault
		}
		list := tc.rules
		if list == nil {
			list = prefix
		}
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(tc.command), SessionRules: mustRules(t, Allow, list...)})
		got := string(d.Outcome)
		if d.Outcome == Ask && d.Immune {
			got = immune
		}
		if got != tc.want || !strings.Contains(d.Reason, tc.names) {
			t.Errorf("%q (%s, %d rules): %s (%s); want %s naming %q", tc.command, mode, len(list), got, d.Reason, tc.want, tc.names)
		}
	}
}

// TestEverydayCommands: what a coding session runs all day, deletes and resets in
// its own working directory included, runs in bypass mode without asking, and the
// read-only ones in default mode too, so that the checks of commands after a cd
// to a folder known only when it runs, of ~- and $OLDPWD, of git commands that
// discard work and of path lists read from files leave bypass mode usable.
func TestEverydayCommands(t *testing.T) {
	t.Parallel()
	_, work := cdTree(t)
	e := testEngine(t, DefaultConfig())
	for _, tc := range []struct {
		command  string
		readOnly bool // also runs in default mode
	}{
		{"go test ./...", false},
		{"go vet ./... && go build ./...", false},
		{"npm test", false},
		{"npm run build", false},
		{"git status", true},
		{"git diff", true},
		{"git log --oneline | head -20", true},
		{"git add -A && git commit -m 'fix: x'", false},
		{"git checkout -b feature", false},
		{"git checkout -- file", false},
		{"git restore file", false},
		{"git restore --staged file", false},
		{"git stash -u && git stash pop", false},
		{"git reset --hard", false},
		{"git reset --hard HEAD~1", false},
		{"git clean -fdx", false},
		{"cat file sub/a", true},
		{"grep -rn TODO .", true},
		{"sed -n 1,5p file", true},
		{"sed -i s/a/b/ file", false},
		{"cd sub && cat ../file", true},
		{"cd sub && rm -rf deep/build", false},
		{"rm -rf build/", false},
		{"rm -f file", false},
		{"rm file", false},
		{"rmdir sub/deep", false},
		{"unlink x", false},
		{"find . -name '*.o' -delete", false},
		{"ls | xargs cat", false}, // asks in default mode: xargs reads its paths from its input
		{"ls *.tmp | xargs rm -f", false},
		{"shred -u x", false},
		{"cat ~+/file", true},
		{"tar -czf out.tgz sub", false},
		{"tar -czf out.tgz -T file", false},
		{"find sub -name '*.go' | cpio -o > out.cpio", false},
		{"cd -P sub/.. && ls", false},
		{"while [ ! -d .git ]; do cd -P ..; done; git status", false},
		{"set -P; for i in 1 2 3 4 5 6; do cd ..; done; ls", false},
		{"tar -xzf out.tgz", false},
		{"rsync -a sub/ other/", false},
		{"rsync -a --delete sub/ other/", false},
		{"git rm -r sub/deep", false},
	} {
		for _, mode := range []Mode{ModeBypass, ModeDefault} {
			if mode == ModeDefault && !tc.readOnly {
				continue
			}
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(tc.command)})
			if d.Outcome != Allow {
				t.Errorf("%q (%s): %s (immune %v): %s; want it run at once", tc.command, mode, d.Outcome, d.Immune, d.Reason)
			}
		}
	}
}

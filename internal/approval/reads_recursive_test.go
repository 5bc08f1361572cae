package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recursiveFixture makes root/proj (a checkout) holding data (the daemon's data dir:
// admin.key, toolserverd.db, another session's workspace), src/a.go, a symlink up →
// the checkout, and root/state (a data dir outside it).
func recursiveFixture(t *testing.T) (work, data, state string) {
	t.Helper()
	root := t.TempDir()
	work = filepath.Join(root, "proj")
	data = filepath.Join(work, "data")
	state = filepath.Join(root, "state")
	for _, d := range []string{filepath.Join(work, "src"), filepath.Join(data, "workspaces", "ses_2"), filepath.Join(state, "workspaces", "ses_1")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(data, "admin.key"), filepath.Join(data, "toolserverd.db"), filepath.Join(work, "src", "a.go"), filepath.Join(work, "README.md")} {
		if err := os.WriteFile(f, []byte("SQLite format 3\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(work, filepath.Join(work, "src", "up")); err != nil {
		t.Fatal(err)
	}
	return work, data, state
}

// TestRecursiveReadOfPrivateDir: a working directory that contains the data dir
// (the default "data" under a checkout) reaches it through a command that reads a
// folder holding it recursively, without naming it: `grep -rl SQLite .` read the
// database, `rg key` the admin key, `ls -R` and `find .` listed other sessions'
// files, unasked in bypass mode. Each asks now, immune, as naming the data dir
// does; the same command over a folder without it runs as before.
func TestRecursiveReadOfPrivateDir(t *testing.T) {
	t.Parallel()
	work, data, _ := recursiveFixture(t)
	cases := []immuneCase{
		// grep and its options
		{"grep -rl SQLite .", true},
		{"grep -r x", true}, // no path: the current folder
		{"grep -R x", true},
		{"grep --recursive x .", true},
		{"grep -d recurse x .", true},
		{"grep --directories=recurse x .", true},
		{"grep -rn -e x", true},
		{"grep -rin x src .", true},
		{"grep -r --exclude-dir=data x .", true}, // not judged: asks
		{"grep -r x *", true},
		{"grep -r x d*", true},
		{"grep -r x ./", true},
		{"grep -r x src/..", true},
		{"grep -r x src/up", true}, // a link to the checkout
		{"grep -r x " + work, true},
		{"grep -r x /", true},
		{"cd src && grep -r x ..", true},
		{"sudo grep -r x .", true},
		{"timeout 5 grep -r x .", true},
		{"echo . | xargs grep -r x", true},
		{"grep --recur x .", true},       // getopt takes a long option's prefix
		{"grep -r --inc '*.go' x", true}, // --include's value, then no path
		{"rgrep x", true},
		{"ugrep -r x", true},
		{"busybox grep -r x .", true},
		{"grep -r --color x src", false},
		{"rgrep x src", false},
		{"grep -r x src", false},
		{"grep -r -e x src", false},
		{"grep -r x s*", false},
		{"grep x *", false},
		{"grep -e -r x README.md", false},
		{"cd src && grep -r x .", false},
		// recursive by default
		{"rg key", true},
		{"rg --files", true},
		{"rg --max-depth 2 key", true},
		{"rg -d 1 key", false},
		{"rg key src", false},
		{"rg -e key src", false},
		{"ag key", true},
		{"ack key", true},
		{"fd db", true},
		{"fd db src", false},
		{"find . -name '*.db' -exec cat {} +", true},
		{"find -name x", true},
		{"find -L . -maxdepth 2 -type f", true},
		{"find src -name '*.go' -exec grep -r x {} +", false},
		{"find . -maxdepth 1 -type f", false},
		{"find . -maxdepth 1 -exec grep -r x {} +", true}, // finds ./data, grep reads it
		{"find . -maxdepth 0 -exec rg x {} ;", true},
		{"find src -maxdepth 1 -exec grep -r x {} +", false},
		{"fd -d 1 -x grep -r x {}", true},
		{"fd -d 1 go src -x grep -r x {}", false},
		{"find . -maxdepth 1 -exec cat {} +", false}, // cat of a folder reads nothing
		{"d=.; grep -r x $d", true},
		{"for d in src .; do du $d; done", true},
		{"for d in src; do du $d; done", false},
		{"find src -type d | xargs grep -r x", true}, // its folders come from its input
		{"find src -type f | xargs grep x", false},
		{"find . -path ./data -prune -o -print", true},
		{"du", true},
		{"du -a src .", true},
		{"du -sh .", false},
		{"du -h -d 1", false},
		{"du --max-depth=2 .", true},
		{"tree", true},
		{"tree -L 1", false},
		{"tree -L 2", true},
		{"tree src", false},
		{"ls -R", true},
		{"ls -lR .", true},
		{"ls --recursive src ..", true},
		{"ls *", true},
		{"ls -la", false},
		{"ls -d *", false},
		{"ls src s*", false},
		// copies and archives
		{"tar czf /tmp/x.tgz .", true},
		{"tar -c -f /tmp/x.tgz .", true},
		{"tar --create --file=/tmp/x.tgz *", true},
		{"tar -czf /tmp/x.tgz src", false},
		{"tar xzf /tmp/x.tgz", false},
		{"tar -tf /tmp/x.tgz .", false},
		{"gtar -cf /tmp/x.tar .", true},
		{"7z a /tmp/x.7z .", true},
		{"7z x /tmp/x.7z", false},
		{"shopt -s globstar; cat **/*.db", true},
		{"shopt -s globstar; wc -l /**/admin.key", true},
		{"shopt -s globstar; cat src/**/*.go", false},
		{"cat **/*.db", true}, // without globstar, ** is *: data/toolserverd.db
		{"zip -r /tmp/x.zip .", true},
		{"zip -qr /tmp/x.zip . -x 'data/*'", true},
		{"zip /tmp/x.zip README.md", false},
		{"cp -r . /tmp/x", true},
		{"cp -a ./ /tmp/x", true},
		{"cp -rt /tmp/x .", true},
		{"cp -r src /tmp/x", false},
		{"cp -r /tmp/y .", false}, // writes into it, reads elsewhere
		{"rsync -a . /tmp/x", true},
		{"rsync -av --exclude data ./ /tmp/x", true},
		{"rsync -a .", true},
		{"rsync -av src/ /tmp/x", false},
		{"scp -r . host:x", true},
		{"scp -r src host:x", false},
		{"diff -r . /tmp/x", true},
		{"diff -ru src /tmp/x", false},
		{"diff README.md src/a.go", false},
	}
	cfg := DefaultConfig()
	cfg.PrivateDirs = []string{data}
	e := testEngine(t, cfg)
	for _, tc := range cases {
		for _, mode := range []Mode{ModeDefault, ModeBypass} {
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(tc.command)})
			asked := d.Outcome == Ask && d.Immune
			if asked != tc.ask {
				t.Errorf("%s mode, %q: %s (immune %v): %s; want an immune ask: %v", mode, tc.command, d.Outcome, d.Immune, d.Reason, tc.ask)
			} else if asked && !strings.Contains(d.Reason, "data directory") {
				t.Errorf("%s mode, %q: the reason does not name the data directory: %s", mode, tc.command, d.Reason)
			}
		}
	}
}

// TestRecursiveReadOfPrivateDirElsewhere: the data dir outside the checkout is
// reached by a recursive read of a folder above it; a session working inside the
// data dir (its own workspace) reads its own folder unasked.
func TestRecursiveReadOfPrivateDirElsewhere(t *testing.T) {
	t.Parallel()
	work, _, state := recursiveFixture(t)
	own := filepath.Join(state, "workspaces", "ses_1")
	cfg := DefaultConfig()
	cfg.PrivateDirs = []string{state}
	cfg.ReadDirs = []string{filepath.Dir(state)} // a read dir does not cover it
	e := testEngine(t, cfg)
	for _, tc := range []struct {
		workdir, command string
		ask              bool
	}{
		{work, "grep -r x ..", true},
		{work, "grep -r x " + filepath.Dir(state), true},
		{work, "grep -r x " + filepath.Join(state, "..", "proj"), false},
		{work, "find / -name admin.key", true},
		{work, "grep -r x .", false},
		{work, "rg x data", false}, // this data is no private dir here
		{own, "grep -r x .", false},
		{own, "rg x", false},
		{own, "grep -r x ../..", true},
		{own, "cd ../.. && grep -r x", true},
	} {
		for _, mode := range []Mode{ModeDefault, ModeBypass} {
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: tc.workdir, Args: commandArgs(tc.command)})
			if asked := d.Outcome == Ask && d.Immune; asked != tc.ask {
				t.Errorf("%s mode, workdir %s, %q: %s (immune %v): %s; want an immune ask: %v", mode, tc.workdir, tc.command, d.Outcome, d.Immune, d.Reason, tc.ask)
			}
		}
	}
}

// TestRecursiveChangeOfPrivateDir: rm -rf ., rm -rf *, git clean -fdx or chmod -R
// in a working directory that holds the data dir deleted (or changed) the database
// and the admin key unasked in bypass mode; each asks now, immune, as reading it
// recursively does. With the data dir elsewhere, they are judged as before.
func TestRecursiveChangeOfPrivateDir(t *testing.T) {
	t.Parallel()
	work, data, state := recursiveFixture(t)
	cases := []struct {
		command       string
		inside, other bool // an immune ask with the data dir in the checkout, elsewhere
	}{
		{"rm -rf .", true, false},
		{"rm -rf *", true, false},
		{"rm -r ./", true, false},
		{"rm -rf -- .", true, false},
		{"cd src && rm -rf ..", true, false},
		{"x=.; rm -rf $x", true, false},
		{"git clean -fdx", true, false},
		{"git clean -fd", true, false},
		{"chmod -R 777 .", true, false},
		{"chown -R me .", true, false},
		{"rm -rf build dist src", false, false},
		{"rm -f *", false, false},
		{"git clean -fx", false, false},
		{"git clean -fdx src", false, false},
		{"git -C src clean -fdx", false, false},
		{"chmod -R u+w src", false, false},
		// $PWD and ~+ are the folder the shell stands in.
		{`rm -rf "$PWD"`, true, false},
		{"grep -r x ~+", true, false},
		{"cd src && rm -rf $PWD/..", true, false},
		{"rm -rf $PWD/build", false, false},
		// rsync --delete empties its destination: rsync -a --delete empty/ .
		// deleted the data dir unasked in bypass mode.
		{"rsync -a --delete /tmp/empty/ .", true, false},
		{"rsync -a --delete-after src/ ./", true, false},
		{"rsync -a --delete src/ build/", false, false},
		{"rsync -a src/ .", false, false},
		// Extracting an archive allowed to write absolute names (tar -P, cpio -i
		// without --no-absolute-filenames, unzip -:) writes wherever the archive
		// says, the data dir included: tar -xPf x.tar overwrote the admin key
		// unasked in bypass mode. Without, it writes below its folder, as rsync -a
		// src/ . does, and is judged as before.
		{"cpio -idm < x.cpio", true, true},
		{"rpm2cpio x.rpm | cpio -idmv", true, true},
		{"tar -xPf x.tar -C src", true, true},
		{"tar xPf x.tar", true, true},
		{"tar -x --absolute-names -f x.tar -C src", true, true},
		{"unzip -: x.zip -d src", true, true},
		{"tar -xf x.tar", false, false},
		{"tar xzf x.tgz", false, false},
		{"tar -xf x.tar -C src", false, false},
		{"tar -cPf x.tar src", false, false},
		{"unzip -o x.zip", false, false},
		{"unzip -l x.zip", false, false},
		{"cpio -idm --no-absolute-filenames < x.cpio", false, false},
		{"cpio -it < x.cpio", false, false},
		{"7z x a.7z", false, false},
		// A symbolic link to a folder holding the data dir reaches it through
		// the link, which does not exist yet when the line is checked: ln -s ..
		// up; cat up/state/admin.key read the admin key unasked in bypass mode.
		{"ln -s .. up; cat up/state/admin.key", true, true},
		{"cd src && ln -s ../.. up", true, true},
		{"ln -s . self", true, false},
		{"ln -sf ../.. src/up", true, true}, // ../.. from src is the checkout's parent
		{"ln -s ../shared lib", false, false},
		{"ln -sf ../README.md src/r", false, false},
		{"ln -s /usr/bin/python3 py", false, false},
		{"ln .. x", false, false}, // no symbolic link (ln refuses a folder)
	}
	for _, private := range []string{data, state} {
		cfg := DefaultConfig()
		cfg.PrivateDirs = []string{private}
		e := testEngine(t, cfg)
		for _, tc := range cases {
			want := tc.inside
			if private == state {
				want = tc.other
			}
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeBypass, Workdir: work, Args: commandArgs(tc.command)})
			if asked := d.Outcome == Ask && d.Immune; asked != want {
				t.Errorf("data dir %s, %q: %s (immune %v): %s; want an immune ask: %v", private, tc.command, d.Outcome, d.Immune, d.Reason, want)
			}
		}
	}
}

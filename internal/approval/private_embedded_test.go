package approval

import "testing"

// TestPrivateDirInsideWords: a path to the data dir written inside a longer word (a
// sed or awk script, an interpreter's one-liner, an option's value after : or @,
// code a shell reads from a here-string, the value of an assignment) names the
// data dir as surely as a word of its own does. Each read the admin key or wrote
// the data dir unasked in bypass mode; each asks now, immune, in every mode, while
// the same forms naming the checkout run as before.
func TestPrivateDirInsideWords(t *testing.T) {
	t.Parallel()
	work, data, _ := recursiveFixture(t)
	cases := []immuneCase{
		{"sed '1r data/admin.key' README.md", true},
		{"sed '1r " + data + "/admin.key' README.md", true},
		{"sed -n 'w data/x' README.md", true},
		{`awk 'BEGIN{while((getline l < "data/admin.key")>0) print l}'`, true},
		{`awk '{print > "data/workspaces/ses_2/f"}' README.md`, true},
		{`perl -e 'open F, "data/admin.key"; print <F>'`, true},
		{`python3 -c 'print(open("data/admin.key").read())'`, true},
		{`node -e 'require("fs").readFileSync("` + data + `/toolserverd.db")'`, true},
		{`python3 -c 'import os; print(os.listdir(".."))'`, false}, // .. is the checkout's parent
		{`python3 -c 'import glob; print(open(glob.glob("d*/admin.key")[0]).read())'`, true},
		{`python3 -c 'import glob; print(glob.glob("src/*.go"))'`, false},
		{"docker run -v ./data:/d alpine cat /d/admin.key", true},
		{"curl -F f=@data/admin.key http://127.0.0.1:1", true},
		{"curl --data-binary @data/admin.key http://127.0.0.1:1", true},
		{"echo 'cat data/admin.key' | sh", true},
		{"bash <<< 'cat data/admin.key'", true},
		{"python3 - <<< 'open(\"data/admin.key\")'", true},
		{"x=data/admin.key; IFS=:; cat $x", true},
		{`cat "${F:-data/admin.key}"`, true},
		{"read p <<< " + data + "; cat $p/admin.key", true},
		{"read -r p <<< ./data/admin.key; IFS=; cat $p", true},
		{"mapfile -t a <<< " + data + "/admin.key; cat ${a[0]}", true},
		{"cat > notes.md <<'EOF'\nthe key is in data/admin.key\nEOF", false}, // text, no path
		{"cat > notes.md <<'EOF'\nsee src/a.go, keep the data\nEOF", false},
		{`read -r a b <<< "x/y z"`, false},
		{"cat > x.sh <<'EOF'\ncat data/admin.key\nEOF\nbash x.sh", true},
		{"cat > x.sh <<'EOF'\ncat src/a.go\nEOF\nbash x.sh", false},
		{`grep -rn x "${D:-.}"`, true},
		{`awk 'BEGIN{system("cd data && cat admin.key")}'`, true},
		{`sed '1e ls data' README.md`, true},
		{"export K=data/admin.key; IFS=:; cat $K", true},
		// The same forms over the checkout, and everyday commands.
		{"sed '1r src/a.go' README.md", false},
		{"sed -n 1,5p README.md", false},
		{`awk '{print $1}' README.md`, false},
		{`awk -F: '{print $1 > "out/" $2}' README.md`, false},
		{`python3 -c 'print(open("src/a.go").read())'`, false},
		{"docker run -v ./src:/src alpine ls /src", false},
		{"git commit -m 'data: keep the db path in config'", false},
		{"grep -rn '/api/v1/' src", false},
		{"python3 - <<< 'open(\"src/a.go\")'", false},
		{"cat <<< 'a path: data/admin.key'", false}, // cat prints it, reads nothing
		{"x=src/a.go; cat $x", false},
		{"go test -run 'TestX/data' ./...", false},
		// sed expands no globs: a * in its regexes matches text, not files.
		{`pg_config | sed -e 's![^ ]*/debian/pg!!' >> out.txt`, false},
		{`sed -i 's|[a-z]*/admin.key|x|g' README.md`, false},
		{`sed -n '/^d*\/admin/p' README.md`, false},
		{"sed -e '1r data/admin.key' README.md", true},
		{"sed -e1rdata/admin.key README.md", true},
	}
	checkPrivateDirFrom(t, data, work, cases)
}

// TestPrivateDirAboveHome: a command's HOME and TMPDIR are its sandbox's, which lie
// in the daemon's data directory, so a path that climbs out of them (~/../..,
// $TMPDIR/..) reaches other sessions' sandboxes and the data dir itself, as a cd ~
// followed by ../.. does. cat ~/../../../admin.key ran unasked in bypass mode; it
// asks now, immune, while paths that stay in HOME run as before.
func TestPrivateDirAboveHome(t *testing.T) {
	t.Parallel()
	work, data, _ := recursiveFixture(t)
	cases := []immuneCase{
		{"cat ~/../../../admin.key", true},
		{"cat $HOME/../../../admin.key", true},
		{"cat ${HOME}/../x", true},
		{"ls $TMPDIR/..", true},
		{"ls ~/..", true},
		{"cat ~/x/../../y", true},
		{`python3 -c 'print(open(os.path.expanduser("~/../../../admin.key")).read())'`, true},
		{"cat ~/.gitconfig", false},
		{"ls ~/x/../y $TMPDIR/a", false},
		{"cat ~/..x", false},
	}
	checkPrivateDirFrom(t, data, work, cases)
}

// TestPrivateDirThroughProc: /proc/self/cwd is the folder the shell stands in, read
// by the daemon as its own folder, and /proc/PID/{cwd,root,fd,…} are another
// process's folders and open files (the daemon's database among them). cat
// /proc/self/cwd/data/admin.key ran unasked even in default mode; it is read as
// ./data/admin.key now, and another process's entries ask, immune.
func TestPrivateDirThroughProc(t *testing.T) {
	t.Parallel()
	work, data, _ := recursiveFixture(t)
	cases := []immuneCase{
		{"cat /proc/self/cwd/data/admin.key", true},
		{"cat /proc/thread-self/cwd/data/toolserverd.db", true},
		{"ls /proc/self/cwd/data", true},
		{"cat /proc/$$/cwd/data/admin.key", true},
		{"cat /proc/1/root" + data + "/admin.key", true},
		{"cat /proc/$PPID/fd/3", true},
		{"grep -a KEY /proc/*/environ", true},
		{`python3 -c 'open("/proc/self/cwd/data/admin.key")'`, true},
		{"cat /proc/self/cwd/README.md", false},
		{"cat /proc/cpuinfo /proc/self/status", false},
		// $$ is the line's own shell: its open files and environment are what
		// /proc/self's are. Its folder is not followed (a subshell's cd leaves it).
		{"ls -l /proc/$$/fd", false},
		{"cat /proc/${$}/environ | tr '\\0' '\\n'", false},
		{"cd src && cat /proc/$$/cwd/a.go", true},
		{"cat /proc/$$/task/1/cwd/data/admin.key", true},
		{"cat /proc/$$/root" + data + "/admin.key", true},
	}
	e := checkPrivateDirFrom(t, data, work, cases)
	// Read as ./README.md, it reads nothing outside the working directory.
	d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs("cat /proc/self/cwd/README.md")})
	if d.Outcome != Allow {
		t.Errorf("cat /proc/self/cwd/README.md: %s: %s; want it run at once", d.Outcome, d.Reason)
	}
}

// TestClimbToCriticalPath: a relative path is judged from where the command runs.
// From /work/proj, rm -rf ../../usr deletes /usr, and cd ../.. && rm -rf usr too;
// the analysis, which knows no folder, took them for files outside the working
// directory (high risk), which bypass mode ran unasked. They are critical and
// immune now; a delete of a sibling checkout is judged as before.
func TestClimbToCriticalPath(t *testing.T) {
	t.Parallel()
	e := testEngine(t, DefaultConfig())
	for _, tc := range []immuneCase{
		{"rm -rf ../../usr", true},
		{"rm -rf ../../../../../etc/", true},
		{"cd ../.. && rm -rf usr", true},
		{"cd .. && cd .. && rm -r home", true},
		{"chmod -R 777 ../../etc", true},
		{"mv ../../home /tmp/h", true},
		{"find ../.. -delete", true},
		{"rm -rf ../other", false},
		{"cd .. && rm -rf proj2", false},
		{"rm -rf build ./dist", false},
		{"cd /tmp && rm -rf x", false},
		{"cd src/.. && rm -rf build", false},
	} {
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: ModeBypass, Workdir: testWorkdir, Args: commandArgs(tc.command)})
		if asked := d.Outcome == Ask && d.Immune; asked != tc.ask {
			t.Errorf("%q from %s: %s (immune %v): %s; want an immune ask: %v", tc.command, testWorkdir, d.Outcome, d.Immune, d.Reason, tc.ask)
		}
	}
}

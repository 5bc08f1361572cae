package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// searchTree builds a small project with .gitignore files at two levels.
func searchTree(t *testing.T, e *fileEnv) {
	t.Helper()
	e.put(t, ".gitignore", "# build output\n*.log\n/build/\nnode_modules\n!keep.log\n")
	e.put(t, ".git/config", "[core] needle\n")
	e.put(t, ".github/ci.yml", "needle: yes\n")
	e.put(t, "README.md", "Needle in the readme\n")
	e.put(t, "app.log", "needle in a log\n")
	e.put(t, "keep.log", "needle kept\n")
	e.put(t, "build/out.txt", "needle built\n")
	e.put(t, "node_modules/m/index.js", "needle module\n")
	e.put(t, "src/main.go", "package main\n\n// needle one\nfunc main() {}\n")
	e.put(t, "src/main_test.go", "package main\n// needle test\n")
	e.put(t, "src/.gitignore", "gen/\n")
	e.put(t, "src/gen/z.go", "needle generated\n")
	e.put(t, "src/lib/util.go", "package lib\nvar x = 1\n// NEEDLE upper\n")
	e.put(t, "docs/build/page.md", "needle in docs/build, not ignored: /build/ is anchored\n")
	e.put(t, "bin/tool", "\x7fELF\x00\x00needle")
}

func TestListDir(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	searchTree(t, e)
	e.symlink(t, "README.md", "readme-link")
	e.symlink(t, "src", "src-link")
	e.symlink(t, "/etc", "etc-link")
	res := e.ok(t, "list_dir", map[string]any{})
	want := "./ (11 entries, depth 1)\n" +
		"README.md  21 bytes\napp.log  16 bytes\nbin/\nbuild/\ndocs/\n" +
		"etc-link -> /etc  [symlink leads outside the working directory; not followed]\n" +
		"keep.log  12 bytes\nnode_modules/\nreadme-link -> README.md  21 bytes\nsrc/\n" +
		"src-link -> src/  [symlink to a directory; not followed, list its target instead]\n" +
		"[3 hidden entries (names starting with .) not shown; set show_hidden to see them]"
	if got := res.Text(); got != want {
		t.Errorf("list_dir:\n%s\nwant:\n%s", got, want)
	}
	res = e.ok(t, "list_dir", map[string]any{"path": "src", "depth": 2, "show_hidden": true})
	want = "src/ (7 entries, depth 2)\n.gitignore  5 bytes\ngen/\ngen/z.go  17 bytes\nlib/\nlib/util.go  38 bytes\nmain.go  43 bytes\nmain_test.go  28 bytes"
	if got := res.Text(); got != want {
		t.Errorf("list_dir src depth 2:\n%s\nwant:\n%s", got, want)
	}
	// .git is listed with show_hidden but never entered.
	res = e.ok(t, "list_dir", map[string]any{"depth": 3, "show_hidden": true})
	fileContains(t, res.Text(), "\n.git/\n", ".github/ci.yml")
	if strings.Contains(res.Text(), ".git/config") {
		t.Errorf("list_dir entered .git: %s", res.Text())
	}
	e.put(t, "empty/.keep", "")
	res = e.ok(t, "list_dir", map[string]any{"path": "empty"})
	fileContains(t, res.Text(), "(empty)", "1 hidden entry")
}

// TestListDirBrokenLinks: a symlink that is not followed is described in words that
// read after "symlink": "[symlink a symlink loop; …]" and "[symlink dangling …]" did not.
func TestListDirBrokenLinks(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.symlink(t, "loop-b", "loop-a")
	e.symlink(t, "loop-a", "loop-b")
	e.symlink(t, "gone", "dangling")
	want := "./ (3 entries, depth 1)\n" +
		"dangling -> gone  [symlink dangles (its target does not exist); not followed]\n" +
		"loop-a -> loop-b  [symlink is in a loop; not followed]\n" +
		"loop-b -> loop-a  [symlink is in a loop; not followed]"
	if got := e.ok(t, "list_dir", map[string]any{}).Text(); got != want {
		t.Errorf("list_dir:\n%s\nwant:\n%s", got, want)
	}
	fileContains(t, e.ok(t, "tree", map[string]any{}).Text(), "loop-a -> loop-b  [symlink is in a loop; not followed]")
}

func TestListDirCap(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	for i := range maxListEntries + 5 {
		e.put(t, fmt.Sprintf("many/f%04d", i), "")
	}
	res := e.ok(t, "list_dir", map[string]any{"path": "many"})
	fileContains(t, res.Text(), "f0999  0 bytes", fmt.Sprintf("[stopped after %d entries", maxListEntries))
	if strings.Contains(res.Text(), "f1000") {
		t.Errorf("listed beyond the cap")
	}
}

func TestTree(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	searchTree(t, e)
	res := e.ok(t, "tree", map[string]any{})
	want := `./
├── README.md
├── bin/
│   └── tool
├── docs/
│   └── build/
│       └── page.md
├── keep.log
└── src/
    ├── lib/
    │   └── util.go
    ├── main.go
    └── main_test.go
[4 hidden entries (names starting with .) not shown; set show_hidden to see them]
[4 entries excluded by .gitignore not shown]`
	if res.Text() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", res.Text(), want)
	}
	res = e.ok(t, "tree", map[string]any{"path": "src", "depth": 1, "show_hidden": true})
	want = "src/\n├── .gitignore\n├── lib/\n├── main.go\n└── main_test.go\n[1 entry excluded by .gitignore not shown]"
	if res.Text() != want {
		t.Errorf("tree src:\n%s\nwant:\n%s", res.Text(), want)
	}
}

func TestGlob(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	searchTree(t, e)
	// Modification times decide the order: util.go newest, main.go oldest.
	base := time.Now().Add(-time.Hour)
	for i, p := range []string{"src/main.go", "src/main_test.go", "src/lib/util.go"} {
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(e.dir, p), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		args map[string]any
		want []string // the paths, in order; nil for no match
	}{
		{map[string]any{"pattern": "**/*.go"}, []string{"src/lib/util.go", "src/main_test.go", "src/main.go"}},
		{map[string]any{"pattern": "src/*.go"}, []string{"src/main_test.go", "src/main.go"}},
		{map[string]any{"pattern": "*.go", "path": "src"}, []string{"src/main_test.go", "src/main.go"}},
		{map[string]any{"pattern": "**/*_test.go", "path": "src"}, []string{"src/main_test.go"}},
		{map[string]any{"pattern": "src/**/{util,main}.go"}, []string{"src/lib/util.go", "src/main.go"}},
		{map[string]any{"pattern": filepath.Join(e.dir, "src", "lib", "*.go")}, []string{"src/lib/util.go"}},
		{map[string]any{"pattern": "*.log"}, []string{"keep.log"}},
		{map[string]any{"pattern": "**/index.js"}, nil},
		{map[string]any{"pattern": "node_modules/**/*.js"}, []string{"node_modules/m/index.js"}},
		{map[string]any{"pattern": "**/ci.yml"}, []string{".github/ci.yml"}},
		{map[string]any{"pattern": "**/config"}, nil},
		{map[string]any{"pattern": "*.go"}, nil},
	}
	for _, tt := range tests {
		res := e.ok(t, "glob", tt.args)
		lines := strings.Split(res.Text(), "\n")
		var got []string
		if strings.HasPrefix(lines[0], "No files match") {
			got = nil
		} else {
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, "[") {
					got = append(got, l)
				}
			}
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("glob %v: got %q, want %q\n%s", tt.args, got, tt.want, res.Text())
		}
	}
	res := e.ok(t, "glob", map[string]any{"pattern": "*.go"})
	fileContains(t, res.Text(), "**/*.go searches every level")
	// Not `in ..`, which reads as the parent directory.
	fileContains(t, res.Text(), `No files match "*.go" in the working directory.`)
	fileContains(t, e.ok(t, "grep", map[string]any{"pattern": "absent-everywhere"}).Text(), `No matches for "absent-everywhere" in the working directory (`)
	e.fail(t, "glob", map[string]any{"pattern": "src/[a"}, tool.KindInvalidArgs, "not a valid glob")
	e.fail(t, "glob", map[string]any{"pattern": "{a,b"}, tool.KindInvalidArgs, "not a valid glob")
}

func TestGlobCap(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	for i := range maxGlobResults + 10 {
		e.put(t, fmt.Sprintf("g/%03d.txt", i), "")
	}
	res := e.ok(t, "glob", map[string]any{"pattern": "g/*.txt"})
	fileContains(t, res.Text(), fmt.Sprintf("%d files match", maxGlobResults+10), fmt.Sprintf("[showing %d of %d matches", maxGlobResults, maxGlobResults+10))
}

func TestGrep(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	searchTree(t, e)
	e.put(t, "ctx.txt", "a\nb\nhit 1\nc\nd\ne\nf\nhit 2\nhit 3\ng\n")
	tests := []struct {
		name string
		args map[string]any
		want string // the whole text
		has  []string
	}{
		{name: "gitignore, binary and .git skipped", args: map[string]any{"pattern": "needle"},
			want: ".github/ci.yml:1: needle: yes\n" +
				"docs/build/page.md:1: needle in docs/build, not ignored: /build/ is anchored\n" +
				"keep.log:1: needle kept\n" +
				"src/main.go:3: // needle one\n" +
				"src/main_test.go:2: // needle test\n" +
				"[5 matching lines in 5 files]\n[1 binary file skipped]\n[4 entries excluded by .gitignore were not searched]"},
		{name: "case insensitive with include", args: map[string]any{"pattern": "needle", "case_insensitive": true, "include": "*.{go,md}", "exclude": "*_test.go"},
			want: "README.md:1: Needle in the readme\ndocs/build/page.md:1: needle in docs/build, not ignored: /build/ is anchored\n" +
				"src/lib/util.go:3: // NEEDLE upper\nsrc/main.go:3: // needle one\n" +
				"[4 matching lines in 4 files]\n[4 entries excluded by .gitignore were not searched]"},
		{name: "include with a slash", args: map[string]any{"pattern": "(?i)needle", "path": "src", "include": "lib/**"},
			want: "src/lib/util.go:3: // NEEDLE upper\n[1 matching line in 1 file]\n[1 entry excluded by .gitignore was not searched]"},
		{name: "context", args: map[string]any{"pattern": "^hit", "path": "ctx.txt", "context": 1},
			want: "ctx.txt-2- b\nctx.txt:3: hit 1\nctx.txt-4- c\n--\nctx.txt-7- f\nctx.txt:8: hit 2\nctx.txt:9: hit 3\nctx.txt-10- g\n[3 matching lines in 1 file]"},
		{name: "max results", args: map[string]any{"pattern": "hit", "path": "ctx.txt", "max_results": 2},
			want: "ctx.txt:3: hit 1\nctx.txt:8: hit 2\n[2 matching lines in 1 file]\n[stopped at max_results=2; there are more matches: narrow the search or raise max_results]"},
		{name: "explicit ignored file", args: map[string]any{"pattern": "needle", "path": "app.log"},
			want: "app.log:1: needle in a log\n[1 matching line in 1 file]"},
		{name: "explicit ignored directory", args: map[string]any{"pattern": "needle", "path": "node_modules"},
			want: "node_modules/m/index.js:1: needle module\n[1 matching line in 1 file]"},
		{name: "no match", args: map[string]any{"pattern": "absent", "path": "src"},
			has: []string{`No matches for "absent" in src (4 files searched).`}},
	}
	for _, tt := range tests {
		res := e.ok(t, "grep", tt.args)
		if tt.want != "" && res.Text() != tt.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, res.Text(), tt.want)
		}
		fileContains(t, res.Text(), tt.has...)
	}
	e.fail(t, "grep", map[string]any{"pattern": "a(b"}, tool.KindInvalidArgs, "not a valid regular expression", "missing closing )")
	e.fail(t, "grep", map[string]any{"pattern": `(?<=x)y`}, tool.KindInvalidArgs, "RE2")
	e.fail(t, "grep", map[string]any{"pattern": "x", "include": "[a"}, tool.KindInvalidArgs, "not a valid glob")
}

// TestSearchNamedIgnoredDirectory: a directory named explicitly is searched even when
// .gitignore excludes it, as node_modules is above, also when the rule is a "*" that
// excludes everything below it too: .skills/.gitignore (written by the skill tool so
// that the copies of opened skills stay out of git), a virtualenv's or a cache's.
// Globs and greps there found nothing, though the skill tool sends models there.
// What the named directory's subfolders' .gitignore files exclude stays excluded, and
// a search of the working directory still leaves the whole directory out.
func TestSearchNamedIgnoredDirectory(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "main.py", "import sys  # needle\n")
	// A skill opened in the session, copied to .skills/pdf as the skill tool does.
	lib := t.TempDir()
	for rel, data := range map[string]string{
		"pdf/SKILL.md":           "---\nname: pdf\ndescription: PDFs.\n---\nneedle: run scripts/check.py\n",
		"pdf/scripts/check.py":   "print('needle')\n",
		"pdf/scripts/.gitignore": "*.pyc\n",
		"pdf/scripts/check.pyc":  "needle compiled\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(lib, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lib, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sm, err := skills.NewManager(skills.Config{Dirs: []string{lib}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sk, ok := sm.Get("pdf")
	if !ok {
		t.Fatalf("skill not loaded: %v", sm.Problems())
	}
	if _, err := skills.Project(sk, e.dir); err != nil {
		t.Fatal(err)
	}
	e.put(t, ".venv/.gitignore", "*\n")
	e.put(t, ".venv/lib/site.py", "needle\n")

	globs := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"pattern": "**/*.py"}, "main.py"},
		{map[string]any{"pattern": ".skills/pdf/**/*.py"}, ".skills/pdf/scripts/check.py"},
		{map[string]any{"pattern": "**/*.py", "path": ".skills/pdf"}, ".skills/pdf/scripts/check.py"},
		{map[string]any{"pattern": "check.*", "path": ".skills/pdf/scripts"}, ".skills/pdf/scripts/check.py"},
		{map[string]any{"pattern": ".skills/**/*.py"}, ".skills/pdf/scripts/check.py"},
		{map[string]any{"pattern": "**/*.py", "path": ".venv"}, ".venv/lib/site.py"},
	}
	for _, g := range globs {
		var got []string
		for _, l := range strings.Split(e.ok(t, "glob", g.args).Text(), "\n")[1:] {
			if l != "" && !strings.HasPrefix(l, "[") {
				got = append(got, l)
			}
		}
		if strings.Join(got, ",") != g.want {
			t.Errorf("glob %v: %q, want %s", g.args, got, g.want)
		}
	}
	greps := map[string]string{
		".":                   "main.py:1: import sys  # needle\n[1 matching line in 1 file]",
		".skills/pdf":         ".skills/pdf/SKILL.md:5: needle: run scripts/check.py\n.skills/pdf/scripts/check.py:1: print('needle')\n[2 matching lines in 2 files]",
		".skills/pdf/scripts": ".skills/pdf/scripts/check.py:1: print('needle')\n[1 matching line in 1 file]",
	}
	for dir, want := range greps {
		got := e.ok(t, "grep", map[string]any{"pattern": "needle", "path": dir}).Text()
		if got, _, _ = strings.Cut(got, "\n[1 entry excluded"); !strings.HasPrefix(got, want) {
			t.Errorf("grep in %s:\n%s\nwant:\n%s", dir, got, want)
		}
	}
	if got := e.ok(t, "tree", map[string]any{"path": ".skills/pdf"}).Text(); !strings.Contains(got, "check.py") || strings.Contains(got, "check.pyc") {
		t.Errorf("tree .skills/pdf:\n%s", got)
	}
}

func TestGrepLimits(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	long := strings.Repeat("z", 5000) + "needle"
	e.put(t, "long.txt", long+"\n")
	res := e.ok(t, "grep", map[string]any{"pattern": "needle"})
	fileContains(t, res.Text(), "long.txt:1: "+strings.Repeat("z", 2000)+" … [line cut: 3006 more bytes]")
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "match %d %s\n", i, strings.Repeat("w", 100))
	}
	e.put(t, "many.txt", b.String())
	res = e.ok(t, "grep", map[string]any{"pattern": "match", "path": "many.txt", "max_results": 1000})
	if len(res.Text()) > outputBudget+1000 {
		t.Errorf("output of %d bytes", len(res.Text()))
	}
	fileContains(t, res.Text(), "the output limit was reached")
	e.put(t, "huge.txt", strings.Repeat("needle\n", (grepMaxFile/7)+1)+"the end\n")
	res = e.ok(t, "grep", map[string]any{"pattern": "nothing-like-this"})
	fileContains(t, res.Text(), "1 file larger than 20.0 MiB skipped; name one in path to search it")
	// Named in path, a file over the limit is searched: read_file sends the model here
	// for files too large to read at once, and a large log is what one greps.
	res = e.ok(t, "grep", map[string]any{"pattern": "^the end$", "path": "huge.txt"})
	fileContains(t, res.Text(), fmt.Sprintf("huge.txt:%d: the end", grepMaxFile/7+2), "[1 matching line in 1 file]")
}

func TestIgnoreRules(t *testing.T) {
	t.Parallel()
	rules := ignoreRules(nil).
		with(parseIgnore("", []byte("*.o\n/root-only\ndir/\n\\#hash\n!important.o\nspaced\\ \ntrail   \n# comment\n\n**/deep/*.tmp\na/**/b\n"))).
		with(parseIgnore("sub", []byte("local\n/anchored\n!*.o\n")))
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"x.o", false, true},
		{"q/x.o", false, true},
		{"important.o", false, false},
		{"root-only", false, true},
		{"q/root-only", false, false},
		{"dir", true, true},
		{"dir", false, false},
		{"q/dir", true, true},
		{"#hash", false, true},
		{"spaced ", false, true},
		{"trail", false, true},
		{"x/deep/y.tmp", false, true},
		{"deep/y.tmp", false, true},
		{"a/b", false, true},
		{"a/x/y/b", false, true},
		{"sub/local", false, true},
		{"sub/q/local", false, true},
		{"local", false, false},
		{"sub/anchored", false, true},
		{"sub/q/anchored", false, false},
		{"sub/x.o", false, false},
		{"main.go", false, false},
	}
	for _, tt := range tests {
		if got := rules.ignored(tt.path, tt.isDir); got != tt.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", tt.path, tt.isDir, got, tt.want)
		}
	}
}

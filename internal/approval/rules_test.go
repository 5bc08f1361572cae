package approval

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Rule
	}{
		{"execute_command(git commit:*)", Rule{Allow, "execute_command", "git commit:*"}},
		{"execute_command(npm test)", Rule{Allow, "execute_command", "npm test"}},
		{"  execute_command( git status:* )  ", Rule{Allow, "execute_command", "git status:*"}},
		{"write_file(src/**)", Rule{Allow, "write_file", "src/**"}},
		{"write_file(/tmp/**)", Rule{Allow, "write_file", "/tmp/**"}},
		{"mcp__github__*", Rule{Allow, "mcp__github__*", ""}},
		{"mcp__github__create_issue", Rule{Allow, "mcp__github__create_issue", ""}},
		{"execute_command", Rule{Allow, "execute_command", ""}},
		{"execute_command(*)", Rule{Allow, "execute_command", "*"}},
		{"execute_command(echo (a))", Rule{Allow, "execute_command", "echo (a)"}},
		{"execute_command(echo \"a b\":*)", Rule{Allow, "execute_command", `echo "a b":*`}},
		{"*", Rule{Allow, "*", ""}},
		{"mcp__*__delete_*", Rule{Allow, "mcp__*__delete_*", ""}},
		{"tool.v2-beta(x)", Rule{Allow, "tool.v2-beta", "x"}},
	}
	for _, c := range cases {
		got, err := ParseRule(Allow, c.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseRule(%q) = %#v, want %#v", c.in, got, c.want)
		}
		again, err := ParseRule(Allow, got.String())
		if err != nil || again != got {
			t.Errorf("round trip of %q through %q: %#v, %v", c.in, got.String(), again, err)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action Outcome
		in     string
		want   string
	}{
		{Allow, "", "empty rule"},
		{Allow, "   ", "empty rule"},
		{Allow, "execute_command(", "must end with"},
		{Allow, "execute_command(git", "must end with"},
		{Allow, "execute_command()", "empty pattern"},
		{Allow, "execute_command(  )", "empty pattern"},
		{Allow, "(git status)", "no tool name"},
		{Allow, "execute_command)", `")" without "("`},
		{Allow, "execute command", "contains"},
		{Allow, "a/b", "contains"},
		{Allow, "mcp__[github", "not a valid glob"},
		{Allow, "x(a\x00b)", "control character"},
		{Allow, "x\x01", "contains"},
		{"maybe", "execute_command", "not allow, ask or deny"},
		{"", "execute_command", "not allow, ask or deny"},
	}
	for _, c := range cases {
		_, err := ParseRule(c.action, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseRule(%q, %q) error %v, want one containing %q", c.action, c.in, err, c.want)
		}
	}
}

func TestParseRules(t *testing.T) {
	t.Parallel()
	rules, err := ParseRules(Deny, []string{"execute_command(rm:*)", "bad(", "write_file(x)", ""})
	if err == nil || !strings.Contains(err.Error(), `"bad("`) || !strings.Contains(err.Error(), "empty rule") {
		t.Errorf("error %v should name both bad rules", err)
	}
	want := []Rule{{Deny, "execute_command", "rm:*"}, {Deny, "write_file", "x"}}
	if !reflect.DeepEqual(rules, want) {
		t.Errorf("rules %v, want %v", rules, want)
	}
}

func TestRuleMatchWords(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern string
		words   string
		want    bool
	}{
		{"git commit:*", "git commit -m x", true},
		{"git commit:*", "git commit", true},
		{"git commit:*", "git commitx", false},
		{"git commit:*", "git", false},
		{"git commit:*", "git push", false},
		{"git commit", "git commit", true},
		{"git commit", "git commit -m x", false},
		{"npm run:*", "npm run build", true},
		{"npm run:*", "npm install", false},
		{"rm:*", "rm -rf /tmp/x", true},
		{"rm:*", "rmdir x", false},
		{"*", "anything at all", true},
		{"  git   status  :*", "git status -s", true},
		{`echo "a b":*`, "echo|a b|c", true},
		{`echo "a b":*`, "echo|a|b", false},
		{`echo 'it''s'`, "echo|its", true},
		{"git status:*:*", "git status:* x", true},
	}
	for _, c := range cases {
		r := compileRule(Rule{Allow, "execute_command", c.pattern})
		sep := " "
		if strings.Contains(c.words, "|") {
			sep = "|"
		}
		if got := r.matchWords(strings.Split(c.words, sep)); got != c.want {
			t.Errorf("%q on %q: %v, want %v (words %q, err %v)", c.pattern, c.words, got, c.want, r.cmdWords, r.cmdErr)
		}
	}
}

func TestCommandPatternErrors(t *testing.T) {
	t.Parallel()
	for _, p := range []string{`echo "x`, `a; b`, `a | b`, `X=1 a`, `a > f`, `:*`, `(a)`} {
		if c := compileRule(Rule{Allow, "execute_command", p}); c.cmdErr == nil {
			t.Errorf("pattern %q compiled to %q", p, c.cmdWords)
		}
	}
}

// TestSuggestExactCommand: for a call of high risk the suggestion is the command as
// written, which matches it and not its variations.
func TestSuggestExactCommand(t *testing.T) {
	t.Parallel()
	a := AnalyzeCommand(`git push --force origin "my branch"`)
	want := `git push --force origin 'my branch'`
	if got := suggestCommand(a.Commands[0].Words, a.Commands[0].special, true); got != want {
		t.Fatalf("exact suggestion %q, want %q", got, want)
	}
	r := compileRule(Rule{Allow, "execute_command", want})
	if !r.matchWords(a.Commands[0].Words) {
		t.Errorf("exact suggestion %q does not match its command", want)
	}
	for _, other := range []string{"git push --force origin main", "git push --force origin 'my branch' --tags"} {
		if r.matchWords(AnalyzeCommand(other).Commands[0].Words) {
			t.Errorf("exact suggestion %q matches %q", want, other)
		}
	}
}

func TestSuggestCommand(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"git push origin main": "git push:*",
		"npm run build":        "npm run:*",
		"rm -rf build":         "rm -rf build",
		"chmod -R 777 .":       "chmod -R 777 .",
		"ls":                   "ls:*",
		"cat foo.txt":          "cat:*",
		"go test ./...":        "go test:*",
		"./build.sh x":         "./build.sh x:*",
		"make x_y-z":           "make x_y-z:*",
		"kubectl 1.2":          "kubectl:*",
		"my\\ tool x":          "'my tool' x:*",
	}
	for in, want := range cases {
		a := AnalyzeCommand(in)
		if got := suggestCommand(a.Commands[0].Words, a.Commands[0].special, false); got != want {
			t.Errorf("suggestCommand(%q) = %q, want %q", in, got, want)
		}
		// A suggestion must allow the command it was made for.
		r := compileRule(Rule{Allow, "execute_command", want})
		if !r.matchWords(a.Commands[0].Words) {
			t.Errorf("suggestion %q does not match %q", want, in)
		}
	}
}

func TestNewPathSubject(t *testing.T) {
	t.Parallel()
	cases := []struct {
		path, workdir, rel, abs string
		inside                  bool
	}{
		{"src/a.go", "/w", "src/a.go", "/w/src/a.go", true},
		{"./src/../b.go", "/w", "b.go", "/w/b.go", true},
		{"/w/src/a.go", "/w", "src/a.go", "/w/src/a.go", true},
		{"/w", "/w", ".", "/w", true},
		{".", "/w/", ".", "/w", true},
		{"/wx/a", "/w", "", "/wx/a", false},
		{"../x", "/w", "", "/x", false},
		{"src/../../x", "/w/p", "", "/w/x", false},
		{"/etc/passwd", "/w", "", "/etc/passwd", false},
		{"a/b", "", "a/b", "", true},
		{"../a", "", "", "", false},
		{"/a/b", "", "", "/a/b", false},
		{"a", "/", "a", "/a", true},
		{"/x/y", "/", "x/y", "/x/y", true},
		{`a\b`, "/w", `a\b`, `/w/a\b`, true},
	}
	for _, c := range cases {
		s := newPathSubject(c.path, c.workdir)
		if s.rel != c.rel || s.abs != c.abs || s.inside != c.inside {
			t.Errorf("newPathSubject(%q, %q) = rel %q abs %q inside %v, want %q %q %v",
				c.path, c.workdir, s.rel, s.abs, s.inside, c.rel, c.abs, c.inside)
		}
	}
}

func TestMatchPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"src/**", "src/a.go", true},
		{"src/**", "src/a/b/c.go", true},
		{"src/**", "src", true},
		{"src/**", "srcx/a.go", false},
		{"src/**", "lib/src/a.go", false},
		{"src/**", "/w/src/a.go", true},
		{"src/**", "/other/src/a.go", false},
		{"src/**/*.py", "src/a/b.py", true},
		{"src/**/*.py", "src/a/b.go", false},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "src/x/a.go", false},
		{"src/", "src/a", true},
		{"./src/**", "src/a", true},
		{"config.json", "config.json", true},
		{"config.json", "a/config.json", true},
		{"config.json", "config.jsonx", false},
		{"*.lock", "Cargo.lock", true},
		{"*.lock", "a/b/yarn.lock", true},
		{"*.lock", "lock", false},
		{".env", ".env", true},
		{".env", "a/.env", true},
		{".env", ".env/x", true},
		{".env", ".envx", false},
		{".env.*", ".env.local", true},
		{".env.*", "x/.env.prod", true},
		{".env.*", ".env", false},
		{".git/**", ".git", true},
		{".git/**", ".git/config", true},
		{".git/**", "a/.git/config", false},
		{".git/**", ".gitignore", false},
		{"**/.git/**", "a/.git/config", true},
		{"**/.git/**", "/elsewhere/.git/config", true},
		{"**/.ssh/**", "/root/.ssh/id_rsa", true},
		{"**/.ssh/**", "../.ssh/x", true},
		{"**/.ssh/**", ".sshx/a", false},
		{".bashrc", "/home/me/.bashrc", true},
		{".bashrc", "../../.bashrc", true},
		{"/tmp/**", "/tmp/a", true},
		{"/tmp/**", "/tmp", true},
		{"/tmp/**", "/tmpx/a", false},
		{"/tmp", "/tmp/a/b", true},
		{"/etc/hosts", "/etc/hosts", true},
		{"/etc/hosts", "hosts", false},
		{"/w/src/**", "src/a", true},
		{"**", "anything/at/all", true},
		{"a/b", "a/b/c", true},
		{"a/b", "a/bc", false},
		{"a/*/c", "a/x/c/d", true},
		{"**/*.pem", "/etc/ssl/x.pem", true},
		{"**/*.pem", "x.pem", true},
		{"src/[ab].go", "src/a.go", true},
		{"src/{a,b}/**", "src/b/x", true},
		{"", "x", false},
	}
	for _, c := range cases {
		s := newPathSubject(c.path, "/w")
		if got := matchPath(normalizeGlob(c.glob), s); got != c.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
}

func TestLiteralGlobAgreesWithDoublestar(t *testing.T) {
	t.Parallel()
	globs := []string{".env", "**/.ssh/**", ".git/**", "src/**", "a/b", "a/b/**", "**/x", "node_modules"}
	paths := []string{".env", "a/.env", ".ssh", "x/.ssh/k", ".git", ".git/a", "a/.git/b", "src", "src/a", "srcx",
		"a/b", "a/b/c", "a/bc", "x", "q/x", "x/q", "node_modules/a/b", "/abs/.ssh/k", "../up/.env"}
	for _, g := range globs {
		if _, _, ok := literalGlob(g); !ok {
			t.Fatalf("%q should take the literal fast path", g)
		}
		for _, p := range paths {
			s := newPathSubject(p, "/w")
			fast := matchPath(g, s)
			var slow bool
			switch {
			case !strings.Contains(g, "/"):
				slow = anyTarget(s, "**/"+g)
			case strings.HasPrefix(g, "**/"):
				slow = anyTarget(s, g)
			default:
				slow = s.inside && matchTree(g, s.rel)
			}
			if fast != slow {
				t.Errorf("glob %q path %q: fast %v, doublestar %v", g, p, fast, slow)
			}
		}
	}
}

func anyTarget(s pathSubject, glob string) bool {
	for _, t := range s.targets() {
		if matchTree(glob, t) {
			return true
		}
	}
	return false
}

func TestSuggestPath(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"src/pkg/main.go": "src/pkg/**",
		"main.go":         "main.go",
		"/w/a/b.txt":      "a/**",
		"/tmp/x/y":        "/tmp/x/**",
		"/x":              "/x",
		".":               "",
		"a[1]/b":          `a\[1\]/**`,
	}
	for in, want := range cases {
		s := newPathSubject(in, "/w")
		got := suggestPath(s)
		if got != want {
			t.Errorf("suggestPath(%q) = %q, want %q", in, got, want)
		}
		if got != "" && !matchPath(normalizeGlob(got), s) {
			t.Errorf("suggestion %q does not match %q", got, in)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"execute_command(git commit:*)", "write_file(src/**)", "mcp__github__*", "x()", "(", ")",
		"a(b(c))", "execute_command(echo \"a b\":*)", " t ( p ) ", "*", "[", "a(\x00)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(Ask, s)
		if err != nil {
			return
		}
		if r.Tool == "" || r.Action != Ask {
			t.Fatalf("%q parsed to %#v", s, r)
		}
		again, err := ParseRule(Ask, r.String())
		if err != nil || again != r {
			t.Fatalf("%q → %q → %#v, %v; want %#v", s, r.String(), again, err, r)
		}
		c := compileRule(r) // must not panic, whatever the pattern
		c.matchWords([]string{"git", "status"})
		matchPath(c.pathGlob, newPathSubject("src/a.go", "/w"))
	})
}

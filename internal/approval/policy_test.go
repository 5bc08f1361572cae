package approval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

const testWorkdir = "/work/proj"

type decisionCase struct {
	where    string
	section  string
	mode     Mode
	tool     string
	subject  string
	outcome  Outcome
	immune   bool
	readOnly *bool
	risk     tool.Risk
	suggest  *[]string
	reason   string
	cfg      Config
	session  []Rule
}

// readDecisionCases reads testdata/decisions.txt (its header says the format).
func readDecisionCases(t *testing.T) []decisionCase {
	t.Helper()
	f, err := os.Open("testdata/decisions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		cases   []decisionCase
		section string
		cfg     Config
		session []Rule
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		where := fmt.Sprintf("decisions.txt:%d", n)
		fail := func(format string, args ...any) { t.Fatalf(where+": "+format, args...) }
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(line, "== "); ok {
			section, cfg, session = name, DefaultConfig(), nil
			continue
		}
		if head, rest, ok := strings.Cut(line, ": "); ok && !strings.Contains(head, " ") {
			cfg, session = cloneConfig(cfg), append([]Rule(nil), session...)
			switch head {
			case "allow", "ask", "deny":
				r, err := ParseRule(Outcome(head), rest)
				if err != nil {
					fail("%v", err)
				}
				cfg.Rules = append(cfg.Rules, r)
			case "session-allow", "session-ask", "session-deny":
				r, err := ParseRule(Outcome(strings.TrimPrefix(head, "session-")), rest)
				if err != nil {
					fail("%v", err)
				}
				session = append(session, r)
			case "override":
				name, risk, _ := strings.Cut(rest, "=")
				cfg.RiskOverrides[name] = tool.Risk(risk)
			case "policy":
				risk, out, _ := strings.Cut(rest, "=")
				cfg.RiskPolicy[tool.Risk(risk)] = Outcome(out)
			case "immune-paths":
				cfg.ImmunePaths = []string{}
				if rest != "none" {
					cfg.ImmunePaths = strings.Fields(rest)
				}
			case "subject":
				name, spec, _ := strings.Cut(rest, "=")
				kind, arg, _ := strings.Cut(spec, ":")
				cfg.Subjects[name] = Subject{Kind: SubjectKind(kind), Arg: arg}
			default:
				fail("unknown directive %q", head)
			}
			continue
		}
		head, subject, ok := strings.Cut(line, " :: ")
		if !ok {
			fail("no \" :: \"")
		}
		c := decisionCase{where: where, section: section, cfg: cfg, session: session}
		if s, reason, ok := strings.Cut(subject, " ~~ "); ok {
			subject, c.reason = s, reason
		}
		if u, err := strconv.Unquote(subject); err == nil {
			subject = u
		}
		c.subject = subject
		if h, list, ok := strings.Cut(head, " suggest="); ok { // always the last flag
			var l []string
			if list != "" {
				l = strings.Split(list, "|")
			}
			head, c.suggest = h, &l
		}
		fields := strings.Fields(head)
		if len(fields) < 3 {
			fail("want MODE TOOL OUTCOME")
		}
		c.mode, c.tool, c.outcome = Mode(fields[0]), fields[1], Outcome(fields[2])
		if c.mode == "-" {
			c.mode = ""
		}
		if !c.outcome.Valid() {
			fail("bad outcome %q", c.outcome)
		}
		for _, tok := range fields[3:] {
			switch {
			case tok == "immune":
				c.immune = true
			case tok == "ro" || tok == "rw":
				ro := tok == "ro"
				c.readOnly = &ro
			case strings.HasPrefix(tok, "risk="):
				c.risk = tool.Risk(tok[len("risk="):])
			default:
				fail("unknown flag %q", tok)
			}
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func cloneConfig(c Config) Config {
	out := c
	out.Rules = append([]Rule(nil), c.Rules...)
	out.RiskOverrides = map[string]tool.Risk{}
	for k, v := range c.RiskOverrides {
		out.RiskOverrides[k] = v
	}
	out.RiskPolicy = map[tool.Risk]Outcome{}
	for k, v := range c.RiskPolicy {
		out.RiskPolicy[k] = v
	}
	out.Subjects = map[string]Subject{}
	for k, v := range c.Subjects {
		out.Subjects[k] = v
	}
	return out
}

func (c decisionCase) request(t *testing.T) Request {
	tl := toolFor(t, c.tool)
	req := Request{Tool: tl, Mode: c.mode, SessionRules: c.session, Workdir: testWorkdir, Args: json.RawMessage(`{}`)}
	switch {
	case c.subject == "-":
	case c.tool == "execute_command":
		req.Args = commandArgs(c.subject)
	default:
		req.Args = pathArgs1(c.subject)
	}
	return req
}

func TestCheckTable(t *testing.T) {
	t.Parallel()
	cases := readDecisionCases(t)
	if len(cases) < 250 {
		t.Fatalf("only %d cases read", len(cases))
	}
	engines := map[string]*Engine{}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[string(c.mode)+" "+string(c.outcome)] = true
		key := fmt.Sprintf("%s/%v", c.section, c.cfg)
		e, ok := engines[key]
		if !ok {
			e = testEngine(t, c.cfg)
			engines[key] = e
		}
		d := e.Check(c.request(t))
		var problems []string
		if d.Outcome != c.outcome {
			problems = append(problems, fmt.Sprintf("outcome %s, want %s", d.Outcome, c.outcome))
		}
		if d.Immune != c.immune {
			problems = append(problems, fmt.Sprintf("immune %v, want %v", d.Immune, c.immune))
		}
		if c.readOnly != nil && d.ReadOnly != *c.readOnly {
			problems = append(problems, fmt.Sprintf("read-only %v, want %v", d.ReadOnly, *c.readOnly))
		}
		if c.risk != "" && d.Risk != c.risk {
			problems = append(problems, fmt.Sprintf("risk %s, want %s", d.Risk, c.risk))
		}
		if c.suggest != nil {
			var got []string
			for _, r := range d.Suggestions {
				if r.Action != Allow {
					problems = append(problems, "suggestion "+r.String()+" is not an allow rule")
				}
				got = append(got, r.String())
			}
			if strings.Join(got, "|") != strings.Join(*c.suggest, "|") {
				problems = append(problems, fmt.Sprintf("suggestions %q, want %q", got, *c.suggest))
			}
		}
		if c.reason != "" && !strings.Contains(d.Reason, c.reason) {
			problems = append(problems, fmt.Sprintf("reason lacks %q", c.reason))
		}
		if d.Reason == "" {
			problems = append(problems, "empty reason")
		}
		if d.Outcome != Ask && (d.Immune || len(d.Suggestions) > 0) {
			problems = append(problems, "immune or suggestions on a decision that is not an ask")
		}
		if d.Immune && len(d.Suggestions) > 0 {
			problems = append(problems, "suggestions on an immune ask")
		}
		if len(problems) > 0 {
			t.Errorf("%s [%s] %s %s %q:\n  %s\n  decision: %s %q (risk %s, immune %v, read-only %v, suggestions %v)",
				c.where, c.section, c.mode, c.tool, c.subject, strings.Join(problems, "\n  "),
				d.Outcome, d.Reason, d.Risk, d.Immune, d.ReadOnly, d.Suggestions)
		}
	}
	// Every mode is tried with every outcome it can give (dont_ask never asks).
	for _, m := range Modes() {
		for _, o := range []Outcome{Allow, Ask, Deny} {
			if !seen[string(m)+" "+string(o)] && !(m == ModeDontAsk && o == Ask) {
				t.Errorf("no case of mode %s deciding %s", m, o)
			}
		}
	}
}

// immuneCase is a command run in testWorkdir and whether it must ask for a person
// whatever the mode (an immune ask).
type immuneCase struct {
	command string
	ask     bool
}

// checkPrivateDir runs the cases with private as the only private dir.
func checkPrivateDir(t *testing.T, private string, cases []immuneCase) {
	t.Helper()
	checkPrivateDirFrom(t, private, testWorkdir, cases)
}

// checkPrivateDirFrom runs the cases from workdir, in default and bypass mode, with
// private as the only private dir: each asks, immune, exactly when it says. It returns
// the engine, for checks of the test's own.
func checkPrivateDirFrom(t *testing.T, private, workdir string, cases []immuneCase) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.PrivateDirs = []string{private}
	e := testEngine(t, cfg)
	for _, tc := range cases {
		for _, mode := range []Mode{ModeDefault, ModeBypass} {
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: workdir, Args: commandArgs(tc.command)})
			if asked := d.Outcome == Ask && d.Immune; asked != tc.ask {
				t.Errorf("%s mode, %q: %s (immune %v): %s; want an immune ask: %v", mode, tc.command, d.Outcome, d.Immune, d.Reason, tc.ask)
			}
		}
	}
	return e
}

// TestPrivateDirInsideWorkdir: a working directory that contains the data dir (the
// default "data" under a checkout) reaches it by relative and bare names too; those
// ask, immune, and the rest of the working directory does not.
func TestPrivateDirInsideWorkdir(t *testing.T) {
	t.Parallel()
	checkPrivateDir(t, testWorkdir+"/data", []immuneCase{
		{"cat data/admin.key", true},
		{"ls data", true},
		{"cd data && cat admin.key", true},
		{"tar czf /tmp/x.tgz ./data/", true},
		{"cat " + testWorkdir + "/data/toolserverd.db", true},
		{"cp -r src/ data2/ && ls database", false},
		{"cat src/data.go README.md", false},
	})
}

// TestPrivateDirs: a command naming a private dir outside the working directory asks,
// immune, in every mode; the working directory inside it is the session's own.
func TestPrivateDirs(t *testing.T) {
	t.Parallel()
	// testWorkdir /work/proj lies inside the private dir.
	checkPrivateDir(t, "/work", []immuneCase{
		{"cat ../admin.key", true},
		{"cat /work/toolserverd.db", true},
		{"ls ..", true},
		{"cd .. && ls", true},
		{"grep --file=/work/admin.key x", true},
		{`sh -c "cat ../other/notes"`, true},
		{"cat README.md ./src/a.go /work/proj/b.go", false},
		{"ls /usr/include", false},
		{"cat /workshop/x", false},
		// git's ref@{…}.. opens a range of commits: its .. is no folder.
		{"git log @{u}..", false},
		{"git diff HEAD@{1}.. -- src", false},
		{`python3 -c 'import os; print(os.listdir(".."))'`, true},
		{`python3 -c 'print(f"{x}..")'; ls {a,..}`, true},
		// A .. set apart by blanks or a | in what echo or printf print, or in a jq
		// filter (its recursive descent), is not the folder above.
		{`echo 'Building ..' && printf '%s ..\n' x`, false},
		{`jq -r '.. | objects | .id' x.json && jq '[..|strings]' y.json`, false},
		{`python3 -c "from pathlib import Path; print(Path('..').resolve())"`, true},
		{`node -e "require('fs').readdirSync('..')"`, true},
		{`python3 -c "import os; os.system('ls ..')"`, true},
		{`awk 'BEGIN{system("ls ..")}'`, true},
		{"docker run -v ..:/d alpine ls /d", true},
		{"watch 'grep -r KEY ..'", true},
		{"x='a ..'; echo $x; ls $x", true},
		// A redirection's default value is the file it may write or read.
		{"echo x > ${X:-/work/admin.key}", true},
		{`cat < "${IN:-../admin.key}"`, true},
		{"echo x > ${OUT:-out.txt}", false},
	})
}

// TestCommandWordsFromCwd: execute_command's cwd starts the command in a folder of
// the working directory (a skill's, .skills/pdf), and the command's relative words
// are paths from there. Judged from the working directory instead, one more ".."
// reached the data dir unasked (cwd .skills/pdf, `head ../../../admin.key`), and a
// path back into the working directory asked as if it were the data dir
// (cwd .skills/skill-creator, `python x.py ../pdf`).
func TestCommandWordsFromCwd(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	work := filepath.Join(data, "workspaces", "ses_1")
	for _, d := range []string{filepath.Join(work, ".skills", "pdf"), filepath.Join(work, ".skills", "skill-creator"), filepath.Join(root, "secrets")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(data, "admin.key"), filepath.Join(root, "secrets", "passwd")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.PrivateDirs = []string{data}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cwd, command string
		immune       bool
		ask          string // a word an ask's reason names; "" = allowed at once
	}{
		{".skills/pdf", "head -c 5 ../../../admin.key", true, "../../../admin.key"},
		{work + "/.skills/pdf", "cat ../../../admin.key", true, "../../../admin.key"},
		{".skills/pdf", "cat ../../../../../secrets/passwd", false, "../../../../../secrets/passwd"},
		{".skills/pdf", "ls ../../..", true, "../../.."},
		{".skills/skill-creator", "cat ../pdf/SKILL.md", false, ""},
		{".skills/pdf", "cat ../../README.md", false, ""},
		{"", "cat ../admin.key", true, "../admin.key"},
		// cd moves the command too: a relative word is judged from the folders the
		// cds before it lead to (command_dirs_test.go has the shell's forms).
		{"", "cd .skills/pdf && head -c 5 ../../../admin.key", true, "../../../admin.key"},
		{"", "cd .skills && cd pdf; cat ../../../admin.key", true, "../../../admin.key"},
		{"", "cd .skills/pdf && cat ../../../../../secrets/passwd", false, "../../../../../secrets/passwd"},
		{".skills", "cd pdf && ls ../../..", true, "../../.."},
		{"", "cd .skills/pdf && cat SKILL.md", false, ""},
		// A subshell ( … ) is followed the same way, its cds and all.
		{"", "(cd .skills/pdf && head -c 5 ../../../admin.key)", true, "../../../admin.key"},
		{"", "(cd .skills && (cd pdf; cat ../../../admin.key))", true, "../../../admin.key"},
		{"", "(cd .skills/pdf && cat SKILL.md)", false, ""},
		{"", "(cd .skills/pdf) && cat ../admin.key", true, "../admin.key"},
		// HOME and TMPDIR are the sandbox's folders, in the data dir: after a cd to a
		// folder known only when it runs, a word that climbs with .. cannot be judged.
		{"", "cd && head -c 5 ../../../../admin.key", true, "../../../../admin.key"},
		{"", "cd $TMPDIR; cat ../../../../admin.key", true, "../../../../admin.key"},
		{"", "cd ~ && cat ../x", true, "../x"},
		{"", "cd - && cat SKILL.md", false, "cat SKILL.md"}, // cd - goes to $OLDPWD, which may be anywhere
		{"", "cd " + filepath.Join(work, ".skills") + " && cat ../../../admin.key", true, "../../../admin.key"},
	} {
		args, _ := json.Marshal(map[string]string{"command": tc.command, "cwd": tc.cwd})
		for _, mode := range []Mode{ModeDefault, ModeBypass} {
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: args})
			switch {
			case tc.ask == "" && d.Outcome != Allow:
				t.Errorf("%s mode, cwd %q, %q: %s (%s); want it run at once", mode, tc.cwd, tc.command, d.Outcome, d.Reason)
			case tc.ask != "" && (tc.immune || mode == ModeDefault) && (d.Outcome != Ask || d.Immune != tc.immune || !strings.Contains(d.Reason, tc.ask)):
				t.Errorf("%s mode, cwd %q, %q: %s (immune %v, %s); want an ask (immune %v) naming %s", mode, tc.cwd, tc.command, d.Outcome, d.Immune, d.Reason, tc.immune, tc.ask)
			}
		}
	}
}

// TestPrivateDirThroughLink: a symlink in the working directory that leads into the
// data dir names it as surely as its own name does. `head x.db` (x.db → data's
// database) and `ls dlink` (dlink → data) ran at once, in every mode, reading the
// database and the admin key a person must approve reading.
func TestPrivateDirThroughLink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	work := filepath.Join(root, "proj")
	data := filepath.Join(work, "data")
	outside := filepath.Join(root, "state") // a data dir outside the checkout
	for _, d := range []string{filepath.Join(work, "src"), data, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(data, "admin.key"), filepath.Join(outside, "admin.key"), filepath.Join(work, "src", "a.go")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"dlink": data, "x.key": filepath.Join(data, "admin.key"), "src/up": work, "olink": outside, "alias.go": filepath.Join(work, "src", "a.go")}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, private := range []string{data, outside} {
		cfg := DefaultConfig()
		cfg.PrivateDirs = []string{private}
		e, err := NewEngine(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cases := []immuneCase{
			{"cat src/a.go alias.go", false},
			{"ls src/up/src", false},
		}
		// A cd that resolves links before .. (cd -P, set -P, env -C) goes where the
		// disk says: olink/.. is root, where proj/data/admin.key is the data dir's.
		cases = append(cases, immuneCase{"cd -P olink/.. && cat proj/src/a.go", false}, immuneCase{"cd olink/.. && cat proj/data/admin.key", false})
		if private == data {
			cases = append(cases, immuneCase{"head -c 20 x.key", true}, immuneCase{"ls dlink", true},
				immuneCase{"cat dlink/admin.key", true}, immuneCase{"cat src/up/data/admin.key", true}, immuneCase{"cp src/a.go dlink/new.go", true},
				immuneCase{"cd -P olink/.. && cat proj/data/admin.key", true}, immuneCase{"set -P; cd olink/.. && cat proj/data/admin.key", true},
				immuneCase{"cd -P olink/.. && cd proj && cat data/admin.key", true}, immuneCase{"env -C olink/.. cat proj/data/admin.key", true},
				immuneCase{"cd -P olink/.. && cat < proj/data/admin.key", true}, immuneCase{"cd -P olink/.. && grep -r x proj", true},
				immuneCase{"cd -P src/up/../proj/olink/.. && ls proj/data", true},
				// Paths xargs or tar -T - reads from a here-string or here-document
				// are named by the line: they ran unasked in bypass mode.
				immuneCase{"xargs cat <<< data/admin.key", true}, immuneCase{"tar -czf /tmp/x.tgz -T - <<< data/admin.key", true},
				immuneCase{"tar -czf /tmp/x.tgz --files-from=/dev/stdin <<< data/admin.key", true},
				immuneCase{"xargs cat <<'EOF'\nsrc/a.go\ndata/admin.key\nEOF", true}, immuneCase{"cd src && xargs cat <<< ../data/admin.key", true},
				immuneCase{"xargs cat <<< src/a.go", false}, immuneCase{"cat <<< data/admin.key", false},
				immuneCase{"cat > notes.md <<'EOF'\nsee data/admin.key\nEOF", false},
				// ~+ and $PWD are read as the folder the cds led to: a line that sets
				// PWD itself (or OLDPWD, ~-'s) names what no check can tell.
				immuneCase{"PWD=data; cat ~+/admin.key", true}, immuneCase{"PWD=data cat ~+/admin.key", true},
				immuneCase{"export PWD=data; cat $PWD/admin.key", true}, immuneCase{"OLDPWD=data; cat ~-/admin.key", true},
				immuneCase{"for PWD in data; do cat ~+/admin.key; done", true}, immuneCase{"read PWD <<< data; cat ~+/admin.key", true},
				immuneCase{"printf -v PWD data; cat ~+/admin.key", true},
				immuneCase{"declare -n r=PWD; r=data; cat ~+/admin.key", true}, immuneCase{"local -rn r=OLDPWD", true}, immuneCase{"declare x=PWD", false}, immuneCase{"printf PWD", false},
				immuneCase{"cat ~+/src/a.go", false}, immuneCase{"echo $PWD $OLDPWD", false}, immuneCase{"cd src && cat ~+/a.go", false})
		} else {
			cases = append(cases, immuneCase{"cat olink/admin.key", true}, immuneCase{"ls olink", true}, immuneCase{"ls olink/", true},
				immuneCase{"cd -P olink/.. && cat state/admin.key", true}, immuneCase{"xargs cat <<< ../state/admin.key", true})
		}
		for _, tc := range cases {
			for _, mode := range []Mode{ModeDefault, ModeBypass} {
				d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(tc.command)})
				if asked := d.Outcome == Ask && d.Immune; asked != tc.ask {
					t.Errorf("data dir %s, %s mode, %q: %s (immune %v): %s; want an immune ask: %v", private, mode, tc.command, d.Outcome, d.Immune, d.Reason, tc.ask)
				}
			}
		}
	}
}

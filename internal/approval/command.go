package approval

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Finding is one thing the command analysis noticed, said so that an approver and a
// model both understand which part of the command did what.
type Finding struct {
	// Part is the piece of the command it is about, as written.
	Part string
	// What says what that piece does.
	What string
	// Risk is the risk it implies; "" when it only explains why the command needs
	// approval.
	Risk tool.Risk
	// Immune findings force an ask that allow rules and bypass mode cannot silence.
	Immune bool
}

func (f Finding) String() string {
	return fmt.Sprintf("%q %s", clip(f.Part, 80), f.What)
}

// SimpleCommand is one command of a command line: `git status` in
// `git status && make`.
type SimpleCommand struct {
	// Text is the command as written, with its redirections.
	Text string
	// Words are its words after quote removal, without NAME=value prefixes and
	// without transparent wrappers (env, nice, timeout, nohup, command, exec, time,
	// stdbuf, ionice). Allow rules match these.
	Words []string
	// Runs are the commands it runs in turn: through sudo, doas and xargs, the
	// actions of find -exec, the commands inside sh -c and eval strings. Deny and
	// ask rules match these too.
	Runs [][]string
	// Dynamic is set when a word is only known at run time ($VAR, $(…)).
	Dynamic bool
	// Dirs are the folders it may run in: where the cd, pushd and popd commands
	// that run before it in the same shell lead from the folder the line starts in
	// (command_dirs.go). Several when a cd may or may not have run (after ||, in an
	// if). nil (a command that did not parse): the start only.
	Dirs []Dir
	// special[i] is set when the shell expands Words[i] (a glob, a variable, a
	// substitution, ~): allow rules match it only with a word written so, never with
	// the same text quoted. nil (a command that did not parse): none is.
	special []bool
	// ReadOnly is set when the command is known to change nothing, its
	// redirections included.
	ReadOnly bool
	// raw are the words with only the NAME=value prefixes removed.
	raw []string
	// unsafeEnv is set when the command sets a variable such as PATH or
	// LD_PRELOAD; no allow rule covers it then.
	unsafeEnv bool
	// values are what its words that hold variables may expand to, by their text as
	// in Words ("$f"), as the line gives them (command_vars.go); nil for a word known
	// only when it runs.
	values map[string][]field
	// argsFromInput is set when it runs a command through xargs, whose arguments
	// come from its input.
	argsFromInput bool
	// input is the text a here-string (<<<) or here-document gives it on its
	// input, which xargs or tar -T - reads paths from; nil without one.
	input []string
}

// CommandAnalysis is what a static reading of a shell command line concluded.
type CommandAnalysis struct {
	Commands []SimpleCommand
	// ReadOnly is set when every command is read-only, nothing writes through a
	// redirection and nothing forces an ask.
	ReadOnly bool
	// Risk is the highest risk the findings imply; RiskSafe when they imply none.
	Risk tool.Risk
	// Immune is set when a finding forces an ask nothing can silence.
	Immune   bool
	Findings []Finding
	// Writes are the paths the command may write or delete: redirection targets
	// and the arguments of commands that are not read-only.
	Writes []string
	// Redirects are the redirection targets among Writes.
	Redirects []string
	// Inputs are the files input redirections read (< file).
	Inputs []string
	// ParseError is set when the command is not valid shell.
	ParseError string
	// writeSites are Writes, and inputSites Inputs, each with the folders the
	// command naming it may run in.
	writeSites, inputSites []pathSite
	// vagueDeletes are deletes from a folder a sourced script may have led to
	// (writes_vague.go).
	vagueDeletes []vagueDelete
	// assigned are the values the line assigns to variables, with the folders
	// the assignment runs in, which the data-dir check reads as words.
	assigned []pathSite
	// physical is set when the line may turn on set -P (set -o physical): then
	// its cds resolve symbolic links before .., as cd -P does.
	physical bool
}

// pathSite is a path a command names, with the folders it is read from.
type pathSite struct {
	path     string
	dirs     []Dir // nil: the start only
	redirect bool
	// copySource: a path a copying command (cp, rsync, …) reads, not its last path
	// argument, which it writes; the writes check of the data dir counts it all the
	// same, the check of the kernel's control files does not (cp /proc/cpuinfo .).
	copySource bool
	// argOnly: an argument of a command not known to write its path arguments
	// (awk, python3 script.py, tar): it may only read it. The kernel check counts
	// it for cgroup files and kernel settings, not for the rest of /sys and /proc
	// (awk '…' /proc/meminfo).
	argOnly bool
	// src is a redirection's file as written (${X:-/sys/…} keeps its default there).
	src string
	// values are what a redirection target holding variables may expand to, as
	// the line gives them; nil when only the run knows.
	values []field
}

// AnalyzeCommand reads a bash command line without running it. It never panics;
// a command it cannot parse is not read-only and forces an immune ask.
func AnalyzeCommand(command string) CommandAnalysis {
	return analyzeCommand(command, 0)
}

// maxNesting bounds how deep sh -c strings inside sh -c strings are read.
const maxNesting = 3

type analyzer struct {
	src   string
	depth int
	cfg   *expand.Config
	res   CommandAnalysis
	notRO bool
	seen  map[Finding]bool
	pipes map[*syntax.BinaryCmd]bool
	// pipelines are checked after the walk, when every command's words are known.
	pipelines [][]*syntax.Stmt
	callViews map[*syntax.CallExpr][][]string
	flow      *dirFlow // &flowState once followDirs ran
	flowState dirFlow
	// cmdDirs are the folders of the command the danger checks look at.
	cmdDirs []Dir
	// vars is what the line tells of its variables (command_vars.go).
	vars *varScope
	// written is the text echo, printf, cat and tee of the line wrote to each file
	// (by its path as written), which a later command may run as code.
	written map[string][]string
	// codeRead counts the strings codeDanger parsed (maxCodeTexts).
	codeRead int
	// positional is set when the line gives the positional parameters values
	// this check does not follow: it defines a function (whose calls pass them)
	// or runs set with operands.
	positional bool
}

func analyzeCommand(src string, depth int) CommandAnalysis {
	a := &analyzer{src: src, depth: depth, cfg: newExpandConfig()}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		a.res.ParseError = err.Error()
		a.add(Finding{
			Part:   src,
			What:   "could not be parsed as shell (" + err.Error() + "), so what it does cannot be checked",
			Immune: true,
		})
		a.fallback()
	} else {
		a.scanVars(f)
		a.positional = setsPositional(f)
		a.followDirs(f)
		syntax.Walk(f, a.visit)
		for _, p := range a.pipelines {
			a.pipeline(p)
		}
	}
	a.finish()
	return a.res
}

func (a *analyzer) add(f Finding) {
	if a.seen == nil {
		a.seen = map[Finding]bool{}
	}
	if !a.seen[f] {
		a.seen[f] = true
		a.res.Findings = append(a.res.Findings, f)
	}
}

func (a *analyzer) finish() {
	a.kernelWrites()
	a.res.Risk = tool.RiskSafe
	ro := !a.notRO && a.res.ParseError == ""
	for _, f := range a.res.Findings {
		a.res.Risk = maxRisk(a.res.Risk, f.Risk)
		if f.Immune {
			a.res.Immune = true
			ro = false
		}
	}
	for _, c := range a.res.Commands {
		ro = ro && c.ReadOnly
	}
	a.res.ReadOnly = ro
	a.res.Writes = dedupe(a.res.Writes)
}

func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (a *analyzer) text(n syntax.Node) string { return nodeText(a.src, n) }

// visit reads one node of the walk. A subshell ( … ) and a coprocess add no finding
// of their own: the walk goes on into them, so their commands are judged one by one
// like any others, each from the folders the subshell's own cds lead to
// (command_dirs.go), and what they run asks as it would outside. A command or
// process substitution is different: its output becomes words of another command
// (`cat $(echo /etc/passwd)`), which no check can read before it runs.
func (a *analyzer) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Stmt:
		a.stmt(n)
	case *syntax.CmdSubst:
		what := "is a command substitution $(…)"
		if n.Backquotes {
			what = "is a command substitution `…`"
		}
		a.add(Finding{Part: a.text(n), Immune: true,
			What: what + ": it runs a command and pastes its output into this one, which cannot be checked before it runs"})
	case *syntax.ProcSubst:
		a.add(Finding{Part: a.text(n), Immune: true,
			What: "is a process substitution: it runs a hidden command whose output cannot be checked before it runs"})
	case *syntax.FuncDecl:
		a.notRO = true
		if !a.forkBomb(n) {
			a.add(Finding{Part: a.text(n), What: "defines a shell function"})
		}
	case *syntax.BinaryCmd:
		if (n.Op == syntax.Pipe || n.Op == syntax.PipeAll) && !a.pipes[n] {
			a.markPipeline(n)
		}
	case *syntax.DeclClause:
		nameref := false // declare -n r=PWD; r=data sets PWD
		for _, as := range n.Args {
			if as.Naked && as.Value != nil && strings.HasPrefix(as.Value.Lit(), "-") && strings.ContainsRune(as.Value.Lit(), 'n') {
				nameref = true
			}
		}
		for _, as := range n.Args {
			a.assign(as, a.text(n))
			a.assigned(as, nil)
			if nameref && as.Value != nil && pwdVars[as.Value.Lit()] {
				a.setsPWD(as.Value.Lit(), a.text(n))
			}
		}
	case *syntax.ForClause:
		if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil && pwdVars[wi.Name.Value] {
			a.setsPWD(wi.Name.Value, a.text(n))
		}
	case *syntax.CallExpr:
		// read PWD, printf -v PWD, mapfile OLDPWD: a name they set is a word.
		if len(n.Args) > 1 && slices.Contains([]string{"read", "printf", "mapfile", "readarray", "getopts"}, n.Args[0].Lit()) {
			printf := n.Args[0].Lit() == "printf"
			for i, w := range n.Args[1:] {
				name := w.Lit()
				if printf { // printf -v NAME, -vNAME; its other words are printed
					if name = strings.TrimPrefix(name, "-v"); name == w.Lit() && (i == 0 || n.Args[i].Lit() != "-v") {
						continue
					}
				}
				if pwdVars[name] {
					a.setsPWD(name, a.text(n))
				}
			}
		}
	}
	return true
}

// pwdVars are the variables ~+ and $PWD, ~- and $OLDPWD and cd - read the shell's
// folders from, which the checks follow through its cds alone.
var pwdVars = map[string]bool{"PWD": true, "OLDPWD": true}

// setsPWD flags a line that sets PWD or OLDPWD itself: PWD=data; cat ~+/admin.key
// reads data/admin.key, which the checks, reading ~+ as the folder the cds led
// to, took for ./admin.key.
func (a *analyzer) setsPWD(name, part string) {
	a.notRO = true
	a.add(Finding{Part: part, Immune: true,
		What: "sets " + name + ", which ~+, ~-, $PWD, $OLDPWD and cd - read the folder from, so the paths they name cannot be checked"})
}

func (a *analyzer) stmt(s *syntax.Stmt) {
	wrote := a.redirects(s)
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok {
		if wrote {
			a.notRO = true
		}
		return
	}
	a.call(s, call, wrote)
}

// redirects records the files a statement writes through redirections.
func (a *analyzer) redirects(s *syntax.Stmt) (wrote bool) {
	var dirs []Dir
	if len(s.Redirs) > 0 {
		dirs = a.dirsAt(s)
	}
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll,
			syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob, syntax.RdrInOut, syntax.DplOut:
		case syntax.RdrIn:
			if r.Word != nil {
				in := joinFields(expandWords(a.cfg, a.src, []*syntax.Word{r.Word}))
				a.res.Inputs = append(a.res.Inputs, in)
				a.res.inputSites = append(a.res.inputSites, pathSite{path: in, dirs: dirs, values: a.siteValues(r.Word), src: a.srcOf(r.Word)})
			}
			continue
		default:
			continue
		}
		if r.Word == nil {
			continue
		}
		target := joinFields(expandWords(a.cfg, a.src, []*syntax.Word{r.Word}))
		if r.Op == syntax.DplOut && (target == "-" || allDigits(target)) {
			continue // 2>&1, >&-
		}
		if harmlessSink(target) {
			continue
		}
		wrote = true
		a.res.Writes = append(a.res.Writes, target)
		a.res.Redirects = append(a.res.Redirects, target)
		a.res.writeSites = append(a.res.writeSites, pathSite{path: target, dirs: dirs, redirect: true, values: a.siteValues(r.Word),
			src: a.srcOf(r.Word)})
		a.cmdDirs = dirs
		dangerous := a.redirectDanger(a.text(r), target)
		a.cmdDirs = nil
		if !dangerous {
			a.add(Finding{Part: a.text(r), What: "writes to " + strconv.Quote(target)})
		}
	}
	return wrote
}

func joinFields(fs []field) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.text
	}
	return strings.Join(parts, " ")
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func harmlessSink(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/") && allDigits(p[len("/dev/fd/"):])
}

// callText is a simple command as written, with its redirections but without the
// ; or & that ends the statement.
func (a *analyzer) callText(s *syntax.Stmt, call *syntax.CallExpr) string {
	start, end := s.Pos().Offset(), call.End().Offset()
	for _, r := range s.Redirs {
		if e := r.End().Offset(); e > end {
			end = e
		}
	}
	if int(end) > len(a.src) || start > end {
		return strings.TrimSpace(a.text(s))
	}
	return strings.TrimSpace(a.src[start:end])
}

// siteValues are the values the line gives a redirection target that holds
// variables, or nil.
func (a *analyzer) siteValues(w *syntax.Word) []field {
	if !wordDynamic(w) {
		return nil
	}
	if vals, ok := a.resolve(w); ok {
		return vals
	}
	return nil
}

// srcOf is w as the line writes it, or "" when its position is not in the line.
func (a *analyzer) srcOf(w *syntax.Word) string {
	from, to := int(w.Pos().Offset()), int(w.End().Offset())
	if from < 0 || from > to || to > len(a.src) {
		return ""
	}
	return a.src[from:to]
}

func (a *analyzer) call(s *syntax.Stmt, call *syntax.CallExpr, redirectWrites bool) {
	text := a.callText(s, call)
	envOK := true
	for _, as := range call.Assigns {
		envOK = a.assign(as, text) && envOK
		a.assigned(as, a.dirsAt(s))
	}
	if len(call.Args) == 0 {
		return // only assignments
	}
	fs := expandWords(a.cfg, a.src, call.Args)
	raw := make([]string, len(fs))
	dyn := make([]bool, len(fs))
	special := make([]bool, len(fs))
	sc := SimpleCommand{Text: text, raw: raw, Dirs: a.dirsAt(s)}
	for _, r := range s.Redirs {
		switch {
		case r.Op == syntax.WordHdoc && r.Word != nil:
			sc.input = append(sc.input, joinFields(expandWords(a.cfg, a.src, []*syntax.Word{r.Word})))
		case (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil:
			sc.input = append(sc.input, joinFields(expandWords(a.cfg, a.src, []*syntax.Word{r.Hdoc})))
		}
	}
	for i, f := range fs {
		raw[i], dyn[i], special[i] = f.text, f.dynamic, f.dynamic || f.glob
		sc.Dynamic = sc.Dynamic || f.dynamic
	}
	for _, w := range call.Args {
		if !wordDynamic(w) {
			continue
		}
		if sc.values == nil {
			sc.values = map[string][]field{}
		}
		key := joinFields(expandWords(a.cfg, a.src, []*syntax.Word{w}))
		vals, ok := a.resolve(w)
		if prev, seen := sc.values[key]; !ok || seen && prev == nil {
			vals = nil // another word of the same text is known only when it runs
		} else {
			vals = append(prev, vals...)
		}
		sc.values[key] = vals
	}
	u := unwrap(raw)
	sc.Words, sc.Runs, sc.argsFromInput = u.key, u.runs, u.fromInput
	// A word with a default (${DIR:-/}) may take it: the command as it runs with
	// the defaults is one more of what it runs, for the danger checks, the rules
	// and the data-dir check.
	if alt := a.defaultsView(call.Args); alt != nil {
		v := unwrap(alt)
		sc.Runs = append(sc.Runs, v.key)
		sc.Runs = append(sc.Runs, v.runs...)
	}
	// env -C X runs the command as (cd X && command) would, but physically (chdir):
	// X is read as a folder from where the line stands, the command's words from X.
	for _, t := range u.chdirs {
		from := sc.Dirs
		if len(from) == 0 {
			from = []Dir{startDir}
		}
		targets := []string{t}
		vals := sc.values[t] // env -C $d, d set by the line
		if strings.Contains(t, "$") && len(vals) > 0 {
			targets = targets[:0]
			for _, v := range vals {
				targets = append(targets, v.text)
			}
		}
		a.res.inputSites = append(a.res.inputSites, pathSite{path: t, dirs: from, values: vals})
		sc.Dirs = make([]Dir, 0, len(from)*len(targets))
		for _, d := range from {
			for _, t := range targets {
				if t == "" || t == "-" || strings.ContainsAny(t, "$`*?[") || strings.HasPrefix(t, "~") {
					sc.Dirs = append(sc.Dirs, Dir{Vague: true})
				} else {
					sc.Dirs = append(sc.Dirs, d.cd(t, true))
				}
			}
		}
	}
	sc.special = tailFlags(raw, special, sc.Words)
	for _, v := range append([][]string{sc.Words}, sc.Runs...) {
		if len(v) > 0 && strings.Contains(v[0], "$") {
			a.add(Finding{Part: text, Immune: true,
				What: "takes the program to run from a variable or substitution, so what runs cannot be checked"})
		}
	}
	for _, e := range u.envs {
		if dangerousEnv(e[0], e[1]) {
			envOK = false
			a.add(Finding{Part: text, What: "sets " + e[0] + ", which changes what the command runs or loads"})
		}
	}
	for _, str := range u.shell {
		a.add(Finding{Part: text, Immune: true,
			What: "runs a string as shell code (" + u.shellWhat + "), which cannot be checked before it runs"})
		runs, _ := a.nested(text, str, sc.Dirs)
		sc.Runs = append(sc.Runs, runs...)
	}
	sc.Runs = append(sc.Runs, a.programEffects(text, append([][]string{sc.Words}, sc.Runs...), sc.Dirs)...)
	a.wrappedDanger(text, append([][]string{sc.Words}, sc.Runs...), sc.Dirs)
	a.scriptFiles(s, sc)
	// A here-string or here-document handed to a shell is shell code, as sh -c's
	// string is; one handed to another interpreter is read as its -c code is.
	if len(sc.input) > 0 && runsInput(sc) {
		for _, in := range sc.input {
			if inputShell(sc) {
				a.add(Finding{Part: text, Immune: true,
					What: "runs a string as shell code (a here-string or here-document), which cannot be checked before it runs"})
				runs, _ := a.nested(text, in, sc.Dirs)
				sc.Runs = append(sc.Runs, runs...)
			} else {
				a.codeDanger(codeStrings(in))
			}
		}
	}
	if u.privileged {
		a.add(Finding{Part: text, What: "runs as another user (sudo, doas or su)", Risk: tool.RiskHigh})
	}
	for _, v := range append([][]string{sc.Words}, sc.Runs...) {
		if what := rebindsNames(v); what != "" {
			a.notRO = true
			a.add(Finding{Part: text, Immune: true, What: what + ", so what a command of the line runs cannot be checked"})
		}
	}
	if a.positional && deletesPositional(call.Args, append([][]string{sc.Words}, sc.Runs...)) {
		a.flag(text, "deletes what a function's callers or set -- give it ($1, $@ …), which this check does not follow", tool.RiskCritical)
	}
	a.cmdDirs = sc.Dirs
	a.danger(text, sc.Words)
	for _, r := range sc.Runs {
		a.danger(text, r)
	}
	a.cmdDirs = nil
	sc.unsafeEnv = !envOK
	ro := envOK && !u.privileged && len(u.shell) == 0 && !dyn[0] && len(sc.Words) <= len(dyn) &&
		readOnlyCommand(sc.Words, dyn[len(dyn)-len(sc.Words):]) // Words is a suffix of the words
	sc.ReadOnly = ro && !redirectWrites
	if !ro {
		a.writesOf(sc.Words, sc.Dirs)
		for _, r := range sc.Runs {
			a.writesOf(r, sc.Dirs)
		}
	}
	a.res.Commands = append(a.res.Commands, sc)
	if a.callViews == nil {
		a.callViews = map[*syntax.CallExpr][][]string{}
	}
	a.callViews[call] = append([][]string{sc.Words}, sc.Runs...)
}

// programEffects notes what programs that take a script or a command in their
// words do with it (command_scripts.go): the files they read and write, as a
// redirection's are, and the commands they run, read as nested shell code and
// judged as the line's own commands are (awk '{print | "sort"}' runs sort; awk
// 'BEGIN{system("rm -rf /")}' is rm -rf /). Code they build as they run (sed's
// s///e, awk's system($0)), or hand a shell on its input (print | "sh"), cannot be
// read: it asks whatever the rules and mode say, as sh -c does. It returns the
// commands they run.
func (a *analyzer) programEffects(part string, views [][]string, dirs []Dir) [][]string {
	var runs [][]string
	for _, v := range views {
		if len(v) == 0 {
			continue
		}
		fx := scriptEffects(v)
		for _, r := range fx.reads {
			if r != "" && !harmlessSink(r) && r != "/dev/stdin" {
				a.res.Inputs = append(a.res.Inputs, r)
				a.res.inputSites = append(a.res.inputSites, pathSite{path: r, dirs: dirs})
			}
		}
		for _, w := range fx.writes {
			if w != "" && !harmlessSink(w) {
				a.writes([]string{w}, dirs)
			}
		}
		a.codeDanger(fx.maybe)
		a.kernelPathsInCode(fx.maybe)
		for _, r := range fx.runs {
			inputCode := false
			if r != "" {
				var rs [][]string
				rs, inputCode = a.nested(part, r, dirs)
				runs = append(runs, rs...)
			}
			if r == "" || inputCode {
				a.add(Finding{Part: part, Immune: true,
					What: "runs shell code it builds as it runs (" + fx.what + "), which cannot be checked before it runs"})
			}
		}
	}
	return runs
}

// setsPositional reports whether the line defines a function or runs set with
// operands (set -- a b), giving $1, $@ … values of its own.
func setsPositional(f *syntax.File) bool {
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			found = true
		case *syntax.CallExpr:
			if len(n.Args) > 1 && n.Args[0].Lit() == "set" {
				for i, w := range n.Args[1:] {
					lit := w.Lit()
					prev := n.Args[i].Lit() // the word before w: -o, -euo take it as an option name
					optName := len(prev) > 1 && (prev[0] == '-' || prev[0] == '+') && prev[1] != '-' && strings.HasSuffix(prev, "o")
					if lit == "--" || lit == "-" || !strings.HasPrefix(lit, "-") && !strings.HasPrefix(lit, "+") && !optName {
						found = true
					}
				}
			}
		}
		return !found
	})
	return found
}

// deletesPositional reports whether a command that deletes (rm, rmdir, unlink,
// shred, find -delete, in any of its views) names a target with a positional
// parameter ($1, ${2}, $@, $*).
func deletesPositional(args []*syntax.Word, views [][]string) bool {
	deletes := false
	for _, v := range views {
		if len(v) == 0 {
			continue
		}
		switch path.Base(v[0]) {
		case "rm", "rmdir", "unlink", "shred":
			deletes = true
		case "find":
			deletes = deletes || contains(v, "-delete")
		}
	}
	if !deletes {
		return false
	}
	found := false
	for _, w := range args[1:] {
		syntax.Walk(w, func(n syntax.Node) bool {
			if p, ok := n.(*syntax.ParamExp); ok && p.Param != nil && (allDigits(p.Param.Value) || p.Param.Value == "@" || p.Param.Value == "*") && p.Param.Value != "0" {
				found = true
			}
			return !found
		})
	}
	return found
}

// rebindsNames says how the command words makes a command name run something
// else than the program of that name, or returns "": hash -p binds a name to
// any program (hash -p /bin/rm cat; cat -rf /), enable -f loads a builtin from a
// shared object, and shopt -s expand_aliases lets the aliases of the line's
// next lines replace the names they define (alias cat='rm -rf').
func rebindsNames(words []string) string {
	if len(words) < 2 {
		return ""
	}
	name, args := path.Base(words[0]), words[1:]
	short := func(c byte) bool {
		for _, a := range args {
			if a == "--" {
				break
			}
			if len(a) > 1 && a[0] == '-' && strings.IndexByte(a[1:], c) >= 0 {
				return true
			}
		}
		return false
	}
	switch {
	case name == "hash" && short('p'):
		return "binds a command name to another program (hash -p)"
	case name == "enable" && short('f'):
		return "loads a builtin command from a shared object (enable -f)"
	case name == "shopt" && short('s') && contains(args, "expand_aliases"):
		return "turns on aliases (shopt -s expand_aliases), which may make any name run other code"
	}
	return ""
}

// defaultsView is the words of a command with every ${NAME:-word} style default
// taken (withDefaults), or nil when none has one.
func (a *analyzer) defaultsView(args []*syntax.Word) []string {
	var words []*syntax.Word
	changed := false
	for _, w := range args {
		d, ok := withDefaults(w)
		changed = changed || ok
		words = append(words, d)
	}
	if !changed {
		return nil
	}
	var out []string
	for _, f := range expandWords(a.cfg, a.src, words) {
		out = append(out, f.text)
	}
	return out
}

// maxWrappedWords bounds the words wrappedDanger reads of one command.
const maxWrappedWords = 64

// wrappedDanger reads a program this check does not know, which may run the words
// after its own as a command (setsid, taskset, flock, unshare, strace, ssh, docker
// run) or a word as shell code (script -c, ssh host '…'), for the critical
// destructive commands among them: setsid rm -rf / is rm -rf /. Only critical
// findings count, so that a word that merely looks like a command (git rm -r .)
// asks no more. Read-only invocations and git (whose subcommands share the names)
// are not read so.
func (a *analyzer) wrappedDanger(part string, views [][]string, dirs []Dir) {
	for _, v := range views {
		if len(v) < 2 || path.Base(v[0]) == "git" || readOnlyCommand(v, make([]bool, len(v))) {
			continue
		}
		b := &analyzer{src: a.src, depth: a.depth, cfg: a.cfg, cmdDirs: dirs}
		for i := 1; i < len(v) && i < maxWrappedWords; i++ {
			if strings.ContainsAny(v[i], " \t\n") {
				b.codeDanger(v[i : i+1])
				continue
			}
			u := unwrap(v[i:])
			b.danger(part, u.key)
			for _, r := range u.runs {
				b.danger(part, r)
			}
		}
		for _, f := range b.res.Findings {
			if f.Risk == tool.RiskCritical {
				a.add(f)
			}
		}
	}
}

// scriptFiles follows code the line writes to a file and then runs: cat > x.sh
// <<'EOF' … EOF; bash x.sh runs what the here-document says. It notes what
// echo, printf, cat (its here-document or here-string) and tee write through a
// redirection (or tee's operands), and reads what a later shell, interpreter,
// source or ./x.sh runs of it as code handed to it is read: what the danger
// checks find counts, and the data-dir check reads its words.
func (a *analyzer) scriptFiles(s *syntax.Stmt, sc SimpleCommand) {
	if len(sc.Words) == 0 {
		return
	}
	name := path.Base(sc.Words[0])
	var content string
	switch name {
	case "cat", "tee":
		content = strings.Join(sc.input, "\n")
	case "echo", "printf":
		content = strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(strings.Join(positional(sc.Words[1:]), " "))
	}
	if content != "" {
		var targets []string
		for _, r := range s.Redirs {
			switch r.Op {
			case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll, syntax.AppAll:
				if r.Word != nil {
					targets = append(targets, joinFields(expandWords(a.cfg, a.src, []*syntax.Word{r.Word})))
				}
			}
		}
		if name == "tee" {
			targets = append(targets, positional(sc.Words[1:])...)
		}
		for _, t := range targets {
			if a.written == nil {
				a.written = map[string][]string{}
			}
			a.written[path.Clean(t)] = append(a.written[path.Clean(t)], content)
		}
	}
	if len(a.written) == 0 {
		return
	}
	for _, v := range append([][]string{sc.Words}, sc.Runs...) {
		if len(v) == 0 {
			continue
		}
		prog, file, shell := path.Base(v[0]), "", true
		switch {
		case prog == "source" || prog == ".":
			if len(v) > 1 {
				file = v[1]
			}
		case shellNames[prog] || interpreters[prog]:
			shell = shellNames[prog]
			if ops := positional(v[1:]); len(ops) > 0 {
				file = ops[0]
			}
		case strings.Contains(v[0], "/"):
			file = v[0]
		}
		if file == "" {
			continue
		}
		for _, code := range a.written[path.Clean(file)] {
			a.res.assigned = append(a.res.assigned, pathSite{path: code, dirs: sc.Dirs})
			if shell {
				a.codeDanger([]string{code})
			} else {
				a.codeDanger(codeStrings(code))
			}
		}
	}
}

// maxCodeTexts bounds the strings codeDanger reads as commands in one line; past
// it the line asks, so that a line of many strings costs the check little.
const maxCodeTexts = 1000

// dangerWords are the names the danger checks look for (and the wrappers,
// downloaders and function definitions they follow): a text without any of them
// holds nothing they would find, and is not parsed.
var dangerWords = []string{"rm", "mkfs", "mke2fs", "wipefs", "mkswap", "dd", "shred", "unlink", "rsync", "chmod",
	"chown", "chgrp", "git", "find", "shutdown", "reboot", "halt", "poweroff", "init", "systemctl", "kill", "mv",
	"sudo", "doas", "su", "curl", "wget", "fetch", "http", "aria2c", "()", "function", "tar", "sed", "awk", "sh", "python", "perl",
	"ruby", "node", "php", "eval"}

// mayBeDangerous reports whether text holds one of dangerWords.
func mayBeDangerous(text string) bool {
	for _, w := range dangerWords {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// codeDanger reads each of texts as a command a program may run and keeps what
// the danger checks find in it (rm -rf / is critical), and nothing else: most
// such texts are no commands at all.
func (a *analyzer) codeDanger(texts []string) {
	if a.depth+1 > maxNesting {
		return
	}
	for _, m := range texts {
		if !mayBeDangerous(m) {
			continue
		}
		if a.codeRead++; a.codeRead > maxCodeTexts {
			a.add(Finding{Part: clip(a.src, 80), Immune: true, What: "holds more strings that may be commands than this check reads"})
			return
		}
		for _, f := range analyzeCommand(m, a.depth+1).Findings {
			if f.Risk != "" {
				a.add(f)
			}
		}
	}
}

// inputShell reports whether the program of sc that runs its input is a shell.
func inputShell(sc SimpleCommand) bool {
	for _, words := range append([][]string{sc.Words}, sc.Runs...) {
		if len(words) > 0 && shellNames[path.Base(words[0])] && readsStdin(words[1:]) || sourcesInput(words) {
			return true
		}
	}
	return false
}

// writes records paths a command run in dirs may write.
func (a *analyzer) writes(paths []string, dirs []Dir) {
	a.res.Writes = append(a.res.Writes, paths...)
	for _, p := range paths {
		a.res.writeSites = append(a.res.writeSites, pathSite{path: p, dirs: dirs})
	}
}

// copyCommands write their last path argument and read the others (unless a
// target directory is given as an option, -t DIR). ln is none: a link to a kernel
// control file (ln -s /sys/fs/cgroup/…/cgroup.procs p) writes it under another name
// (echo $$ > p), and so does cp's -s or -l.
var copyCommands = map[string]bool{"cp": true, "rsync": true, "scp": true, "install": true}

// targetDirCommands take a target directory option: -t DIR, -tDIR, -vt DIR,
// --target-directory[=]DIR (or an abbreviation, --target). rsync's and scp's -t
// mean something else.
var targetDirCommands = map[string]bool{"cp": true, "install": true, "ln": true}

// pathWriters are the commands known to write the paths they are given (a copy
// its destination): a path given to any other command that is not read-only may
// be read only (awk '…' /proc/meminfo).
var pathWriters = map[string]bool{
	"tee": true, "dd": true, "cp": true, "mv": true, "install": true, "ln": true, "rsync": true, "scp": true,
	"truncate": true, "touch": true, "sponge": true, "shred": true, "rm": true, "rmdir": true, "mkdir": true,
	"chmod": true, "chown": true, "chgrp": true, "sed": true, "mknod": true, "mkfifo": true,
}

// writesOf records the paths the command words may write, as writes does, telling
// a copying command's sources apart (copySource) and marking the arguments of
// commands not known to write them (argOnly).
func (a *analyzer) writesOf(words []string, dirs []Dir) {
	paths := pathArgs(words)
	n := len(a.res.writeSites)
	name := ""
	if len(words) > 0 {
		name = path.Base(words[0])
	}
	everyPath := false
	if targetDirCommands[name] {
		for _, w := range words[1:] {
			if w == "--" {
				break
			}
			if strings.HasPrefix(w, "--t") {
				everyPath = true // --target-directory DIR: every path may be written
				continue
			}
			if name == "cp" && (w == "--symbolic-link" || w == "--link" ||
				len(w) > 1 && w[0] == '-' && w[1] != '-' && strings.ContainsAny(w, "sl")) {
				everyPath = true // cp -s, cp -l: links, not copies; every path counts
			}
			if len(w) < 2 || w[0] != '-' || w[1] == '-' {
				continue
			}
			if i := strings.IndexByte(w, 't'); i > 0 {
				everyPath = true // -t DIR, -vt DIR
				if dir := w[i+1:]; dir != "" {
					paths = append(paths, dir) // -t/DIR: pathArgs left it out
				}
			}
		}
	}
	a.writes(paths, dirs)
	if !pathWriters[name] {
		for i := n; i < len(a.res.writeSites); i++ {
			a.res.writeSites[i].argOnly = true
		}
	}
	if !copyCommands[name] || everyPath || len(paths) < 2 {
		return
	}
	for i := n; i < len(a.res.writeSites)-1; i++ {
		a.res.writeSites[i].copySource = true
	}
}

// nested reads a string that a command run in dirs runs as shell code and returns
// the commands in it, so deny rules and danger checks see through sh -c, and
// whether one of them runs code it reads from its input (sh, python3 -).
func (a *analyzer) nested(part, src string, dirs []Dir) (runs [][]string, inputCode bool) {
	if a.depth+1 > maxNesting {
		a.add(Finding{Part: part, Immune: true, What: "nests shell code too deeply to check"})
		return nil, false
	}
	inner := analyzeCommand(src, a.depth+1)
	for _, c := range inner.Commands {
		runs = append(runs, c.Words)
		runs = append(runs, c.Runs...)
		inputCode = inputCode || runsInput(c)
	}
	for _, f := range inner.Findings {
		a.add(f)
	}
	a.res.Writes = append(a.res.Writes, inner.Writes...)
	for _, w := range inner.writeSites {
		w.dirs = joinDirs(dirs, w.dirs)
		a.res.writeSites = append(a.res.writeSites, w)
	}
	a.res.Inputs = append(a.res.Inputs, inner.Inputs...)
	for _, in := range inner.inputSites {
		in.dirs = joinDirs(dirs, in.dirs)
		a.res.inputSites = append(a.res.inputSites, in)
	}
	return runs, inputCode
}

// assigned records the value of an assignment run in dirs.
func (a *analyzer) assigned(as *syntax.Assign, dirs []Dir) {
	if as.Value == nil {
		return
	}
	if v := joinFields(expandWords(a.cfg, a.src, []*syntax.Word{as.Value})); v != "" {
		a.res.assigned = append(a.res.assigned, pathSite{path: v, dirs: dirs})
	}
}

// assign checks a NAME=value prefix or declaration; false when it is unsafe.
func (a *analyzer) assign(as *syntax.Assign, part string) bool {
	if as.Name == nil {
		return true
	}
	val := ""
	if as.Value != nil {
		val = joinFields(expandWords(a.cfg, a.src, []*syntax.Word{as.Value}))
	}
	if pwdVars[as.Name.Value] {
		a.setsPWD(as.Name.Value, part)
		return false
	}
	if as.Name.Value == "BASH_CMDS" || as.Name.Value == "BASH_ALIASES" {
		a.notRO = true
		a.add(Finding{Part: part, Immune: true,
			What: "sets " + as.Name.Value + ", which binds command names to other programs or code, so what a command of the line runs cannot be checked"})
		return false
	}
	if !dangerousEnv(as.Name.Value, val) {
		return true
	}
	a.notRO = true
	a.add(Finding{Part: part, What: "sets " + as.Name.Value + ", which changes what the command runs or loads"})
	return false
}

// pathArgs are the words of a command that may name files it writes.
func pathArgs(words []string) []string {
	var out []string
	for i, w := range words {
		if i == 0 {
			continue
		}
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "of=") {
			if _, v, ok := strings.Cut(w, "="); ok && v != "" {
				out = append(out, v)
			}
			continue
		}
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

var fallbackSplitter = strings.NewReplacer(";", "\n", "&", "\n", "|", "\n", "(", "\n", ")", "\n", "`", "\n", "{", "\n", "}", "\n")
var quoteStripper = strings.NewReplacer(`"`, "", `'`, "", `\`, "", "$", "")

// fallback splits a command that did not parse into rough simple commands, so
// deny rules and danger checks still see its words.
func (a *analyzer) fallback() {
	for _, seg := range strings.Split(fallbackSplitter.Replace(a.src), "\n") {
		words := strings.Fields(quoteStripper.Replace(seg))
		if len(words) == 0 {
			continue
		}
		u := unwrap(words)
		sc := SimpleCommand{Text: strings.TrimSpace(seg), Words: u.key, Runs: u.runs, Dynamic: true, raw: words}
		a.danger(sc.Text, sc.Words)
		for _, r := range sc.Runs {
			a.danger(sc.Text, r)
		}
		a.writes(pathArgs(sc.Words), nil)
		a.res.Commands = append(a.res.Commands, sc)
	}
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// tailFlags returns the flags of words, which unwrap took from the end of raw (the
// wrappers before it removed); when words is not such a tail, every word is flagged,
// so that no allow rule takes a literal word for it.
func tailFlags(raw []string, flags []bool, words []string) []bool {
	if n := len(raw) - len(words); n >= 0 && slices.Equal(raw[n:], words) {
		return flags[n:]
	}
	out := make([]bool, len(words))
	for i := range out {
		out[i] = true
	}
	return out
}

package approval

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Which folder a word is read from. `cd .skills/pdf && node run.js ../y` reads ../y
// from .skills/pdf, not from where the command line starts; `(cd sub) && cat ../y`
// and `cd sub | cat ../y` read it from the start, since the cd ran in a subshell;
// `cd sub || cd other && cat ../y` reads it from sub or other. The analysis follows
// the shell's order of execution (&&, ||, ;, if, loops, case) and gives each simple
// command the set of folders it may run in, never missing one it could run in.

// Dir is a folder a simple command may run in, as the cds before it lead there from
// the folder the command line starts in.
type Dir struct {
	// Path is "." for the start folder, a slash path relative to it (it may begin
	// with ..), or an absolute path.
	Path string
	// Vague is set when a cd went where only the run knows (cd, cd ~, cd $VAR,
	// cd -, a sourced script): then Path is "".
	Vague bool
	// Script, on a vague Dir, is the file whose sourcing led there, when it is
	// named by a literal path with a slash from a known folder: relative to the
	// start (as the kernel reads it: link/.. is not cleaned away) or absolute.
	// The check trusts such a folder as much as the script, when the script lies
	// in the working directory (scriptInside).
	Script string
	// Physical, on a vague Dir a cd -P (set -P, env -C) with .. led to from a
	// known folder, is that cd's path as written from the start (elink/..,
	// unclean) or absolute: the kernel resolves its links before its .., which
	// only the disk tells. The data-dir check resolves it there (physicalDirs);
	// every other check reads the folder as vague.
	Physical string
}

var startDir = Dir{Path: "."}

// cd is where `cd target` leads from d. physical is cd -P, which resolves
// symbolic links before .., so a target with .. leads where only the disk knows.
func (d Dir) cd(target string, physical bool) Dir {
	if physical && (target == ".." || strings.HasPrefix(target, "../") || strings.Contains(target, "/..")) {
		return Dir{Vague: true, Physical: d.physicalJoin(target)}
	}
	switch {
	case path.IsAbs(target):
		return Dir{Path: path.Clean(target)}
	case d.Vague && d.Physical != "":
		return Dir{Vague: true} // not followed further: a loop of cd -P .. would never settle
	case d.Vague:
		return d
	}
	return Dir{Path: path.Join(d.Path, target)}
}

// physicalJoin is the unclean path target leads to from d, for Dir.Physical: ""
// when d is vague (a Physical is followed one cd from a known folder only).
func (d Dir) physicalJoin(target string) string {
	switch {
	case path.IsAbs(target):
		return target
	case d.Vague:
		return ""
	}
	return d.Path + "/" + target
}

// location is where the shell stands at one point: its folder, pushd's stack, and
// the folder cd - goes back to (OLDPWD), when a cd of the line set it.
type location struct {
	dir   Dir
	stack []Dir // the newest last
	old   Dir
	// oldSet is set when a cd, pushd or popd of the line set old; without one,
	// OLDPWD is whatever the run inherits.
	oldSet bool
}

var vagueLocation = location{dir: Dir{Vague: true}}

func (l location) equal(m location) bool {
	return l.dir == m.dir && slices.Equal(l.stack, m.stack) && l.old == m.old && l.oldSet == m.oldSet
}

// moved is where the shell stands after a change from l to dir with stack: bash's
// cd, pushd and popd set OLDPWD to the folder they leave.
func (l location) moved(dir Dir, stack []Dir) location {
	return location{dir: dir, stack: stack, old: l.dir, oldSet: true}
}

// locations are the places the shell may stand at one point; never empty where a
// command may run.
type locations []location

func (s locations) has(l location) bool {
	for _, x := range s {
		if x.equal(l) {
			return true
		}
	}
	return false
}

// union is s with the locations of t it lacks; it never changes s's elements.
func (s locations) union(t locations) locations {
	out := slices.Clip(s)
	for _, l := range t {
		if !out.has(l) {
			out = append(out, l)
		}
	}
	return out
}

func (s locations) each(f func(location) location) locations {
	var out locations
	for _, l := range s {
		out = out.union(locations{f(l)})
	}
	return out
}

// maxLocations bounds the places one command may run in; a command line that
// branches into more (cd a || cd b; cd c || cd d; …) forces an immune ask.
const maxLocations = 16

// maxFollowed bounds how many statements the flow follows in all (a loop body once
// per pass, nested loops multiply): past it the line asks, and the rest of it is not
// followed, so that a long or deeply nested line costs the check little.
const maxFollowed = 10_000

// maxLoopPasses bounds how often a loop body is followed before its folders must
// have settled (for i in 1 2; do cd sub; done does not settle).
const maxLoopPasses = 4

// dirFlow follows the shell's order of execution to find the locations each
// statement starts in.
type dirFlow struct {
	a *analyzer
	// at are the locations each statement starts in, in the order the flow
	// reached them; a statement followed more than once (a loop body) has an
	// entry each time, and then merged holds their union.
	at       []stmtAt
	cursor   int // where dirsAt looks first: the walk mostly follows the flow
	repeats  bool
	merged   map[*syntax.Stmt]locations
	all      locations // every location any statement starts in
	funcs    []*syntax.FuncDecl
	lastpipe bool // shopt -s lastpipe may run a pipeline's last stage in this shell
	physical bool // set -P may make cd and pushd resolve links before ..
	cdpath   bool // the line may set CDPATH, which may send cd and pushd anywhere
	limited  bool // a too-complex finding was added
	hasSubst bool // the line may hold a command or process substitution
	followed int  // statements followed, at most maxFollowed
	// visit and visitIn walk a node for substitutions (one func for every walk).
	visit   func(syntax.Node) bool
	visitIn locations
	// lastLocs and lastDirs are dirsAt's previous answer, which the next statement
	// usually shares.
	lastLocs locations
	lastDirs []Dir
}

// followDirs works out where every statement of f starts.
func (a *analyzer) followDirs(f *syntax.File) {
	a.flowState = dirFlow{a: a, at: make([]stmtAt, 0, 8), lastpipe: strings.Contains(a.src, "lastpipe"),
		hasSubst: strings.Contains(a.src, "$(") || strings.Contains(a.src, "`") || strings.Contains(a.src, "<(") || strings.Contains(a.src, ">(")}
	fl := &a.flowState
	fl.physical = setsPhysical(f, a)
	a.res.physical = fl.physical
	fl.cdpath = strings.Contains(a.src, "CDPATH")
	ok, fail := fl.stmts(f.Stmts, locations{{dir: startDir}})
	fl.all = fl.all.union(ok).union(fail)
	// A function's body runs where it is called, which may be anywhere the line
	// stands; a body that changes folder changes it for its callers.
	for i := 0; i < len(fl.funcs); i++ {
		fd := fl.funcs[i]
		all := fl.all
		ok, fail := fl.stmt(fd.Body, all)
		if len(ok.union(fail)) > len(all) {
			fl.limit(fd, "defines a function that changes folder, so where its caller's words are read from cannot be checked")
		}
	}
	if fl.repeats {
		fl.merged = map[*syntax.Stmt]locations{}
		for _, e := range fl.at {
			locs := e.locs
			if prev, ok := fl.merged[e.s]; ok {
				locs = prev.union(locs)
			}
			fl.merged[e.s] = locs[:min(len(locs), maxLocations)] // past that, limit forced an ask
		}
	}
	a.flow = fl
}

type stmtAt struct {
	s    *syntax.Stmt
	locs locations
}

// lookup finds where the flow found s to start.
func (f *dirFlow) lookup(s *syntax.Stmt) (locations, bool) {
	if f.merged != nil {
		locs, ok := f.merged[s]
		return locs, ok
	}
	for i := range f.at {
		j := (f.cursor + i) % len(f.at)
		if f.at[j].s == s {
			f.cursor = j + 1
			return f.at[j].locs, true
		}
	}
	return nil, false
}

// dirsAt are the folders the statement s may start in.
func (a *analyzer) dirsAt(s *syntax.Stmt) []Dir {
	if a.flow == nil {
		return nil
	}
	fl := a.flow
	locs, ok := fl.lookup(s)
	if !ok { // not reached by the flow (it should be): every folder, and an unknown one
		locs = fl.all.union(locations{vagueLocation})
	}
	if len(locs) == len(fl.lastLocs) && len(locs) > 0 && &locs[0] == &fl.lastLocs[0] {
		return fl.lastDirs
	}
	out := make([]Dir, 0, len(locs))
	for _, l := range locs {
		if !slices.Contains(out, l.dir) {
			out = append(out, l.dir)
		}
	}
	fl.lastLocs, fl.lastDirs = locs, out
	return out
}

func (f *dirFlow) limit(n syntax.Node, what string) {
	if !f.limited {
		f.limited = true
		f.a.add(Finding{Part: f.a.text(n), Immune: true, What: what})
	}
}

// record notes where s starts and returns those places, at most maxLocations of
// them: past that the line asks (limit), and the places followed stay few, so that
// a line branching at every step (cd a || cd b; …) is not followed into thousands.
func (f *dirFlow) record(s *syntax.Stmt, in locations) locations {
	if len(in) > maxLocations {
		in = in[:maxLocations]
	}
	f.at = append(f.at, stmtAt{s, in})
	f.all = f.all.union(in)
	if len(f.all) > maxLocations {
		f.limit(s, "changes folder in more ways than this check follows")
		f.all = f.all[:maxLocations]
	}
	return in
}

// stmts follows a list run in order (;, newlines); ok and fail are where it may
// stand after it, having succeeded or failed.
func (f *dirFlow) stmts(list []*syntax.Stmt, in locations) (ok, fail locations) {
	ok, fail = in, in
	for i, s := range list {
		if i > 0 {
			in = ok.union(fail)
		}
		ok, fail = f.stmt(s, in)
	}
	return ok, fail
}

func (f *dirFlow) stmt(s *syntax.Stmt, in locations) (ok, fail locations) {
	if f.followed++; f.followed > maxFollowed {
		f.limit(s, "is too long or nested for this check to follow where it changes folder")
		return in, in
	}
	in = f.record(s, in)
	for _, r := range s.Redirs {
		f.substs(r, in)
	}
	switch c := s.Cmd.(type) {
	case nil:
		ok, fail = in, in
	case *syntax.CallExpr:
		ok, fail = f.call(c, in)
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt:
			xok, xfail := f.stmt(c.X, in)
			yok, yfail := f.stmt(c.Y, xok)
			ok, fail = yok, xfail.union(yfail)
		case syntax.OrStmt:
			xok, xfail := f.stmt(c.X, in)
			yok, yfail := f.stmt(c.Y, xfail)
			ok, fail = xok.union(yok), yfail
		default: // a pipeline: bash runs each stage in a subshell
			f.stmt(c.X, in)
			yok, yfail := f.stmt(c.Y, in)
			ok, fail = in, in
			if f.lastpipe {
				ok = ok.union(yok).union(yfail)
				fail = ok
			}
		}
	case *syntax.Subshell:
		f.stmts(c.Stmts, in)
		ok, fail = in, in
	case *syntax.Block:
		ok, fail = f.stmts(c.Stmts, in)
	case *syntax.IfClause:
		ok, fail = f.ifClause(c, in)
	case *syntax.WhileClause:
		ok, fail = f.loop(s, c.Cond, c.Until, c.Do, in)
	case *syntax.ForClause:
		f.substs(c.Loop, in)
		ok, fail = f.loop(s, nil, false, c.Do, in)
	case *syntax.CaseClause:
		ok = f.caseClause(c, in)
		fail = ok
	case *syntax.TimeClause:
		ok, fail = in, in
		if c.Stmt != nil {
			ok, fail = f.stmt(c.Stmt, in)
		}
	case *syntax.CoprocClause:
		if c.Name != nil {
			f.substs(c.Name, in)
		}
		f.stmt(c.Stmt, in)
		ok, fail = in, in
	case *syntax.FuncDecl:
		if !slices.Contains(f.funcs, c) {
			f.funcs = append(f.funcs, c) // followed once the whole line is
		}
		ok, fail = in, in
	default: // [[ ]], (( )), declare, let: no cd, but maybe substitutions
		f.substs(c, in)
		ok, fail = in, in
	}
	if s.Background || s.Coprocess || s.Disown {
		return in, in
	}
	if s.Negated {
		ok, fail = fail, ok
	}
	return ok, fail
}

func (f *dirFlow) ifClause(c *syntax.IfClause, in locations) (ok, fail locations) {
	if len(c.Cond) == 0 { // else
		return f.stmts(c.Then, in)
	}
	cok, cfail := f.stmts(c.Cond, in)
	ok, fail = f.stmts(c.Then, cok)
	if c.Else == nil {
		return ok.union(cfail), fail // no branch taken: status 0
	}
	eok, efail := f.ifClause(c.Else, cfail)
	return ok.union(eok), fail.union(efail)
}

// loop follows a while, until or for loop until the places it may stand in settle.
func (f *dirFlow) loop(s *syntax.Stmt, cond []*syntax.Stmt, until bool, body []*syntax.Stmt, in locations) (ok, fail locations) {
	cur := in
	for pass := 0; ; pass++ {
		next, enter := cur, cur
		if len(cond) > 0 {
			cok, cfail := f.stmts(cond, cur)
			next = next.union(cok).union(cfail)
			enter = cok
			if until {
				enter = cfail
			}
		}
		bok, bfail := f.stmts(body, enter)
		next = next.union(bok).union(bfail)
		if len(next) == len(cur) { // union only grows: nothing new
			return next, next
		}
		f.repeats = true // the body is followed again
		if pass == maxLoopPasses {
			f.limit(s, "changes folder in a loop in a way this check does not follow")
			return next, next
		}
		cur = next
	}
}

func (f *dirFlow) caseClause(c *syntax.CaseClause, in locations) locations {
	f.substs(c.Word, in)
	out := in // no pattern matched
	var prev locations
	for _, it := range c.Items {
		for _, p := range it.Patterns {
			f.substs(p, in)
		}
		start := in.union(prev) // ;& and ;;& carry on from the body before
		iok, ifail := f.stmts(it.Stmts, start)
		out = out.union(iok).union(ifail)
		prev = nil
		if it.Op != syntax.Break {
			prev = iok.union(ifail)
		}
	}
	return out
}

// substs follows the command and process substitutions of a node: each runs in a
// subshell that starts where the node does.
func (f *dirFlow) substs(n syntax.Node, in locations) {
	if !f.hasSubst {
		return
	}
	if f.visit == nil {
		f.visit = f.visitSubst
	}
	saved := f.visitIn
	f.visitIn = in
	syntax.Walk(n, f.visit)
	f.visitIn = saved
}

func (f *dirFlow) visitSubst(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.CmdSubst:
		f.stmts(n.Stmts, f.visitIn)
		return false
	case *syntax.ProcSubst:
		f.stmts(n.Stmts, f.visitIn)
		return false
	}
	return true
}

// call follows a simple command: cd, pushd, popd and source change where the shell
// stands when they succeed; anything else leaves it.
func (f *dirFlow) call(call *syntax.CallExpr, in locations) (ok, fail locations) {
	f.substs(call, in)
	if len(call.Args) == 0 {
		return in, in
	}
	switch call.Args[0].Lit() {
	case "cd", "pushd", "popd", "builtin", "command", "source", ".":
	default:
		return in, in
	}
	words := literalWords(call.Args)
	if words == nil {
		words = expandWords(f.a.cfg, f.a.src, call.Args)
	}
	for len(words) > 0 && (words[0].text == "builtin" || words[0].text == "command") {
		words = words[1:]
		for len(words) > 0 && strings.HasPrefix(words[0].text, "-") {
			switch words[0].text {
			case "-v", "-V":
				return in, in // command -v: a lookup
			}
			words = words[1:]
		}
	}
	if len(words) == 0 {
		return in, in
	}
	vague := func(location) location { return vagueLocation }
	switch words[0].text {
	case "source", ".":
		// The script may change folder anywhere, and stay where it is.
		target := sourceTarget(words[1:])
		ok = in
		for _, l := range in {
			d := Dir{Vague: true}
			if target != "" && !l.dir.Vague {
				d.Script = target
				if !path.IsAbs(target) && l.dir.Path != "." {
					d.Script = l.dir.Path + "/" + target
				}
			}
			ok = ok.union(locations{{dir: d}})
		}
		return ok, ok
	case "cd":
		args, physical := cdOptions(words[1:], f.physical)
		if f.cdpath && len(args) > 0 && viaCDPATH(args[0]) {
			return in.each(vague), in
		}
		if len(args) > 0 && args[0].dynamic {
			if targets := f.cdTargets(call, args[0]); len(targets)*len(in) <= maxLocations {
				var ok locations
				for _, t := range targets {
					ok = ok.union(in.each(func(l location) location { return l.moved(l.dir.cd(t, physical), l.stack) }))
				}
				if ok != nil {
					return ok, in
				}
			}
		}
		if len(args) > 0 && args[0].text == "-" && !args[0].dynamic && !strings.Contains(f.a.src, "OLDPWD") {
			// cd - goes back to the folder the line's last cd left; before one,
			// to what the run inherits. A line naming OLDPWD (unset OLDPWD) is
			// not followed so.
			return in.each(func(l location) location {
				if !l.oldSet {
					return l.moved(Dir{Vague: true}, l.stack)
				}
				return l.moved(l.old, l.stack)
			}), in
		}
		if len(args) == 0 || unknownTarget(args[0]) {
			return in.each(func(l location) location { return l.moved(Dir{Vague: true}, l.stack) }), in
		}
		t := args[0].text
		return in.each(func(l location) location { return l.moved(l.dir.cd(t, physical), l.stack) }), in
	case "pushd":
		args := words[1:]
		switch {
		case len(args) == 0: // swap the two top folders
			return in.each(func(l location) location {
				if len(l.stack) == 0 {
					return vagueLocation
				}
				n := len(l.stack) - 1
				return l.moved(l.stack[n], append(slices.Clone(l.stack[:n]), l.dir))
			}), in
		case len(args) > 1 || strings.HasPrefix(args[0].text, "-") || strings.HasPrefix(args[0].text, "+") || unknownTarget(args[0]) || f.cdpath && viaCDPATH(args[0]):
			return in.each(vague), in // -n, +N, -N: stack juggling this check does not follow
		}
		t := args[0].text
		return in.each(func(l location) location {
			if len(l.stack) >= maxLocations { // a stack this deep is not followed
				f.limit(call, "pushes more folders than this check follows")
				return vagueLocation
			}
			return l.moved(l.dir.cd(t, f.physical), append(slices.Clone(l.stack), l.dir))
		}), in
	case "popd":
		if len(words) > 1 {
			return in.each(vague), in
		}
		return in.each(func(l location) location {
			if len(l.stack) == 0 {
				return vagueLocation
			}
			n := len(l.stack) - 1
			return l.moved(l.stack[n], slices.Clone(l.stack[:n]))
		}), in
	}
	return in, in
}

// sourceTarget is the file `source args…` reads when the check can know which:
// a literal path with a slash. A name without one is looked up in PATH first, and
// an option (bash 5.3's -p PATH) changes where: "" for those and for a word known
// only when it runs.
func sourceTarget(args []field) string {
	if len(args) == 0 || unknownTarget(args[0]) || strings.HasPrefix(args[0].text, "-") || !strings.Contains(args[0].text, "/") {
		return ""
	}
	return args[0].text
}

// cdTargets are the folders cd's target arg, a word holding variables, may name as
// the line sets them (command_vars.go: `d=sub; cd $d`); nil when one is known only
// when it runs.
func (f *dirFlow) cdTargets(call *syntax.CallExpr, arg field) []string {
	for _, w := range call.Args {
		if !wordDynamic(w) || joinFields(expandWords(f.a.cfg, f.a.src, []*syntax.Word{w})) != arg.text {
			continue
		}
		vals, ok := f.a.resolve(w)
		if !ok {
			return nil
		}
		var out []string
		for _, v := range vals {
			// A value that is an option (x=-P; cd $x link/..) makes the next word
			// the target, read as it says: not followed.
			if v.glob || unknownTarget(v) || strings.HasPrefix(v.text, "-") {
				return nil
			}
			out = append(out, v.text)
		}
		return out
	}
	return nil
}

// cdOptions drops cd's options (-L, -P, -e, -@); physical is set by -P, unset by
// -L, whichever comes last, and else is what set -P made it (setP).
func cdOptions(args []field, setP bool) (rest []field, physical bool) {
	physical = setP
	for i, a := range args {
		switch {
		case a.text == "--":
			return args[i+1:], physical
		case len(a.text) < 2 || a.text[0] != '-' || a.dynamic:
			return args[i:], physical
		}
		for _, r := range a.text[1:] {
			switch r {
			case 'P':
				physical = true
			case 'L':
				physical = false
			}
		}
	}
	return nil, physical
}

// setsPhysical reports whether the line may turn on bash's physical option, with
// which cd and pushd resolve symbolic links before .. (set -P, set -o physical, an
// option cluster such as set -eP, SHELLOPTS=physical), or may set options this
// check cannot read (set $opts). It is read for the whole line, wherever the set
// stands: judging a cd as physical where it is logical only asks more.
func setsPhysical(f *syntax.File, a *analyzer) bool {
	if strings.Contains(a.src, "physical") {
		return true
	}
	if !strings.Contains(a.src, "set") {
		return false
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if found || !ok || len(call.Args) == 0 {
			return !found
		}
		words := literalWords(call.Args)
		if words == nil {
			words = expandWords(a.cfg, a.src, call.Args)
		}
		for len(words) > 0 && (words[0].text == "builtin" || words[0].text == "command") {
			words = words[1:]
		}
		if len(words) == 0 || words[0].text != "set" || words[0].dynamic {
			return true
		}
		for _, w := range words[1:] {
			switch {
			case w.dynamic || w.glob || strings.Contains(w.text, "$"):
				found = true // options known only when it runs
			case w.text == "--" || w.text == "-" || !strings.HasPrefix(w.text, "-") && !strings.HasPrefix(w.text, "+"):
				return true // positional parameters follow
			case strings.HasPrefix(w.text, "-") && strings.Contains(w.text, "P"):
				found = true
			}
		}
		return true
	})
	return found
}

// unknownTarget reports whether where cd goes is known only when it runs: $VAR,
// $(…), ~, -, a glob, an empty word.
// viaCDPATH reports whether bash looks the cd target a up in CDPATH: one that does
// not start with /, . or .. (CDPATH=/ cd usr goes to /usr).
func viaCDPATH(a field) bool {
	t := a.text
	return a.dynamic || strings.Contains(t, "$") || !(strings.HasPrefix(t, "/") || t == "." || t == ".." || strings.HasPrefix(t, "./") || strings.HasPrefix(t, "../") || t == "-" || strings.HasPrefix(t, "~"))
}

func unknownTarget(a field) bool {
	return a.dynamic || a.glob || a.text == "" || a.text == "-" || strings.HasPrefix(a.text, "~") || strings.Contains(a.text, "$")
}

// joinDirs are the folders inner (relative to a nested shell's start) lead to when
// that shell starts in one of outer (nil: the start only).
func joinDirs(outer, inner []Dir) []Dir {
	if len(outer) == 0 {
		return inner
	}
	if len(inner) == 0 {
		return outer
	}
	var out []Dir
	for _, o := range outer {
		for _, i := range inner {
			d := o.cd(i.Path, false)
			switch {
			case i.Vague && i.Script != "" && !path.IsAbs(i.Script) && o.Vague:
				d = Dir{Vague: true}
			case i.Vague && i.Script != "" && !path.IsAbs(i.Script) && o.Path != ".":
				d = Dir{Vague: true, Script: o.Path + "/" + i.Script}
			case i.Vague && i.Physical != "" && !path.IsAbs(i.Physical):
				d = Dir{Vague: true, Physical: o.physicalJoin(i.Physical)}
			case i.Vague:
				d = i
			}
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// literalWords are the words of a command written without quotes, escapes,
// expansions or globs (cd .skills/pdf), as the shell passes them; nil when one is
// not, which expandWords then reads.
func literalWords(args []*syntax.Word) []field {
	out := make([]field, len(args))
	for i, w := range args {
		lit := w.Lit()
		if lit == "" || strings.ContainsAny(lit, "\\{~*?[$'\"") {
			return nil
		}
		out[i] = field{text: lit}
	}
	return out
}

package approval

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Engine decides tool calls under one Config. It holds no per-session state and is
// safe for concurrent use.
type Engine struct {
	rules     []compiledRule
	overrides globTable[tool.Risk]
	subjects  globTable[Subject]
	policy    map[tool.Risk]Outcome
	immune    []string
	private   []string // cleaned absolute slash paths (Config.PrivateDirs)
	// privateReal holds the private dirs with symlinks resolved (as given when they
	// do not exist yet).
	privateReal []string
	readDirs    []string // Config.ReadDirs, symlinks resolved
	edit        map[string]bool
}

// NewEngine validates cfg, fills its defaults and compiles its rules.
func NewEngine(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Engine{
		overrides: newGlobTable(cfg.RiskOverrides),
		subjects:  newGlobTable(cfg.Subjects),
		policy:    cfg.RiskPolicy,
		edit:      map[string]bool{},
	}
	for _, r := range cfg.Rules {
		e.rules = append(e.rules, compileRule(r))
	}
	for _, p := range cfg.ImmunePaths {
		e.immune = append(e.immune, normalizeGlob(p))
	}
	for _, t := range cfg.EditTools {
		e.edit[t] = true
	}
	for _, d := range cfg.PrivateDirs {
		if d = path.Clean(filepath.ToSlash(d)); path.IsAbs(d) && d != "/" {
			e.private = append(e.private, d)
			real := d
			if r, err := filepath.EvalSymlinks(d); err == nil {
				real = path.Clean(filepath.ToSlash(r))
			}
			e.privateReal = append(e.privateReal, real)
		}
	}
	for _, d := range cfg.ReadDirs {
		if filepath.IsAbs(d) {
			if real, err := filepath.EvalSymlinks(d); err == nil {
				d = real
			}
			e.readDirs = append(e.readDirs, path.Clean(filepath.ToSlash(d)))
		}
	}
	return e, nil
}

// ValidateRule reports whether a rule, such as one an approver accepted, fits the
// tool it names, so that callers can refuse it before storing it.
func (e *Engine) ValidateRule(r Rule) error {
	return validateRule(r, e.subjects)
}

// check is one request being decided.
type check struct {
	e         *Engine
	req       Request
	name      string
	mode      Mode
	risk      tool.Risk
	riskWhy   string // where the tool's risk comes from, for reasons; "" when from its nature
	readOnly  bool
	cmd       *CommandAnalysis
	command   string // the command line, for command tools
	startDir  string // the directory the command starts in, as the call gives it ("": the working directory)
	start     string // commandDir, worked out once
	startDone bool
	startOnly []string // wordDirs of a command that runs where the line starts
	// wordDirs' previous answer: the commands of a line mostly share their Dirs.
	lastDs    []Dir
	lastDirs  []string
	lastVague bool
	path      *pathSubject
	immune    string
	rules     []compiledRule

	// Reads outside the working directory (reads_outside.go), worked out once.
	outside     string
	outsideOf   []string // per simple command: what it reads outside, or ""
	outsideDone bool
	workReal    string
	workDone    bool
}

// Check decides one call. Order: deny rules, explore mode, immune asks, ask rules,
// the read-only fast path, the tool's own Checker, allow rules, then the mode's
// fallback (the risk policy). Asks then become allows in bypass mode (unless
// immune) and denies in dont_ask mode.
func (e *Engine) Check(req Request) Decision {
	if req.Tool == nil {
		return Decision{Outcome: Deny, Reason: "there is no tool to check", Risk: tool.RiskCritical}
	}
	c := e.prepare(req)
	d := c.decide()
	d.Risk, d.ReadOnly = c.risk, c.readOnly
	if c.cmd != nil {
		d.Findings = c.cmd.Findings
	}
	return c.finish(d)
}

func (e *Engine) prepare(req Request) *check {
	spec := req.Tool.Spec()
	c := &check{e: e, req: req, name: spec.Name, mode: req.Mode, readOnly: spec.ReadOnly, risk: normalRisk(spec.Risk), riskWhy: spec.RiskWhy}
	if !c.mode.Valid() || c.mode == "" {
		c.mode = ModeDefault
	}
	if r, ok := e.overrides.lookup(c.name); ok {
		c.risk, c.riskWhy = r, "set by permissions.risk_overrides"
	}
	c.rules = e.rules
	if len(req.SessionRules) > 0 {
		c.rules = make([]compiledRule, 0, len(e.rules)+len(req.SessionRules))
		c.rules = append(c.rules, e.rules...)
		for _, r := range req.SessionRules {
			c.rules = append(c.rules, compileRule(r))
		}
	}
	s, ok := e.subjects.lookup(c.name)
	if !ok {
		return c
	}
	val, present := stringArg(req.Args, s.Arg)
	if !present && s.Default != "" {
		val, present = s.Default, true
	}
	switch s.Kind {
	case SubjectCommand:
		if s.Dir != "" {
			c.startDir, _ = stringArg(req.Args, s.Dir)
		}
		a := AnalyzeCommand(val)
		c.cmd, c.command = &a, val
		c.risk = maxRisk(c.risk, a.Risk)
		c.readOnly = a.ReadOnly && present
		c.immune = c.commandImmune(present)
	case SubjectPath:
		if !present {
			return c
		}
		ps := newPathSubject(val, req.Workdir)
		c.path = &ps
		if !c.readOnly {
			if g := e.immunePath(ps); g != "" {
				c.immune = fmt.Sprintf("%s would change %q, a protected path (%s)", c.name, val, g)
			}
		}
	}
	return c
}

func (c *check) commandImmune(present bool) string {
	if !present {
		return "the call carries no command to check"
	}
	var parts []string
	if c.cmd.Immune {
		for _, f := range c.cmd.Findings {
			if f.Immune || f.Risk != "" {
				parts = append(parts, f.String())
			}
		}
	} else if f := c.vagueDeleteImmune(); f != "" {
		parts = append(parts, f)
	} else if f := c.climbsToCritical(); f != "" {
		parts = append(parts, f)
	} else if f := c.kernelWrite(); f != "" {
		parts = append(parts, f)
	}
	// A protected path is named too when something else forces the ask:
	// (cd ~ && rm -rf .ssh) deletes from a folder known only when it runs, and
	// maybe the working directory's .ssh.
	if p := c.protectedWrite(); p != "" {
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		return strings.Join(parts, "; ")
	}
	if r := c.readsPrivate(); r != "" {
		return r
	}
	return c.readsPrivateWithin()
}

// climbsToCritical judges the danger of a command whose relative words lead out of
// the working directory (by .., or from a folder a cd led to outside it) as what
// they name from where it runs: from /work/proj, rm -rf ../../usr and cd ../..
// && rm -rf usr are rm -rf /usr, which the analysis, knowing no folder, took for
// files outside the working directory (high risk). A critical finding so is
// immune as the analysis's own; its text is returned, or "".
func (c *check) climbsToCritical() string {
	work := ""
	if c.req.Workdir != "" {
		work = path.Clean(filepath.ToSlash(c.req.Workdir))
	}
	for _, sc := range c.cmd.Commands {
		dirs, _ := c.wordDirs(sc.Dirs)
		for _, words := range append([][]string{sc.Words}, sc.Runs...) {
			climbing := slices.ContainsFunc(words, func(w string) bool { return strings.Contains(w, "..") })
			for _, dir := range dirs {
				if dir == "" || !filepath.IsAbs(dir) || !climbing && (work == "" || within(filepath.ToSlash(dir), work)) {
					continue
				}
				abs := slices.Clone(words)
				changed := false
				for i, w := range abs[1:] {
					if w == "" || strings.HasPrefix(w, "-") || path.IsAbs(w) || strings.HasPrefix(w, "~") || strings.Contains(w, "$") {
						continue
					}
					p := path.Join(filepath.ToSlash(dir), w)
					if work != "" && within(p, work) {
						continue
					}
					abs[i+1], changed = p, true
				}
				if !changed {
					continue
				}
				b := &analyzer{src: c.command, cfg: newExpandConfig()}
				b.danger(sc.Text, abs)
				for _, f := range b.res.Findings {
					if f.Risk == tool.RiskCritical {
						c.cmd.Findings = append(c.cmd.Findings, f)
						c.risk = tool.RiskCritical
						return f.String()
					}
				}
			}
		}
	}
	return ""
}

// protectedWrite names a path the command may write that an immune glob protects,
// or "".
func (c *check) protectedWrite() string {
	for _, w := range c.cmd.writeSites {
		dirs, _ := c.wordDirs(w.dirs)
		for _, dir := range dirs {
			if g := c.e.immunePath(c.wordSubjectFrom(w.path, dir)); g != "" {
				return fmt.Sprintf("the command may change %q, a protected path (%s)", w.path, g)
			}
		}
	}
	return ""
}

// readsPrivate names a path of the command (any word that looks like one, cd's too)
// that lies in a private dir, outside the session's working directory when that is
// inside the private dir (its own workspace). A working directory that contains a
// private dir (the default data dir "data" under a checkout) reaches it by a bare
// name ("ls data"), so then every word is read as a path.
func (c *check) readsPrivate() string {
	if len(c.e.private) == 0 {
		return ""
	}
	workdir := ""
	if c.req.Workdir != "" {
		workdir = path.Clean(filepath.ToSlash(c.req.Workdir))
	}
	bare := false // a private dir lies inside the working directory
	for _, d := range c.e.private {
		bare = bare || (workdir != "" && d != workdir && within(d, workdir))
	}
	for _, sc := range c.cmd.Commands {
		dirs, vague := c.physicalDirs(sc.Dirs)
		for _, words := range append([][]string{sc.Words}, sc.Runs...) {
			// A glob that matches the data dir itself enters or lists it here.
			enter := len(words) > 0 && slices.Contains([]string{"cd", "pushd", "ls", "env", "dir", "vdir"}, path.Base(words[0])) &&
				!slices.ContainsFunc(words[1:], func(a string) bool { // ls -d lists the folder, not its entries
					return a == "--directory" || len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'd') && path.Base(words[0]) != "env"
				})
			// sed expands no globs: a * in its script is a regex's (the files
			// its r and w commands name are judged from sedScriptEffects).
			var sedScript []string
			if len(words) > 0 && path.Base(words[0]) == "sed" {
				sedScript, _ = sedScripts(words[1:])
			}
			text := len(words) > 0 && textPrograms[path.Base(words[0])]
			for _, w := range words {
				globs := !slices.ContainsFunc(sedScript, func(s string) bool {
					return w == s || strings.HasPrefix(w, "-") && strings.HasSuffix(w, s)
				})
				// A word holding a variable the line sets is judged by every value
				// it may take (x=data; cat $x/admin.key).
				cands := []field{{text: w, glob: strings.ContainsAny(w, "*?[")}}
				if vals := sc.values[w]; strings.Contains(w, "$") && vals != nil {
					cands = vals
				}
				for _, f := range cands {
					if r := c.wordPrivate(f.text, f.glob, enter, dirs, vague, bare, workdir, sc.Dirs); r != "" {
						if f.text != w {
							return fmt.Sprintf("%s, which %q may be", r, w)
						}
						return r
					}
					if r := c.embeddedPrivate(f.text, globs, text && f.text == w, dirs, vague, bare, workdir, sc.Dirs); r != "" {
						return r
					}
				}
			}
		}
	}
	// A here-string or here-document that a shell or interpreter runs as code
	// (bash <<< 'cat data/admin.key'), or that read or mapfile takes as values
	// (read p <<< /var/lib/toolserverd; cat $p/admin.key), names the paths in it
	// as words would; only pieces with a slash count, a bare name is no path.
	// Text another program is handed (cat > notes.md <<EOF) names nothing.
	for _, sc := range c.cmd.Commands {
		if len(sc.input) == 0 || !runsInput(sc) && !(len(sc.Words) > 0 && slices.Contains([]string{"read", "mapfile", "readarray"}, sc.Words[0])) {
			continue
		}
		dirs, vague := c.physicalDirs(sc.Dirs)
		for _, text := range sc.input {
			t := strings.TrimSpace(text)
			r := ""
			if strings.Contains(t, "/") && !strings.ContainsAny(t, " \t\n") {
				r = c.wordPrivate(t, false, false, dirs, vague, false, workdir, sc.Dirs)
			}
			if r == "" {
				r = c.embeddedPrivate(text, true, false, dirs, vague, false, workdir, sc.Dirs)
			}
			if r != "" {
				return r + ", in the text it reads from its input"
			}
		}
	}
	// The value of an assignment names a path a later word may take, even where the
	// line's variables are not followed (x=data/admin.key; IFS=:; cat $x).
	for _, site := range c.cmd.assigned {
		dirs, vague := c.physicalDirs(site.dirs)
		if r := c.wordPrivate(site.path, false, false, dirs, vague, bare, workdir, site.dirs); r != "" {
			return r
		}
		if r := c.embeddedPrivate(site.path, true, false, dirs, vague, bare, workdir, site.dirs); r != "" {
			return r
		}
	}
	// The paths xargs or tar -T - reads from a here-string or here-document are
	// names the line gives: xargs cat <<< data/admin.key is cat data/admin.key.
	for _, sc := range c.cmd.Commands {
		if len(sc.input) == 0 || !readsPathsFromInput(sc) {
			continue
		}
		dirs, vague := c.physicalDirs(sc.Dirs)
		for _, text := range sc.input {
			for _, line := range strings.Split(text, "\n") {
				for _, w := range append([]string{strings.TrimSpace(line)}, strings.Fields(line)...) {
					if w == "" {
						continue
					}
					if r := c.wordPrivate(w, false, false, dirs, vague, bare, workdir, sc.Dirs); r != "" {
						return r + ", which it reads from its input"
					}
				}
			}
		}
	}
	// Redirections are no words: cat < data/admin.key, echo x > data/admin.key.
	for i, site := range append(slices.Clip(c.cmd.inputSites), c.cmd.writeSites...) {
		enter := i < len(c.cmd.inputSites) // env -C d?ta
		dirs, vague := c.physicalDirs(site.dirs)
		cands := []field{{text: site.path, glob: strings.ContainsAny(site.path, "*?[")}}
		if strings.Contains(site.path, "$") && len(site.values) > 0 {
			cands = site.values
		}
		if d := paramDefaults(site.src); d != "" {
			cands = append(slices.Clip(cands), field{text: d}) // > ${X:-data/admin.key}
		}
		for _, f := range cands {
			if r := c.wordPrivate(f.text, f.glob, enter, dirs, vague, bare, workdir, site.dirs); r != "" {
				if f.text != site.path {
					return fmt.Sprintf("%s, which %q may be", r, site.path)
				}
				return r
			}
		}
	}
	return ""
}

// embeddedPrivate names a path to a private dir written inside the longer text w
// (sed '1r data/admin.key', python -c 'open("data/admin.key")', -v ./data:/d,
// -F f=@data/admin.key), or returns "". The pieces of w between quotes, blanks and
// the punctuation that separates a path from what surrounds it in a script or an
// option's value are judged as words, when they hold a slash or are "..": a bare
// name inside a sentence ("keep the data") is no path. A piece with * or ? is
// matched as a glob, unless globs is false (text that expands none, a sed script);
// text says w is a word of a textPrograms command.
func (c *check) embeddedPrivate(w string, globs, text bool, dirs []string, vague, bare bool, workdir string, ds []Dir) string {
	for _, tok := range embeddedPaths(w, text) {
		if r := c.wordPrivate(tok, globs && strings.ContainsAny(tok, "*?"), false, dirs, vague, bare, workdir, ds); r != "" {
			return fmt.Sprintf("%s, inside %q", r, clip(w, 80))
		}
	}
	return ""
}

// embeddedPaths are the pieces of w, other than w itself, that may be paths.
func embeddedPaths(w string, text bool) []string {
	if !strings.Contains(w, "/") && !strings.Contains(w, "..") {
		return nil
	}
	var out []string
	start := -1
	for i := 0; i <= len(w); i++ {
		if i < len(w) && !strings.ContainsRune(" \t\n\r'\"`<>|;&(){}[],=:@!", rune(w[i])) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start < 0 {
			continue
		}
		tok := w[start:i]
		if tok != w && (tok == ".." && !refRange(w[:start]) && !(text && textDots(w, start, i)) || strings.Contains(tok, "/")) && !slices.Contains(out, tok) {
			out = append(out, tok)
		}
		start = -1
	}
	return out
}

// textDots reports whether the .. at w[start:end] is set apart by a blank or a |
// on a side: in the text echo and printf print, or a jq filter (its recursive
// descent, jq '.. | .id'), it names no folder.
func textDots(w string, start, end int) bool {
	return start > 0 && strings.ContainsRune(" \t\n\r|", rune(w[start-1])) ||
		end < len(w) && strings.ContainsRune(" \t\n\r|", rune(w[end]))
}

// textPrograms take their words as text or a filter, never as code or paths run
// elsewhere: their files are words of their own.
var textPrograms = map[string]bool{"echo": true, "printf": true, "jq": true, "gojq": true, "yq": true}

// refRange reports whether text ends with git's ref@{…} (@{u}, HEAD@{1}), after
// which .. opens a range of commits (git log @{u}..), not a folder.
func refRange(text string) bool {
	i := strings.LastIndex(text, "@{")
	return i >= 0 && strings.HasSuffix(text, "}") && !strings.ContainsAny(text[i+2:len(text)-1], "{}/ \t\n'\"")
}

// runsInput reports whether sc runs the code on its input: a shell or an
// interpreter given no script (bash, sh -s, python3 -).
func runsInput(sc SimpleCommand) bool {
	for _, words := range append([][]string{sc.Words}, sc.Runs...) {
		if len(words) > 0 && (shellNames[path.Base(words[0])] || interpreters[path.Base(words[0])]) && readsStdin(words[1:]) || sourcesInput(words) {
			return true
		}
	}
	return false
}

// readsPathsFromInput reports whether sc takes the paths it works on from its
// input: xargs, tar -T -, cpio -o, zip -@ (pathList).
func readsPathsFromInput(sc SimpleCommand) bool {
	if sc.argsFromInput {
		return true
	}
	for _, words := range append([][]string{sc.Words}, sc.Runs...) {
		switch pathList(words) {
		case "its input", `"/dev/stdin"`, `"/dev/fd/0"`, `"/proc/self/fd/0"`:
			return true
		}
	}
	return false
}

// wordPrivate names the word w, read from each of dirs, when it names a path in a
// private dir or a link into one, or returns "".
func (c *check) wordPrivate(w string, glob, enter bool, dirs []string, vague, bare bool, workdir string, ds []Dir) string {
	if _, v, ok := strings.Cut(w, "="); ok {
		w = v // --file=PATH
	}
	w = pwdRelative(w)
	if procOther(w) {
		return fmt.Sprintf("the command names %q, another process's folder or open files under /proc (the daemon's among them: its database, its working directory), which cannot be checked", w)
	}
	if dir, rest, ok := sandboxHomeWord(w); ok {
		if climbsOut(rest) {
			return fmt.Sprintf("the command names %q, which climbs out of %s (HOME and TMPDIR lie in the daemon's data directory, with other sessions' files)", w, dir)
		}
		return "" // the sandbox's own
	}
	// A word that is no path by its look may still be a symlink into
	// the data dir: only where it leads is checked for it.
	byName := bare || w == ".." || strings.Contains(w, "/")
	if byName && vague && climbs(w) && c.vagueUntrusted(ds) {
		return fmt.Sprintf("the command names %q after a change to a folder known only when it runs (a cd to ~ or $VAR, a sourced script; HOME and TMPDIR lie in the daemon's data directory)", w)
	}
	for _, dir := range dirs {
		ps := c.wordSubjectFrom(w, dir)
		if ps.abs == "" {
			continue
		}
		for _, d := range c.e.private {
			if byName && within(ps.abs, d) && !(ps.inside && within(workdir, d)) {
				return fmt.Sprintf("the command names %q, in the daemon's data directory (its keys, its database, other sessions' files)", w)
			}
		}
		if real := c.linkTarget(ps.abs); real != "" && c.inPrivate(real) {
			return fmt.Sprintf("the command names %q, a link to %q in the daemon's data directory (its keys, its database, other sessions' files)", w, real)
		}
		if glob && strings.ContainsAny(w, "*?[") {
			if r := c.globPrivate(w, ps.abs, workdir, enter); r != "" {
				return r
			}
		}
	}
	return ""
}

// globPrivate names the glob w (pattern: it read from its folder, clean and
// absolute) when it may match a path inside a private dir (cat */admin.key with
// the data dir "data" in the checkout), or a link into one, or returns "". Matching
// a private dir itself is reading in it only for a command that enters or lists
// it (enter: cd dat?, ls d*), not for cat * or grep x *.
func (c *check) globPrivate(w, pattern, workdir string, enter bool) string {
	pat := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	for _, d := range c.e.private {
		if within(workdir, d) && within(globBase(pattern), workdir) {
			continue // the session's own workspace
		}
		dc := strings.Split(strings.TrimPrefix(d, "/"), "/")
		if d == "/" || len(pat) < len(dc) || len(pat) == len(dc) && !enter {
			continue
		}
		reaches := true
		for i, part := range dc {
			if ok, err := path.Match(pat[i], part); !ok || err != nil {
				reaches = false
				break
			}
		}
		if reaches {
			return fmt.Sprintf("the command names %q, which may match files in the daemon's data directory (its keys, its database, other sessions' files)", w)
		}
	}
	if strings.Count(pattern, "*")+strings.Count(pattern, "?")+strings.Count(pattern, "[") > 4 {
		return "" // too wide to list on disk
	}
	matches, _ := filepath.Glob(filepath.FromSlash(pattern))
	for i, m := range matches {
		if i == 1000 {
			break
		}
		if real := c.linkTarget(m); real != "" && c.inPrivate(real) {
			return fmt.Sprintf("the command names %q, which matches %q, a link into the daemon's data directory (its keys, its database, other sessions' files)", w, m)
		}
	}
	return ""
}

// globBase is the folder a clean absolute glob pattern lists from: its part before
// the first component holding a glob character.
func globBase(pattern string) string {
	i := strings.IndexAny(pattern, "*?[")
	if i < 0 {
		return pattern
	}
	if j := strings.LastIndex(pattern[:i], "/"); j > 0 {
		return pattern[:j]
	}
	return "/"
}

// sandboxHomeWord splits a word under the command's HOME or TMPDIR (~, $HOME,
// $TMPDIR, as the shell or a program would expand them) into that folder and the
// rest of the path.
func sandboxHomeWord(w string) (dir, rest string, ok bool) {
	for _, d := range []string{"~", "$HOME", "${HOME}", "$TMPDIR", "${TMPDIR}"} {
		if r, found := strings.CutPrefix(w, d); found && (r == "" || r[0] == '/') {
			return d, r, true
		}
	}
	return "", "", false
}

// climbsOut reports whether the path rest, read below a folder, leaves it by ..
// (/x/../.. does, /x/.. does not).
func climbsOut(rest string) bool {
	depth := 0
	for _, part := range strings.Split(rest, "/") {
		switch part {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// procOther reports whether w names, under /proc, the folders or open files of a
// process other than the one that runs it: /proc/PID/cwd, root, fd, map_files,
// environ, mem or task (PID a number, a variable such as $PPID, or a glob), a
// thread's under /proc/self/task, or the folders of the line's own shell
// (/proc/$$/cwd, /proc/$$/root). Where they lead is the other process's
// business, the daemon's own folder and its open database among them.
func procOther(w string) bool {
	rest, ok := strings.CutPrefix(path.Clean(w), "/proc/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 {
		return false
	}
	pid, entry := parts[0], parts[1]
	// $$ is the line's own shell: its open files and environment are its
	// commands' (as /proc/self's are), but not its folders: a subshell's cd leaves
	// its cwd behind where the check cannot follow it, and its root is not
	// resolved on disk as /proc/self/root is.
	shell := pid == "$$" || pid == "${$}"
	switch {
	case pid == "self" || pid == "thread-self" || shell:
		if entry == "task" && len(parts) >= 4 {
			entry = parts[3]
		} else if !shell || (entry != "cwd" && entry != "root") {
			return false
		}
	case !allDigits(pid) && !strings.ContainsAny(pid, "$*?["):
		return false
	}
	switch entry {
	case "cwd", "root", "fd", "map_files", "environ", "mem", "task":
		return true
	}
	return false
}

// pwdRelative reads a word that starts with ~+ or $PWD, the folder the shell
// stands in (or /proc/self/cwd, the folder of the process that reads it), as one
// relative to it: ~+/data/admin.key is ./data/admin.key.
func pwdRelative(w string) string {
	for _, pwd := range []string{"~+", "$PWD", "${PWD}", "/proc/self/cwd", "/proc/thread-self/cwd"} {
		if rest, ok := strings.CutPrefix(w, pwd); ok && (rest == "" || rest[0] == '/') {
			return "." + rest
		}
	}
	return w
}

// linkTarget is where the path p leads when a symlink on the way makes it differ from
// p ("" when it does not, or p's folder does not exist): for a path that does not
// exist yet (a file a command would create), its folder's target.
func (c *check) linkTarget(p string) string {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return ""
		}
		real = filepath.Join(dir, filepath.Base(p))
	}
	if real = filepath.ToSlash(real); real == path.Clean(filepath.ToSlash(p)) {
		return ""
	}
	return real
}

// inPrivate reports whether the resolved path real lies in a private dir (resolved
// too), other than in the session's own working directory inside one.
func (c *check) inPrivate(real string) bool {
	work := c.workdirReal()
	for _, d := range c.e.privateReal {
		if within(real, d) && !(work != "" && within(real, work) && within(work, d)) {
			return true
		}
	}
	return false
}

// commandDir is the directory the command starts in: the working directory, or the
// folder the call's cwd names (relative to the working directory, or absolute). ""
// when neither is absolute.
func (c *check) commandDir() string {
	dir := c.startDir
	if dir == "" || !filepath.IsAbs(dir) {
		if c.req.Workdir == "" || !filepath.IsAbs(c.req.Workdir) {
			return ""
		}
		dir = filepath.Join(c.req.Workdir, dir)
	}
	return filepath.Clean(dir)
}

// wordSubjectFrom reads a word of the command as a path from dir ("" or the working
// directory: as newPathSubject does), judged against the working directory.
func (c *check) wordSubjectFrom(w, dir string) pathSubject {
	if dir == "" || dir == c.req.Workdir || strings.HasPrefix(w, "~") || filepath.IsAbs(w) {
		return newPathSubject(w, c.req.Workdir)
	}
	ps := newPathSubject(filepath.Join(dir, w), c.req.Workdir)
	ps.raw = w
	return ps
}

// wordDirs are the folders the relative words of a simple command that runs in ds
// (SimpleCommand.Dirs; nil: where the line starts) are read from: commandDir joined
// with each. vague is set when one of them is known only when it runs (after cd $VAR,
// cd ~, cd -, a sourced script): a word that climbs out of its folder then cannot be
// judged; its other words are read from where the line starts, as written. Without
// an absolute start, words are read from the working directory as given.
func (c *check) wordDirs(ds []Dir) (dirs []string, vague bool) {
	if !c.startDone {
		c.startDone, c.start = true, c.commandDir()
	}
	if c.start == "" {
		if c.startOnly == nil {
			c.startOnly = []string{c.req.Workdir}
		}
		return c.startOnly, false
	}
	if len(ds) == 0 || len(ds) == 1 && ds[0] == startDir {
		if c.startOnly == nil {
			c.startOnly = []string{c.start}
		}
		return c.startOnly, false
	}
	if len(ds) == len(c.lastDs) && &ds[0] == &c.lastDs[0] {
		return c.lastDirs, c.lastVague
	}
	defer func() { c.lastDs, c.lastDirs, c.lastVague = ds, dirs, vague }()
	dirs = make([]string, 0, len(ds))
	for _, d := range ds {
		dir := c.start
		switch {
		case d.Vague:
			vague = true
		case path.IsAbs(d.Path):
			dir = filepath.Clean(filepath.FromSlash(d.Path))
		case d.Path != ".":
			dir = filepath.Join(c.start, filepath.FromSlash(d.Path))
		}
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs, vague
}

// physicalDirs are wordDirs(ds) and, for the data-dir checks, the folders a cd
// that resolves links before .. (Dir.Physical) leads to on disk now: cd -P
// elink/.. && cat proj/data/admin.key reads the data dir when elink's target's
// parent holds it. A path that does not resolve is left out: the cd would fail.
func (c *check) physicalDirs(ds []Dir) (dirs []string, vague bool) {
	dirs, vague = c.wordDirs(ds)
	if !vague || c.start == "" {
		return dirs, vague
	}
	var out []string
	for _, d := range ds {
		if d.Physical == "" {
			continue
		}
		p := filepath.FromSlash(d.Physical)
		if !filepath.IsAbs(p) {
			p = c.start + string(filepath.Separator) + p // unclean: the disk reads elink/..
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if out == nil {
			out = slices.Clone(dirs)
		}
		if !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	if out == nil {
		return dirs, vague
	}
	return out, vague
}

// climbs reports whether the relative path w starts by leaving its folder (..).
func climbs(w string) bool {
	w = path.Clean(filepath.ToSlash(w))
	return w == ".." || strings.HasPrefix(w, "../")
}

// joinDir is where cd target leads from dir.
func joinDir(dir, target string) string {
	if filepath.IsAbs(target) {
		return filepath.Clean(target)
	}
	return filepath.Join(dir, target)
}

// within reports whether the clean absolute slash path p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func (e *Engine) immunePath(ps pathSubject) string {
	for _, g := range e.immune {
		if matchPath(g, ps) {
			return g
		}
	}
	return ""
}

func stringArg(args json.RawMessage, name string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return "", false
	}
	raw, ok := m[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func (c *check) decide() Decision {
	if r, part := c.match(Deny); r != nil {
		return Decision{Outcome: Deny, Rule: r, Reason: "denied by the rule deny " + r.String() + part}
	}
	if c.mode == ModeExplore && !c.readOnly {
		return Decision{Outcome: Deny, Reason: "the session is in explore mode, which is read-only, and " + c.what() + " could change something"}
	}
	if c.immune != "" {
		if c.e.policy[c.risk] == Deny {
			return Decision{Outcome: Deny, Reason: fmt.Sprintf("%s has %s risk, which the policy denies: %s", c.what(), c.risk, c.immune)}
		}
		return Decision{Outcome: Ask, Immune: true, Reason: c.immune + "; a person must approve this call, whatever the rules and mode say"}
	}
	if r, part := c.match(Ask); r != nil {
		return Decision{Outcome: Ask, Rule: r, Reason: "the rule ask " + r.String() + " requires approval" + part}
	}
	outside := c.readsOutside()
	if c.readOnly && outside == "" {
		return Decision{Outcome: Allow, Reason: c.what() + " is read-only"}
	}
	pending := ""
	if ch, ok := c.req.Tool.(Checker); ok {
		out, why := ch.CheckPermission(c.req.Args)
		switch out {
		case Deny:
			return Decision{Outcome: Deny, Reason: cmpOr(why, c.name+" refused this call")}
		case Allow:
			return Decision{Outcome: Allow, Reason: cmpOr(why, c.name+" allowed this call")}
		case Ask:
			pending = cmpOr(why, c.name+" asks for approval of this call")
		}
	}
	if rules := c.allowed(); len(rules) > 0 {
		names := make([]string, len(rules))
		for i, r := range rules {
			names[i] = r.String()
		}
		return Decision{Outcome: Allow, Rule: rules[0], Reason: "allowed by the rule allow " + strings.Join(names, ", allow ")}
	}
	writesVague := ""
	if c.cmd != nil && c.mode != ModeBypass {
		writesVague = c.writesVague()
	}
	switch {
	case c.mode == ModeBypass:
		return Decision{Outcome: Allow, Reason: "bypass mode allows every call that is not denied or protected"}
	case outside != "":
		return Decision{Outcome: Ask, Reason: outside + ", outside the session's working directory: reading outside it needs approval", Suggestions: c.suggest()}
	case writesVague != "":
		return Decision{Outcome: Ask, Reason: writesVague + ": writing where only the run knows needs approval", Suggestions: c.suggest()}
	case pending != "":
		return Decision{Outcome: Ask, Reason: pending, Suggestions: c.suggest()}
	case c.mode == ModeAcceptEdits && c.e.edit[c.name] && c.path != nil && c.path.inside:
		return Decision{Outcome: Allow, Reason: "accept_edits mode allows " + c.name + " inside the working directory"}
	}
	switch c.e.policy[c.risk] {
	case Allow:
		return Decision{Outcome: Allow, Reason: fmt.Sprintf("%s risk is allowed by the policy", c.risk)}
	case Deny:
		return Decision{Outcome: Deny, Reason: fmt.Sprintf("%s has %s risk%s, which the policy denies%s", c.what(), c.risk, c.why(), c.detail())}
	}
	return Decision{Outcome: Ask, Reason: fmt.Sprintf("%s has %s risk%s and needs approval%s", c.what(), c.risk, c.why(), c.detail()), Suggestions: c.suggest()}
}

// finish applies what bypass and dont_ask do to an ask.
func (c *check) finish(d Decision) Decision {
	if d.Outcome != Ask {
		d.Immune, d.Suggestions = false, nil
		return d
	}
	switch {
	case c.mode == ModeDontAsk:
		d.Outcome, d.Immune, d.Suggestions = Deny, false, nil
		d.Reason += "; the session is in dont_ask mode, which never asks, so the call is denied"
	case c.mode == ModeBypass && !d.Immune:
		d.Outcome, d.Suggestions = Allow, nil
		d.Reason = "bypass mode allows it (it would otherwise ask: " + d.Reason + ")"
	}
	return d
}

// what names the call in reasons.
func (c *check) what() string {
	switch {
	case c.cmd != nil:
		return fmt.Sprintf("the command %q", clip(c.command, 120))
	case c.path != nil:
		return fmt.Sprintf("%s on %q", c.name, c.path.raw)
	}
	return c.name
}

// why says where the tool's risk comes from, when the tool says or an override set
// it; "" for a command (detail explains those) or a tool whose risk is its own.
func (c *check) why() string {
	if c.riskWhy == "" || c.cmd != nil {
		return ""
	}
	return " (" + c.riskWhy + ")"
}

// detail explains a command's risk: what the analysis found and which parts are
// not read-only.
func (c *check) detail() string {
	if c.cmd == nil {
		return ""
	}
	var parts []string
	for _, f := range c.cmd.Findings {
		parts = append(parts, f.String())
	}
	var notRO []string
	for _, sc := range c.cmd.Commands {
		if !sc.ReadOnly {
			notRO = append(notRO, fmt.Sprintf("%q", clip(sc.Text, 60)))
		}
	}
	if len(notRO) > 0 {
		parts = append(parts, strings.Join(notRO, ", ")+" "+map[bool]string{true: "is", false: "are"}[len(notRO) == 1]+" not known to be read-only")
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}

// match finds the first rule of an action that matches the call; for commands,
// matching any part of the command line is enough.
func (c *check) match(action Outcome) (*Rule, string) {
	for i := range c.rules {
		r := &c.rules[i]
		if r.Action != action || !nameMatch(r.Tool, c.name) {
			continue
		}
		switch {
		case r.any:
			return ruleCopy(r), ""
		case c.cmd != nil:
			for _, sc := range c.cmd.Commands {
				for _, v := range views(sc) {
					if r.matchWords(v) {
						return ruleCopy(r), fmt.Sprintf(" (it matches %q)", clip(sc.Text, 80))
					}
				}
			}
		case c.path != nil:
			if r.pathErr == nil && matchPath(r.pathGlob, *c.path) {
				return ruleCopy(r), ""
			}
		}
	}
	return nil, ""
}

func ruleCopy(r *compiledRule) *Rule {
	out := r.Rule
	return &out
}

// views are every form of a command deny and ask rules are tried on: as written,
// without wrappers, what it runs, and each of those with a path-named program
// (/bin/rm) reduced to its name.
func views(sc SimpleCommand) [][]string {
	out := make([][]string, 0, 2+len(sc.Runs))
	out = append(out, sc.raw, sc.Words)
	out = append(out, sc.Runs...)
	for _, v := range out[:len(out):len(out)] {
		if len(v) > 0 && strings.Contains(v[0], "/") {
			b := append([]string{path.Base(v[0])}, v[1:]...)
			out = append(out, b)
		}
	}
	return out
}

// allowed returns the allow rules that together cover the call, or nil. A command
// line is covered only when every part of it is read-only or allowed.
func (c *check) allowed() []*Rule {
	var used []*Rule
	for i := range c.rules {
		r := &c.rules[i]
		if r.Action == Allow && r.any && nameMatch(r.Tool, c.name) {
			return []*Rule{ruleCopy(r)}
		}
	}
	switch {
	case c.cmd != nil:
		if len(c.cmd.Commands) == 0 || c.redirectsOutside() != "" {
			return nil
		}
		argsOutside := c.argsOutside() != ""
		for i, sc := range c.cmd.Commands {
			readsOutside := c.partReadsOutside(i)
			if sc.ReadOnly && !readsOutside {
				continue
			}
			r := c.allowRule(sc)
			if r == nil || (argsOutside || readsOutside || c.sourcesUnknown(sc)) && isPrefixRule(r) {
				return nil
			}
			used = appendRule(used, r)
		}
	case c.path != nil:
		for i := range c.rules {
			r := &c.rules[i]
			if r.Action == Allow && nameMatch(r.Tool, c.name) && r.pathErr == nil && matchPath(r.pathGlob, *c.path) {
				return []*Rule{ruleCopy(r)}
			}
		}
	}
	return used
}

func (c *check) allowRule(sc SimpleCommand) *Rule {
	if sc.unsafeEnv {
		return nil
	}
	for i := range c.rules {
		r := &c.rules[i]
		if r.Action == Allow && nameMatch(r.Tool, c.name) && r.matchAllow(sc) {
			return ruleCopy(r)
		}
	}
	return nil
}

func appendRule(list []*Rule, r *Rule) []*Rule {
	for _, x := range list {
		if *x == *r {
			return list
		}
	}
	return append(list, r)
}

// A command rule allows commands, inside the working directory. It does not cover
// a redirection to a file outside it (or to a path known only at run time: $VAR,
// ~), which the rule's words do not show: such a command asks every time. Nor does
// a prefix rule (`git commit:*`) cover an argument naming a path outside it; an
// exact rule, which names every word, does.

// isPrefixRule reports whether r allows a command prefix (`git commit:*`).
func isPrefixRule(r *Rule) bool { return strings.HasSuffix(r.Pattern, ":*") }

// redirectsOutside names a redirection target outside the working directory.
func (c *check) redirectsOutside() string {
	for _, w := range c.cmd.writeSites {
		if !w.redirect {
			continue
		}
		if strings.HasPrefix(w.path, "~") || strings.Contains(w.path, "$") || c.siteVague(w) || !c.siteInside(w) {
			return w.path
		}
	}
	return ""
}

// siteInside reports whether a named path lies in the working directory from every
// folder it may be read from.
func (c *check) siteInside(w pathSite) bool {
	dirs, _ := c.wordDirs(w.dirs)
	for _, dir := range dirs {
		if !c.wordSubjectFrom(w.path, dir).inside {
			return false
		}
	}
	return true
}

// argsOutside names a written argument that is a path outside the working
// directory (absolute, .., ~) or read from a folder known only when it runs
// (writes_vague.go); other words with variables are not judged.
func (c *check) argsOutside() string {
	if len(c.cmd.vagueDeletes) > 0 {
		return c.cmd.vagueDeletes[0].part
	}
	for _, w := range c.cmd.writeSites {
		if w.redirect {
			continue
		}
		if c.siteVague(w) {
			return w.path
		}
		if strings.Contains(w.path, "$") {
			continue
		}
		if strings.HasPrefix(w.path, "~") || !c.siteInside(w) {
			return w.path
		}
	}
	return ""
}

// suggest proposes allow rules that would let calls like this one through.
func (c *check) suggest() []Rule {
	if c.cmd != nil && c.redirectsOutside() != "" {
		return nil // no rule would cover it
	}
	var out []Rule
	add := func(pattern string) {
		r := Rule{Action: Allow, Tool: c.name, Pattern: pattern}
		for _, x := range out {
			if x == r {
				return
			}
		}
		out = append(out, r)
	}
	switch {
	case c.cmd != nil:
		argsOutside := c.argsOutside() != ""
		for i, sc := range c.cmd.Commands {
			readsOutside := c.partReadsOutside(i)
			if (sc.ReadOnly && !readsOutside) || sc.unsafeEnv || len(sc.Words) == 0 || strings.Contains(sc.Words[0], "$") {
				continue
			}
			sourcesUnknown := c.sourcesUnknown(sc)
			if r := c.allowRule(sc); r != nil && !((argsOutside || readsOutside || sourcesUnknown) && isPrefixRule(r)) {
				continue // already allowed
			}
			if p := suggestCommand(sc.Words, sc.special, c.cmd.Risk.Rank() >= tool.RiskHigh.Rank() || argsOutside || readsOutside || sourcesUnknown); p != "" {
				add(p)
			}
		}
	case c.path != nil:
		if p := suggestPath(*c.path); p != "" {
			add(p)
		}
	default:
		add("")
	}
	return out
}

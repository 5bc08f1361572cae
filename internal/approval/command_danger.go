package approval

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Destructive patterns. Critical findings are also immune: an allow rule such as
// `rm:*` or bypass mode must not let `rm -rf /` through unseen.

func (a *analyzer) flag(part, what string, risk tool.Risk) {
	a.add(Finding{Part: part, What: what, Risk: risk, Immune: risk == tool.RiskCritical})
}

// danger looks for destructive patterns in one view of a simple command.
func (a *analyzer) danger(part string, words []string) {
	if len(words) == 0 {
		return
	}
	name, args := path.Base(words[0]), words[1:]
	switch {
	case name == "rm":
		a.rmDanger(part, args)
	case name == "mkfs" || strings.HasPrefix(name, "mkfs.") || name == "mke2fs" || name == "wipefs" || name == "mkswap":
		a.flag(part, "formats a disk or partition ("+name+"), destroying what is on it", tool.RiskCritical)
	case name == "dd":
		for _, arg := range args {
			if dev, ok := strings.CutPrefix(arg, "of="); ok && strings.HasPrefix(dev, "/dev/") && !harmlessSink(dev) {
				a.flag(part, "writes raw bytes to the device "+dev+" (dd of=)", tool.RiskCritical)
			}
		}
	case name == "shred":
		targets, remove := shredArgs(args)
		for _, t := range targets {
			if blockDevice(t) {
				a.flag(part, "overwrites the device "+t, tool.RiskCritical)
			} else if remove {
				a.deleteFromVague(part, t)
			}
		}
		if remove && len(targets) == 0 { // xargs shred -u
			a.deleteFromVague(part, "")
		}
	case name == "rmdir" || name == "unlink":
		targets := positional(args)
		for _, t := range targets {
			a.deleteFromVague(part, t)
		}
		if len(targets) == 0 { // xargs rmdir
			a.deleteFromVague(part, "")
		}
	case name == "rsync":
		a.rsyncDeletes(part, args)
	case name == "mv":
		a.mvDanger(part, args)
	case name == "chmod" || name == "chown" || name == "chgrp":
		a.modeDanger(part, name, args)
	case name == "git":
		a.gitDanger(part, args)
	case name == "find" && (contains(args, "-delete") || len(findExecs(args)) > 0 && a.deletes(findExecs(args))):
		named := false
		for _, t := range args {
			if strings.HasPrefix(t, "-") || t == "(" || t == "!" {
				break
			}
			named = true
			if a.deleteFromVague(part, t) {
				continue
			}
			switch class, what := a.classify(t); class {
			case targetCritical:
				a.flag(part, "deletes files under "+what+" (find "+t+" … -delete)", tool.RiskCritical)
			case targetSystem:
				a.flag(part, "deletes files under "+what+" (find "+t+" … -delete)", tool.RiskHigh)
			case targetBroad:
				if strings.HasPrefix(t, "..") || strings.Contains(t, "$") {
					a.flag(part, "deletes files under "+what+" (find "+t+" … -delete)", tool.RiskHigh)
				}
			}
		}
		if !named { // GNU find's default: .
			a.deleteFromVague(part, "")
		}
	case name == "shutdown" || name == "reboot" || name == "halt" || name == "poweroff":
		a.flag(part, "shuts down or restarts the machine ("+name+")", tool.RiskHigh)
	case name == "init" || name == "telinit":
		if len(args) > 0 && (args[0] == "0" || args[0] == "6") {
			a.flag(part, "shuts down or restarts the machine ("+name+" "+args[0]+")", tool.RiskHigh)
		}
	case name == "systemctl":
		for _, arg := range args {
			switch arg {
			case "poweroff", "reboot", "halt", "kexec", "suspend", "hibernate":
				a.flag(part, "shuts down or restarts the machine (systemctl "+arg+")", tool.RiskHigh)
			}
		}
	case name == "kill" || name == "pkill":
		for _, arg := range args {
			if arg == "-1" && name == "kill" {
				a.flag(part, "signals every process the user may signal (kill -1)", tool.RiskHigh)
			}
		}
	}
}

// deletes reports whether find -exec runs rm.
func (a *analyzer) deletes(execs [][]string) bool {
	for _, ex := range execs {
		if u := unwrap(ex); len(u.key) > 0 && path.Base(u.key[0]) == "rm" {
			return true
		}
	}
	return false
}

func (a *analyzer) rmDanger(part string, args []string) {
	recursive, forced, noPreserve := false, false, false
	var targets []string
	opts := true
	for _, arg := range args {
		switch {
		case opts && arg == "--":
			opts = false
		case opts && arg == "--recursive":
			recursive = true
		case opts && arg == "--no-preserve-root":
			noPreserve = true
		case opts && arg == "--force":
			forced = true
		case opts && strings.HasPrefix(arg, "--"):
		case opts && len(arg) > 1 && arg[0] == '-':
			recursive = recursive || strings.ContainsAny(arg[1:], "rR")
			forced = forced || strings.ContainsRune(arg[1:], 'f')
		default:
			targets = append(targets, arg)
		}
	}
	if noPreserve {
		a.flag(part, "removes files with --no-preserve-root, which lets rm delete /", tool.RiskCritical)
	}
	if len(targets) == 0 { // xargs rm: its input names them
		a.deleteFromVague(part, "")
	}
	for _, t := range targets {
		if a.deleteFromVague(part, t) {
			continue
		}
		class, what := a.classify(t)
		switch {
		case class == targetCritical && recursive:
			a.flag(part, "deletes "+what+" recursively (rm -r "+t+")", tool.RiskCritical)
		case class == targetCritical || class == targetSystem:
			a.flag(part, "deletes "+what+" (rm "+t+")", tool.RiskHigh)
		case class == targetBroad && recursive:
			a.flag(part, "deletes "+what+" recursively (rm -r "+t+")", tool.RiskHigh)
		}
	}
}

var worldWritable = regexp.MustCompile(`^0*[0-7]?[0-7][0-7][2367]$|(^|,)[ugo]*a[ugo]*[+=][rwxXst]*w|(^|,)[ug]*o[ug]*[+=][rwxXst]*w|(^|,)[+=][rwxXst]*w`)

func (a *analyzer) modeDanger(part, name string, args []string) {
	recursive := false
	var rest []string
	for _, arg := range args {
		switch {
		case arg == "--recursive" || len(arg) > 1 && arg[0] == '-' && arg[1] != '-' && strings.ContainsRune(arg, 'R'):
			recursive = true
		case strings.HasPrefix(arg, "-") && !(name == "chmod" && worldWritable.MatchString(arg)):
		default:
			rest = append(rest, arg)
		}
	}
	if len(rest) == 0 {
		return
	}
	spec, targets := rest[0], rest[1:]
	for _, t := range targets {
		class, what := a.classify(t)
		if recursive && (class == targetCritical || class == targetSystem) {
			a.flag(part, "recursively changes the "+map[bool]string{true: "permissions", false: "owner"}[name == "chmod"]+" of "+what+" ("+name+" -R "+t+")", tool.RiskCritical)
			return
		}
	}
	if name == "chmod" && worldWritable.MatchString(spec) {
		what := "makes files writable by every user (chmod " + spec + ")"
		if recursive {
			what = "makes a whole tree writable by every user (chmod -R " + spec + ")"
		}
		a.flag(part, what, tool.RiskHigh)
	}
}

func (a *analyzer) gitDanger(part string, args []string) {
	sub, rest, _ := gitSubcommand(args)
	switch sub {
	case "push":
		for _, arg := range rest {
			switch {
			case arg == "--force" || arg == "--force-with-lease" || strings.HasPrefix(arg, "--force-with-lease=") ||
				len(arg) > 1 && arg[0] == '-' && arg[1] != '-' && strings.ContainsRune(arg, 'f'):
				a.flag(part, "force-pushes, overwriting history on the remote (git push "+arg+")", tool.RiskHigh)
			case strings.HasPrefix(arg, "+") && len(arg) > 1:
				a.flag(part, "force-pushes the refspec "+arg+", overwriting history on the remote", tool.RiskHigh)
			case arg == "--delete" || arg == "-d" || arg == "--mirror":
				a.flag(part, "deletes or overwrites branches on the remote (git push "+arg+")", tool.RiskHigh)
			}
		}
	case "reset":
		if contains(rest, "--hard") {
			if a.gitDirVague(part, args, "discards uncommitted changes (git reset --hard)") ||
				!gitDirRooted(args) && a.changeFromVague(part, "", "discards uncommitted changes (git reset --hard)") {
				break
			}
			a.flag(part, "discards uncommitted changes (git reset --hard)", tool.RiskHigh)
		}
	case "checkout", "restore", "switch":
		if how := gitDiscards(sub, rest); how != "" && !a.gitDirVague(part, args, "discards uncommitted changes (git "+sub+" "+how+")") && !gitDirRooted(args) {
			a.changeFromVague(part, "", "discards uncommitted changes (git "+sub+" "+how+")")
		}
	case "rm":
		// git rm deletes the files it names from the working tree too (unless
		// --cached), and -f those with uncommitted changes.
		if contains(rest, "--cached") {
			break
		}
		if a.gitDirVague(part, args, "deletes files (git rm)") || gitDirRooted(args) {
			break
		}
		paths := positional(rest)
		for _, p := range paths {
			a.deleteFromVague(part, p)
		}
		if len(paths) == 0 { // --pathspec-from-file
			a.deleteFromVague(part, "")
		}
	case "clean":
		for _, arg := range rest {
			if arg == "--force" || len(arg) > 1 && arg[0] == '-' && arg[1] != '-' && strings.ContainsRune(arg, 'f') {
				if a.gitDirVague(part, args, "deletes untracked files (git clean "+arg+")") || !gitDirRooted(args) && a.deleteFromVague(part, "") {
					break
				}
				a.flag(part, "deletes untracked files (git clean "+arg+")", tool.RiskHigh)
				break
			}
		}
	}
}

// rsyncDeletes notes the deletes of rsync --delete (in its destination, the last
// word) and --remove-source-files (its sources) as deleteFromVague's, when they are
// local.
func (a *analyzer) rsyncDeletes(part string, args []string) {
	del, removeSources := false, false
	for _, arg := range args {
		switch {
		case arg == "--del" || strings.HasPrefix(arg, "--delete"):
			del = true
		case arg == "--remove-source-files":
			removeSources = true
		}
	}
	words := positional(args)
	if len(words) == 0 || !del && !removeSources {
		return
	}
	local := func(w string) bool { // host:path and rsync:// are another machine's
		i := strings.IndexByte(w, ':')
		return i < 0 || strings.Contains(w[:i], "/")
	}
	dest := words[len(words)-1]
	if del && local(dest) && !a.deleteFromVague(part, dest) {
		// rsync -a --delete empty/ ~ deletes all the home directory holds.
		if class, what := a.classify(dest); class == targetCritical {
			a.flag(part, "deletes what "+what+" holds that the source lacks (rsync --delete into "+dest+")", tool.RiskCritical)
		}
	}
	if removeSources {
		for _, src := range words[:len(words)-1] {
			if local(src) {
				a.deleteFromVague(part, src)
			}
		}
	}
}

// mvDanger judges what mv moves away as what rm -r would delete there: mv ~
// /tmp/h takes the home directory away as surely as rm -rf ~ does. Its sources
// are its operands but the last, or all with -t (--target-directory).
func (a *analyzer) mvDanger(part string, args []string) {
	var ops []string
	target, opts := false, true
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case opts && arg == "--":
			opts = false
		case opts && (arg == "-t" || arg == "--target-directory" || arg == "-S" || arg == "--suffix"):
			target = target || arg == "-t" || arg == "--target-directory"
			i++
		case opts && strings.HasPrefix(arg, "--target-directory="):
			target = true
		case opts && len(arg) > 1 && arg[0] == '-':
			target = target || arg[1] != '-' && strings.Contains(arg, "t")
		default:
			ops = append(ops, arg)
		}
	}
	if !target && len(ops) > 0 {
		ops = ops[:len(ops)-1]
	}
	for _, src := range ops {
		switch class, what := a.classify(src); class {
		case targetCritical:
			a.flag(part, "moves "+what+" away (mv "+src+"), as deleting it would", tool.RiskCritical)
		case targetSystem:
			a.flag(part, "moves "+what+" away (mv "+src+")", tool.RiskHigh)
		}
	}
}

// gitDiscards names the argument with which git checkout, restore or switch
// overwrites uncommitted changes of the working tree, or returns "": checkout's
// paths (after --, or .) and -f, restore unless it only unstages (--staged
// without --worktree), switch's -f and --discard-changes. git checkout main
// refuses to overwrite them; so does switch.
func gitDiscards(sub string, rest []string) string {
	staged, worktree := false, false
	paths := "" // restore's first path
loop:
	for i, a := range rest {
		short := len(a) > 1 && a[0] == '-' && a[1] != '-'
		switch {
		case a == "--":
			switch {
			case i+1 >= len(rest):
			case sub == "checkout":
				return "-- " + rest[i+1]
			case sub == "restore" && paths == "":
				paths = "-- " + rest[i+1]
			}
			break loop
		case a == "--force" || a == "--discard-changes" || sub != "restore" && short && strings.ContainsRune(a, 'f'):
			return a
		case sub != "restore":
			// A glob or pathspec magic names paths: no branch name holds * ? [.
			if sub == "checkout" && (a == "." || a == "./" || a == ":/" || strings.HasPrefix(a, ":(") || strings.HasPrefix(a, "--pathspec-from-file") ||
				!strings.HasPrefix(a, "-") && strings.ContainsAny(a, "*?[")) {
				return a
			}
		case a == "--staged" || short && strings.ContainsRune(a, 'S'):
			staged = true
			worktree = worktree || short && strings.ContainsRune(a, 'W')
		case a == "--worktree" || short && strings.ContainsRune(a, 'W'):
			worktree = true
		case strings.HasPrefix(a, "--pathspec-from-file"):
			paths = a
		case !strings.HasPrefix(a, "-") && paths == "":
			paths = a
		}
	}
	if sub == "restore" && paths != "" && (!staged || worktree) {
		return paths
	}
	return ""
}

// gitDirVague flags, critical and immune, a git command that does what (a delete,
// a discard of uncommitted work) in a folder that git -C or --work-tree, before
// the subcommand, names by a word known only when it runs: git -C "$X" reset
// --hard is cd "$X" && git reset --hard, which is immune, as env -C "$X" rm -rf
// build is. It reports whether it flagged.
func (a *analyzer) gitDirVague(part string, args []string, what string) bool {
	for i := 0; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		dir, ok := "", false
		switch arg := args[i]; {
		case arg == "-C" || arg == "--work-tree":
			if i+1 < len(args) {
				dir, ok = args[i+1], true
			}
			i++
		case strings.HasPrefix(arg, "--work-tree="):
			dir, ok = arg[len("--work-tree="):], true
		case arg == "-c" || arg == "--git-dir" || arg == "--namespace" || arg == "--super-prefix" || arg == "--config-env":
			i++
		}
		if ok && !rootedWord(dir) && (dir == "" || strings.ContainsAny(dir, "$`*?[") || oldpwdWord(dir)) {
			a.flag(part, what+" in "+strconv.Quote(dir)+", a folder known only when it runs, so what it changes cannot be checked", tool.RiskCritical)
			return true
		}
	}
	return false
}

// gitDirRooted reports whether git -C, before the subcommand, names a folder that
// is the same from any folder (git -C /repo clean -fdx), which a later relative -C
// only goes below.
func gitDirRooted(args []string) bool {
	for i := 0; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		switch args[i] {
		case "-C":
			if i+1 < len(args) && rootedWord(args[i+1]) {
				return true
			}
			i++
		case "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env":
			i++
		}
	}
	return false
}

// redirectDanger looks at a file a redirection writes.
func (a *analyzer) redirectDanger(part, target string) bool {
	if blockDevice(target) {
		a.flag(part, "writes raw bytes to the disk device "+target, tool.RiskCritical)
		return true
	}
	if class, what := a.classify(target); class == targetCritical || class == targetSystem {
		a.flag(part, "overwrites "+what+" through a redirection", tool.RiskHigh)
		return true
	}
	return false
}

var downloaders = map[string]bool{"curl": true, "wget": true, "fetch": true, "http": true, "https": true, "aria2c": true}
var interpreters = map[string]bool{"python": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true, "deno": true, "bun": true}

// markPipeline records a pipeline, flattened, for pipeline to check.
func (a *analyzer) markPipeline(b *syntax.BinaryCmd) {
	var stmts []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if bc, ok := s.Cmd.(*syntax.BinaryCmd); ok && (bc.Op == syntax.Pipe || bc.Op == syntax.PipeAll) {
			if a.pipes == nil {
				a.pipes = map[*syntax.BinaryCmd]bool{}
			}
			a.pipes[bc] = true
			flatten(bc.X)
			flatten(bc.Y)
			return
		}
		stmts = append(stmts, s)
	}
	flatten(b.X)
	flatten(b.Y)
	a.pipelines = append(a.pipelines, stmts)
}

// pipeline catches `curl … | sh`: code from the network run without being seen. A
// stage that is a subshell or a group (`(cd /tmp && curl …) | sh`, `curl … | { bash; }`)
// counts by the commands in it.
func (a *analyzer) pipeline(stmts []*syntax.Stmt) {
	a.pipedCode(stmts)
	download := ""
	for _, s := range stmts {
		if call, ok := s.Cmd.(*syntax.CallExpr); ok {
			if a.pipelineCall(stmts, s, call, &download) {
				return
			}
			continue
		}
		for _, call := range stageCalls(s) {
			if a.pipelineCall(stmts, s, call, &download) {
				return
			}
		}
	}
}

// pipedCode reads what echo and printf stages print into a later stage that runs
// its input as code (echo 'rm -rf /' | sh, printf '…' | python3) as that code:
// what the danger checks find in it counts, for a shell's input as a whole, for
// an interpreter's in its strings.
func (a *analyzer) pipedCode(stmts []*syntax.Stmt) {
	var printed []string
	for _, s := range stmts {
		calls := stageCalls(s)
		if call, ok := s.Cmd.(*syntax.CallExpr); ok {
			calls = []*syntax.CallExpr{call}
		}
		for _, call := range calls {
			for _, v := range a.callViews[call] {
				if len(v) == 0 {
					continue
				}
				name := path.Base(v[0])
				switch {
				case name == "echo" || name == "printf":
					text := strings.Join(positional(v[1:]), " ")
					printed = append(printed, strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(text))
				case len(printed) > 0 && ((shellNames[name] || interpreters[name]) && readsStdin(v[1:]) || sourcesInput(v)):
					if !interpreters[name] {
						a.codeDanger(printed)
					} else {
						for _, p := range printed {
							a.codeDanger(codeStrings(p))
						}
					}
				}
			}
		}
	}
}

// stageCalls are the simple commands inside a compound pipeline stage, in order.
func stageCalls(s *syntax.Stmt) []*syntax.CallExpr {
	var calls []*syntax.CallExpr
	if s.Cmd != nil {
		syntax.Walk(s.Cmd, func(n syntax.Node) bool {
			if call, ok := n.(*syntax.CallExpr); ok {
				calls = append(calls, call)
			}
			return true
		})
	}
	return calls
}

// pipelineCall looks at one command of the stage s; download is the downloader seen
// before it. It reports whether it flagged the pipeline.
func (a *analyzer) pipelineCall(stmts []*syntax.Stmt, s *syntax.Stmt, call *syntax.CallExpr, download *string) bool {
	for _, v := range a.callViews[call] {
		if len(v) == 0 {
			continue
		}
		name := path.Base(v[0])
		if downloaders[name] {
			*download = name
		} else if *download != "" && (shellNames[name] || interpreters[name]) && readsStdin(v[1:]) {
			part := strings.TrimSpace(a.src[stmts[0].Pos().Offset():s.End().Offset()])
			a.flag(part, "pipes a download ("+*download+") into "+name+", running code from the network unseen", tool.RiskHigh)
			return true
		}
	}
	return false
}

// readsStdin reports whether an interpreter with these arguments runs its stdin.
func readsStdin(args []string) bool {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-" || a == "-s" || a == "--":
			return true
		case a == "-c" || a == "-e" || a == "-m":
			return false
		case a == "-o" || a == "-O":
			i++
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
		default:
			return stdinPath(a) // a script file, unless it is the input itself
		}
	}
	return true
}

// stdinPath reports whether p names a command's own input.
func stdinPath(p string) bool {
	return p == "/dev/stdin" || p == "/dev/fd/0" || p == "/proc/self/fd/0"
}

// sourcesInput reports whether words are source or . reading its own input
// (source /dev/stdin), which runs it as shell code.
func sourcesInput(words []string) bool {
	return len(words) > 1 && (words[0] == "source" || words[0] == ".") && stdinPath(words[1])
}

// forkBomb catches functions that spawn themselves: `:(){ :|:& };:`.
func (a *analyzer) forkBomb(fd *syntax.FuncDecl) bool {
	if fd.Name == nil || fd.Body == nil {
		return false
	}
	selfCall, spawns := false, false
	syntax.Walk(fd.Body, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) > 0 && n.Args[0].Lit() == fd.Name.Value {
				selfCall = true
			}
		case *syntax.Stmt:
			spawns = spawns || n.Background
		case *syntax.BinaryCmd:
			spawns = spawns || n.Op == syntax.Pipe || n.Op == syntax.PipeAll
		}
		return true
	})
	if selfCall && spawns {
		a.flag(a.text(fd), "defines a function that spawns copies of itself (a fork bomb)", tool.RiskCritical)
	}
	return selfCall && spawns
}

type targetClass int

const (
	targetPlain    targetClass = iota
	targetBroad                // .., ., *, a path from a variable
	targetSystem               // inside a system directory
	targetCritical             // /, a home directory, a system directory itself
)

var systemDirs = map[string]bool{
	"/bin": true, "/boot": true, "/dev": true, "/etc": true, "/lib": true, "/lib32": true, "/lib64": true,
	"/libx32": true, "/opt": true, "/proc": true, "/root": true, "/sbin": true, "/srv": true, "/sys": true,
	"/usr": true, "/var": true, "/home": true, "/Users": true, "/System": true, "/Library": true,
	"/Applications": true, "/snap": true, "/private": true,
}

// classify is classifyTarget of t as written and read from each folder a cd led
// the command to (cd / && rm -rf usr deletes /usr): the worst of them.
func (a *analyzer) classify(t string) (targetClass, string) {
	class, what := classifyTarget(t)
	if t == "" || path.IsAbs(t) || strings.HasPrefix(t, "~") || strings.Contains(t, "$") {
		return class, what
	}
	for _, d := range a.cmdDirs {
		if d.Vague || d.Path == "." {
			continue
		}
		if c, w := classifyTarget(path.Join(d.Path, t)); c > class {
			class, what = c, w
		}
	}
	return class, what
}

// classifyTarget says how bad it is to delete or overwrite a path.
func classifyTarget(t string) (targetClass, string) {
	if t == "" {
		return targetPlain, ""
	}
	c := t
	if strings.HasPrefix(c, "${HOME}") {
		c = "$HOME" + c[len("${HOME}"):]
	}
	if c == "~" || strings.HasPrefix(c, "~/") {
		c = "$HOME" + c[1:]
	}
	c = path.Clean(c)
	glob := false
	for _, suffix := range []string{"/*", "/.*", "/.[!.]*", "/{*,.*}"} {
		if strings.HasSuffix(c, suffix) {
			c, glob = path.Clean(strings.TrimSuffix(c, suffix)+"/"), true
			break
		}
	}
	everything := ""
	if glob {
		everything = "everything in "
	}
	home := c == "$HOME" || c == "$USER" || strings.HasPrefix(c, "~") && !strings.Contains(c, "/")
	switch {
	case c == "/":
		return targetCritical, everything + "the whole filesystem (/)"
	case c == "~+":
		return targetCritical, everything + "the folder the shell stands in (~+)"
	case home:
		return targetCritical, everything + "the home directory (" + t + ")"
	case systemDirs[c]:
		return targetCritical, everything + "the system directory " + c
	case (strings.HasPrefix(c, "/home/") || strings.HasPrefix(c, "/Users/")) && strings.Count(c, "/") == 2:
		return targetCritical, everything + "the home directory " + c
	}
	for d := path.Dir(c); d != "/" && d != "." && d != "$HOME"; d = path.Dir(d) {
		if systemDirs[d] && !strings.HasPrefix(c, "/var/tmp/") && !strings.HasPrefix(c, "/home/") && !strings.HasPrefix(c, "/Users/") {
			return targetSystem, "the system path " + c
		}
	}
	switch {
	case c == ".." || strings.HasPrefix(c, "../"):
		return targetBroad, "files outside the working directory (" + t + ")"
	case c == "." || c == "*" || c == ".*":
		return targetBroad, "everything in the working directory (" + t + ")"
	case strings.Contains(c, "$"):
		return targetBroad, "a path built from a variable (" + t + "), which may be empty or wrong"
	}
	return targetPlain, ""
}

func blockDevice(p string) bool {
	dev, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return false
	}
	for _, prefix := range []string{"sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "dm-", "md", "loop", "mapper/", "rdisk", "sr"} {
		if strings.HasPrefix(dev, prefix) {
			return true
		}
	}
	return false
}

// shredArgs are the files shred names and whether it removes them once
// overwritten (-u, --remove[=HOW]); the values of -n, -s and --random-source are
// no files.
func shredArgs(args []string) (targets []string, remove bool) {
	opts := true
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !opts || a == "-" || !strings.HasPrefix(a, "-"):
			targets = append(targets, a)
		case a == "--":
			opts = false
		case a == "--remove" || strings.HasPrefix(a, "--remove="):
			remove = true
		case strings.HasPrefix(a, "--"):
			if a == "--iterations" || a == "--size" || a == "--random-source" {
				i++
			}
		default:
			remove = remove || strings.ContainsRune(a, 'u')
			if j := strings.IndexAny(a, "ns"); j >= 0 && j == len(a)-1 {
				i++ // -n 3, -un 3: the value is the next word
			}
		}
	}
	return targets, remove
}

func positional(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

var dangerousEnvNames = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "PROMPT_COMMAND": true, "IFS": true, "SHELLOPTS": true,
	"BASHOPTS": true, "PS4": true, "GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_EXEC_PATH": true,
	"GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true, "GIT_ASKPASS": true, "SSH_ASKPASS": true, "EDITOR": true,
	"VISUAL": true, "GIT_PAGER": true, "PAGER": true, "MANPAGER": true, "LESSOPEN": true, "LESSCLOSE": true,
	"PYTHONPATH": true, "PYTHONSTARTUP": true, "PYTHONHOME": true, "NODE_OPTIONS": true, "NODE_PATH": true,
	"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "RUBYOPT": true, "RUBYLIB": true,
	"GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true, "GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true,
	"GIT_EXTERNAL_DIFF": true, "GIT_DIFF_OPTS": true, "HOME": true,
	// Another repository's config runs its programs (see gitSubcommand).
	"GIT_DIR": true, "GIT_COMMON_DIR": true,
	// Where `cd name` goes, which command_dirs.go reads as ./name.
	"CDPATH": true,
}

// dangerousEnv reports whether setting name to val can change what a command runs.
func dangerousEnv(name, val string) bool {
	switch name {
	case "PAGER", "GIT_PAGER", "MANPAGER":
		if val == "" || val == "cat" {
			return false
		}
	}
	return dangerousEnvNames[name] || strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") ||
		strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") ||
		strings.HasPrefix(name, "BASH_FUNC_")
}

package approval

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Recursive reads of a folder that holds a private dir. A working directory that
// contains the data dir (the default "data" under a checkout) reaches it without
// naming it: `grep -rl SQLite .`, `rg key`, `find . -exec cat {} +`, `tar czf x.tgz .`,
// `cp -r . /tmp/x` read the database and the admin key as surely as `cat data/…`
// does, and `ls -R`, `du`, `tree` and `find .` list other sessions' files as
// `ls data` does. Such a command asks as naming the data dir does, in every mode.
// Recognised: grep -r (and -R, --recursive, -d recurse, long options abbreviated
// as getopt takes them; rgrep, ugrep), rg, ag, ack, fd, find, du (but -s), tree,
// ls -R (and ls of a glob that matches the data dir), tar c/r/u, 7z a/u, zip -r,
// cp -r/-a, rsync -r/-a, scp -r, diff -r, and any word with ** in a line that turns
// on globstar. Paths a program reads from a file or its input (tar -T, xargs) and
// links a recursion follows below its folder are not seen. A depth limit (find -maxdepth,
// tree -L, du -d, rg/fd --max-depth) that stops above the data dir's contents
// keeps it unasked; an exclusion (--exclude-dir, -prune, -x) does not, since what
// it excludes is matched by the program's own rules.

// recSpec says how a program's words are read: which options make it read the
// folders it is given recursively, which take a value, which operands are paths.
type recSpec struct {
	always   bool     // recursive without an option
	flags    string   // short options that make it recursive
	long     []string // long options that do
	stop     string   // short options that make it read no folder's contents (du -s, ls -d)
	stopLong []string
	args     string   // short options that take a value (the rest of the cluster, or the next word)
	argsLong []string // long options that take the next word when written without =
	depth    byte     // the short option that limits the depth
	depthLng string   // the long one
	recurse  byte     // the short option whose value "recurse" makes it recursive (grep -d)
	recLong  string
	pattern  bool   // the first operand is a pattern, unless an option gives it
	patShort string // options that give the pattern
	patLong  []string
	dest     bool   // the last of two or more operands is written, unless an option names it
	dstShort string // options that name it
	dstLong  []string
	dot      bool     // with no path operand it reads "."
	shallow  int      // not recursive, it still reads the entries of a folder operand (ls: 1)
	bundle   bool     // tar: a first word without a dash is a bundle of options
	find     bool     // find: the folders come before the expression
	verbs    []string // a first operand that makes it recursive (7z a)
	exec     string   // short options that run a command on what it finds (fd -x), which may read it all the way down
	execLong []string
}

// longIs reports whether the long option name is one of list, or a prefix of one
// that getopt would take for it (--recur for --recursive).
func longIs(name string, list []string) bool {
	for _, l := range list {
		if name == l || len(name) >= 4 && strings.HasPrefix(l, name) {
			return true
		}
	}
	return false
}

var grepSpec = recSpec{flags: "rR", long: []string{"--recursive", "--dereference-recursive"},
	args: "efmABCdD", argsLong: []string{"--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context",
		"--directories", "--devices", "--exclude", "--include", "--exclude-dir", "--exclude-from", "--label", "--group-separator", "--binary-files"},
	recurse: 'd', recLong: "--directories", pattern: true, patShort: "ef", patLong: []string{"--regexp", "--file"}, dot: true}

var rgrepSpec = func() recSpec { s := grepSpec; s.always = true; return s }()

var tarSpec = recSpec{flags: "cru", long: []string{"--create", "--append", "--update"}, stopLong: []string{"--no-recursion"}, args: "fTXbHKNgLV",
	argsLong: []string{"--file", "--files-from", "--exclude-from", "--exclude", "--transform", "--owner", "--group", "--mode", "--format",
		"--use-compress-program", "--label", "--newer", "--after-date", "--blocking-factor", "--record-size", "--tape-length", "--checkpoint-action", "--index-file"},
	bundle: true}

var sevenZipSpec = recSpec{verbs: []string{"a", "u"}}

var recSpecs = map[string]recSpec{
	"grep": grepSpec, "egrep": grepSpec, "fgrep": grepSpec, "ugrep": grepSpec, "rgrep": rgrepSpec,
	"rg": {always: true, args: "efgtTmABCdEjMr", argsLong: []string{"--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--type-add",
		"--type-clear", "--max-count", "--after-context", "--before-context", "--context", "--max-depth", "--maxdepth", "--encoding", "--threads",
		"--max-columns", "--replace", "--ignore-file", "--pre", "--pre-glob", "--sort", "--sortr", "--max-filesize", "--path-separator",
		"--engine", "--colors", "--context-separator", "--field-match-separator", "--field-context-separator", "--dfa-size-limit", "--regex-size-limit"},
		depth: 'd', depthLng: "--max-depth", pattern: true, patShort: "ef", patLong: []string{"--regexp", "--file", "--files", "--type-list"}, dot: true},
	"ag": {always: true, args: "ABCGgmpW", argsLong: []string{"--after", "--before", "--context", "--file-search-regex", "--ignore", "--ignore-dir",
		"--max-count", "--path-to-ignore", "--depth", "--pager", "--width"},
		depthLng: "--depth", pattern: true, patShort: "g", dot: true},
	"ack": {always: true, args: "ABCgm", argsLong: []string{"--after-context", "--before-context", "--context", "--max-count", "--type", "--ignore-dir", "--ignore-file", "--match"},
		pattern: true, patShort: "fg", patLong: []string{"--match"}, dot: true},
	"fd": fdSpec, "fdfind": fdSpec,
	"find": {always: true, find: true, dot: true},
	"du": {always: true, stop: "s", stopLong: []string{"--summarize"}, args: "dBtX", argsLong: []string{"--max-depth", "--block-size", "--threshold",
		"--exclude", "--exclude-from", "--files0-from", "--time-style", "--time"}, depth: 'd', depthLng: "--max-depth", dot: true},
	"tree": {always: true, args: "LPIoHT", argsLong: []string{"--charset", "--filelimit", "--timefmt", "--sort", "--gitfile"}, depth: 'L', dot: true},
	"ls": {flags: "R", long: []string{"--recursive"}, stop: "d", stopLong: []string{"--directory"}, args: "ITw",
		argsLong: []string{"--ignore", "--hide", "--tabsize", "--width", "--format", "--sort", "--time", "--time-style", "--block-size", "--quoting-style", "--indicator-style"},
		dot:      true, shallow: 1},
	"tar": tarSpec, "gtar": tarSpec, "bsdtar": tarSpec,
	"7z": sevenZipSpec, "7za": sevenZipSpec, "7zr": sevenZipSpec, "7zz": sevenZipSpec,
	"zip":   {flags: "rR", long: []string{"--recurse-paths", "--recurse-patterns"}, args: "bntOZPs"},
	"cp":    {flags: "rRa", long: []string{"--recursive", "--archive"}, args: "tS", argsLong: []string{"--target-directory", "--suffix"}, dest: true, dstShort: "t", dstLong: []string{"--target-directory"}},
	"rsync": {flags: "ra", long: []string{"--recursive", "--archive"}, args: "eBfTM", argsLong: rsyncArgs, dest: true},
	"scp":   {flags: "r", args: "cFiJlPSoDX", dest: true},
	"diff":  {flags: "r", long: []string{"--recursive"}, args: "CUIFxXSDLW", argsLong: []string{"--exclude", "--exclude-from", "--starting-file", "--label", "--ignore-matching-lines", "--show-function-line", "--ifdef", "--width"}},
	// Recursive changes reach the data dir's files as recursive reads do: rm -rf .
	// in a checkout holding it deletes the database and the admin key.
	"rm":    {flags: "rR", long: []string{"--recursive"}},
	"chmod": {flags: "R", long: []string{"--recursive"}, args: "", argsLong: []string{"--reference"}},
	"chown": {flags: "R", long: []string{"--recursive"}, argsLong: []string{"--reference", "--from"}},
	"chgrp": {flags: "R", long: []string{"--recursive"}, argsLong: []string{"--reference"}},
}

var fdSpec = recSpec{always: true, args: "edtEScj", argsLong: []string{"--extension", "--max-depth", "--type", "--exclude", "--size", "--color", "--threads",
	"--min-depth", "--exact-depth", "--changed-within", "--changed-before", "--owner", "--base-directory", "--search-path", "--ignore-file"},
	depth: 'd', depthLng: "--max-depth", pattern: true, dot: true, exec: "xX", execLong: []string{"--exec", "--exec-batch"}}

var rsyncArgs = []string{"--rsh", "--filter", "--exclude", "--include", "--exclude-from", "--include-from", "--files-from", "--temp-dir", "--partial-dir",
	"--backup-dir", "--suffix", "--chmod", "--chown", "--compare-dest", "--copy-dest", "--link-dest", "--log-file", "--password-file", "--bwlimit",
	"--timeout", "--port", "--rsync-path", "--max-size", "--min-size", "--block-size", "--info", "--debug", "--out-format"}

// recursiveRead reads words (a program and its arguments) as a program that reads
// folders' contents: the words it reads so (every operand that may be a path, "."
// when it reads the current folder by default) and how deep (0: all the way; 1:
// the folder's own entries). ok is false for any other command.
func recursiveRead(words []string) (roots []string, depth int, ok bool) {
	if len(words) == 0 {
		return nil, 0, false
	}
	if path.Base(words[0]) == "busybox" {
		words = words[1:]
		if len(words) == 0 {
			return nil, 0, false
		}
	}
	spec, found := recSpecs[path.Base(words[0])]
	if !found {
		return nil, 0, false
	}
	if spec.find {
		return findRoots(words[1:])
	}
	args := words[1:]
	rec, stopped := spec.always, false
	limit := -1
	patByOpt, destByOpt, noMore, execs := false, false, false, false
	var ops []string
	value := func(v string, short byte, long string) {
		if (short != 0 && short == spec.depth) || (long != "" && spec.depthLng != "" && longIs(long, []string{spec.depthLng})) {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 && (limit < 0 || n > limit) {
				limit = n
			}
		}
		if v == "recurse" && ((short != 0 && short == spec.recurse) || (long != "" && spec.recLong != "" && longIs(long, []string{spec.recLong}))) {
			rec = true
		}
	}
	command := false // the words of the command fd -x runs, up to a ";"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if command {
			command = a != ";"
			continue
		}
		switch {
		case noMore || a == "-" || !strings.HasPrefix(a, "-"):
			if i == 0 && spec.bundle && !noMore && strings.ContainsAny(a, spec.flags) {
				rec = true // tar czf x.tgz .
			}
			if len(ops) == 0 && slices.Contains(spec.verbs, a) {
				rec = true
			}
			ops = append(ops, a)
		case a == "--":
			noMore = true
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			rec = rec || longIs(name, spec.long)
			stopped = stopped || slices.Contains(spec.stopLong, name)
			patByOpt = patByOpt || slices.Contains(spec.patLong, name)
			destByOpt = destByOpt || longIs(name, spec.dstLong)
			if longIs(name, spec.execLong) {
				execs, command = true, true
			}
			if !hasVal && longIs(name, spec.argsLong) && i+1 < len(args) {
				i++
				val, hasVal = args[i], true
			}
			if hasVal {
				value(val, 0, name)
			}
		default: // a cluster of short options
			for j := 1; j < len(a); j++ {
				l := a[j]
				rec = rec || strings.IndexByte(spec.flags, l) >= 0
				stopped = stopped || strings.IndexByte(spec.stop, l) >= 0
				patByOpt = patByOpt || strings.IndexByte(spec.patShort, l) >= 0
				destByOpt = destByOpt || strings.IndexByte(spec.dstShort, l) >= 0
				if strings.IndexByte(spec.exec, l) >= 0 {
					execs, command = true, true
					break
				}
				if strings.IndexByte(spec.args, l) >= 0 {
					v := a[j+1:]
					if v == "" && i+1 < len(args) {
						i++
						v = args[i]
					}
					value(v, l, "")
					break
				}
			}
		}
	}
	if execs {
		limit = -1 // fd -d 1 -x grep -r x {} reads what it finds all the way down
	}
	switch {
	case stopped || (rec && limit == 0):
		return nil, 0, false
	case rec && limit > 0:
		depth = limit
	case rec:
		depth = 0
	case spec.shallow > 0:
		depth = spec.shallow
	default:
		return nil, 0, false
	}
	paths := len(ops) // operands that are paths; the pattern too is kept as a root
	if spec.pattern && !patByOpt {
		paths--
	}
	// rsync --delete (--del, --delete-after, …) empties its destination of what
	// the source lacks: rsync -a --delete empty/ . deletes the checkout's data dir.
	deletes := path.Base(words[0]) == "rsync" && slices.ContainsFunc(args, func(a string) bool {
		return a == "--del" || strings.HasPrefix(a, "--delete")
	})
	if spec.dest && !destByOpt && len(ops) >= 2 && !deletes {
		ops, paths = ops[:len(ops)-1], paths-1
	}
	if paths <= 0 && spec.dot {
		ops = append(ops, ".")
	}
	return ops, depth, true
}

// findStart are the folders find starts from: the words before the first word of
// the expression, "." when there is none.
func findStart(args []string) []string {
	roots, _ := findSplit(args)
	if len(roots) == 0 {
		roots = []string{"."}
	}
	return roots
}

// findRoots reads find's words: the folders it starts from, and -maxdepth, which
// limits the depth.
func findRoots(args []string) (roots []string, depth int, ok bool) {
	roots, i := findSplit(args)
	limit := -1
	for ; i < len(args); i++ {
		if args[i] == "-maxdepth" && i+1 < len(args) {
			if n, err := strconv.Atoi(args[i+1]); err == nil && n >= 0 && (limit < 0 || n > limit) {
				limit = n
			}
		}
	}
	if limit == 0 {
		return nil, 0, false
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	return roots, max(limit, 0), true
}

// findSplit returns find's folders and where its expression starts.
func findSplit(args []string) (roots []string, expr int) {
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "-H" || a == "-L" || a == "-P" || strings.HasPrefix(a, "-O"):
			i++
			continue
		case a == "-D":
			i += 2
			continue
		}
		break
	}
	for ; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" || a == ")" || a == "," {
			break
		}
		roots = append(roots, a)
	}
	return roots, i
}

// readsPrivateWithin names a folder the command reads recursively that holds a
// private dir, or "". Words known only when it runs ($X, ~) are left to the check of
// reads outside the working directory, as for commands that name a path, unless the
// line sets them (d=.; grep -r x $d).
func (c *check) readsPrivateWithin() string {
	if len(c.e.private) == 0 || c.cmd == nil {
		return ""
	}
	globstar := strings.Contains(c.command, "globstar")
	for _, sc := range c.cmd.Commands {
		var dirs []string
		outer, _, outerOK := recursiveRead(sc.Words)
		if len(sc.Words) > 0 && path.Base(sc.Words[0]) == "find" {
			outer, outerOK = findStart(sc.Words[1:]), true // -maxdepth 0 finds its folders
		}
		for li, words := range append([][]string{sc.Words}, sc.Runs...) {
			roots, depth, ok := recursiveRead(words)
			if !ok {
				roots, ok = gitCleanRoots(words)
			}
			if !ok {
				roots, ok = extractRoots(words)
			}
			if !ok {
				roots, ok = linkRoots(words)
			}
			if globstar {
				// shopt -s globstar: ** matches every folder below, so cat **/*.db
				// reads as grep -r does.
				for _, w := range words[1:] {
					if i := strings.Index(w, "**"); i >= 0 {
						root := "."
						if j := strings.LastIndex(w[:i], "/"); j >= 0 {
							root = w[:j+1]
						}
						roots, depth, ok = append(roots, root), 0, true
					}
				}
			}
			if !ok {
				continue
			}
			if li > 0 && sc.argsFromInput {
				return fmt.Sprintf("the command runs %q, which reads recursively the folders xargs reads from its input, known only when it runs (the daemon's data directory may be one, or lie inside one)", words[0])
			}
			if dirs == nil {
				dirs, _ = c.physicalDirs(sc.Dirs)
			}
			var words2 []string
			for _, w := range roots {
				w = pwdRelative(w)
				switch {
				case strings.Contains(w, "{}") && li > 0 && outerOK:
					// find … -exec grep -r x {} +: whatever find finds, at any depth
					// (find . -maxdepth 1 finds ./data), is read all the way down.
					words2, depth = append(words2, outer...), 0
				case strings.Contains(w, "$"):
					for _, v := range sc.values[w] {
						words2 = append(words2, v.text)
					}
				default:
					words2 = append(words2, w)
				}
			}
			for _, w := range words2 {
				if w == "" || w == "-" || strings.HasPrefix(w, "~") || strings.Contains(w, "$") {
					continue
				}
				for _, dir := range dirs {
					if d := c.holdsPrivate(w, dir, depth); d != "" {
						return fmt.Sprintf("the command %q reads or changes %q recursively, and the daemon's data directory %s (its keys, its database, other sessions' files) lies inside it", words[0], w, d)
					}
				}
			}
		}
	}
	return ""
}

// holdsPrivate names the private dir whose contents reading w from dir to depth
// (0: all the way) reaches, or "". A glob is matched against the private dirs and
// the folders above them, as the shell would expand it.
func (c *check) holdsPrivate(w, dir string, depth int) string {
	ps := c.wordSubjectFrom(w, dir)
	if ps.abs == "" {
		return ""
	}
	glob := strings.ContainsAny(w, "*?[")
	real := ""
	if !glob {
		if r, err := filepath.EvalSymlinks(ps.abs); err == nil {
			real = path.Clean(filepath.ToSlash(r))
		}
	}
	for i, d := range c.e.private {
		for _, p := range []string{d, c.e.privateReal[i]} {
			// Every folder from p up to the root: the command reaches p's contents
			// from one it reads when p lies less than depth levels below it.
			for a, below := p, 0; ; a, below = path.Dir(a), below+1 {
				if depth > 0 && below >= depth {
					break
				}
				var hit bool
				if glob {
					hit, _ = path.Match(ps.abs, a)
				} else {
					hit = a == ps.abs || a == real
				}
				if hit {
					return d
				}
				if a == "/" {
					break
				}
			}
		}
	}
	return ""
}

// gitCleanRoots reads words as git clean -f -d, which deletes untracked folders
// (the data dir in a checkout among them) all the way down: the folders it cleans
// (its pathspecs, else the repository's folder, -C's or "."). ok is false for any
// other command.
func gitCleanRoots(words []string) (roots []string, ok bool) {
	if len(words) < 2 || path.Base(words[0]) != "git" {
		return nil, false
	}
	base := "."
	i := 1
	for ; i < len(words) && strings.HasPrefix(words[i], "-"); i++ {
		switch words[i] {
		case "-C":
			if i+1 < len(words) {
				base = path.Join(base, words[i+1])
				if path.IsAbs(words[i+1]) {
					base = words[i+1]
				}
			}
			i++
		case "-c", "--git-dir", "--work-tree", "--namespace", "--config-env":
			i++
		}
	}
	if i >= len(words) || words[i] != "clean" {
		return nil, false
	}
	force, dirs, noMore := false, false, false
	for _, a := range words[i+1:] {
		switch {
		case noMore || !strings.HasPrefix(a, "-"):
			roots = append(roots, path.Join(base, a))
		case a == "--":
			noMore = true
		case a == "--force":
			force = true
		case !strings.HasPrefix(a, "--"):
			force = force || strings.ContainsRune(a, 'f')
			dirs = dirs || strings.ContainsRune(a, 'd')
		}
	}
	if !force || !dirs {
		return nil, false
	}
	if len(roots) == 0 {
		roots = []string{base}
	}
	return roots, true
}

// extractRoots reads words as an archive extraction that may write absolute names,
// which writes wherever the archive says: tar -x (--extract, --get, x in a first
// bundle) with -P (--absolute-names), unzip -: (but -l, -t, -v, -Z, -z, -p, -c,
// which write nothing), cpio -i (--extract) without --no-absolute-filenames. Its
// root is then "/". An extraction without absolute names writes below its folder,
// as cp -r and rsync -a do, and is not one (ok false), as any other command.
func extractRoots(words []string) (roots []string, ok bool) {
	if len(words) < 2 {
		return nil, false
	}
	args := words[1:]
	absolute := false
	switch path.Base(words[0]) {
	case "tar", "gtar", "bsdtar":
		extract := false
		for i := 0; i < len(args); i++ {
			a := args[i]
			name, _, _ := strings.Cut(a, "=")
			switch {
			case a == "--":
				i = len(args)
			case strings.HasPrefix(a, "--"):
				extract = extract || longIs(name, []string{"--extract", "--get"})
				absolute = absolute || longIs(name, []string{"--absolute-names"})
			case strings.HasPrefix(a, "-") || i == 0:
				// A cluster, or old-style letters as the first word.
				letters := strings.TrimPrefix(a, "-")
				for j := 0; j < len(letters); j++ {
					c := letters[j]
					extract, absolute = extract || c == 'x', absolute || c == 'P'
					if strings.IndexByte("fCTXbgKLNVHIF", c) >= 0 && strings.HasPrefix(a, "-") {
						break // -Cdir: the rest is the value
					}
				}
			}
		}
		absolute = absolute && extract
	case "unzip":
		for _, a := range args {
			if a == "-d" || a == "-x" || !strings.HasPrefix(a, "-") {
				continue
			}
			if strings.ContainsAny(a[1:], "ltvZzpc") {
				return nil, false
			}
			absolute = absolute || strings.Contains(a, ":")
		}
	case "cpio":
		extract, relative := false, false
		for _, a := range args {
			switch {
			case a == "--extract":
				extract = true
			case a == "--no-absolute-filenames":
				relative = true
			case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--"):
				extract = extract || strings.ContainsRune(a, 'i')
				if strings.ContainsRune(a, 't') {
					return nil, false // lists
				}
			}
		}
		absolute = extract && !relative
	}
	if !absolute {
		return nil, false
	}
	return []string{"/"}, true
}

// linkRoots reads words as ln -s (--symbolic), which makes a link whose target's
// contents, at any depth, a later word of the line reaches through the link
// before the check can see it on disk (ln -s .. up; cat up/data/admin.key): its
// targets, each read from where the command runs and, when relative, from the
// link's folder, as the kernel reads it. ok is false for any other command.
func linkRoots(words []string) (roots []string, ok bool) {
	if len(words) < 2 || path.Base(words[0]) != "ln" {
		return nil, false
	}
	symbolic, noMore := false, false
	var ops []string
	target := "" // -t DIR: the folder the links are made in
	for i := 1; i < len(words); i++ {
		a := words[i]
		switch {
		case noMore || !strings.HasPrefix(a, "-") || a == "-":
			ops = append(ops, a)
		case a == "--":
			noMore = true
		case a == "--symbolic":
			symbolic = true
		case a == "-t" || a == "--target-directory" || a == "-S" || a == "--suffix":
			if i+1 < len(words) {
				if a == "-t" || a == "--target-directory" {
					target = words[i+1]
				}
				i++
			}
		case strings.HasPrefix(a, "--target-directory="):
			target = a[len("--target-directory="):]
		case !strings.HasPrefix(a, "--"):
			symbolic = symbolic || strings.ContainsRune(a, 's')
		}
	}
	if !symbolic || len(ops) == 0 {
		return nil, false
	}
	dir := target
	targets := ops
	if target == "" && len(ops) > 1 {
		targets, dir = ops[:len(ops)-1], path.Dir(ops[len(ops)-1])
	}
	for _, t := range targets {
		roots = append(roots, t)
		if !path.IsAbs(t) && dir != "" && dir != "." {
			roots = append(roots, path.Join(dir, t))
		}
	}
	return roots, true
}

package approval

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Reads outside the working directory. A read-only command runs without asking only
// while what it names lies in the session's working directory (or a configured read
// dir): `cat ../../etc/passwd`, `ls /home`, `head link-to-outside` ask. The words of
// the command are read as paths the way the shell would hand them over, and judged
// by what they resolve to on disk, symlinks followed: a word that names nothing
// (a grep pattern such as "/api/v1") reads nothing and passes. Like every check of a
// command as written, this is a guard for the approver, not a confinement.

// noFileArgs are read-only programs whose arguments are not files.
var noFileArgs = map[string]bool{
	"echo": true, "printf": true, "which": true, "type": true, "true": true, "false": true,
	"pwd": true, "date": true, "whoami": true, "id": true, "uname": true, "hostname": true,
	"printenv": true, "sleep": true, "seq": true, "expr": true, "command": true, "hash": true,
	"basename": true, "dirname": true, // they only cut the text of a path
}

// readsOutside names what a read-only part of the command reads outside the working
// directory, or "". It judges every part once (the words' paths are resolved on
// disk); partReadsOutside then answers for each part.
func (c *check) readsOutside() string {
	if c.cmd == nil {
		return ""
	}
	if !c.outsideDone {
		c.outsideDone = true
		c.outsideOf = make([]string, len(c.cmd.Commands))
		for i, sc := range c.cmd.Commands {
			c.outsideOf[i] = c.commandReadsOutside(sc)
			if c.outside == "" {
				c.outside = c.outsideOf[i]
			}
		}
		if c.outside == "" {
			for _, in := range c.cmd.inputSites {
				dirs, vague := c.wordDirs(in.dirs)
				if w := c.pathOutside(in.path, true, dirs, vague, false); w != "" {
					c.outside = "the command reads " + w
					break
				}
			}
		}
	}
	return c.outside
}

// partReadsOutside reports whether the i-th simple command reads outside the
// working directory.
func (c *check) partReadsOutside(i int) bool {
	c.readsOutside()
	return i < len(c.outsideOf) && c.outsideOf[i] != ""
}

// commandReadsOutside names the first word of a read-only simple command that is a
// path outside the working directory, or the list any simple command reads the
// paths it works on from (pathList), or "".
func (c *check) commandReadsOutside(sc SimpleCommand) string {
	if c.workdirReal() == "" {
		return ""
	}
	lists := append([][]string{sc.Words}, sc.Runs...)
	for _, words := range lists {
		if from := pathList(words); from != "" {
			return fmt.Sprintf("the command %q reads the paths it works on from %s, known only when it runs", clip(sc.Text, 80), from)
		}
	}
	if !sc.ReadOnly {
		return ""
	}
	dirs, vague := c.wordDirs(sc.Dirs)
	for li, words := range lists {
		if len(words) == 0 || noFileArgs[path.Base(words[0])] {
			continue
		}
		if li > 0 && sc.argsFromInput {
			return fmt.Sprintf("the command runs %q on paths xargs reads from its input, known only when it runs", words[0])
		}
		// bash's cd reads its folder logically (cd link/.. is .), unless -P or
		// set -P.
		cd := words[0] == "cd" || words[0] == "pushd"
		logical := false
		if cd {
			fields := make([]field, 0, len(words)-1)
			for _, w := range words[1:] {
				fields = append(fields, field{text: w})
			}
			_, physical := cdOptions(fields, c.cmd.physical)
			logical = !physical
		}
		if vague && !cd && words[0] != "popd" {
			// It may read what it names, or its folder itself (ls), from where a cd
			// to a folder known only when it runs led.
			return fmt.Sprintf("the command %q runs in a folder known only when it runs (after a cd to ~, - or $VAR, or a sourced script)", clip(sc.Text, 80))
		}
		for i, w := range words[1:] {
			special := li == 0 && i+1 < len(sc.special) && sc.special[i+1]
			cands := []field{{text: w, glob: special}}
			if strings.Contains(w, "$") && (special || li > 0) {
				vals := sc.values[w]
				if vals == nil {
					return fmt.Sprintf("the command reads %q (a path known only when it runs)", w)
				}
				cands = vals
			}
			for _, f := range cands {
				v := f.text
				if strings.HasPrefix(v, "-") {
					_, after, ok := strings.Cut(v, "=")
					if !ok {
						continue
					}
					v = after
				}
				if out := c.pathOutside(v, f.glob, dirs, vague, logical); out != "" {
					if v != w {
						return fmt.Sprintf("the command reads %q, which may be %s", w, out)
					}
					return "the command reads " + out
				}
			}
		}
	}
	return ""
}

// pathOutside judges one word, read from each of dirs (vague: also from a folder
// known only when it runs); special says the shell expands it (glob, variable, ~).
// A path is read as the kernel does, .. after a link going to the parent of where
// the link points; logical reads it as cd does, with link/.. cleaned away. It
// returns the word quoted (with what it links to) when it is outside, or "".
func (c *check) pathOutside(w string, special bool, dirs []string, vague, logical bool) string {
	if w == "" || harmlessSink(w) {
		return ""
	}
	p := w
	switch {
	case pwdWord(w):
		p = pwdRelative(w) // ~+/x: ./x
	case oldpwdWord(w):
		return fmt.Sprintf("%q (under the folder cd - goes back to, known only when it runs)", w)
	case strings.HasPrefix(w, "~"):
		return fmt.Sprintf("%q (a home directory)", w)
	}
	if special {
		if strings.Contains(w, "$") {
			return fmt.Sprintf("%q (a path known only when it runs)", w)
		}
		if i := strings.IndexAny(p, "*?["); i >= 0 {
			// A glob: judge the directory it lists.
			g := p
			p = "."
			if j := strings.LastIndex(g[:i], "/"); j >= 0 {
				p = g[:j+1]
			}
		}
	}
	if filepath.IsAbs(p) {
		if logical {
			p = filepath.Clean(p)
		}
		return c.outsideAt(w, p)
	}
	if vague && climbs(p) {
		return fmt.Sprintf("%q (a path known only when it runs: it climbs out of a folder a cd chose)", w)
	}
	for _, dir := range dirs {
		// Not filepath.Join, which would clean link/.. away (EvalSymlinks reads it
		// as the kernel does).
		at := dir + string(filepath.Separator) + p
		if logical {
			at = filepath.Join(dir, p)
		}
		if out := c.outsideAt(w, at); out != "" {
			return out
		}
	}
	return ""
}

// outsideAt names the word w, which reads p, when p is an existing path outside the
// working directory and the read dirs, or returns "".
func (c *check) outsideAt(w, p string) string {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "" // names nothing: reads nothing
	}
	real = filepath.ToSlash(real)
	if within(real, c.workdirReal()) {
		return ""
	}
	for _, d := range c.e.readDirs {
		if within(real, d) {
			return ""
		}
	}
	if clean := filepath.ToSlash(filepath.Clean(p)); real != clean {
		return fmt.Sprintf("%q (a link to %q)", w, real)
	}
	return fmt.Sprintf("%q", w)
}

// workdirReal is the working directory with symlinks resolved, or "" when the
// request has none that exists (then nothing is judged outside it).
func (c *check) workdirReal() string {
	if !c.workDone {
		c.workDone = true
		if c.req.Workdir != "" && filepath.IsAbs(c.req.Workdir) {
			if real, err := filepath.EvalSymlinks(c.req.Workdir); err == nil {
				c.workReal = filepath.ToSlash(real)
			}
		}
	}
	return c.workReal
}

// listOptions are the long options that name a file listing the paths a program
// works on.
var listOptions = map[string]string{"tar": "--files-from", "gtar": "--files-from", "bsdtar": "--files-from",
	"rsync": "--files-from", "wc": "--files0-from", "du": "--files0-from", "sort": "--files0-from"}

// listAbbrevs are the shortest abbreviations of the list option the programs'
// getopt_long still takes as it (their other long options share the rest): wc
// --f=list is wc --files0-from=list, sort --files0=list sorts the files it names.
// rsync takes none; tar --file is another option.
var listAbbrevs = map[string]string{"tar": "--files", "gtar": "--files", "bsdtar": "--files", "wc": "--f", "du": "--f", "sort": "--fil"}

// pathList says where a program reads the paths it works on from a list rather
// than its words: tar -T FILE (--files-from), rsync --files-from, wc, du and sort
// --files0-from, cpio -o and -p (its input), zip -@ (its input). Those paths are
// known only when it runs, as xargs' are, wherever the list lies: "" when it
// reads none.
func pathList(words []string) string {
	if len(words) == 0 {
		return ""
	}
	from := func(v string) string {
		if v == "-" || v == "" {
			return "its input"
		}
		return fmt.Sprintf("%q", v)
	}
	name, args := path.Base(words[0]), words[1:]
	long := listOptions[name]
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		if a == "--" {
			break
		}
		opt, val, inline := strings.Cut(a, "=")
		switch {
		case long != "" && (opt == long || listAbbrevs[name] != "" && strings.HasPrefix(opt, listAbbrevs[name]) && strings.HasPrefix(long, opt)):
			if inline {
				return from(val)
			}
			return from(next)
		case len(a) < 2 || a[0] != '-' || a[1] == '-':
			if name == "cpio" && (a == "--create" || a == "--pass-through") {
				return "its input"
			}
		case name == "tar" || name == "gtar" || name == "bsdtar":
			if j := strings.IndexByte(a, 'T'); j > 0 {
				if rest := a[j+1:]; rest != "" {
					return from(rest)
				}
				return from(next)
			}
		case name == "cpio" && strings.ContainsAny(a[1:], "op"):
			return "its input"
		case name == "zip" && strings.ContainsRune(a[1:], '@'):
			return "its input"
		}
	}
	return ""
}

package approval

import (
	"path"
	"path/filepath"
	"strings"
)

// Sourcing a script. `source ./env.sh` runs the script in the shell itself: like
// `bash ./env.sh`, it is judged as a command that is not read-only, which an allow
// rule covers when the script lies in the working directory. After it, where the
// shell stands and what its variables hold are known only when it runs (the script
// may cd or set them), so the words that follow are judged as after a cd to $VAR;
// but a word climbing out of that folder asks only as any command outside the
// working directory does, not as one that may name the daemon's private files, since
// the approver trusts the script as much as a `bash ./env.sh` there. A script
// outside the working directory, or named by a word known only when it runs or
// without a slash (bash looks it up in PATH first), is no such script: the words
// after it ask as after cd $VAR, and no prefix rule (source:*) covers its source.

// scriptInside reports whether the sourced file named by script (Dir.Script)
// exists in the working directory, symlinks resolved, and not in a private dir
// there.
func (c *check) scriptInside(script string) bool {
	work := c.workdirReal()
	if script == "" || work == "" {
		return false
	}
	c.wordDirs(nil) // works out c.start
	p := filepath.FromSlash(script)
	if !filepath.IsAbs(p) {
		if c.start == "" {
			return false
		}
		// Not filepath.Join, which would clean link/.. away.
		p = c.start + string(filepath.Separator) + p
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	real = filepath.ToSlash(real)
	if !within(real, work) {
		return false
	}
	for _, d := range c.e.private {
		if within(real, d) && !within(work, d) {
			return false
		}
	}
	return true
}

// vagueUntrusted reports whether one of ds is a folder known only when it runs that
// no script inside the working directory led to (cd $VAR, cd ~, a script sourced
// from elsewhere).
func (c *check) vagueUntrusted(ds []Dir) bool {
	for _, d := range ds {
		if d.Vague && (d.Script == "" || !c.scriptInside(d.Script)) {
			return true
		}
	}
	return false
}

// sourcesUnknown reports whether sc sources a script that is not one in the working
// directory from every folder sc may run in.
func (c *check) sourcesUnknown(sc SimpleCommand) bool {
	words := sc.Words
	for len(words) > 0 && (words[0] == "builtin" || words[0] == "command") {
		words = words[1:]
		for len(words) > 0 && strings.HasPrefix(words[0], "-") {
			words = words[1:]
		}
	}
	if len(words) == 0 || words[0] != "source" && words[0] != "." {
		return false
	}
	special := len(sc.special) > len(sc.Words)-len(words)+1 && sc.special[len(sc.Words)-len(words)+1]
	if len(words) < 2 || special {
		return true
	}
	target := sourceTarget([]field{{text: words[1]}})
	if target == "" {
		return true
	}
	ds := sc.Dirs
	if len(ds) == 0 {
		ds = []Dir{startDir}
	}
	for _, d := range ds {
		script := target
		switch {
		case path.IsAbs(target):
		case d.Vague:
			return true
		case d.Path != ".":
			script = d.Path + "/" + target
		}
		if !c.scriptInside(script) {
			return true
		}
	}
	return false
}

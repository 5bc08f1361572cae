package approval

import (
	"fmt"
	"path"
	"strings"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Writes from a folder known only when it runs. After cd $X, cd ~, cd -, a popd
// past the stack or a sourced script, a relative word of a command that writes or
// deletes names a file only the run knows: `cd - && rm -rf build` may delete any
// build, `cd ~ && echo x >> .bash_aliases` writes the home directory's. A delete
// there (rm with or without -r or -f, rmdir, unlink, shred -u, find -delete, git
// clean -f, and git reset --hard, checkout -- ., restore, which discard uncommitted
// work) is critical and immune, as `cd / && rm -rf usr` is: no rule or mode can
// tell what it deletes. So is a delete under ~- or $OLDPWD, the folder cd - goes
// to, which this check does not follow.
// Other writes there ask as reads there do: no prefix rule covers them (an exact
// rule, which names every word, does; a redirection, which no rule shows, asks
// every time, as `> $F` does), and bypass mode lets them through. A word that
// names the same file from any folder (/x, ~/x, $HOME/x) is judged on its own. A
// folder that a cd to a variable the line sets leads to (command_vars.go) is
// known, not vague. After sourcing a script of the working directory
// (command_source.go), trusted as much as running it there, a delete asks as such other writes do instead of being immune, and other
// words are read from where the line starts, as before.

// rootedWord reports whether the word w names the same file from any folder. ~+
// and $PWD name the folder the shell stands in, ~- and $OLDPWD the one cd - goes
// back to: neither is.
func rootedWord(w string) bool {
	if pwdWord(w) || oldpwdWord(w) {
		return false
	}
	for _, home := range []string{"$HOME", "${HOME}"} {
		if w == home || strings.HasPrefix(w, home+"/") {
			return true
		}
	}
	return path.IsAbs(w) || strings.HasPrefix(w, "~")
}

// pwdWord reports whether w starts with ~+ or $PWD, the folder the shell stands in
// (or /proc/self/cwd, that of the program reading it).
func pwdWord(w string) bool {
	return prefixedBy(w, "~+", "$PWD", "${PWD}", "/proc/self/cwd", "/proc/thread-self/cwd")
}

// oldpwdWord reports whether w starts with ~- or $OLDPWD, the folder the shell
// stood in before its last cd, which this check does not follow: like cd -, a
// word under it is read from a folder known only when it runs.
func oldpwdWord(w string) bool { return prefixedBy(w, "~-", "$OLDPWD", "${OLDPWD}") }

func prefixedBy(w string, prefixes ...string) bool {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(w, p); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// vagueDelete is a delete of a relative path from a folder a script of the
// working directory may have led to, which the engine judges once it knows
// whether that script lies there (scriptInside).
type vagueDelete struct {
	part, what string
	dirs       []Dir
}

// deleteFromVague notes a delete of target ("": the command names none, find's
// default . or xargs' input) by part, when the command may run in a folder known
// only when it runs and target is relative, or target lies under ~- or $OLDPWD;
// it reports whether it did, so that the caller does not judge target from the
// start as well.
func (a *analyzer) deleteFromVague(part, target string) bool {
	what := "deletes files"
	if target != "" {
		what = "deletes " + fmt.Sprintf("%q", target)
	}
	return a.changeFromVague(part, target, what)
}

// changeFromVague is deleteFromVague for a change that discards work as a delete
// does (git reset --hard), said by what.
func (a *analyzer) changeFromVague(part, target, what string) bool {
	if target != "" && rootedWord(target) {
		return false
	}
	vague, untrusted := false, false
	if oldpwdWord(target) {
		vague, untrusted = true, true
	}
	for _, d := range a.cmdDirs {
		if d.Vague {
			vague, untrusted = true, untrusted || d.Script == ""
		}
	}
	if !vague {
		return false
	}
	what += " in a folder known only when it runs (after a cd to ~, - or $VAR, a popd, or a sourced script, or under ~- or $OLDPWD), so what it deletes cannot be checked"
	if untrusted {
		a.flag(part, what, tool.RiskCritical)
		return true
	}
	a.res.vagueDeletes = append(a.res.vagueDeletes, vagueDelete{part: part, what: what, dirs: a.cmdDirs})
	return true
}

// vagueDeleteImmune judges the deletes deleteFromVague left to the engine: one
// after a script outside the working directory is critical and immune like the
// rest. It returns the finding's text, or "".
func (c *check) vagueDeleteImmune() string {
	for _, d := range c.cmd.vagueDeletes {
		if c.vagueUntrusted(d.dirs) {
			f := Finding{Part: d.part, What: d.what, Risk: tool.RiskCritical, Immune: true}
			c.cmd.Findings = append(c.cmd.Findings, f)
			c.risk = tool.RiskCritical
			return f.String()
		}
	}
	return ""
}

// siteVague reports whether a written path is relative and read from a folder
// known only when it runs that no script of the working directory led to.
func (c *check) siteVague(w pathSite) bool {
	return !rootedWord(w.path) && c.vagueUntrusted(w.dirs)
}

// writesVague names what the command writes or deletes in a folder known only
// when it runs, or "".
func (c *check) writesVague() string {
	if len(c.cmd.vagueDeletes) > 0 {
		d := c.cmd.vagueDeletes[0]
		return Finding{Part: d.part, What: d.what}.String()
	}
	for _, w := range c.cmd.writeSites {
		if c.siteVague(w) {
			return fmt.Sprintf("the command writes %q in a folder known only when it runs (after a cd to ~, - or $VAR, a popd, or a sourced script)", w.path)
		}
	}
	return ""
}

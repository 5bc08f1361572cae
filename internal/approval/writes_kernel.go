package approval

import (
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Writes to the kernel's control files. A command that writes a file under /sys or
// /proc changes the machine rather than a file: its pid written into a cgroup's
// cgroup.procs (or tasks) takes it out of the pids and memory cgroups the sandbox
// put it in, so that a fork bomb passes sandbox.pids_limit; /proc/sys and
// /sys/kernel hold the kernel's settings, /proc/sysrq-trigger reboots. In local
// mode, with the daemon running as root, nothing else stops such a write (isolated
// commands see /sys and /proc read-only), so it is critical and immune, as a write
// into the data dir is: it always asks, whatever the rules and mode say. Commands
// that only read them (cat /sys/fs/cgroup/pids/pids.max) are not concerned.

// kernelControl says what p is when it names one of the kernel's control files
// (anything under /sys or /proc but the shell's own descriptors, /proc/self/fd/1),
// or "". A glob in p's first component that could match sys or proc counts. With
// argOnly (p is an argument of a command that may only read it), only cgroup
// files and kernel settings count: awk '…' /proc/meminfo reads.
func kernelControl(p string, argOnly bool) string {
	if !path.IsAbs(p) {
		return ""
	}
	c := path.Clean(p)
	first, _, _ := strings.Cut(c[1:], "/")
	top := first
	if strings.ContainsAny(first, "*?[") {
		for _, name := range []string{"sys", "proc"} {
			if ok, _ := path.Match(first, name); ok {
				top = name
			}
		}
	}
	switch {
	case top == "sys" && (within(c, "/sys/fs/cgroup") || first != top):
		return "the cgroup control file " + p + " (a pid written into cgroup.procs or tasks leaves its pids and memory cgroups: a fork bomb then passes sandbox.pids_limit)"
	case top == "proc" && (within(c, "/proc/sys") || c == "/proc/sysrq-trigger"), top == "sys" && within(c, "/sys/kernel"):
		return "the kernel setting " + p
	case argOnly:
		return ""
	case top == "sys", top == "proc" && !procOwnFD(c):
		return "the kernel interface " + p
	}
	return ""
}

// procOwnFD reports whether p is a descriptor of the shell's own (/proc/self/fd/1,
// /proc/thread-self/fd/2): a write there is a write to its output.
func procOwnFD(p string) bool {
	for _, self := range []string{"/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(p, self); ok && allDigits(n) {
			return true
		}
	}
	return false
}

// kernelWrite flags, critical and immune, every path the line may write that is a
// kernel control file: as written, as the line's variables give it, and read from
// each folder a cd led the command to.
func (a *analyzer) kernelWrites() {
	for _, w := range a.res.writeSites {
		if w.copySource {
			continue // read: cp /proc/cpuinfo out
		}
		cands := []string{w.path}
		if d := paramDefaults(w.src); d != "" {
			cands = append(cands, d) // ${X:-/sys/…}
		}
		for _, v := range w.values {
			cands = append(cands, v.text)
		}
		if !path.IsAbs(w.path) {
			for _, d := range w.dirs {
				if !d.Vague && path.IsAbs(d.Path) {
					cands = append(cands, path.Join(d.Path, w.path))
				}
			}
		}
		for _, p := range cands {
			if what := kernelControl(p, w.argOnly); what != "" {
				a.add(Finding{Part: w.path, What: "writes " + what, Risk: tool.RiskCritical, Immune: true})
				break
			}
		}
	}
}

// paramOperand is a parameter expansion with a default, assigned or alternative
// value (${X:-v}, ${X=v}, ${X:+v}, ${X?v}), whose value may be what the word expands to.
var paramOperand = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=+?]([^{}]*)\}`)

// paramDefaults is src, a redirection target as written, with each parameter
// expansion that has one replaced by its default or alternative value and quotes
// removed (> "${X:-/sys/fs/cgroup/pids}/cgroup.procs" may write
// /sys/fs/cgroup/pids/cgroup.procs), or "" when src has none.
func paramDefaults(src string) string {
	if !strings.Contains(src, "${") {
		return ""
	}
	d := paramOperand.ReplaceAllString(src, "$1")
	if d == src {
		return ""
	}
	return strings.NewReplacer(`"`, "", `'`, "").Replace(d)
}

// kernelWrite is kernelWrites for the paths the analysis could not place: relative
// ones read from the working directory, or from a folder a relative cd led to
// (cd ../../sys/fs/cgroup/pids). It returns the finding's text, or "".
func (c *check) kernelWrite() string {
	for _, w := range c.cmd.writeSites {
		if path.IsAbs(w.path) || strings.HasPrefix(w.path, "~") || strings.Contains(w.path, "$") {
			continue // placed by the analysis, or not placeable
		}
		dirs, _ := c.wordDirs(w.dirs)
		for _, dir := range dirs {
			if dir == "" || !filepath.IsAbs(dir) {
				continue
			}
			if what := kernelControl(path.Join(filepath.ToSlash(dir), w.path), w.argOnly); what != "" {
				f := Finding{Part: w.path, What: "writes " + what, Risk: tool.RiskCritical, Immune: true}
				c.cmd.Findings = append(c.cmd.Findings, f)
				c.risk = tool.RiskCritical
				return f.String()
			}
		}
	}
	return ""
}

// kernelPathsInCode flags, critical and immune, a cgroup file or kernel setting a
// program's code names as a string (python3 -c "open('/sys/fs/cgroup/…/cgroup.procs',
// 'w')…", node -e, perl -e): what the code does with it cannot be told, as with a path
// given to python3 script.py (argOnly), which counts them too.
func (a *analyzer) kernelPathsInCode(texts []string) {
	for _, t := range texts {
		t = strings.TrimLeft(t, "<>+|& \t") // perl's open(F, ">/sys/…")
		if what := kernelControl(t, true); what != "" {
			a.add(Finding{Part: t, What: "may write (named in a program's code) " + what, Risk: tool.RiskCritical, Immune: true})
		}
	}
}

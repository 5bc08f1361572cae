package approval

import (
	"errors"
	"io"
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// newExpandConfig returns an expansion config that reads words without running
// anything: variables expand to their own name ("$HOME"), so `~`, `$HOME` and
// `${HOME}` all read as "$HOME"; command substitutions read as "$(…)". A fresh
// config per analysis, because expand mutates the config it is given.
func newExpandConfig() *expand.Config {
	return &expand.Config{
		Env: expand.FuncEnviron(func(name string) string {
			switch {
			case name == "IFS":
				return ""
			case strings.HasPrefix(name, "HOME "): // ~user
				return "~" + name[len("HOME "):]
			}
			return "$" + name
		}),
		CmdSubst: func(w io.Writer, _ *syntax.CmdSubst) error {
			_, err := io.WriteString(w, "$(…)")
			return err
		},
		ProcSubst: func(*syntax.ProcSubst) (string, error) {
			return "", errors.New("process substitution")
		},
	}
}

// field is one word of a command as the shell would pass it, after quote removal.
type field struct {
	text    string
	dynamic bool // part of it is only known at run time ($VAR, $(…), $((…)))
	glob    bool // the shell expands it further: an unquoted *, ? or [, a leading ~
}

// expandWords reads the words of a command. Brace expansion is applied
// (`/{etc,usr}` is two words); globs are not. A word that cannot be read is kept as
// written and marked dynamic.
func expandWords(cfg *expand.Config, src string, words []*syntax.Word) []field {
	out := make([]field, 0, len(words))
	for _, w := range words {
		dyn, glob := wordDynamic(w), wordGlob(w)
		if braceFanout(w) > maxBraceFanout {
			out = append(out, field{text: nodeText(src, w), dynamic: true})
			continue
		}
		fs, err := expand.Fields(cfg, w)
		if err != nil {
			out = append(out, field{text: nodeText(src, w), dynamic: true})
			continue
		}
		if len(fs) == 0 { // "$EMPTY" style words vanish; keep a marker
			fs = []string{""}
		}
		for _, s := range fs {
			out = append(out, field{text: s, dynamic: dyn, glob: glob})
		}
	}
	return out
}

// maxBraceFanout bounds brace expansion: a{1,2}{1,2}… doubles with each group,
// and a word that would expand further is kept as written.
const maxBraceFanout = 256

// braceFanout estimates how many words brace expansion makes of w.
func braceFanout(w *syntax.Word) int {
	cp := *w // SplitBraces replaces the Parts slice
	if !syntax.SplitBraces(&cp) {
		return 1
	}
	return partsFanout(cp.Parts)
}

func partsFanout(parts []syntax.WordPart) int {
	n := 1
	for _, p := range parts {
		br, ok := p.(*syntax.BraceExp)
		if !ok {
			continue
		}
		k := 0
		if br.Sequence {
			k = maxBraceFanout + 1 // {1..N}: assume the worst unless it is small
			if len(br.Elems) >= 2 {
				from, err1 := strconv.Atoi(br.Elems[0].Lit())
				to, err2 := strconv.Atoi(br.Elems[1].Lit())
				if err1 == nil && err2 == nil && to-from <= maxBraceFanout && from-to <= maxBraceFanout {
					k = max(to-from, from-to) + 1
				} else if err1 != nil && err2 != nil {
					k = 26 * 2 // {a..z}, {A..z}
				}
			}
		} else {
			for _, e := range br.Elems {
				k += partsFanout(e.Parts)
			}
		}
		n *= max(k, 1)
		if n > maxBraceFanout {
			return n
		}
	}
	return n
}

// wordGlob reports whether the shell expands w into other words than its text: an
// unquoted, unescaped *, ? or [ (a pattern over file names), an extended glob, or a
// leading ~. Quote removal turns '*' and * into the same text; an allow rule must
// not take one for the other.
func wordGlob(w *syntax.Word) bool {
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.ExtGlob:
			return true
		case *syntax.Lit:
			if i == 0 && strings.HasPrefix(p.Value, "~") {
				return true
			}
			for j := 0; j < len(p.Value); j++ {
				switch p.Value[j] {
				case '\\':
					j++ // the next byte is escaped: literal
				case '*', '?', '[':
					return true
				}
			}
		}
	}
	return false
}

func wordDynamic(w *syntax.Word) bool {
	return partsDynamic(w.Parts)
}

func partsDynamic(parts []syntax.WordPart) bool {
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst:
			return true
		case *syntax.DblQuoted:
			if partsDynamic(p.Parts) {
				return true
			}
		}
	}
	return false
}

// withDefaults is w with each ${NAME:-word}, ${NAME-word}, ${NAME:=word} and
// ${NAME=word} replaced by its word, as the shell expands it when NAME is unset:
// rm -rf "${DIR:-/}" deletes / then. changed is false when w has none.
func withDefaults(w *syntax.Word) (_ *syntax.Word, changed bool) {
	var rewrite func(parts []syntax.WordPart) []syntax.WordPart
	rewrite = func(parts []syntax.WordPart) []syntax.WordPart {
		out := make([]syntax.WordPart, 0, len(parts))
		for _, p := range parts {
			switch p := p.(type) {
			case *syntax.ParamExp:
				if p.Exp != nil {
					switch p.Exp.Op {
					case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
						changed = true
						if p.Exp.Word != nil {
							out = append(out, rewrite(p.Exp.Word.Parts)...)
						}
						continue
					}
				}
			case *syntax.DblQuoted:
				cp := *p
				cp.Parts = rewrite(p.Parts)
				out = append(out, &cp)
				continue
			}
			out = append(out, p)
		}
		return out
	}
	parts := rewrite(w.Parts)
	if !changed {
		return w, false
	}
	return &syntax.Word{Parts: parts}, true
}

// nodeText is the source text of a node, or "" when the positions do not fit.
func nodeText(src string, n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(src) || start > end {
		return ""
	}
	return src[start:end]
}

// unwrapped is what one simple command runs, seen through its wrappers.
type unwrapped struct {
	// key is the command with transparent wrappers (env, nice, timeout, nohup,
	// command, exec, stdbuf, ionice, time) removed: what allow rules match.
	key []string
	// runs are the commands it runs in turn through sudo, doas, xargs and
	// find -exec, each with its own wrappers removed.
	runs [][]string
	// shell are strings it runs as shell code (sh -c, eval, su -c, watch, env -S).
	shell     []string
	shellWhat string
	// privileged is set when sudo, doas or su runs something as another user.
	privileged bool
	// envs are the variable names set through env NAME=VALUE.
	envs [][2]string
	// fromInput is set when xargs runs a command with arguments from its input.
	fromInput bool
	// chdirs are the folders env -C (--chdir) changes to before it runs the
	// command, in turn.
	chdirs []string
}

const maxUnwrap = 16

var shellNames = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "fish": true, "ash": true, "busybox": true}

func unwrap(words []string) unwrapped {
	u := unwrapped{key: words}
	cur, inKey := words, true
	for step := 0; len(cur) > 0 && step < maxUnwrap; step++ {
		name := path.Base(cur[0])
		next, more := []string(nil), false
		switch name {
		case "env":
			var split string
			var dirs []string
			next, split, u.envs, dirs = skipEnv(cur, u.envs)
			u.chdirs = append(u.chdirs, dirs...)
			if split != "" {
				u.shell, u.shellWhat = append(u.shell, split), "env -S"
			}
		case "nice":
			next = skipOptions(cur[1:], "n", "adjustment")
		case "nohup", "builtin":
			next = skipOptions(cur[1:], "", "")
		case "timeout":
			next = skipOptions(cur[1:], "sk", "signal kill-after")
			if len(next) > 0 { // the duration
				next = next[1:]
			}
		case "stdbuf":
			next = skipOptions(cur[1:], "ioe", "input output error")
		case "ionice":
			next = skipOptions(cur[1:], "cnP", "class classdata")
		case "time":
			next = skipOptions(cur[1:], "fo", "format output")
		case "exec":
			next = skipOptions(cur[1:], "a", "")
		case "command":
			if len(cur) > 1 && (cur[1] == "-v" || cur[1] == "-V") {
				return u // a lookup, runs nothing
			}
			next = skipOptions(cur[1:], "", "")
		case "sudo", "doas":
			u.privileged = true
			next, more = skipSudo(cur[1:]), true
		case "su":
			u.privileged = true
			for i := 1; i+1 < len(cur); i++ {
				if cur[i] == "-c" || cur[i] == "--command" {
					u.shell, u.shellWhat = append(u.shell, cur[i+1]), "su -c"
				}
			}
			return u
		case "xargs":
			next, more = skipOptions(cur[1:], "IELnPsdax", "arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var"), true
			if len(next) == 0 {
				next = []string{"echo"}
			}
			u.fromInput = true
		case "find":
			for _, ex := range findExecs(cur[1:]) {
				sub := unwrap(ex)
				u.runs = append(u.runs, sub.key)
				u.runs = append(u.runs, sub.runs...)
				u.shell = append(u.shell, sub.shell...)
				u.shellWhat = cmpOr(u.shellWhat, sub.shellWhat)
				u.privileged = u.privileged || sub.privileged
			}
			return u
		case "eval":
			u.shell, u.shellWhat = append(u.shell, strings.Join(cur[1:], " ")), "eval"
			return u
		case "watch":
			rest := skipOptions(cur[1:], "nq", "interval errexit equexit")
			if len(rest) > 0 {
				u.shell, u.shellWhat = append(u.shell, strings.Join(rest, " ")), "watch"
			}
			return u
		case "trap":
			if len(cur) > 1 {
				u.shell, u.shellWhat = append(u.shell, cur[1]), "trap"
			}
			return u
		default:
			if shellNames[name] {
				if script, ok := shellCommandString(cur[1:]); ok {
					u.shell, u.shellWhat = append(u.shell, script), name+" -c"
				}
			}
			return u
		}
		if len(next) == 0 {
			return u
		}
		if more {
			inKey = false
		}
		if inKey {
			u.key = next
		} else {
			u.runs = append(u.runs, next)
		}
		cur = next
	}
	return u
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// skipOptions drops leading options. withArg lists the short options that take a
// separate value; longArg the long ones (space separated) that may take one.
func skipOptions(args []string, withArg, longArg string) []string {
	longs := strings.Fields(longArg)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:]
		case strings.HasPrefix(a, "--"):
			name, _, hasVal := strings.Cut(a[2:], "=")
			if !hasVal && contains(longs, name) {
				i++
			}
		case len(a) > 1 && a[0] == '-':
			if len(a) == 2 && strings.IndexByte(withArg, a[1]) >= 0 {
				i++
			}
		default:
			return args[i:]
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// skipEnv drops env's options and NAME=VALUE words. split is the string of -S.
func skipEnv(words []string, envs [][2]string) (rest []string, split string, _ [][2]string, chdirs []string) {
	for i := 1; i < len(words); i++ {
		a := words[i]
		switch {
		case a == "--":
			return words[i+1:], "", envs, chdirs
		case a == "-S" || a == "--split-string":
			if i+1 < len(words) {
				return nil, strings.Join(words[i+1:], " "), envs, chdirs
			}
			return nil, "", envs, chdirs
		case strings.HasPrefix(a, "-S") || strings.HasPrefix(a, "--split-string="):
			_, v, ok := strings.Cut(a, "=")
			if !ok {
				v = a[2:]
			}
			return nil, strings.Join(append([]string{v}, words[i+1:]...), " "), envs, chdirs
		case a == "-C" || a == "--chdir":
			if i+1 < len(words) {
				chdirs = append(chdirs, words[i+1])
			}
			i++
		case strings.HasPrefix(a, "--chdir="):
			chdirs = append(chdirs, a[len("--chdir="):])
		case strings.HasPrefix(a, "-C"):
			chdirs = append(chdirs, a[2:])
		case a == "-u" || a == "--unset":
			i++
		case strings.HasPrefix(a, "-"):
		case isAssignment(a):
			name, val, _ := strings.Cut(a, "=")
			envs = append(envs, [2]string{name, val})
		default:
			return words[i:], "", envs, chdirs
		}
	}
	return nil, "", envs, chdirs
}

func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	return ok && validName(name)
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func skipSudo(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:]
		case strings.HasPrefix(a, "--"):
			if !strings.Contains(a, "=") && contains([]string{"user", "group", "host", "prompt", "close-from", "chdir", "role", "type", "other-user", "command-timeout", "chroot"}, a[2:]) {
				i++
			}
		case len(a) > 1 && a[0] == '-':
			if len(a) == 2 && strings.IndexByte("ughpCDrtUTR", a[1]) >= 0 {
				i++
			}
		case isAssignment(a):
		default:
			return args[i:]
		}
	}
	return nil
}

// findExecs returns the commands of find's -exec, -execdir, -ok and -okdir actions.
func findExecs(args []string) [][]string {
	var out [][]string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			if j > i+1 {
				out = append(out, args[i+1:j])
			}
			i = j
		}
	}
	return out
}

// shellCommandString finds the -c string of a shell invocation (`bash -lc 'x'`).
func shellCommandString(args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+"):
			return "", false
		case a == "-o" || a == "+o" || a == "-O" || a == "+O": // set options take a value
			i++
		case strings.HasPrefix(a, "--"):
		case a[0] == '-' && strings.ContainsRune(a[1:], 'c'):
			if i+1 < len(args) {
				return args[i+1], true
			}
			return "", true
		}
	}
	return "", false
}

package approval

import (
	"path"
	"strings"
)

// Programs whose words carry a script or a command: what they read, write and run
// beyond the files their words name. sed's r and w commands name files inside its
// script, its e command runs shell code; awk's getline < and print > name files, its
// system() and pipes run shell code. A static reading finds them there as it finds
// a redirection's file in the line; the code they run asks whatever the rules and
// mode say, as sh -c's does.

// effects are what one program's script does: files it reads and writes, and the
// shell code it runs ("" for code it builds as it runs), said as what.
type effects struct {
	reads, writes, runs []string
	what                string
	// maybe are strings of an interpreter's code that may be commands it runs
	// (os.system("…"), `…`, ["rm", "-rf", x]): only what the danger checks find
	// in them counts, since most are no commands at all.
	maybe []string
}

// add gathers what o reads, writes and runs into fx.
func (fx *effects) add(o effects) {
	fx.reads = append(fx.reads, o.reads...)
	fx.writes = append(fx.writes, o.writes...)
	fx.runs = append(fx.runs, o.runs...)
}

// scriptEffects reads the script words of the program words runs.
func scriptEffects(words []string) effects {
	switch path.Base(words[0]) {
	case "sed", "gsed":
		var fx effects
		scripts, _ := sedScripts(words[1:])
		for _, s := range scripts {
			fx.add(sedScriptEffects(s))
		}
		fx.what = "sed e"
		return fx
	case "tar", "gtar", "bsdtar":
		return effects{runs: tarCommands(words[1:]), what: "tar"}
	case "rsync":
		return effects{runs: rsyncCommands(words[1:]), what: "rsync -e"}
	case "git":
		return effects{runs: gitCommands(words[1:]), what: "git -c"}
	case "python", "python3", "perl", "ruby", "node", "php", "deno", "bun", "nodejs":
		var fx effects
		for _, code := range interpreterCode(path.Base(words[0]), words[1:]) {
			fx.maybe = append(fx.maybe, codeStrings(code)...)
		}
		return fx
	case "awk", "gawk", "mawk", "nawk":
		var fx effects
		program, sources := awkProgram(words[1:])
		for _, p := range append(sources, program) {
			fx.add(awkEffects(p))
		}
		fx.what = "awk system() or a pipe"
		return fx
	}
	return effects{}
}

// awkProgram is the program text of an awk command line: its first operand, unless
// -f, -e or -E (gawk's --file, --source, --exec) give it another way ("" then:
// a program file is read only when it runs, and a --source one's effects are read
// all the same through sources).
func awkProgram(args []string) (program string, sources []string) {
	fromOption := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch {
		case a == "--":
			if !fromOption && i+1 < len(args) {
				return args[i+1], sources
			}
			return "", sources
		case strings.HasPrefix(a, "--"):
			switch name {
			case "--source", "--file", "--exec", "--include", "--load", "--assign", "--field-separator":
				if !hasVal && i+1 < len(args) {
					val = args[i+1]
					i++
				}
				if name == "--source" {
					sources = append(sources, val)
				}
				fromOption = fromOption || name == "--source" || name == "--file" || name == "--exec"
			}
		case len(a) > 1 && a[0] == '-':
			c := a[1]
			if strings.IndexByte("fevFEil", c) < 0 {
				continue
			}
			v := a[2:]
			if v == "" && i+1 < len(args) {
				v = args[i+1]
				i++
			}
			if c == 'e' {
				sources = append(sources, v)
			}
			fromOption = fromOption || c == 'f' || c == 'e' || c == 'E'
		default:
			if fromOption {
				return "", sources
			}
			return a, sources
		}
	}
	return "", sources
}

// awkToken is one token of an awk program: a string literal (its value), a name,
// or an operator among | |& > >> < ( ), or another character.
type awkToken struct {
	kind byte // 's' string, 'n' name, 'o' operator, 'x' anything else
	text string
}

// awkTokens reads an awk program far enough to find its strings, names, pipes and
// redirections; print's > is told from a comparison by standing outside the
// parentheses of its print statement (kind 'r'), and a regex literal from a
// division by what comes before the slash, as awk itself does.
func awkTokens(p string) []awkToken {
	var out []awkToken
	printDepth, depth := -1, 0
	prev := func() awkToken {
		if len(out) == 0 {
			return awkToken{kind: 'o', text: ";"}
		}
		return out[len(out)-1]
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == ' ' || c == '\t' || c == '\\' && i+1 < len(p) && p[i+1] == '\n':
		case c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			i--
		case c == '\n' || c == ';' || c == '{' || c == '}':
			printDepth = -1
			out = append(out, awkToken{kind: 'o', text: ";"})
		case c == '"':
			var b strings.Builder
			for i++; i < len(p) && p[i] != '"'; i++ {
				if p[i] == '\\' && i+1 < len(p) {
					i++
					switch p[i] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						b.WriteByte(p[i])
					}
					continue
				}
				b.WriteByte(p[i])
			}
			out = append(out, awkToken{kind: 's', text: b.String()})
		case c == '/' && !(prev().kind == 's' || prev().kind == 'n' || prev().kind == 'x' && (prev().text == ")" || prev().text == "]" || prev().text == "$")):
			for i++; i < len(p) && p[i] != '/'; i++ { // a regex literal
				if p[i] == '\\' {
					i++
				}
			}
			out = append(out, awkToken{kind: 'x', text: "/re/"})
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(p) && (p[j] == '_' || p[j] >= 'a' && p[j] <= 'z' || p[j] >= 'A' && p[j] <= 'Z' || p[j] >= '0' && p[j] <= '9' || p[j] == '.') {
				j++
			}
			w := p[i:j]
			if (w == "print" || w == "printf") && printDepth < 0 {
				printDepth = depth
			}
			out = append(out, awkToken{kind: 'n', text: w})
			i = j - 1
		case c == '|':
			switch {
			case i+1 < len(p) && p[i+1] == '|':
				out = append(out, awkToken{kind: 'x', text: "||"})
				i++
			case i+1 < len(p) && p[i+1] == '&':
				out = append(out, awkToken{kind: 'o', text: "|&"})
				i++
			default:
				out = append(out, awkToken{kind: 'o', text: "|"})
			}
		case c == '>':
			op := ">"
			if i+1 < len(p) && p[i+1] == '>' {
				op = ">>"
				i++
			} else if i+1 < len(p) && p[i+1] == '=' {
				out = append(out, awkToken{kind: 'x', text: ">="})
				i++
				continue
			}
			if printDepth >= 0 && depth == printDepth {
				out = append(out, awkToken{kind: 'r', text: op})
			} else {
				out = append(out, awkToken{kind: 'x', text: op})
			}
		case c == '(':
			depth++
			out = append(out, awkToken{kind: 'x', text: "("})
		case c == ')':
			depth--
			out = append(out, awkToken{kind: 'x', text: ")"})
		default:
			out = append(out, awkToken{kind: 'x', text: string(c)})
		}
	}
	return out
}

// awkEffects reads an awk program for the files its getline < and print > name,
// and the commands its system(), its pipes (print | "cmd", "cmd" | getline) and
// gawk's coprocesses (|&) run: literal when a string alone gives them, "" when the
// program builds them.
func awkEffects(p string) effects {
	var fx effects
	t := awkTokens(p)
	at := func(i int) awkToken {
		if i < 0 || i >= len(t) {
			return awkToken{kind: 'o', text: ";"}
		}
		return t[i]
	}
	// lone: the string at i is a whole operand, not part of a concatenation.
	lone := func(i int) bool {
		next := at(i + 1)
		return at(i).kind == 's' && (next.kind == 'o' || next.kind == 'r' || next.text == ")" || next.text == ",")
	}
	for i, tok := range t {
		switch {
		case tok.kind == 'n' && tok.text == "system" && at(i+1).text == "(":
			if at(i+2).kind == 's' && at(i+3).text == ")" {
				fx.runs = append(fx.runs, at(i+2).text)
			} else {
				fx.runs = append(fx.runs, "")
			}
		case tok.kind == 'o' && (tok.text == "|" || tok.text == "|&"):
			switch {
			case at(i+1).kind == 'n' && at(i+1).text == "getline" && at(i-1).kind == 's' && (at(i-2).kind == 'o' || at(i-2).text == "("):
				fx.runs = append(fx.runs, at(i-1).text)
			case at(i+1).kind == 's' && lone(i+1):
				fx.runs = append(fx.runs, at(i+1).text)
			default:
				fx.runs = append(fx.runs, "")
			}
		case tok.kind == 'r' && lone(i+1):
			fx.writes = append(fx.writes, at(i+1).text)
		case tok.kind == 'x' && tok.text == "<" && (at(i-1).text == "getline" || at(i-2).text == "getline" && at(i-1).kind == 'n') && lone(i+1):
			fx.reads = append(fx.reads, at(i+1).text)
		}
	}
	return fx
}

// tarLong are GNU tar's long options whose value is a command it runs through the
// shell, with the shortest abbreviation getopt_long takes for each: --to-command
// (fed each extracted file), --use-compress-program, --info-script and
// --new-volume-script; --checkpoint-action runs its exec= value.
var tarLong = []struct{ name, abbrev string }{
	{"--to-command", "--to-"}, {"--use-compress-program", "--use-"}, {"--info-script", "--inf"},
	{"--new-volume-script", "--new-"}, {"--checkpoint-action", "--checkpoint-"},
}

// tarCommands are the commands tar's options give it to run: the long ones of
// tarLong, -I and -F (in a cluster such as -xIzstd, or old-style letters such as
// xIf, whose values are the next words in turn).
func tarCommands(args []string) []string {
	var out []string
	command := func(opt, val string) {
		if opt == "--checkpoint-action" {
			if v, ok := strings.CutPrefix(val, "exec="); ok {
				out = append(out, v)
			}
			return
		}
		out = append(out, val)
	}
	// withArg are the short options that take a value.
	const withArg = "fCTXbgKLNVHIF"
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a, "=")
			for _, l := range tarLong {
				if strings.HasPrefix(name, l.abbrev) && strings.HasPrefix(l.name, name) {
					if !hasVal && i+1 < len(args) {
						val = args[i+1]
						i++
					}
					command(l.name, val)
				}
			}
		case len(a) > 1 && a[0] == '-' || i == 0:
			// -xIzstd, or old-style letters (xIf prog file) as the first word.
			old := a[0] != '-'
			letters := strings.TrimPrefix(a, "-")
			next := i + 1
			for j := 0; j < len(letters); j++ {
				c := letters[j]
				if strings.IndexByte(withArg, c) < 0 {
					continue
				}
				val := ""
				switch {
				case !old && j+1 < len(letters):
					val = letters[j+1:]
					j = len(letters)
				case next < len(args):
					val = args[next]
					next++
				}
				if c == 'I' || c == 'F' {
					out = append(out, val)
				}
			}
			i = next - 1
		}
	}
	return out
}

// rsyncCommands are the remote shells rsync's -e (--rsh) names, which it runs
// here with the words it splits them into.
func rsyncCommands(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out
		case a == "--rsh" || a == "-e":
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
		case strings.HasPrefix(a, "--rsh="):
			out = append(out, a[len("--rsh="):])
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			// -avze ssh, -e'ssh -p 2': e takes the rest of the cluster or the next word.
			if j := strings.IndexByte(a, 'e'); j > 0 {
				if j+1 < len(a) {
					out = append(out, a[j+1:])
				} else if i+1 < len(args) {
					out = append(out, args[i+1])
					i++
				}
			}
		}
	}
	return out
}

// gitCommandKeys are the last parts of git config names whose value is a
// command git runs (core.pager, core.sshCommand, diff.<driver>.textconv,
// credential.helper, filter.<driver>.clean …).
var gitCommandKeys = map[string]bool{
	"pager": true, "editor": true, "sshcommand": true, "fsmonitor": true, "external": true, "command": true,
	"textconv": true, "program": true, "helper": true, "driver": true, "askpass": true, "clean": true,
	"smudge": true, "process": true, "cmd": true, "difffilter": true, "gitproxy": true, "packobjectshook": true,
}

// gitCommands are the commands git's -c options, before the subcommand, set:
// a value of a key in gitCommandKeys, any key under pager. and alias. (an alias
// starting with ! is shell code); a --config-env value comes from the
// environment, known only when it runs (""). An empty value (-c key=) runs nothing.
func gitCommands(args []string) []string {
	var out []string
	for i := 0; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a := args[i]
		switch {
		case a == "-c" || a == "--config-env":
			if i+1 >= len(args) {
				return out
			}
			i++
			key, val, set := strings.Cut(args[i], "=")
			key = strings.ToLower(key)
			last := key[strings.LastIndexByte(key, '.')+1:]
			switch {
			case set && val == "" && a == "-c":
				// credential.helper= empties the key: git runs no helper.
			case strings.HasPrefix(key, "alias."):
				if v, ok := strings.CutPrefix(val, "!"); ok {
					out = append(out, v)
				}
			case !gitCommandKeys[last] && !strings.HasPrefix(key, "pager."):
			case a == "--config-env":
				out = append(out, "")
			default:
				out = append(out, val)
			}
		case strings.HasPrefix(a, "--config-env="):
			key, _, _ := strings.Cut(strings.ToLower(a[len("--config-env="):]), "=")
			if last := key[strings.LastIndexByte(key, '.')+1:]; gitCommandKeys[last] || strings.HasPrefix(key, "pager.") || strings.HasPrefix(key, "alias.") {
				out = append(out, "")
			}
		case a == "-C" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--super-prefix":
			i++
		}
	}
	return out
}

// interpreterFlags are, per interpreter, the short options whose value is code
// to run, those whose value (the rest of the cluster, or the next word) is
// anything else, those that take only the rest of the cluster (perl -i.bak,
// -MModule), and those that take only the digits after them (perl -l, -0).
var interpreterFlags = map[string]struct{ code, value, rest, digits string }{
	"python": {code: "c", value: "WXmQ"}, "perl": {code: "eE", rest: "MmIixdDC", digits: "l0"},
	"ruby": {code: "e", value: "IrCEFx", digits: "0"}, "node": {code: "ep", value: "r"},
	"bun": {code: "e", value: "r"}, "php": {code: "r", value: "cdzfB"},
}

// interpreterCode is the code an interpreter's options give it to run: python -c,
// perl -e and -E (in a cluster such as -ne or -lpe too), ruby -e, node -e, -p,
// --eval and --print, php -r, bun -e, deno eval.
func interpreterCode(name string, args []string) []string {
	switch name {
	case "python3":
		name = "python"
	case "nodejs":
		name = "node"
	}
	flags := interpreterFlags[name]
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-m" && name == "python":
			return out
		case a == "eval" && i == 0 && name == "deno":
			if i+1 < len(args) {
				out = append(out, args[i+1])
			}
			return out
		case a == "--eval" || a == "--print":
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
		case strings.HasPrefix(a, "--eval=") || strings.HasPrefix(a, "--print="):
			_, v, _ := strings.Cut(a, "=")
			out = append(out, v)
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(flags.digits, a[j]) >= 0 {
					for j+1 < len(a) && a[j+1] >= '0' && a[j+1] <= '9' {
						j++
					}
					continue
				}
				if strings.IndexByte(flags.rest, a[j]) >= 0 {
					break
				}
				code := strings.IndexByte(flags.code, a[j]) >= 0
				if !code && strings.IndexByte(flags.value, a[j]) < 0 {
					continue
				}
				v := a[j+1:]
				if v == "" && i+1 < len(args) {
					v = args[i+1]
					i++
				}
				if code {
					out = append(out, v)
				}
				break
			}
		default:
			return out // a script file: its code is read only when it runs
		}
	}
	return out
}

// codeStrings are the string literals of code ('…', "…", `…`), and each run of
// them that only commas and blanks part (["rm", "-rf", "/"]) joined as the words
// of one command.
func codeStrings(code string) []string {
	var out, run []string
	flush := func() {
		if len(run) > 1 {
			quoted := make([]string, len(run))
			for i, r := range run {
				quoted[i] = "'" + strings.ReplaceAll(r, "'", `'\''`) + "'"
			}
			out = append(out, strings.Join(quoted, " "))
		}
		run = nil
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '\'', c == '"', c == '`':
			var b strings.Builder
			for i++; i < len(code) && code[i] != c; i++ {
				if code[i] == '\\' && i+1 < len(code) {
					i++
				}
				b.WriteByte(code[i])
			}
			out = append(out, b.String())
			run = append(run, b.String())
		case c == ',' || c == ' ' || c == '\t':
		default:
			flush()
		}
	}
	flush()
	return out
}

package approval

import "strings"

// sedReadOnly accepts sed only when it edits nothing in place, reads no script
// file, and every script uses commands that print, delete from the output, quit or
// substitute without the w and e flags. Anything else (w, r, e, a, i, c, labels)
// needs approval: GNU sed's w writes files and e runs commands.
func sedReadOnly(args []string) bool {
	var scripts []string
	explicit := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--in-place" || strings.HasPrefix(a, "--in-place=") || a == "--file" || strings.HasPrefix(a, "--file="):
			return false
		case a == "--expression":
			if i+1 >= len(args) {
				return false
			}
			scripts, explicit = append(scripts, args[i+1]), true
			i++
		case strings.HasPrefix(a, "--expression="):
			scripts, explicit = append(scripts, a[len("--expression="):]), true
		case a == "--line-length":
			i++
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'n', 'E', 'r', 's', 'u', 'z':
				case 'l':
					if j == len(a)-1 {
						i++
					}
					j = len(a)
				case 'e':
					if j < len(a)-1 {
						scripts = append(scripts, a[j+1:])
					} else if i+1 < len(args) {
						scripts = append(scripts, args[i+1])
						i++
					} else {
						return false
					}
					explicit, j = true, len(a)
				default: // i (in place), f (script file) and anything unknown
					return false
				}
			}
		default:
			if !explicit {
				scripts, explicit = append(scripts, a), true
			}
		}
	}
	for _, s := range scripts {
		if !sedScriptSafe(s) {
			return false
		}
	}
	return true
}

// sedScriptSafe parses a sed script conservatively.
func sedScriptSafe(s string) bool {
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		for i < len(s) && strings.IndexByte(" \t\n;", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			return true
		}
		if !sedAddress(s, &i) {
			return false
		}
		if i < len(s) && s[i] == ',' {
			i++
			if !sedAddress(s, &i) {
				return false
			}
		}
		skipSpace()
		if i < len(s) && s[i] == '!' {
			i++
			skipSpace()
		}
		if i >= len(s) {
			return false
		}
		c := s[i]
		i++
		switch c {
		case '{':
			continue
		case 'p', 'P', 'd', 'D', '=', 'n', 'N', 'g', 'G', 'h', 'H', 'x', 'z', 'l', '}':
		case 'q', 'Q':
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case 's', 'y':
			if i >= len(s) || s[i] == '\\' || s[i] == '\n' {
				return false
			}
			delim := s[i]
			i++
			for part := 0; part < 2; part++ {
				if !sedDelimited(s, &i, delim) {
					return false
				}
			}
			if c == 's' {
				for i < len(s) && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
					i++
				}
			}
		default:
			return false
		}
		skipSpace()
		if i < len(s) && strings.IndexByte(";\n}", s[i]) < 0 {
			return false
		}
	}
}

// sedAddress skips an optional address: a line number, $, or /regex/.
func sedAddress(s string, i *int) bool {
	switch {
	case *i >= len(s):
		return true
	case s[*i] >= '0' && s[*i] <= '9':
		for *i < len(s) && (s[*i] >= '0' && s[*i] <= '9' || s[*i] == '~') {
			*i++
		}
	case s[*i] == '$':
		*i++
	case s[*i] == '/':
		*i++
		if !sedDelimited(s, i, '/') {
			return false
		}
		for *i < len(s) && (s[*i] == 'I' || s[*i] == 'M') {
			*i++
		}
	}
	return true
}

// sedDelimited skips text up to and including an unescaped delimiter.
func sedDelimited(s string, i *int, delim byte) bool {
	for *i < len(s) {
		switch s[*i] {
		case '\\':
			*i += 2
		case delim:
			*i++
			return true
		default:
			*i++
		}
	}
	return false
}

// sedScripts are the scripts of a sed command line (its -e and --expression
// values, else its first operand), and whether it reads one from a file (-f),
// which nobody can check before it runs.
func sedScripts(args []string) (scripts []string, fromFile bool) {
	explicit := false
	var first string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if !explicit && first == "" && i+1 < len(args) {
				first = args[i+1]
			}
			i = len(args)
		case a == "--expression" || a == "--file":
			if i+1 < len(args) {
				if a == "--file" {
					fromFile = true
				} else {
					scripts, explicit = append(scripts, args[i+1]), true
				}
			}
			i++
		case strings.HasPrefix(a, "--expression="):
			scripts, explicit = append(scripts, a[len("--expression="):]), true
		case strings.HasPrefix(a, "--file="):
			fromFile = true
		case a == "--line-length":
			i++
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && a[0] == '-':
		flags:
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'e', 'f', 'l':
					v := a[j+1:]
					if v == "" && i+1 < len(args) {
						v = args[i+1]
						i++
					}
					switch a[j] {
					case 'e':
						scripts, explicit = append(scripts, v), true
					case 'f':
						fromFile = true
					}
					break flags
				case 'i':
					break flags // -i.bak: the rest is the suffix
				}
			}
		default:
			if first == "" {
				first = a
			}
		}
	}
	if !explicit && first != "" {
		scripts = append(scripts, first)
	}
	return scripts, fromFile
}

// sedScriptEffects reads a GNU sed script for the files its r and R commands read,
// the files its w and W commands and the w flag of s write, and the commands its e
// command runs ("" for the pattern space, which the e flag of s and a bare e run:
// text only the run knows). A script it cannot read to its end (sed refuses one it does
// not know) yields what it read so far.
func sedScriptEffects(s string) effects {
	var fx effects
	i := 0
	rest := func() string { // to the end of the line
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = len(s) - i
		}
		v := s[i : i+j]
		i += j
		return v
	}
	word := func() { // a label, to ; or the end of the line
		for i < len(s) && s[i] != ';' && s[i] != '\n' {
			i++
		}
	}
	for i < len(s) {
		for i < len(s) && strings.IndexByte(" \t\n;{}!", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '#' {
			rest()
			continue
		}
		if !sedAddress(s, &i) {
			return fx
		}
		if i < len(s) && s[i] == ',' {
			i++
			if i < len(s) && (s[i] == '+' || s[i] == '~') {
				i++
			}
			if !sedAddress(s, &i) {
				return fx
			}
		}
		for i < len(s) && strings.IndexByte(" \t!", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		i++
		switch c {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			for i < len(s) && (s[i] == ' ' || s[i] >= '0' && s[i] <= '9') {
				i++
			}
		case 'a', 'i', 'c':
			for { // text, continued by a trailing backslash
				line := rest()
				if !strings.HasSuffix(line, "\\") || i >= len(s) {
					break
				}
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			word()
		case 'r', 'R':
			fx.reads = append(fx.reads, rest())
		case 'w', 'W':
			fx.writes = append(fx.writes, rest())
		case 'e':
			fx.runs = append(fx.runs, strings.TrimSpace(rest()))
		case 's', 'y':
			if i >= len(s) || s[i] == '\\' || s[i] == '\n' {
				return fx
			}
			delim := s[i]
			i++
			for part := 0; part < 2; part++ {
				if !sedDelimited(s, &i, delim) {
					return fx
				}
			}
			for c == 's' && i < len(s) && strings.IndexByte("gpiImMew0123456789", s[i]) >= 0 {
				switch s[i] {
				case 'e':
					fx.runs = append(fx.runs, "")
				case 'w':
					i++
					fx.writes = append(fx.writes, rest())
					continue
				}
				i++
			}
		default:
			return fx
		}
	}
	return fx
}

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

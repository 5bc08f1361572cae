package builtin

import (
	"bufio"
	"bytes"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// maxIgnoreFile bounds the size of a .gitignore file that is read.
const maxIgnoreFile = 1 << 20

// ignoreRule is one line of a .gitignore file.
type ignoreRule struct {
	base    string // the directory of the .gitignore, relative to the root with slashes ("" for the root)
	glob    string // doublestar pattern matched against paths relative to base
	negate  bool   // "!pattern": re-include
	dirOnly bool   // "pattern/": only directories
}

// ignoreRules are the .gitignore rules in force in one directory, the outer files
// first: the last rule that matches a path decides, as in git.
type ignoreRules []ignoreRule

// parseIgnore parses a .gitignore file found in the directory base (slash path
// relative to the root, "" for the root). It follows gitignore(5): blank lines and
// "#" comments are skipped, "\#" and "\!" escape a leading character, trailing spaces
// are dropped unless escaped, "!" negates, a trailing "/" matches only directories,
// and a pattern with a "/" before its end is anchored to base while one without
// matches at any depth below it. "*", "?", "[…]" and "**" are matched by doublestar,
// which has the same meaning for them; lines it cannot parse are skipped.
func parseIgnore(base string, data []byte) []ignoreRule {
	var rules []ignoreRule
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxIgnoreFile)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		line = trimIgnoreSpaces(line)
		r := ignoreRule{base: base}
		switch {
		case strings.HasPrefix(line, "!"):
			r.negate, line = true, line[1:]
		case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if strings.Contains(line, "/") {
			line = strings.TrimPrefix(line, "/")
		} else {
			line = "**/" + line
		}
		if !doublestar.ValidatePattern(line) {
			continue
		}
		r.glob = line
		rules = append(rules, r)
	}
	return rules
}

// trimIgnoreSpaces drops trailing spaces that are not escaped with a backslash.
func trimIgnoreSpaces(line string) string {
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
		line = line[:len(line)-1]
	}
	return line
}

// with returns the rules followed by more, without changing r (the rules of sibling
// directories share r's backing array).
func (r ignoreRules) with(more []ignoreRule) ignoreRules {
	if len(more) == 0 {
		return r
	}
	return append(slices.Clip(r), more...)
}

// ignored reports whether the path rel (slash path relative to the root) is ignored.
func (r ignoreRules) ignored(rel string, isDir bool) bool {
	for i := len(r) - 1; i >= 0; i-- {
		if r[i].matches(rel, isDir) {
			return !r[i].negate
		}
	}
	return false
}

// sparing returns r without the rules that exclude rel, for a path named explicitly:
// it is searched whatever .gitignore says of it, and the other rules still apply to
// what is below it.
func (r ignoreRules) sparing(rel string, isDir bool) ignoreRules {
	var out ignoreRules
	for _, rule := range r {
		if !rule.negate && rule.matches(rel, isDir) {
			continue
		}
		out = append(out, rule)
	}
	return out
}

// matches reports whether the rule's pattern matches the path rel (slash path relative
// to the root).
func (rule ignoreRule) matches(rel string, isDir bool) bool {
	if rule.dirOnly && !isDir {
		return false
	}
	sub := rel
	if rule.base != "" {
		rest, ok := strings.CutPrefix(rel, rule.base+"/")
		if !ok {
			return false
		}
		sub = rest
	}
	ok, _ := doublestar.Match(rule.glob, sub)
	return ok
}

// ignoreBase is the base of rules read from the .gitignore in dir (a slash path
// relative to the root, "." for the root).
func ignoreBase(dir string) string {
	if dir == "." {
		return ""
	}
	return path.Clean(dir)
}

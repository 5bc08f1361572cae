// Package globset answers whether a name matches one of many path.Match patterns
// without matching it against each: whitelists of tools and skills hold thousands of
// patterns such as `mcp__github__*`, and checking each against each of thousands of
// names cost a fifth of a second or more per session.
package globset

import (
	"path"
	"sort"
	"strings"
)

// IsPattern reports whether s holds a character special to path.Match.
func IsPattern(s string) bool { return strings.ContainsAny(s, "*?[") }

// PrefixLiteral returns lit when pattern is lit followed by one '*', lit holding no
// character special to path.Match (nor '/'): pattern then matches exactly the names
// that start with lit and hold no '/' after it.
func PrefixLiteral(pattern string) (string, bool) {
	lit, ok := strings.CutSuffix(pattern, "*")
	if !ok || strings.ContainsAny(lit, `*?[]\/`) {
		return "", false
	}
	return lit, true
}

// Matching returns the names of sorted (in ascending order) that pattern matches,
// in order. A prefix pattern (`mcp__github__*`) is looked up by binary search
// instead of matched against every name.
func Matching(sorted []string, pattern string) []string {
	var out []string
	if lit, ok := PrefixLiteral(pattern); ok {
		for i := sort.SearchStrings(sorted, lit); i < len(sorted) && strings.HasPrefix(sorted[i], lit); i++ {
			if !strings.Contains(sorted[i][len(lit):], "/") {
				out = append(out, sorted[i])
			}
		}
		return out
	}
	for _, n := range sorted {
		if ok, _ := path.Match(pattern, n); ok {
			out = append(out, n)
		}
	}
	return out
}

// AnyMatch reports whether pattern matches a name of sorted (ascending), as
// Matching would find one.
func AnyMatch(sorted []string, pattern string) bool {
	if lit, ok := PrefixLiteral(pattern); ok {
		for i := sort.SearchStrings(sorted, lit); i < len(sorted) && strings.HasPrefix(sorted[i], lit); i++ {
			if !strings.Contains(sorted[i][len(lit):], "/") {
				return true
			}
		}
		return false
	}
	for _, n := range sorted {
		if ok, _ := path.Match(pattern, n); ok {
			return true
		}
	}
	return false
}

// Set tells whether a name matches one of its patterns, as path.Match would: prefix
// patterns by a binary search among their sorted literals, the others one by one.
// Patterns path.Match finds malformed match nothing. The zero Set matches nothing.
type Set struct {
	prefixes []string // sorted; none a prefix of another
	others   []string
}

// New returns the Set of patterns.
func New(patterns []string) Set {
	var s Set
	for _, pat := range patterns {
		if lit, ok := PrefixLiteral(pat); ok {
			s.prefixes = append(s.prefixes, lit)
		} else {
			s.others = append(s.others, pat)
		}
	}
	sort.Strings(s.prefixes)
	// Drop a literal that a kept one starts: it matches no name the shorter does not
	// (neither holds '/'). In sorted order, one that starts with kept follows it.
	kept := s.prefixes[:0]
	for _, lit := range s.prefixes {
		if len(kept) > 0 && strings.HasPrefix(lit, kept[len(kept)-1]) {
			continue
		}
		kept = append(kept, lit)
	}
	s.prefixes = kept
	return s
}

// Match reports whether a pattern of s matches name.
func (s *Set) Match(name string) bool {
	// The one literal that can start name is the greatest not after it: any literal
	// between one that starts name and name would start with that one.
	if i := sort.SearchStrings(s.prefixes, name); i < len(s.prefixes) && s.prefixes[i] == name {
		return true // the rest, "", holds no '/'
	} else if i > 0 {
		if lit := s.prefixes[i-1]; strings.HasPrefix(name, lit) && !strings.Contains(name[len(lit):], "/") {
			return true
		}
	}
	for _, pat := range s.others {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

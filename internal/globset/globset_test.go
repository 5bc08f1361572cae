package globset

import (
	"path"
	"slices"
	"testing"
)

// The whitelist's patterns are answered by a binary search among prefix literals and
// path.Match for the rest: the answers are path.Match's, for every pattern form.
func TestPatternSetAnswersAsPathMatch(t *testing.T) {
	t.Parallel()
	patterns := []string{
		"*", "x*", "mcp__gh__*", "mcp__gh*", "mcp__gh__get*", "mcp__gh__get_issue*", "*x", "*_issue", "a?c", "[ab]*", "[^a]*",
		`a\*b*`, `mcp\_\_gh*`, `\x*`, "mcp__gh__*x", "a/b*", "a*b*", "**", "x**", "?*", "mcp__*__get*", "é*", "a*/",
	}
	names := []string{
		"", "x", "xy", "x/y", "x*", "mcp__gh__get_issue", "mcp__gh__get", "mcp__gh__", "mcp__gh", "mcp__ghx", "mcp__gh__a/b",
		"mcp__gh__x", "mcp__gl__get_x", "abc", "aXc", "a/c", "a*b", "a*bc", "a*b/c", "b", "ab/c", "a/bc", "a/b", "c", "é", "éa",
		"\xff", "x\xff", "mcp__gh/", "mcp__", "z", "_issue", "a/",
	}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			t.Fatalf("pattern %q: %v", p, err)
		}
	}
	matches := func(set []string, name string) bool {
		for _, p := range set {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	// Each pattern alone, every pair, and the whole list (one literal starting another).
	var sets [][]string
	for i, p := range patterns {
		sets = append(sets, []string{p})
		for _, q := range patterns[i+1:] {
			sets = append(sets, []string{p, q}, []string{q, p})
		}
	}
	sets = append(sets, patterns)
	for _, set := range sets {
		ps := New(set)
		for _, n := range names {
			if got, want := ps.Match(n), matches(set, n); got != want {
				t.Errorf("patterns %q, name %q: %v, path.Match says %v", set, n, got, want)
			}
		}
	}
	sorted := slices.Sorted(slices.Values(names))
	for _, p := range patterns {
		var want []string
		for _, n := range sorted {
			if ok, _ := path.Match(p, n); ok {
				want = append(want, n)
			}
		}
		if got := Matching(sorted, p); !slices.Equal(got, want) {
			t.Errorf("Matching(%q) = %q, path.Match says %q", p, got, want)
		}
		if got := AnyMatch(sorted, p); got != (len(want) > 0) {
			t.Errorf("AnyMatch(%q) = %v, path.Match finds %q", p, got, want)
		}
	}
}

package skills

import (
	"fmt"
	"testing"
)

// benchPatterns is a whitelist of 2,000 patterns, one per skill (team-07-skill-0123*,
// as a client writes one for each skill and its later variants).
func benchPatterns() []string {
	var wl []string
	for i := range 2000 {
		wl = append(wl, fmt.Sprintf("team-%02d-skill-%04d*", i%20, i))
	}
	return wl
}

// benchManager is a Manager over 2,000 skills of twenty teams (team-07-skill-0123).
func benchManager(b *testing.B) *Manager {
	b.Helper()
	root := b.TempDir()
	for i := range 2000 {
		name := fmt.Sprintf("team-%02d-skill-%04d", i%20, i)
		writeSkill(b, root, name, fmt.Sprintf("Skill number %d of team %d, does one thing well.", i, i%20), "body")
	}
	m := newManager(b, Config{Dirs: []string{root}})
	if n := len(m.List()); n != 2000 {
		b.Fatalf("%d skills loaded, want 2000", n)
	}
	return m
}

// BenchmarkNewProxyPatterns2000 builds a session's view with 2,000 patterns over
// 2,000 skills (what creating a session costs for its available_skills).
func BenchmarkNewProxyPatterns2000(b *testing.B) {
	m, wl := benchManager(b), benchPatterns()
	b.ResetTimer()
	for range b.N {
		if _, warnings := NewProxy(m, wl); len(warnings) != 0 {
			b.Fatal(warnings)
		}
	}
}

// BenchmarkProxyListPatterns2000 lists the skills such a view shows (the skill
// tool's query and unknown-name answers, GET of the prompt on a cold cache).
func BenchmarkProxyListPatterns2000(b *testing.B) {
	m := benchManager(b)
	p, _ := NewProxy(m, benchPatterns())
	b.ResetTimer()
	for range b.N {
		if n := len(p.List()); n != 2000 {
			b.Fatalf("%d skills listed", n)
		}
	}
}

// BenchmarkListingCachePatterns2000 is the prompt route's cached listing for such a
// view: the cache key is which skills the session sees, worked out on every call.
func BenchmarkListingCachePatterns2000(b *testing.B) {
	m := benchManager(b)
	p, _ := NewProxy(m, benchPatterns())
	c := NewListingCache(func(s string) int { return len(s)/4 + 1 })
	c.Listing(p, DefaultPromptBudgetTokens)
	b.ResetTimer()
	for range b.N {
		c.Listing(p, DefaultPromptBudgetTokens)
	}
}

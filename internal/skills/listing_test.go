package skills_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// BenchmarkListing measures what the prompt route spends on the skills part of a
// library of 1,000 skills at the default budget, against listing them whole (a budget
// that holds everything): the cut listing counts only the budget's worth of text.
func BenchmarkListing(b *testing.B) {
	var list []skills.Skill
	for i := range 1000 {
		list = append(list, skills.Skill{Name: fmt.Sprintf("field-tool-%03d", i),
			Description: strings.Repeat(fmt.Sprintf("Analyze data set %d with a library and write results as CSV. ", i), 1+i%5)})
	}
	toolmgr.CountTokens("warm")
	for _, budget := range []int{skills.DefaultPromptBudgetTokens, 1 << 30} {
		b.Run(fmt.Sprint("budget=", budget), func(b *testing.B) {
			for b.Loop() {
				if l := skills.Listing(list, budget, toolmgr.CountTokens); l.Tokens > budget {
					b.Fatalf("%d tokens", l.Tokens)
				}
			}
		})
	}
}

// BenchmarkListingCache measures the prompt route's skills part for a library of
// 1,000 skills loaded by a real Manager, seen through a session's Proxy: computed
// anew on every call (as before the cache: List, then Listing) against answered by
// a ListingCache, alternately in one run, and reports their ratio.
func BenchmarkListingCache(b *testing.B) {
	root := b.TempDir()
	for i := range 1000 {
		dir := filepath.Join(root, fmt.Sprintf("field-tool-%03d", i))
		desc := strings.Repeat(fmt.Sprintf("Analyze data set %d with a library and write results as CSV. ", i), 1+i%5)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		md := fmt.Sprintf("---\nname: field-tool-%03d\ndescription: %q\n---\nbody\n", i, strings.TrimSpace(desc))
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	m, err := skills.NewManager(skills.Config{Dirs: []string{root}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	p, _ := skills.NewProxy(m, []string{"field-*"})
	cache := skills.NewListingCache(toolmgr.CountTokens)
	budget := skills.DefaultPromptBudgetTokens
	want := skills.Listing(p.List(), budget, toolmgr.CountTokens)
	if len(want.Described) == 0 || !want.Cut() {
		b.Fatalf("listing of 1,000 skills: %d described, cut %v", len(want.Described), want.Cut())
	}
	var cold, cached time.Duration
	for b.Loop() {
		t0 := time.Now()
		c := skills.Listing(p.List(), budget, toolmgr.CountTokens)
		t1 := time.Now()
		h := cache.Listing(p, budget)
		cold, cached = cold+t1.Sub(t0), cached+time.Since(t1)
		if c.Text != want.Text || h.Text != want.Text {
			b.Fatal("listings differ")
		}
	}
	b.ReportMetric(float64(cold.Nanoseconds())/float64(b.N), "cold-ns/op")
	b.ReportMetric(float64(cached.Nanoseconds())/float64(b.N), "cached-ns/op")
	b.ReportMetric(float64(cold)/float64(cached), "cold/cached")
}

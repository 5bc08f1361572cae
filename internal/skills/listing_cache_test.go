package skills

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestListingCache: the prompt listing is computed once per library version,
// visible skills and budget. A skill edited, added or removed on disk shows up in
// the next listing after the reload that finds it; sessions with different
// whitelists, or whose gate changes, get their own answers; a reload that finds
// nothing new, or asking again, is answered from the cache.
func TestListingCache(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "alpha", "Alpha does the first thing.", "body")
	writeSkill(t, root, "beta", "Beta does the second thing.", "body")
	writeSkill(t, root, "gamma", "Gamma does the third thing.", "body")
	m := newManager(t, Config{Dirs: []string{root}})

	var counted atomic.Int64
	c := NewListingCache(func(s string) int { counted.Add(1); return len(s)/4 + 1 })
	p1, _ := NewProxy(m, []string{"alpha*"})
	p2, _ := NewProxy(m, []string{"beta", "gamma"})
	hidden := atomic.Bool{}
	p3, _ := NewProxy(m, nil)
	p3.SetGate(func(name string) bool { return !(hidden.Load() && name == "gamma") })

	// listing asks for p's listing and checks it names want (in order) and
	// whether it had to count to answer.
	listing := func(what string, p *Proxy, budget int, want []string, fresh bool) PromptListing {
		t.Helper()
		before := counted.Load()
		l := c.Listing(p, budget)
		if got := strings.Join(l.Described, " "); got != strings.Join(want, " ") {
			t.Errorf("%s: listing describes %q, want %q", what, got, want)
		}
		if did := counted.Load() != before; did != fresh {
			t.Errorf("%s: counted %v, want %v (computed anew, not from the cache)", what, did, fresh)
		}
		return l
	}
	listing("p1", p1, 4000, []string{"alpha"}, true)
	listing("p2 after p1", p2, 4000, []string{"beta", "gamma"}, true)
	listing("p1 again", p1, 4000, []string{"alpha"}, false)
	listing("p3", p3, 4000, []string{"alpha", "beta", "gamma"}, true)
	listing("p2 again", p2, 4000, []string{"beta", "gamma"}, false)
	// A gate that hides a skill (a tool group switched off) changes what p3 sees.
	hidden.Store(true)
	listing("p3 with gamma gated", p3, 4000, []string{"alpha", "beta"}, true)
	hidden.Store(false)
	listing("p3 ungated", p3, 4000, []string{"alpha", "beta", "gamma"}, false)
	// Another budget is another answer.
	if l := listing("p3 small budget", p3, MinPromptBudgetTokens, []string{"alpha", "beta", "gamma"}, true); l.Tokens > MinPromptBudgetTokens {
		t.Errorf("small budget: %d tokens", l.Tokens)
	}

	// A reload that finds nothing new keeps the answers.
	if m.Reload() {
		t.Fatal("Reload found a change where there is none")
	}
	listing("p1 after an empty reload", p1, 4000, []string{"alpha"}, false)

	// Edited: the new description is listed.
	writeSkill(t, root, "alpha", "Alpha now does something else entirely.", "body")
	if !m.Reload() {
		t.Fatal("Reload missed the edit")
	}
	if l := listing("p1 after the edit", p1, 4000, []string{"alpha"}, true); !strings.Contains(l.Text, "something else entirely") || strings.Contains(l.Text, "first thing") {
		t.Errorf("after the edit: %q", l.Text)
	}
	// Added: a skill the pattern covers appears; removed: it goes.
	writeSkill(t, root, "alpha-two", "Alpha two.", "body")
	if err := os.RemoveAll(filepath.Join(root, "beta")); err != nil {
		t.Fatal(err)
	}
	if !m.Reload() {
		t.Fatal("Reload missed the addition and removal")
	}
	listing("p1 after the addition", p1, 4000, []string{"alpha", "alpha-two"}, true)
	listing("p2 after the removal", p2, 4000, []string{"gamma"}, true)
	listing("p3 after both", p3, 4000, []string{"alpha", "alpha-two", "gamma"}, true)

	// Answers are copies: changing one changes no later answer.
	l := c.Listing(p3, 4000)
	l.Described[0] = "changed"
	listing("p3 after a caller changed its copy", p3, 4000, []string{"alpha", "alpha-two", "gamma"}, false)
}

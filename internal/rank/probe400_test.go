package rank

import (
	"slices"
	"testing"
)

// probe400Floor guards hit@12 of probe400_queries.txt (a message hits when any of
// the tools it names ranks in the dozen) over probe400_tools.json: 52 of 53 when the
// set was written, 53 with compound words ("back up" → backup); the floor is the
// measured value minus two messages.
const probe400Floor = 0.96

func TestHitsProbe400(t *testing.T) {
	t.Parallel()
	docs := docsFile(t, "probe400_tools.json")
	queries := labelledFile(t, "probe400_queries.txt")
	if len(docs) < 380 || len(queries) < 50 {
		t.Fatalf("%d tools and %d labelled messages, want at least 380 and 50", len(docs), len(queries))
	}
	ix := NewIndex(docs)
	known := map[string]bool{}
	for _, d := range docs {
		known[d.Name] = true
	}
	hits := 0
	for _, q := range queries {
		var names []string
		for _, r := range ix.Rank(q.query, 12) {
			names = append(names, r.Name)
		}
		hit := false
		for _, rel := range q.relevant {
			if !known[rel] {
				t.Fatalf("message %q: label %s is not a tool of the set", q.query, rel)
			}
			hit = hit || slices.Contains(names, rel)
		}
		if hit {
			hits++
		} else {
			t.Logf("miss: %q (want one of %v): got %v", q.query, q.relevant, names)
		}
	}
	rate := float64(hits) / float64(len(queries))
	t.Logf("hit@12 = %d/%d = %.3f over %d tools", hits, len(queries), rate, ix.Len())
	if rate < probe400Floor {
		t.Errorf("hit@12 = %.3f, below the floor %.3f", rate, probe400Floor)
	}
}

// TestCompoundWords: users write as two words what tool names write as one ("back
// up" for backup, "log in" for login, "clean up" for cleanup, "roll back" for
// rollback); the query's two words also count as the one.
func TestCompoundWords(t *testing.T) {
	t.Parallel()
	ix := NewIndex([]Doc{
		{Name: "create_backup", Description: "Start a logical backup of a database."},
		{Name: "navigate_back", Description: "Go back to the previous page."},
		{Name: "list_databases", Description: "List the databases on the server."},
		{Name: "query", Description: "Run a read-only SQL query against the database."},
		{Name: "cleanup_pods", Description: "Delete pods in Evicted or Completed states."},
		{Name: "list_pods", Description: "List the pods of a namespace."},
		{Name: "login", Description: "Sign the browser in to a site."},
		{Name: "open_page", Description: "Open a page in the browser and log its load time."},
	})
	for query, want := range map[string]string{
		"back up the production database": "create_backup",
		"clean up the crashed pods":       "cleanup_pods",
		"log in to the admin site":        "login",
	} {
		if got := ix.Rank(query, 1); len(got) == 0 || got[0].Name != want {
			t.Errorf("%q: best %v, want %s", query, got, want)
		}
	}
}

package store

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSearchTerms(t *testing.T) {
	t.Parallel()
	many := strings.Repeat("w ", 10) + strings.Repeat("x", 3)
	for i := range 40 {
		many += " t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{}},
		{`  "  * ( ) : - ^ `, []string{}},
		{"Deploy POSTGRES deploy", []string{"deploy", "postgres"}},
		{`content:secret OR "x*"`, []string{"content", "secret", "or", "x"}},
		{"NEAR(a b, 3)", []string{"near", "a", "b", "3"}},
		{"café naïve 東京 x²", []string{"café", "naïve", "東京", "x"}},
		{"snake_case kebab-case dotted.name", []string{"snake", "case", "kebab", "dotted", "name"}},
		{"a\x00b", []string{"a", "b"}},
	}
	for _, tt := range tests {
		if got := searchTerms(tt.query); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("searchTerms(%q) = %q, want %q", tt.query, got, tt.want)
		}
	}
	if got := searchTerms(many); len(got) != maxSearchTerms || got[0] != "w" || got[1] != "xxx" {
		t.Errorf("searchTerms(many words) = %d terms starting %q, want %d starting w, xxx", len(got), got[:2], maxSearchTerms)
	}
}

func TestFullTextQueries(t *testing.T) {
	t.Parallel()
	terms := []string{"deploy", "or", "x"}
	if got, want := fts5Query(terms), `"deploy" OR "or" OR "x"`; got != want {
		t.Errorf("fts5Query = %s, want %s", got, want)
	}
	if got, want := fts5Query([]string{`a"b`}), `"a""b"`; got != want {
		t.Errorf("fts5Query escapes quotes as %s, want %s", got, want)
	}
	if got, want := pgWebQuery(terms), "deploy or x"; got != want {
		t.Errorf("pgWebQuery = %q, want %q", got, want)
	}
	if got := pgWebQuery([]string{"or"}); got != "" {
		t.Errorf("pgWebQuery(or) = %q, want empty (no words left)", got)
	}
}

// TestSQLiteFTSIntegrity: the triggers keep the external-content index in step with
// inserts, replacements and deletes (FTS5's integrity-check compares the two).
func TestSQLiteFTSIntegrity(t *testing.T) {
	t.Parallel()
	s := openTestSQLite(t, filepath.Join(t.TempDir(), "fts.db"))
	ctx := t.Context()
	for i, m := range []*Memory{
		{Tenant: "a", SessionID: "s", Content: "first note about otters", Tags: []string{"x"}},
		{Tenant: "a", SessionID: "s", Key: "k", Content: "keyed note"},
		{Tenant: "a", SessionID: "s", Key: "k", Content: "keyed note replaced", Tags: []string{"y", "z"}},
		{Tenant: "b", SessionID: "s", Content: "other tenant"},
	} {
		if _, err := s.SaveMemory(ctx, m); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if i == 0 {
			defer func(id string) {
				if err := s.DeleteMemory(ctx, "a", id); err != nil {
					t.Error(err)
				}
				checkFTS(t, s)
			}(m.ID)
		}
	}
	checkFTS(t, s)
	var docs int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'keyed'`).Scan(&docs); err != nil || docs != 1 {
		t.Errorf("index rows matching 'keyed' = %d, %v; want 1 (the replaced memory once)", docs, err)
	}
}

func checkFTS(t *testing.T, s *SQLite) {
	t.Helper()
	if _, err := s.w.ExecContext(t.Context(), `INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("FTS integrity-check: %v", err)
	}
}

package pgtest_test

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func schemaOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Query().Get("search_path")
	if s == "" {
		t.Fatalf("URL %s has no search_path", p.Redacted())
	}
	return s
}

// TestIsolation: each URL is its own empty schema, tables land in it, and it is gone
// after the test that asked for it.
func TestIsolation(t *testing.T) {
	ctx := context.Background()
	var first string
	var admin string
	t.Run("a", func(t *testing.T) {
		a, b := pgtest.URL(t), pgtest.URL(t)
		first = schemaOf(t, a)
		if first == schemaOf(t, b) {
			t.Fatalf("two calls returned the same schema %s", first)
		}
		admin = a
		ca, err := pgx.Connect(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		defer ca.Close(ctx)
		var cur string
		if err := ca.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil || cur != first {
			t.Fatalf("current_schema() = %q, %v; want %s", cur, err, first)
		}
		var n int
		if err := ca.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, first).Scan(&n); err != nil || n != 0 {
			t.Fatalf("fresh schema has %d tables (%v), want 0", n, err)
		}
		if _, err := ca.Exec(ctx, `CREATE TABLE things (id int)`); err != nil {
			t.Fatal(err)
		}
		cb, err := pgx.Connect(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		defer cb.Close(ctx)
		if _, err := cb.Exec(ctx, `SELECT * FROM things`); err == nil {
			t.Fatalf("a table created through one URL is visible through another")
		}
	})
	if t.Skipped() || first == "" {
		return
	}
	u, _ := url.Parse(admin)
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, first).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s still exists after its test (%d, %v)", first, n, err)
	}
}

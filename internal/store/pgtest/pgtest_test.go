package pgtest_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

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

// TestNewClusterHoldsItsPort: a cluster made and not started yet refuses
// connections at its URL, and no other listener of the test run can take its port
// before Start (it used to be a closed listener's port, anyone's).
func TestNewClusterHoldsItsPort(t *testing.T) {
	cl := pgtest.NewCluster(t)
	u, err := url.Parse(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", u.Host, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s before Start: %v, want connection refused", u.Host, err)
	}
	if ln, err := net.Listen("tcp", u.Host); !errors.Is(err, syscall.EADDRINUSE) {
		if err == nil {
			ln.Close()
		}
		t.Fatalf("listen on the cluster's %s before Start: %v, want address in use", u.Host, err)
	}
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), cl.URL())
	if err != nil {
		t.Fatalf("connect after Start: %v", err)
	}
	conn.Close(context.Background())
}

package store_test

import (
	"os"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func openPostgres(t testing.TB) *store.Postgres {
	t.Helper()
	u := pgtest.URL(t)
	s, err := store.OpenPostgres(t.Context(), u)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return openPostgres(t) })
}

package store_test

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

// TestFileStamps: a stamp put by one replica is read by another (storetest.FileStamps).
func TestFileStamps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	a, err := store.OpenPostgres(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := store.OpenPostgres(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	storetest.FileStamps(t, a, b)
}

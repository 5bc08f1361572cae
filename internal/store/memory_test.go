package store_test

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestSQLiteMemory(t *testing.T) {
	t.Parallel()
	storetest.RunMemory(t, func(t *testing.T) store.MemoryStore { return openSQLite(t) })
}

func TestPostgresMemory(t *testing.T) {
	t.Parallel()
	storetest.RunMemory(t, func(t *testing.T) store.MemoryStore { return openPostgres(t) })
}

func TestSQLiteScratchpad(t *testing.T) {
	t.Parallel()
	storetest.RunScratchpad(t, func(t *testing.T) store.ScratchpadStore { return openSQLite(t) })
}

func TestPostgresScratchpad(t *testing.T) {
	t.Parallel()
	storetest.RunScratchpad(t, func(t *testing.T) store.ScratchpadStore { return openPostgres(t) })
}

package store_test

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestSQLiteAPIKeys(t *testing.T) {
	t.Parallel()
	storetest.RunAPIKeys(t, func(t *testing.T) store.APIKeyStore { return openSQLite(t) })
}

func TestPostgresAPIKeys(t *testing.T) {
	t.Parallel()
	storetest.RunAPIKeys(t, func(t *testing.T) store.APIKeyStore { return openPostgres(t) })
}

package store_test

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestSQLiteMCPServers(t *testing.T) {
	t.Parallel()
	storetest.RunMCPServers(t, func(t *testing.T) store.MCPServerStore { return openSQLite(t) })
}

func TestPostgresMCPServers(t *testing.T) {
	t.Parallel()
	storetest.RunMCPServers(t, func(t *testing.T) store.MCPServerStore { return openPostgres(t) })
}

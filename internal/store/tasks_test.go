package store_test

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/storetest"
)

func TestSQLiteTasks(t *testing.T) {
	t.Parallel()
	storetest.RunTasks(t, func(t *testing.T) store.TaskStore { return openSQLite(t) })
}

func TestPostgresTasks(t *testing.T) {
	t.Parallel()
	storetest.RunTasks(t, func(t *testing.T) store.TaskStore { return openPostgres(t) })
}

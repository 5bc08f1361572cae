package store

import (
	"errors"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestClaimReplica: one live claim per replica id and schema; a claim whose
// connection is cut is taken again, so the id stays guarded; release frees it.
func TestClaimReplica(t *testing.T) {
	replicaClaimCheck = 100 * time.Millisecond
	u := pgtest.URL(t)
	open := func() *Postgres {
		p, err := OpenPostgres(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	a, b := open(), open()
	lost := make(chan error, 4)
	release, err := a.ClaimReplica(t.Context(), "r1", func(err error) { lost <- err })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimReplica(t.Context(), "r1", nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("second claim of r1: %v, want ErrConflict", err)
	}
	other, err := b.ClaimReplica(t.Context(), "r2", nil)
	if err != nil {
		t.Fatalf("claim of another id: %v", err)
	}
	other()

	// Cut the claim's connection, as a PostgreSQL restart would.
	var schema string
	if err := a.pool.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	holder := func() (pid int32, err error) {
		err = a.pool.QueryRow(t.Context(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
			AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid`,
			replicaLockKey(schema, "r1")).Scan(&pid)
		return pid, err
	}
	first, err := holder()
	if err != nil {
		t.Fatalf("the claim's lock: %v", err)
	}
	if _, err := a.pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid, err := holder(); err == nil && pid != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim was not taken again after its connection was cut")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.ClaimReplica(t.Context(), "r1", nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim of r1 after the first claim's connection was cut: %v, want ErrConflict", err)
	}
	select {
	case err := <-lost:
		t.Fatalf("lost reported although the claim was taken again: %v", err)
	default:
	}
	release()
	again, err := b.ClaimReplica(t.Context(), "r1", nil)
	if err != nil {
		t.Fatalf("claim of r1 after release: %v", err)
	}
	again()
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// Retention with replicas: sessions shared through one store (SQLite here stands
// for it as well as PostgreSQL: both run), each replica with its own data dir.

// retentionStore is a store sessions and their retention live in.
type retentionStore interface {
	Store
	RetentionStore
}

// eachStore runs test on a fresh SQLite store and a fresh PostgreSQL schema.
func eachStore(t *testing.T, test func(t *testing.T, st retentionStore)) {
	t.Helper()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var (
				st  retentionStore
				err error
			)
			if kind == "sqlite" {
				var s *store.SQLite
				s, err = store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"))
				st = s
				if err == nil {
					t.Cleanup(func() { _ = s.Close() })
				}
			} else {
				var p *store.Postgres
				p, err = store.OpenPostgres(t.Context(), pgtest.URL(t))
				st = p
				if err == nil {
					t.Cleanup(func() { _ = p.Close() })
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			test(t, st)
		})
	}
}

// newReplica is a session manager over st with a data dir of its own (workspaces,
// artifacts) and the tools echo and other.
func newReplica(t *testing.T, st retentionStore, cfg Config) *Manager {
	t.Helper()
	dir := t.TempDir()
	cfg.WorkspaceDir, cfg.ArtifactDir = filepath.Join(dir, "workspaces"), filepath.Join(dir, "artifacts")
	tm := toolmgr.New()
	tm.MustRegister(named{"echo", "builtin"}, named{"other", "builtin"})
	m, err := NewManager(cfg, st, tm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRetentionDeletedElsewhere: a session another replica's retention deleted while
// this replica held it live (unused) is dropped from memory here when this replica
// learns it is gone, whichever way it learns it: a use that records itself
// (TouchSession finds no row), a use that reads the stored spec (ReadThrough), or
// the eviction of its tool selection, a change to its stored spec (rules an approver
// added, groups the model switched). Its sandbox is released then (a finished job's
// output goes with it) and the workspace this replica made for it removed.
func TestRetentionDeletedElsewhere(t *testing.T) {
	t.Parallel()
	const keep = time.Hour
	for _, tc := range []struct {
		name  string
		learn func(t *testing.T, b *Manager, s *Session)
	}{
		{"use recorded", func(t *testing.T, b *Manager, s *Session) {
			s.mu.Lock()
			s.storedUsed = time.Now().Add(-2 * keep) // due to record the use
			s.mu.Unlock()
			if _, err := b.Get(context.Background(), "t1", s.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get: %v, want ErrNotFound", err)
			}
		}},
		{"read through", func(t *testing.T, b *Manager, s *Session) {
			b.ReadThrough()
			s.mu.Lock()
			s.storedUsed = time.Now() // recorded a moment ago: not written again
			s.mu.Unlock()
			if _, err := b.Get(context.Background(), "t1", s.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get: %v, want ErrNotFound", err)
			}
		}},
		{"rules added after an approval", func(t *testing.T, b *Manager, s *Session) {
			if err := b.AllowRules(context.Background(), "t1", s.ID, []string{"echo"}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("AllowRules: %v, want ErrNotFound", err)
			}
		}},
		{"groups switched", func(t *testing.T, b *Manager, s *Session) {
			if _, err := b.setGroups(context.Background(), s, nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("setGroups: %v, want ErrNotFound", err)
			}
		}},
		{"evicted with its selection", func(t *testing.T, b *Manager, s *Session) {
			s.Narrow([]string{"echo"})
			if _, err := b.Sweep(context.Background(), time.Now().Add(2*keep)); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, st retentionStore) {
				ctx := context.Background()
				// Two replicas over one store, each with its own data dir.
				a := newReplica(t, st, Config{})
				a.UseRetention(st, keep)
				b := newReplica(t, st, Config{IdleTimeout: keep})
				sb, err := sandbox.NewManager(sandbox.Config{StateDir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = sb.Shutdown(context.Background()) })
				b.UseResources(sb)

				spec, _ := json.Marshal(storedSpec{Spec: Spec{AvailableTools: []string{"echo", "other"}}})
				long := time.Now().Add(-3 * keep).UTC()
				if err := st.CreateSession(ctx, &store.Session{ID: "ses_gone", Tenant: "t1", Spec: spec, CreatedAt: long, UpdatedAt: long}); err != nil {
					t.Fatal(err)
				}
				// Replica b loads it (before its retention is on: no use recorded) and
				// runs a job in its sandbox.
				s, err := b.Get(ctx, "t1", "ses_gone")
				if err != nil {
					t.Fatal(err)
				}
				b.UseRetention(st, keep)
				box, err := sb.For(s.Info)
				if err != nil {
					t.Fatal(err)
				}
				job, err := box.Start(ctx, sandbox.Cmd{Command: "echo built", Timeout: sandbox.NoTimeout})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := job.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				s.mu.Lock()
				s.lastUsed = time.Now().Add(-2 * keep)
				s.mu.Unlock()
				// Replica a's retention deletes it.
				if n, _, err := a.DeleteUnused(ctx, time.Now()); n != 1 || err != nil {
					t.Fatalf("a: DeleteUnused = %d, %v; want it deleted", n, err)
				}

				tc.learn(t, b, s)
				if b.Live() != 0 {
					t.Error("the deleted session stayed live on b")
				}
				if exists(t, s.Info.Workdir) {
					t.Errorf("b kept the deleted session's workspace %s", s.Info.Workdir)
				} else if err := mkdirs(s.Info.Workdir); err != nil { // for a sandbox to look at
					t.Fatal(err)
				}
				cur, err := sb.For(s.Info)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cur.Job(job.ID()); err == nil {
					t.Error("b did not release the deleted session's sandbox: its job is still there")
				}
			})
		})
	}
}

// TestRetentionRemovesOrphanDirs: a process that ended between deleting a session
// from the store and removing its directories (or a replica whose session another
// replica deleted, which never learned it) left them behind. The sweep removes the
// workspace and artifacts directories the daemon made whose session the store no
// longer has, once they are older than the retention; never one of a stored session,
// a recent one (a session being created has its directory before its row), one this
// process holds live, or anything not named as the daemon names sessions.
func TestRetentionRemovesOrphanDirs(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, st retentionStore) {
		ctx := context.Background()
		m := newReplica(t, st, Config{})
		arts := m.cfg.ArtifactDir
		const keep = time.Hour
		m.UseRetention(st, keep)
		old := time.Now().Add(-3 * keep)
		mk := func(dir string, mtime time.Time) string {
			t.Helper()
			if err := mkdirs(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(dir, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			return dir
		}
		ws := m.cfg.WorkspaceDir
		// Stored, in use (held), with old directories: kept.
		stored, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
		if err != nil {
			t.Fatal(err)
		}
		_, unsubscribe := stored.Subscribe(1)
		defer unsubscribe()
		mk(stored.Info.Workdir, old)
		mk(filepath.Join(arts, stored.ID), old)
		// Deleted from the store, directories left behind: removed.
		orphanWS := mk(filepath.Join(ws, NewID("ses_")), old)
		orphanArt := mk(filepath.Join(arts, NewID("ses_")), old)
		// Not in the store but recent (being created): kept.
		fresh := mk(filepath.Join(ws, NewID("ses_")), time.Now())
		// Live here (another replica deleted it; not learned yet): kept.
		live, _, err := m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo"}})
		if err != nil {
			t.Fatal(err)
		}
		_, stopLive := live.Subscribe(1)
		defer stopLive()
		if _, gone, err := st.DeleteUnusedSession(ctx, live.ID, time.Now().Add(time.Hour), 0); err != nil || !gone {
			t.Fatalf("deleting the live session from the store: %v, %v", gone, err)
		}
		mk(live.Info.Workdir, old)
		// Not the daemon's names: kept.
		other := mk(filepath.Join(ws, "checkout"), old)
		dotted := mk(filepath.Join(arts, ".deleting-ses_x"), old)
		notSession := mk(filepath.Join(ws, "ses_short"), old)

		if _, _, err := m.DeleteUnused(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{orphanWS, orphanArt} {
			if exists(t, dir) {
				t.Errorf("orphan directory %s was not removed", dir)
			}
		}
		for _, dir := range []string{stored.Info.Workdir, filepath.Join(arts, stored.ID), fresh, live.Info.Workdir, other, dotted, notSession} {
			if !exists(t, filepath.Join(dir, "f")) {
				t.Errorf("directory %s was removed", dir)
			}
		}
	})
}

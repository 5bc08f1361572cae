package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// TestSyncFollowsTheStore: two proxies on one store (two replicas). Sync brings the
// second in line with what the first added, replaced and removed, and leaves alone
// what the store does not change (no reconnect), a configured server of the same name
// (it wins) and a server whose tool names would overlap one there is.
// With PostgreSQL too (when the tests have one), whose jsonb gives a configuration
// back with its keys in another order.
func TestSyncFollowsTheStore(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testSync(t, sqliteStore(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, err := store.OpenPostgres(t.Context(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		testSync(t, db)
	})
}

func testSync(t *testing.T, db ServerStore) {
	a := newHarness(t, Config{}, WithStore(db))
	a.start(t)
	configured := ServerConfig{Name: "cfgd", Transport: TransportStdio, Command: "/nonexistent/configured", Enabled: false}
	b := newHarness(t, Config{Servers: []ServerConfig{configured}}, WithStore(db))
	b.start(t)
	sync := func(h *harness, want int) {
		t.Helper()
		if n, err := h.m.Sync(t.Context()); err != nil || n != want {
			t.Fatalf("Sync = %d, %v; want %d changes", n, err, want)
		}
	}

	dyn := stdioEverything(t, "dyn")
	dyn.Prefix = "ev_"
	dyn.CallTimeout = 5 * time.Second
	dyn.Env = map[string]string{"EXAMPLE_VAR": "x"}
	if err := a.m.Add(t.Context(), dyn); err != nil {
		t.Fatal(err)
	}
	sync(a, 0) // what it added itself, as the store gives it back: unchanged
	sync(b, 1)
	if st := b.waitState(t, "dyn", StateReady, 30*time.Second); !st.Persisted {
		t.Errorf("status on b %+v: want persisted", st)
	}
	wantText(t, b.call(t.Context(), t, "ev_echo", `{"message":"on b"}`, nil), "Echo: on b")
	pid := b.stdioPid(t, "dyn")
	sync(b, 0)
	if got := b.stdioPid(t, "dyn"); got != pid {
		t.Errorf("a Sync with nothing changed reconnected dyn (pid %d → %d)", pid, got)
	}

	// Its configuration changed in the store: replaced (removed, added).
	dyn.Prefix = "ev2_"
	raw, _ := json.Marshal(dyn)
	if err := db.PutMCPServer(t.Context(), "dyn", raw); err != nil {
		t.Fatal(err)
	}
	sync(b, 2)
	b.waitState(t, "dyn", StateReady, 30*time.Second)
	wantText(t, b.call(t.Context(), t, "ev2_echo", `{"message":"replaced"}`, nil), "Echo: replaced")
	if slices.Contains(b.tools.Names(), "ev_echo") {
		t.Errorf("the replaced server's old tools stay: %v", b.tools.Names())
	}
	if processAlive(pid) {
		t.Errorf("the replaced server's child %d is alive", pid)
	}

	// A stored server named like b's configured one, or in dyn's name space: skipped.
	if err := a.m.Add(t.Context(), ServerConfig{Name: "cfgd", Transport: TransportStdio, Command: "/nonexistent/stored", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutMCPServer(t.Context(), "squat", json.RawMessage(`{"transport":"stdio","command":"/nonexistent","prefix":"ev2_","enabled":false}`)); err != nil {
		t.Fatal(err)
	}
	sync(b, 0)
	for _, st := range b.m.Status() {
		if (st.Name == "squat" && st.State != StateSkipped) || (st.Name == "cfgd" && st.Persisted) {
			t.Errorf("status on b %+v: a configured server wins, an overlapping one is skipped", st)
		}
	}

	// Removed on a: gone from b, its tools and process with it.
	pid = b.stdioPid(t, "dyn")
	if err := a.m.Remove("dyn"); err != nil {
		t.Fatal(err)
	}
	sync(b, 2) // dyn removed; squat, out of dyn's way now, added
	if names := statusNames(b); !slices.Equal(names, []string{"cfgd", "squat"}) {
		t.Errorf("servers on b after dyn's removal on a: %v, want cfgd squat", names)
	}
	if names := b.tools.Names(); len(names) != 0 {
		t.Errorf("tools on b after the removal: %v", names)
	}
	if processAlive(pid) {
		t.Errorf("the removed server's child %d is alive on b", pid)
	}
}

// TestFollowNotifications: with Follow, a change on one proxy reaches another through
// the notifier at once (the interval is an hour here), and so does a restart.
func TestFollowNotifications(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	n := store.NewInProcessNotifier(0)
	a := newHarness(t, Config{}, WithStore(db))
	a.start(t)
	a.m.Follow(n, "replica a", time.Hour)
	b := newHarness(t, Config{}, WithStore(db))
	b.start(t)
	b.m.Follow(n, "replica b", time.Hour)

	if err := a.m.Add(t.Context(), stdioEverything(t, "dyn")); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool { return slices.Equal(statusNames(b), []string{"dyn"}) }) {
		t.Fatalf("dyn not on b after its addition on a: %v", statusNames(b))
	}
	b.waitState(t, "dyn", StateReady, 30*time.Second)
	a.waitState(t, "dyn", StateReady, 30*time.Second)
	pa, pb := a.stdioPid(t, "dyn"), b.stdioPid(t, "dyn")
	if err := a.m.Restart("dyn"); err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, func() bool {
		c := b.m.server("dyn").liveConn()
		return c != nil && c.pid != pb
	}) {
		t.Fatal("a restart on a did not restart dyn on b")
	}
	if !eventually(30*time.Second, func() bool {
		c := a.m.server("dyn").liveConn()
		return c != nil && c.pid != pa
	}) {
		t.Fatal("a restart on a did not restart dyn on a")
	}
	if err := a.m.Remove("dyn"); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool { return len(b.m.Status()) == 0 }) {
		t.Fatalf("dyn still on b after its removal on a: %+v", b.m.Status())
	}
	a.m.Stop() // Stop ends Follow; a second Stop (the cleanup's) does nothing
	b.m.Stop()
}

func statusNames(h *harness) []string {
	var out []string
	for _, st := range h.m.Status() {
		out = append(out, st.Name)
	}
	return out
}

// TestRemoveStoredServerNotRun: a stored server this proxy does not run (its tool
// names overlap a configured server's here; the log says to DELETE it) is removed
// from the store by Remove, and from the replicas that do run it; Remove of a name
// neither here nor stored is ErrUnknownServer still.
func TestRemoveStoredServerNotRun(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	n := store.NewInProcessNotifier(0)
	a := newHarness(t, Config{}, WithStore(db))
	a.start(t)
	a.m.Follow(n, "replica a", time.Hour)
	configured := ServerConfig{Name: "cfgd", Transport: TransportStdio, Command: "/nonexistent/configured", Enabled: false}
	b := newHarness(t, Config{Servers: []ServerConfig{configured}}, WithStore(db))
	b.start(t)
	b.m.Follow(n, "replica b", time.Hour)

	if err := a.m.Add(t.Context(), ServerConfig{Name: "squat", Transport: TransportStdio, Command: "/nonexistent", Prefix: "mcp__cfgd__x", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, st := range b.m.Status() {
		if st.Name == "squat" && st.State != StateSkipped {
			t.Fatalf("squat on b is %s, want skipped (it overlaps cfgd)", st.State)
		}
	}
	if names := statusNames(b); !slices.Equal(names, []string{"cfgd", "squat"}) {
		t.Fatalf("servers on b: %v, want cfgd and squat (skipped: it overlaps cfgd)", names)
	}
	if err := b.m.Remove("squat"); err != nil {
		t.Fatalf("Remove of the stored server b does not run: %v", err)
	}
	recs, err := db.ListMCPServers(t.Context())
	if err != nil || len(recs) != 0 {
		t.Fatalf("stored servers after the removal: %+v, %v; want none", recs, err)
	}
	if !eventually(10*time.Second, func() bool { return len(a.m.Status()) == 0 }) {
		t.Fatalf("squat still on a after its removal on b: %v", statusNames(a))
	}
	if err := b.m.Remove("squat"); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("Remove of a name neither run nor stored: %v, want ErrUnknownServer", err)
	}
}

// TestAddOfANameStoredElsewhere: a server added on one replica, then under the same
// name on another before that one learned of it (its notification in flight, or lost),
// is refused there as existing, as it is on the first: it used to replace the first's
// configuration in the store (both added answered 201) and so on every replica.
func TestAddOfANameStoredElsewhere(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	a := newHarness(t, Config{}, WithStore(db))
	a.start(t)
	b := newHarness(t, Config{}, WithStore(db))
	b.start(t)
	first := ServerConfig{Name: "dyn", Transport: TransportStdio, Command: "/nonexistent/first", Enabled: false}
	if err := a.m.Add(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	second := ServerConfig{Name: "dyn", Transport: TransportStdio, Command: "/nonexistent/second", Enabled: false}
	if err := b.m.Add(t.Context(), second); !errors.Is(err, ErrServerExists) {
		t.Errorf("Add on b of a name a stored: %v, want ErrServerExists", err)
	}
	recs, err := db.ListMCPServers(t.Context())
	if err != nil || len(recs) != 1 {
		t.Fatalf("stored: %+v, %v", recs, err)
	}
	var got ServerConfig
	if err := json.Unmarshal(recs[0].Config, &got); err != nil || got.Command != first.Command {
		t.Errorf("stored configuration of dyn: %s (%v), want the first's", recs[0].Config, err)
	}
	if _, err := b.m.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := b.m.server("dyn"); st == nil || st.cfg.Command != first.Command {
		t.Errorf("dyn on b after Sync: %+v, want the first's", st)
	}
}

// TestFollowLogsAStoreOutageOnce: while the shared store cannot be read (PostgreSQL
// closed to connections), Follow retries every interval, but it logs the outage when
// it begins (and once a minute while it lasts), not at every retry: it logged an
// ERROR every 5 s for as long as PostgreSQL was down. Its end is logged with how long
// it lasted.
func TestFollowLogsAStoreOutageOnce(t *testing.T) {
	t.Parallel()
	dbURL, admin := pgtest.Database(t)
	db, err := store.OpenPostgres(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	var buf lockedBuffer
	tools := toolmgr.New()
	counted := &failedLists{ServerStore: db}
	m, err := New(Config{}, tools, nil, slog.New(slog.NewJSONHandler(&buf, nil)), prometheus.NewRegistry(), WithStore(counted))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	(&harness{m: m, tools: tools}).start(t)
	m.Follow(store.NewInProcessNotifier(0), "replica a", 20*time.Millisecond)

	lines := func(msg string) []map[string]any {
		var out []map[string]any
		for _, rec := range buf.records(t) {
			if rec["msg"] == msg {
				out = append(out, rec)
			}
		}
		return out
	}
	const failed, still, again = "mcp proxy: reading the servers added at run time failed; retried",
		"mcp proxy: reading the servers added at run time still fails; retried",
		"mcp proxy: reading the servers added at run time works again"
	if _, err := admin.Exec(t.Context(), "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(t.Context(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool { return len(lines(failed)) > 0 }) {
		t.Fatal("the outage was not logged")
	}
	// An outage of at least 1s (down_for below) with at least 5 failed reads
	// (attempts below): waited for, not assumed from a fixed sleep, as a loaded
	// machine may retry less often than every 20 ms.
	time.Sleep(time.Second)
	if !eventually(30*time.Second, func() bool { return counted.n.Load() >= 5 }) {
		t.Fatalf("only %d failed reads of the store during the outage", counted.n.Load())
	}
	if _, err := admin.Exec(t.Context(), "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true"); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool { return len(lines(again)) > 0 }) {
		t.Fatal("the end of the outage was not logged")
	}
	end := lines(again)[0]
	if n, _ := end["attempts"].(float64); n < 5 {
		t.Fatalf("only %v attempts during the outage: too few to tell one line from one per attempt", end["attempts"])
	}
	if d, err := time.ParseDuration(fmt.Sprint(end["down_for"])); err != nil || d < time.Second {
		t.Errorf("down_for %v (%v), want the outage's length, at least 1s", end["down_for"], err)
	}
	if n, s := len(lines(failed)), len(lines(still)); n != 1 || s != 0 {
		t.Errorf("%d %q lines and %d %q lines for one outage of %v attempts; want 1 and 0", n, failed, s, still, end["attempts"])
	}
}

// failedLists counts the reads of the servers that fail, on the real store.
type failedLists struct {
	ServerStore
	n atomic.Int32
}

func (f *failedLists) ListMCPServers(ctx context.Context) ([]store.MCPServerRecord, error) {
	recs, err := f.ServerStore.ListMCPServers(ctx)
	if err != nil {
		f.n.Add(1)
	}
	return recs, err
}

package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// benchWriters is how many goroutines record calls at once in the benchmarks: the
// daemon handling many sessions' calls concurrently.
const benchWriters = 32

var benchBackends = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"sqlite", func(b *testing.B) store.Store { return openSQLite(b) }},
	{"postgres", func(b *testing.B) store.Store { return openPostgres(b) }},
}

func benchCall(id string) *store.Call {
	now := time.Now()
	return &store.Call{
		ID: id, SessionID: "ses_bench", Tenant: "acme", ToolCallID: "call_" + id, Name: "read_file",
		Arguments: json.RawMessage(`{"path":"internal/store/groupcommit.go","offset":0,"limit":200}`),
		Status:    store.CallRunning, Owner: "replica-1", CreatedAt: now, StartedAt: &now,
	}
}

var benchResult = tool.TextResult("package store\n\nimport (\n\t\"context\"\n\t\"errors\"\n)\n// 200 bytes of a file, more or less, as a typical small tool result would carry.\n")

// runWriters records b.N calls (insert as running, then finish) from benchWriters
// goroutines and reports calls/s.
func runWriters(b *testing.B, record func(ctx context.Context, id string) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	prefix := strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if err := record(context.Background(), prefix+strconv.FormatInt(n, 10)); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	// CPU per call (this process, all threads: writers, committer, SQLite) is steadier
	// than wall time on a machine that is busy with other work.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/call")
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startBenchCommitter runs a GroupCommitter on s until the benchmark ends.
func startBenchCommitter(b *testing.B, s store.Store) *store.GroupCommitter {
	g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(g.Stop)
	return g
}

// BenchmarkGroupCommit: each call is recorded twice (Insert, Finish) through a
// GroupCommitter, as the daemon does.
func BenchmarkGroupCommit(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			g := startBenchCommitter(b, be.open(b))
			runWriters(b, func(ctx context.Context, id string) error {
				if err := g.Insert(ctx, benchCall(id)); err != nil {
					return err
				}
				return g.Finish(ctx, store.CallFinish{ID: id, Status: store.CallSucceeded, Result: benchResult})
			})
			st := g.Stats()
			b.ReportMetric(float64(st.Ops)/float64(st.Batches), "ops/txn")
		})
	}
}

// BenchmarkDirectWriteCalls: the same work, one WriteCalls transaction per record.
func BenchmarkDirectWriteCalls(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			runWriters(b, func(ctx context.Context, id string) error {
				if err := s.WriteCalls(ctx, []*store.Call{benchCall(id)}, nil); err != nil {
					return err
				}
				return s.WriteCalls(ctx, nil, []store.CallFinish{{ID: id, Status: store.CallSucceeded, Result: benchResult}})
			})
		})
	}
}

// TestGroupCommitStartContext: ending Start's context stops the committer after it has
// written what was queued, like Stop.
func TestGroupCommitStartContext(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{MaxBatch: 4, WriteTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.Insert(t.Context(), benchCall(fmt.Sprintf("tc_%d", i)))
			if err != nil && !errors.Is(err, store.ErrCommitterStopped) {
				t.Errorf("Insert %d: %v", i, err)
			}
		}()
	}
	cancel()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for probe := 0; ; probe++ {
		err := g.Insert(t.Context(), benchCall(fmt.Sprintf("tc_probe_%d", probe)))
		if errors.Is(err, store.ErrCommitterStopped) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committer still accepts work 10s after its context ended (last: %v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.Stop()
	// Every Insert that returned nil is stored; the queue was drained, not dropped.
	st := g.Stats()
	calls, err := s.ListCalls(t.Context(), "ses_bench", store.CallPage{})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(calls)) != st.Ops || st.FailedOps != 0 {
		t.Errorf("stored %d calls, committer wrote %d ops (%d failed); want equal, none failed", len(calls), st.Ops, st.FailedOps)
	}
}

func TestGroupCommitConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []store.GroupCommitConfig{{MaxBatch: -1}, {WriteTimeout: -time.Second}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
		if _, err := store.NewGroupCommitter(openSQLite(t), cfg); err == nil {
			t.Errorf("NewGroupCommitter(%+v) succeeded", cfg)
		}
	}
	if err := (store.GroupCommitConfig{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if _, err := store.NewGroupCommitter(nil, store.GroupCommitConfig{}); err == nil {
		t.Errorf("NewGroupCommitter(nil store) succeeded")
	}
}

// plainStore hides WriteCallBatch: a Store with only the declared contract.
type plainStore struct{ store.Store }

func TestGroupCommitPlainStore(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	g, err := store.NewGroupCommitter(plainStore{s}, store.GroupCommitConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	c := benchCall("tc_1")
	if err := g.Insert(t.Context(), c); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	if err := g.MarkRunning(t.Context(), "tc_1", "x", time.Time{}); err == nil {
		t.Errorf("MarkRunning through a store without WriteCallBatch succeeded")
	}
	if err := g.Finish(t.Context(), store.CallFinish{ID: "tc_1", Status: store.CallSucceeded, Result: benchResult}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	got, err := s.GetCall(t.Context(), "tc_1")
	if err != nil || got.Status != store.CallSucceeded || got.Result.Text() != benchResult.Text() {
		t.Errorf("GetCall = %+v, %v", got, err)
	}
}

// BenchmarkGroupCommitReadOnly records calls as the daemon records read-only ones:
// queued without waiting (Enqueue), then finished (Finish waits), so most pairs fold
// into one insert of the final row; one session per writer, time-ordered ids.
func BenchmarkGroupCommitReadOnly(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			g := startBenchCommitter(b, be.open(b))
			var seq atomic.Int64
			runWriters(b, func(ctx context.Context, _ string) error {
				n := seq.Add(1)
				c := benchCall(fmt.Sprintf("tc_%012x%08d", time.Now().UnixMilli(), n))
				c.SessionID = fmt.Sprintf("ses_%02d", n%benchWriters)
				if err := g.Enqueue(c); err != nil {
					return err
				}
				return g.Finish(ctx, store.CallFinish{ID: c.ID, Status: store.CallSucceeded, Result: benchResult})
			})
			st := g.Stats()
			b.ReportMetric(float64(st.Ops)/float64(st.Batches), "ops/txn")
		})
	}
}

// gatedStore holds each WriteCallBatch until the test releases it.
type gatedStore struct {
	store.Store
	entered chan struct{} // buffered (1): tells of the first write only
	release chan struct{}
}

func (s gatedStore) WriteCallBatch(ctx context.Context, w store.CallWrites) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.(store.BatchWriter).WriteCallBatch(ctx, w)
}

// TestGroupCommitReadDuringWrite: a record the writer has taken from the queue but not
// committed yet is neither queued nor in the store; reads must still find it, never
// answer "not found" for a call that exists, and a list started meanwhile must wait
// for it when nobody else does (Enqueue).
func TestGroupCommitReadDuringWrite(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		enqueue bool
		fold    time.Duration
	}{
		{"insert", false, 0},
		{"enqueue", true, 0},
		{"enqueue in fold window", true, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := gatedStore{Store: openSQLite(t), entered: make(chan struct{}, 1), release: make(chan struct{})}
			g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{FoldWindow: tt.fold})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer g.Stop()
			c := benchCall("tc_inflight")
			done := make(chan error, 1)
			if tt.enqueue {
				if err := g.Enqueue(c); err != nil {
					t.Fatal(err)
				}
				// In the fold window the insert waits for this Finish, which releases it.
				go func() {
					done <- g.Finish(t.Context(), store.CallFinish{ID: c.ID, Status: store.CallSucceeded, Result: benchResult})
				}()
			} else {
				go func() { done <- g.Insert(t.Context(), c) }()
			}
			<-s.entered // the insert is being written
			got, err := g.GetCall(t.Context(), c.ID)
			if err != nil || got.ID != c.ID {
				t.Errorf("GetCall during the write = %+v, %v; want the record", got, err)
			}
			got, err = g.GetCallByToolCallID(t.Context(), c.SessionID, c.ToolCallID)
			if err != nil || got.ID != c.ID {
				t.Errorf("GetCallByToolCallID during the write = %+v, %v; want the record", got, err)
			}
			if tt.enqueue {
				// Nobody waits for this insert's commit, so a list must: while the write
				// is held it cannot answer (without the call) before its deadline.
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				calls, err := g.ListCalls(ctx, c.SessionID, store.CallPage{Limit: 10})
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("ListCalls during the write = %d calls, %v; want it to wait for the write", len(calls), err)
				}
			}
			close(s.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if calls, err := g.ListCalls(t.Context(), c.SessionID, store.CallPage{Limit: 10}); err != nil || len(calls) != 1 || calls[0].ID != c.ID {
				t.Errorf("ListCalls after the write = %d calls, %v; want the one written", len(calls), err)
			}
			if got, err := g.GetCall(t.Context(), c.ID); err != nil || got.ID != c.ID {
				t.Errorf("GetCall after the write = %+v, %v", got, err)
			}
		})
	}
}

// fullStore refuses writes for lack of space while full is set.
type fullStore struct {
	*store.SQLite
	full *atomic.Bool
}

func (s fullStore) WriteCallBatch(ctx context.Context, w store.CallWrites) error {
	if s.full.Load() {
		return fmt.Errorf("store: write calls: commit: %w", syscall.ENOSPC)
	}
	return s.SQLite.WriteCallBatch(ctx, w)
}

// TestGroupCommitOutOfSpace: WriteRefused reports a transaction refused for lack of
// space until one commits, or until the window has passed without a write.
func TestGroupCommitOutOfSpace(t *testing.T) {
	t.Parallel()
	var full atomic.Bool
	g, err := store.NewGroupCommitter(fullStore{openSQLite(t), &full}, store.GroupCommitConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	if err := g.WriteRefused(time.Minute); err != nil {
		t.Fatalf("WriteRefused before any write: %v", err)
	}
	full.Store(true)
	if err := g.Insert(t.Context(), benchCall("tc_1")); !store.IsStorageFull(err) {
		t.Fatalf("Insert on a full store: %v", err)
	}
	if err := g.WriteRefused(time.Minute); !store.IsStorageFull(err) {
		t.Errorf("WriteRefused after a refused write: %v, want the refusal", err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := g.WriteRefused(10 * time.Millisecond); err != nil {
		t.Errorf("WriteRefused with a window shorter than the refusal's age: %v, want nil", err)
	}
	full.Store(false)
	if err := g.Insert(t.Context(), benchCall("tc_2")); err != nil {
		t.Fatal(err)
	}
	if err := g.WriteRefused(time.Minute); err != nil {
		t.Errorf("WriteRefused after a write committed: %v, want nil", err)
	}
}

// TestGroupCommitWriteRefusedOtherThanSpace: a transaction the database refuses for
// another reason than space (here another process holding SQLite's write lock past the
// write timeout; in production an unwritable WAL, an I/O error) is reported too, until
// one commits: /readyz must not stay 200 while every call is answered unavailable.
func TestGroupCommitWriteRefusedOtherThanSpace(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	other, err := sql.Open("sqlite", "file:"+s.Path()+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if err := g.Insert(t.Context(), benchCall("tc_1")); err == nil {
		t.Fatal("Insert while another process holds the write lock succeeded")
	}
	if err := g.WriteRefused(time.Minute); err == nil || store.IsStorageFull(err) {
		t.Errorf("after a refused write: %v, want the refusal (not a full disk)", err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := g.Insert(t.Context(), benchCall("tc_2")); err != nil {
		t.Fatal(err)
	}
	if err := g.WriteRefused(time.Minute); err != nil {
		t.Errorf("after a write committed: %v, want nil", err)
	}
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func startCommitter(t *testing.T, s store.Store) *store.GroupCommitter {
	t.Helper()
	g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return g
}

func testGroupCommitConcurrent(t *testing.T, s store.Store) {
	g := startCommitter(t, s)
	const workers, perWorker = 32, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				id := fmt.Sprintf("tc_%d_%d", w, i)
				if err := g.Insert(t.Context(), runningCall(id, "ses_1", "call_"+id, time.Now())); err != nil {
					errs <- err
					return
				}
				// Committed means readable, at once.
				if c, err := s.GetCall(t.Context(), id); err != nil || c.Status != store.CallRunning {
					errs <- fmt.Errorf("read after Insert of %s: %v, %v", id, c, err)
					return
				}
				if err := g.Finish(t.Context(), store.CallFinish{ID: id, Status: store.CallSucceeded, Result: resultFor(id)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("group commit: %v", err)
	}
	for w := range workers {
		for i := range perWorker {
			checkFinished(t, s, fmt.Sprintf("tc_%d_%d", w, i))
		}
	}
	st := g.Stats()
	if st.Ops != 2*workers*perWorker || st.FailedOps != 0 {
		t.Errorf("stats = %+v, want %d ops, 0 failed", st, 2*workers*perWorker)
	}
	if st.Batches >= st.Ops {
		t.Errorf("stats = %+v: %d concurrent writers were never batched together", st, workers)
	}
	t.Logf("group commit: %d ops in %d transactions (%.1f per transaction)", st.Ops, st.Batches, float64(st.Ops)/float64(st.Batches))
}

func testGroupCommitRecordError(t *testing.T, s store.Store) {
	mustWrite(t, s, []*store.Call{runningCall("tc_taken", "ses_1", "call_0", base)}, nil)
	g := startCommitter(t, s)
	const n = 40
	var wg sync.WaitGroup
	results := make([]error, n+2)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = g.Insert(t.Context(), runningCall(fmt.Sprintf("tc_%d", i), "ses_1", fmt.Sprintf("call_%d", i), base))
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		results[n] = g.Insert(t.Context(), runningCall("tc_taken", "ses_1", "call_dup", base))
	}()
	go func() {
		defer wg.Done()
		results[n+1] = g.Finish(t.Context(), store.CallFinish{ID: "tc_missing", Status: store.CallSucceeded})
	}()
	wg.Wait()
	for i := range n {
		if results[i] != nil {
			t.Errorf("Insert tc_%d: %v; a bad record in the same batch must not fail the others", i, results[i])
		}
		if _, err := s.GetCall(t.Context(), fmt.Sprintf("tc_%d", i)); err != nil {
			t.Errorf("GetCall tc_%d: %v", i, err)
		}
	}
	wantErrIs(t, "Insert of a duplicate id", results[n], store.ErrConflict)
	wantErrIs(t, "Finish of an unknown call", results[n+1], store.ErrNotFound)
	if got := mustGetCall(t, s, "tc_taken"); got.ToolCallID != "call_0" {
		t.Errorf("tc_taken tool_call_id = %q, want the original call_0", got.ToolCallID)
	}
	if st := g.Stats(); st.FailedOps != 2 {
		t.Errorf("stats = %+v, want exactly 2 failed ops", st)
	}

	// Invalid records are refused before they are queued.
	err := g.Insert(t.Context(), &store.Call{ID: "tc_bad", SessionID: "ses_1", Name: "x", Status: "bogus"})
	wantErrIs(t, "Insert of an invalid call", err, store.ErrInvalid)
	err = g.Finish(t.Context(), store.CallFinish{ID: "tc_0", Status: store.CallRunning})
	wantErrIs(t, "Finish to a non-terminal status", err, store.ErrInvalid)
}

func testGroupCommitStopDrains(t *testing.T, s store.Store) {
	g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{MaxBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Insert(t.Context(), runningCall("tc_early", "ses_1", "call_early", base)); !errors.Is(err, store.ErrCommitterStopped) {
		t.Errorf("Insert before Start: %v, want ErrCommitterStopped", err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err == nil {
		t.Errorf("second Start succeeded, want an error")
	}

	// Callers that give up at once: each gets its context's error, yet every write lands.
	const n = 100
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.Insert(gone, runningCall(fmt.Sprintf("tc_%d", i), "ses_1", fmt.Sprintf("call_%d", i), base))
		}()
	}
	wg.Wait()
	g.Stop()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Insert %d with a cancelled context: %v, want nil or context.Canceled", i, err)
		}
	}
	calls, err := s.ListCalls(t.Context(), "ses_1", store.CallPage{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != n {
		t.Errorf("after Stop: %d calls stored, want all %d (a caller going away must not lose its record)", len(calls), n)
	}
	if st := g.Stats(); st.Ops != n || st.FailedOps != 0 {
		t.Errorf("stats = %+v, want %d ops, none failed", st, n)
	}
	err = g.Insert(t.Context(), runningCall("tc_late", "ses_1", "call_late", base))
	wantErrIs(t, "Insert after Stop", err, store.ErrCommitterStopped)
	g.Stop() // idempotent
}

func testGroupCommitStoreFailure(t *testing.T, s store.Store) {
	g := startCommitter(t, s)
	if err := g.Insert(t.Context(), runningCall("tc_0", "ses_1", "call_0", base)); err != nil {
		t.Fatalf("Insert on an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.Insert(t.Context(), runningCall(fmt.Sprintf("tc_%d", i+1), "ses_1", "call", base))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("Insert %d on a closed store returned nil: a failed batch must reach every waiter", i)
		}
	}
	if st := g.Stats(); st.FailedOps != n {
		t.Errorf("stats = %+v, want %d failed ops", st, n)
	}
}

func testGroupCommitMarkRunning(t *testing.T, s store.Store) {
	batchWriter(t, s)
	g := startCommitter(t, s)
	const workers, perWorker = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				id := fmt.Sprintf("tc_%d_%d", w, i)
				c := runningCall(id, "ses_1", "call_"+id, time.Now())
				c.Status, c.StartedAt = store.CallPending, nil
				if err := g.Insert(t.Context(), c); err != nil {
					errs <- err
					return
				}
				if err := g.MarkRunning(t.Context(), id, fmt.Sprintf("owner-%d", w), time.Time{}); err != nil {
					errs <- fmt.Errorf("MarkRunning %s: %w", id, err)
					return
				}
				if got, err := s.GetCall(t.Context(), id); err != nil || got.Status != store.CallRunning ||
					got.Owner != fmt.Sprintf("owner-%d", w) || got.StartedAt == nil {
					errs <- fmt.Errorf("after MarkRunning %s: %+v, %v", id, got, err)
					return
				}
				if err := g.Finish(t.Context(), store.CallFinish{ID: id, Status: store.CallSucceeded, Result: resultFor(id)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("group commit: %v", err)
	}
	for w := range workers {
		for i := range perWorker {
			checkFinished(t, s, fmt.Sprintf("tc_%d_%d", w, i))
		}
	}

	// Racing claims on one waiting call: one winner.
	c := runningCall("tc_contested", "ses_1", "call_c", base)
	c.Status, c.StartedAt = store.CallWaiting, nil
	if err := g.Insert(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	const claimers = 8
	results := make([]error, claimers)
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = g.MarkRunning(t.Context(), "tc_contested", fmt.Sprintf("replica-%d", i), time.Time{})
		}()
	}
	wg.Wait()
	winners := 0
	winner := ""
	for i, err := range results {
		switch {
		case err == nil:
			winners++
			winner = fmt.Sprintf("replica-%d", i)
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("claim %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d claims won, want exactly 1", winners)
	}
	if got := mustGetCall(t, s, "tc_contested"); got.Owner != winner || got.Status != store.CallRunning {
		t.Errorf("contested call: owner %q status %q, want %q running", got.Owner, got.Status, winner)
	}
	err := g.MarkRunning(t.Context(), "tc_nope", "x", time.Time{})
	wantErrIs(t, "MarkRunning of an unknown call", err, store.ErrNotFound)
}

// testGroupCommitFoldWindow: an Enqueue'd record waits in the fold window for its
// Finish and both are written as one row; reads through the committer see it while it
// waits, lists write it first, and a window that ends, a start of the call or Stop
// write it without a Finish.
func testGroupCommitFoldWindow(t *testing.T, s store.Store) {
	g, err := store.NewGroupCommitter(s, store.GroupCommitConfig{FoldWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ctx := t.Context()

	if err := g.Enqueue(runningCall("tc_a", "ses_fold", "call_a", base)); err != nil {
		t.Fatal(err)
	}
	if c, err := g.GetCall(ctx, "tc_a"); err != nil || c.Status != store.CallRunning {
		t.Errorf("committer GetCall of a waiting record = %+v, %v; want it, running", c, err)
	}
	if c, err := g.GetCallByToolCallID(ctx, "ses_fold", "call_a"); err != nil || c.ID != "tc_a" {
		t.Errorf("committer GetCallByToolCallID of a waiting record = %+v, %v; want tc_a", c, err)
	}
	if _, err := s.GetCall(ctx, "tc_a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("store GetCall of a record in the fold window: %v, want ErrNotFound (not written yet)", err)
	}
	if err := g.Finish(ctx, store.CallFinish{ID: "tc_a", Status: store.CallSucceeded, Result: resultFor("tc_a")}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	checkFinished(t, s, "tc_a")
	if st := g.Stats(); st.Folded != 1 || st.Batches != 1 {
		t.Errorf("stats = %+v, want the insert and finish folded into 1 transaction", st)
	}

	// A list writes what waits, so it shows every call the committer has.
	if err := g.Enqueue(runningCall("tc_b", "ses_fold", "call_b", base.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	calls, err := g.ListCalls(ctx, "ses_fold", store.CallPage{Limit: 10})
	if err != nil || len(calls) != 2 || calls[0].ID != "tc_b" || calls[0].Status != store.CallRunning {
		t.Errorf("ListCalls through the committer = %v, %v; want tc_b (running) and tc_a", calls, err)
	}
	recent, err := g.ListRecentCalls(ctx, store.CallFilter{Tenant: "acme", Limit: 10})
	if err != nil || len(recent) != 2 {
		t.Errorf("ListRecentCalls through the committer = %v, %v; want 2 calls", recent, err)
	}
	if err := g.Finish(ctx, store.CallFinish{ID: "tc_b", Status: store.CallSucceeded, Result: resultFor("tc_b")}); err != nil {
		t.Fatalf("Finish after the record was written: %v", err)
	}
	checkFinished(t, s, "tc_b")

	// Commit writes one waiting record, now, and leaves the others waiting.
	for _, id := range []string{"tc_commit1", "tc_commit2"} {
		if err := g.Enqueue(runningCall(id, "ses_commit", "call_"+id, base.Add(time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Commit(ctx, "tc_commit1"); err != nil {
		t.Fatalf("Commit of a waiting record: %v", err)
	}
	if c := mustGetCall(t, s, "tc_commit1"); c.Status != store.CallRunning {
		t.Errorf("after Commit: %+v, want the record written, running", c)
	}
	if _, err := s.GetCall(ctx, "tc_commit2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("store GetCall of another waiting record after Commit: %v, want ErrNotFound", err)
	}
	if err := g.Commit(ctx, "tc_commit1"); err != nil {
		t.Errorf("Commit of a written record: %v", err)
	}
	for _, id := range []string{"tc_commit1", "tc_commit2"} {
		if err := g.Finish(ctx, store.CallFinish{ID: id, Status: store.CallSucceeded, Result: resultFor(id)}); err != nil {
			t.Fatalf("Finish %s: %v", id, err)
		}
		checkFinished(t, s, id)
	}

	// A start of a waiting pending record writes the record first.
	pending := runningCall("tc_c", "ses_fold", "call_c", base.Add(2*time.Second))
	pending.Status, pending.StartedAt = store.CallPending, nil
	if err := g.Enqueue(pending); err != nil {
		t.Fatal(err)
	}
	if err := g.MarkRunning(ctx, "tc_c", "replica-2", base.Add(3*time.Second)); err != nil {
		t.Fatalf("MarkRunning of a waiting record: %v", err)
	}
	if c := mustGetCall(t, s, "tc_c"); c.Status != store.CallRunning || c.Owner != "replica-2" {
		t.Errorf("after MarkRunning: %+v, want running on replica-2", c)
	}

	// A second record with a waiting record's id is the duplicate: the first stays.
	first := runningCall("tc_dup", "ses_fold", "call_first", base.Add(3*time.Second))
	if err := g.Enqueue(first); err != nil {
		t.Fatal(err)
	}
	if err := g.Enqueue(runningCall("tc_dup", "ses_fold", "call_second", base.Add(3*time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := g.Finish(ctx, store.CallFinish{ID: "tc_dup", Status: store.CallSucceeded, Result: resultFor("tc_dup")}); err != nil {
		t.Fatalf("Finish after a duplicate record: %v", err)
	}
	if c := mustGetCall(t, s, "tc_dup"); c.ToolCallID != "call_first" || c.Status != store.CallSucceeded {
		t.Errorf("after a duplicate record: %+v, want the first one, finished", c)
	}

	// Stop writes what still waits.
	if err := g.Enqueue(runningCall("tc_d", "ses_fold", "call_d", base.Add(4*time.Second))); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	if c := mustGetCall(t, s, "tc_d"); c.Status != store.CallRunning {
		t.Errorf("after Stop: %+v, want the waiting record written, running", c)
	}

	// A window that ends writes the record without a Finish.
	short, err := store.NewGroupCommitter(s, store.GroupCommitConfig{FoldWindow: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := short.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer short.Stop()
	if err := short.Enqueue(runningCall("tc_e", "ses_fold", "call_e", base.Add(5*time.Second))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.GetCall(ctx, "tc_e")
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
			t.Fatalf("record of a call never finished, 20 ms window: still not written after 10 s (%v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testGroupCommitFinishFinal: a finish of a call whose record is already final (a
// restart or a lease sweep marked it failed) writes nothing and says so with
// ErrAlreadyFinal, naming the record's status, so that the caller can tell its client
// what the record says; the other finishes of its batch are written.
func testGroupCommitFinishFinal(t *testing.T, s store.Store) {
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	mustWrite(t, s, []*store.Call{runningCall("tc_swept", "ses_1", "call_swept", base)}, nil)
	swept := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: "the replica stopped"}}, IsError: true, ErrorKind: tool.KindFailed}
	if _, err := s.AbandonCalls(t.Context(), "replica-1", swept, base.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	g := startCommitter(t, s)
	const n = 20
	var wg sync.WaitGroup
	results := make([]error, n+2)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("tc_%d", i)
			if err := g.Insert(t.Context(), runningCall(id, "ses_1", "call_"+id, base)); err != nil {
				results[i] = err
				return
			}
			results[i] = g.Finish(t.Context(), store.CallFinish{ID: id, Status: store.CallSucceeded, Result: resultFor(id)})
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		results[n] = g.Finish(t.Context(), store.CallFinish{ID: "tc_swept", Status: store.CallSucceeded, Result: resultFor("tc_swept")})
	}()
	go func() { // a record error in the same batch: the batch is replayed one by one
		defer wg.Done()
		results[n+1] = g.Finish(t.Context(), store.CallFinish{ID: "tc_missing", Status: store.CallSucceeded})
	}()
	wg.Wait()
	for i := range n {
		if results[i] != nil {
			t.Errorf("tc_%d: %v", i, results[i])
		}
	}
	wantErrIs(t, "Finish of a call already failed", results[n], store.ErrAlreadyFinal)
	if !strings.Contains(results[n].Error(), "already failed") {
		t.Errorf("Finish of a call already failed: %v, want it to name the record's status", results[n])
	}
	wantErrIs(t, "Finish of an unknown call", results[n+1], store.ErrNotFound)
	if c := mustGetCall(t, s, "tc_swept"); c.Status != store.CallFailed || c.Result.Text() != "the replica stopped" {
		t.Errorf("tc_swept after a late finish: %+v, want the first result kept", c)
	}
	if st := g.Stats(); st.Final != 1 || st.FailedOps != 1 {
		t.Errorf("stats = %+v, want 1 final and 1 failed", st)
	}

	// Alone in its batch too.
	err := g.Finish(t.Context(), store.CallFinish{ID: "tc_0", Status: store.CallFailed, Result: resultFor("tc_0")})
	wantErrIs(t, "second Finish", err, store.ErrAlreadyFinal)
	if !strings.Contains(err.Error(), "already succeeded") {
		t.Errorf("second Finish: %v, want it to name the record's status", err)
	}
}

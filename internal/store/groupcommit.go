package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCommitterStopped is returned by GroupCommitter.Insert and Finish when the committer
// is not running (not started yet, or stopping).
var ErrCommitterStopped = errors.New("group committer is not running")

// GroupCommitConfig tunes a GroupCommitter. The zero value is usable.
type GroupCommitConfig struct {
	// MaxBatch caps the operations (inserts, starts, finishes) taken from the queue
	// for one transaction; inserts leaving the fold window join it. Default 256.
	MaxBatch int
	// WriteTimeout bounds one batch's transaction. Callers do not bound it: their
	// contexts only bound their wait. Default 30s.
	WriteTimeout time.Duration
	// FoldWindow is how long a record queued with Enqueue waits for its call's Finish,
	// so that both are written as one row (one insert) instead of an insert and an
	// update. A record still waiting when the window ends is written then. Reads
	// through the committer see waiting records (GetCall, GetCallByToolCallID) or
	// write them first (ListCalls, ListRecentCalls). Zero writes them at once.
	FoldWindow time.Duration
	// Observe, when set, is told about every transaction ("write_calls") when it ends.
	Observe func(op string, start time.Time)
}

const (
	defaultMaxBatch     = 256
	defaultWriteTimeout = 30 * time.Second
)

// Validate rejects negative values; zero means the default.
func (c GroupCommitConfig) Validate() error {
	if c.MaxBatch < 0 {
		return fmt.Errorf("store: group commit: max batch %d is negative", c.MaxBatch)
	}
	if c.WriteTimeout < 0 {
		return fmt.Errorf("store: group commit: write timeout %s is negative", c.WriteTimeout)
	}
	if c.FoldWindow < 0 {
		return fmt.Errorf("store: group commit: fold window %s is negative", c.FoldWindow)
	}
	return nil
}

func (c GroupCommitConfig) withDefaults() GroupCommitConfig {
	if c.MaxBatch == 0 {
		c.MaxBatch = defaultMaxBatch
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	return c
}

// GroupCommitStats counts what a GroupCommitter has written.
type GroupCommitStats struct {
	Batches   uint64 // WriteCalls transactions attempted (retries of a split batch included)
	Ops       uint64 // inserts, starts and finishes written, each counted once
	FailedOps uint64 // operations whose waiter got an error
	Folded    uint64 // finishes written as part of their call's insert (one row write for both)
	// Final counts finishes not written because their call's record was already final
	// (Finish answered ErrAlreadyFinal): a result that arrived after the record was
	// failed by a lease sweep or a restart, or after another outcome was recorded.
	Final uint64
}

// GroupCommitter turns concurrent Insert, MarkRunning and Finish calls into few
// transactions (WriteCallBatch when the store has it, else WriteCalls). One writer
// goroutine drains a queue: whatever was queued while the previous transaction ran
// goes into the next one, up to MaxBatch operations. Each
// caller blocks until its record is committed (or the transaction failed), so the
// durability of a returned nil is that of WriteCalls; the cost of a commit is shared by
// everyone in the batch.
//
// A batch that fails fails every waiter in it with the error. The exception is an
// error one record caused (ErrConflict for a duplicate id or a call that cannot be
// started, ErrNotFound for an unknown call): the transaction rolled back, so the batch
// is replayed one operation per transaction, in queue order, and only the culprit gets
// the error.
//
// A caller whose ctx ends stops waiting and gets ctx's error, but its write is not
// withdrawn: it is committed with the batch it is in. A client going away must not lose
// the record of a call that ran. So an error wrapping context.Canceled or
// context.DeadlineExceeded from Insert, MarkRunning or Finish does not mean the write
// failed; it means the caller does not know.
type GroupCommitter struct {
	store Store
	batch BatchWriter // nil when the store has no WriteCallBatch
	cfg   GroupCommitConfig

	mu       sync.Mutex
	state    gcState
	queue    []*gcOp
	free     []*gcOp          // the writer's spare batch buffer
	held     map[string]*gcOp // Enqueue'd inserts waiting for their Finish (FoldWindow)
	heldFIFO []*gcOp          // the same, oldest first; entries no longer in held are skipped
	inflight []*gcOp          // the batch being written: out of the queue, not committed yet
	wake     chan struct{}
	stopCh   chan struct{}
	stopOnce sync.Once
	exited   chan struct{}

	batches, ops, failed, folded, final atomic.Uint64
	// refused is the last transaction the store refused; nil once one commits.
	refused atomic.Pointer[refusal]
}

type refusal struct {
	at  time.Time
	err error
}

type gcState int

const (
	gcIdle gcState = iota
	gcRunning
	gcStopping // no new operations; the writer drains the queue
)

type gcOp struct {
	call   *Call      // an insert (a private copy) when non-nil
	start  *CallStart // a start when non-nil
	flush  bool       // a barrier: every held insert (or only flushID's) is written with it
	finish CallFinish // otherwise, a finish
	done   chan error // buffered: the writer never blocks on a waiter that left; nil when detached

	flushID  string    // on a flush: only this call's held insert is written with it
	detached bool      // an Enqueue'd insert: nobody waits for its commit
	foldable bool      // detached, and may wait for its Finish (FoldWindow)
	heldAt   time.Time // when the writer started holding it
	// final, on a finish, is the status of the record it found already final (the
	// finish changed nothing); "" otherwise.
	final CallStatus
}

// NewGroupCommitter returns a committer writing to s. Call Start before use.
func NewGroupCommitter(s Store, cfg GroupCommitConfig) (*GroupCommitter, error) {
	if s == nil {
		return nil, errors.New("store: group commit: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bw, _ := s.(BatchWriter)
	return &GroupCommitter{
		store:  s,
		batch:  bw,
		cfg:    cfg.withDefaults(),
		held:   map[string]*gcOp{},
		wake:   make(chan struct{}, 1),
		stopCh: make(chan struct{}),
		exited: make(chan struct{}),
	}, nil
}

// Start runs the writer until Stop is called or ctx ends; either way the queue is
// drained first. Writes run under a context detached from ctx's cancellation (values
// kept), bounded by WriteTimeout per batch.
func (g *GroupCommitter) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != gcIdle {
		return errors.New("store: group commit: already started")
	}
	g.state = gcRunning
	go g.run(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
			g.Stop()
		case <-g.exited:
		}
	}()
	return nil
}

// Stop refuses new operations, waits until everything queued is written and the
// waiters have their answers, then returns. Stop before Start just refuses new
// operations. It is safe to call more than once and concurrently.
func (g *GroupCommitter) Stop() {
	g.mu.Lock()
	started := g.state != gcIdle
	g.state = gcStopping
	g.mu.Unlock()
	g.stopOnce.Do(func() { close(g.stopCh) })
	if started {
		<-g.exited
	}
}

// Stats returns counters since construction.
func (g *GroupCommitter) Stats() GroupCommitStats {
	return GroupCommitStats{Batches: g.batches.Load(), Ops: g.ops.Load(), FailedOps: g.failed.Load(), Folded: g.folded.Load(), Final: g.final.Load()}
}

// Insert writes a new call record and returns when it is committed. c is validated
// and a zero CreatedAt is set to now (in c) before queuing; the committer keeps a copy
// of c, but shares c.Arguments and c.Result, which must not be modified afterwards.
func (g *GroupCommitter) Insert(ctx context.Context, c *Call) error {
	if err := prepareCall(c); err != nil {
		return fmt.Errorf("store: insert call: %w", err)
	}
	cp := *c
	cp.StartedAt = copyTime(c.StartedAt)
	cp.FinishedAt = copyTime(c.FinishedAt)
	if err := g.submit(ctx, &gcOp{call: &cp}); err != nil {
		return fmt.Errorf("store: insert call %s: %w", c.ID, err)
	}
	return nil
}

// Enqueue queues a new call record without waiting for it to be committed. Operations
// are committed in queue order, so a later Finish of the same call that returned nil
// implies the insert is durable too. A failure of the insert itself is not reported to
// the caller (a later Finish of the call then fails with ErrNotFound). Use it for
// calls whose loss in a crash would not hide a side effect (read-only tools).
func (g *GroupCommitter) Enqueue(c *Call) error {
	if err := prepareCall(c); err != nil {
		return fmt.Errorf("store: insert call: %w", err)
	}
	cp := *c
	cp.StartedAt = copyTime(c.StartedAt)
	cp.FinishedAt = copyTime(c.FinishedAt)
	op := &gcOp{call: &cp, detached: true, foldable: g.cfg.FoldWindow > 0}
	if err := g.enqueue(op); err != nil {
		return fmt.Errorf("store: insert call %s: %w", c.ID, err)
	}
	return nil
}

// MarkRunning moves a pending or waiting call to running on owner and returns when
// that is committed: a claim, so ErrConflict means the call is not (or no longer)
// pending or waiting, and must not be run. A zero at is now. The store must implement
// BatchWriter (SQLite and Postgres do).
func (g *GroupCommitter) MarkRunning(ctx context.Context, id, owner string, at time.Time) error {
	if g.batch == nil {
		return fmt.Errorf("store: start call %s: the store cannot start calls (no WriteCallBatch)", id)
	}
	st := CallStart{ID: id, Owner: owner, StartedAt: at}
	if err := prepareStart(&st); err != nil {
		return fmt.Errorf("store: start call: %w", err)
	}
	if err := g.submit(ctx, &gcOp{start: &st}); err != nil {
		return fmt.Errorf("store: start call %s: %w", id, err)
	}
	return nil
}

// Finish writes a call's final state and returns when it is committed. A finish of a
// call that is already terminal writes nothing and answers ErrAlreadyFinal (naming the
// record's status; the record keeps its first result); of an unknown call, ErrNotFound.
// A zero FinishedAt is set to now. f.Result must not be modified afterwards. (With a
// store that is no BatchWriter, a finish of a terminal call answers nil.)
func (g *GroupCommitter) Finish(ctx context.Context, f CallFinish) error {
	if err := prepareFinish(&f); err != nil {
		return fmt.Errorf("store: finish call: %w", err)
	}
	if err := g.submit(ctx, &gcOp{finish: f}); err != nil {
		return fmt.Errorf("store: finish call %s: %w", f.ID, err)
	}
	return nil
}

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

func (g *GroupCommitter) enqueue(op *gcOp) error {
	g.mu.Lock()
	if g.state != gcRunning {
		g.mu.Unlock()
		return ErrCommitterStopped
	}
	g.queue = append(g.queue, op)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default: // the writer already has a wake-up pending
	}
	return nil
}

func (g *GroupCommitter) submit(ctx context.Context, op *gcOp) error {
	op.done = make(chan error, 1)
	if err := g.enqueue(op); err != nil {
		return err
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("stopped waiting, the write goes ahead: %w", ctx.Err())
	}
}

func (g *GroupCommitter) run(ctx context.Context) {
	defer close(g.exited)
	var w CallWrites
	var batch []*gcOp
	var finOps []*gcOp // the operation of each of w.Finishes
	inserted := map[string]*Call{}
	release := time.NewTimer(time.Hour)
	release.Stop()
	for {
		g.mu.Lock()
		taken := g.take()
		stopping := g.state == gcStopping
		batch = g.arrange(batch[:0], taken, time.Now(), stopping)
		next := g.nextRelease()
		if taken != nil {
			clear(taken)
			g.free = taken[:0]
		}
		if len(batch) == 0 {
			g.mu.Unlock()
			if stopping {
				return // arrange released every held insert when stopping
			}
			var releaseC <-chan time.Time
			if next > 0 {
				release.Reset(next)
				releaseC = release.C
			}
			select {
			case <-g.wake:
			case <-g.stopCh:
			case <-releaseC:
			}
			release.Stop()
			continue
		}

		// The batch is built (and finishes folded into their inserts) under g.mu: until
		// it is committed, reads find its records in g.inflight.
		g.inflight = batch
		w.Inserts, w.Starts, w.Finishes = w.Inserts[:0], w.Starts[:0], w.Finishes[:0]
		finOps = finOps[:0]
		clear(inserted)
		ops := 0
		for _, op := range batch {
			switch {
			case op.flush:
				continue
			case op.call != nil:
				w.Inserts = append(w.Inserts, op.call)
				inserted[op.call.ID] = op.call
			case op.start != nil:
				w.Starts = append(w.Starts, *op.start)
			default:
				// A call inserted earlier in the same batch is written once, in its
				// final state: one statement instead of an insert and an update.
				if c, ok := inserted[op.finish.ID]; ok && !c.Status.Terminal() && !startedInBatch(w.Starts, c.ID) {
					foldFinish(c, op.finish)
					g.folded.Add(1)
					ops++
					continue
				}
				w.Finishes = append(w.Finishes, op.finish)
				finOps = append(finOps, op)
			}
			ops++
		}
		g.mu.Unlock()
		g.ops.Add(uint64(ops))
		var err error
		var final map[int]CallStatus
		if !w.empty() {
			final, err = g.write(ctx, w)
		}
		if err == nil {
			for i, st := range final {
				finOps[i].final = st
			}
		}
		var errs []error // per operation, when one record made the batch fail
		if err != nil && len(batch) > 1 && isRecordError(err) {
			errs = make([]error, len(batch))
			for i, op := range batch {
				errs[i] = g.writeOne(ctx, op)
			}
		} else if err != nil {
			g.failed.Add(uint64(ops))
		}
		g.mu.Lock()
		g.inflight = nil
		g.mu.Unlock()
		for i, op := range batch {
			switch {
			case op.done == nil: // detached: nobody waits
			case errs != nil:
				op.done <- errs[i]
			case err == nil && op.final != "":
				g.final.Add(1)
				op.done <- op.finalErr()
			default:
				op.done <- err
			}
		}

		clear(w.Inserts)
		clear(w.Starts)
		clear(w.Finishes)
		clear(finOps)
		clear(batch)
	}
}

// arrange appends to batch the operations of taken that are to be written now, in
// order. An Enqueue'd insert is held back (FoldWindow) unless the committer is
// stopping; a held insert rejoins the queue order just before the first operation
// that refers to its call, or at a flush, or when its window has passed (the
// oldest first). The caller holds g.mu.
func (g *GroupCommitter) arrange(batch, taken []*gcOp, now time.Time, releaseAll bool) []*gcOp {
	for _, op := range taken {
		switch {
		case op.foldable && !releaseAll && g.held[op.call.ID] == nil:
			op.heldAt = now
			g.held[op.call.ID] = op
			g.heldFIFO = append(g.heldFIFO, op)
			continue
		case op.flush && op.flushID != "":
			batch = g.releaseHeld(batch, op.flushID)
		case op.flush:
			releaseAll = true
		case op.call != nil:
			// A second insert of a held id goes after the first, and fails as a duplicate.
			batch = g.releaseHeld(batch, op.call.ID)
		case op.start != nil:
			batch = g.releaseHeld(batch, op.start.ID)
		case op.call == nil:
			batch = g.releaseHeld(batch, op.finish.ID)
		}
		batch = append(batch, op)
	}
	cutoff := now.Add(-g.cfg.FoldWindow)
	i := 0
	for ; i < len(g.heldFIFO); i++ {
		op := g.heldFIFO[i]
		if g.held[op.call.ID] != op {
			continue // released earlier
		}
		if !releaseAll && op.heldAt.After(cutoff) {
			break
		}
		delete(g.held, op.call.ID)
		batch = append(batch, op)
	}
	n := copy(g.heldFIFO, g.heldFIFO[i:])
	clear(g.heldFIFO[n:])
	g.heldFIFO = g.heldFIFO[:n]
	return batch
}

// releaseHeld appends the held insert of call id, if any, to batch.
func (g *GroupCommitter) releaseHeld(batch []*gcOp, id string) []*gcOp {
	if op, ok := g.held[id]; ok {
		delete(g.held, id)
		batch = append(batch, op)
	}
	return batch
}

// nextRelease is how long until the oldest held insert's window ends (> 0), or 0 when
// nothing is held. The caller holds g.mu.
func (g *GroupCommitter) nextRelease() time.Duration {
	for _, op := range g.heldFIFO {
		if g.held[op.call.ID] == op {
			return max(time.Until(op.heldAt.Add(g.cfg.FoldWindow)), time.Millisecond)
		}
	}
	return 0
}

// Flush writes every insert waiting in the fold window and returns when that and
// every other Enqueue'd insert are committed (at once when there are none).
func (g *GroupCommitter) Flush(ctx context.Context) error {
	g.mu.Lock()
	waiting := len(g.held) > 0
	for _, op := range g.queue {
		waiting = waiting || op.detached
	}
	for _, op := range g.inflight {
		waiting = waiting || op.detached
	}
	g.mu.Unlock()
	if !waiting {
		return nil
	}
	if err := g.submit(ctx, &gcOp{flush: true}); err != nil {
		return fmt.Errorf("store: flush held records: %w", err)
	}
	return nil
}

// Commit writes call id's insert now if it is waiting in the fold window, and returns
// when it is committed (at once when it is not waiting to be written). Use it before
// another replica is asked to act on the record: that replica reads the store, not
// this committer.
func (g *GroupCommitter) Commit(ctx context.Context, id string) error {
	if g.unwritten(func(c *Call) bool { return c.ID == id }) == nil {
		return nil
	}
	if err := g.submit(ctx, &gcOp{flush: true, flushID: id}); err != nil {
		return fmt.Errorf("store: commit call %s: %w", id, err)
	}
	return nil
}

// GetCall returns a call's record: one not yet committed (queued, waiting in the fold
// window, or in the transaction being written) as it stands, else the store's.
func (g *GroupCommitter) GetCall(ctx context.Context, id string) (*Call, error) {
	if c := g.unwritten(func(c *Call) bool { return c.ID == id }); c != nil {
		return c, nil
	}
	return g.store.GetCall(ctx, id)
}

// GetCallByToolCallID is the store's, seeing records not yet written too (a call
// queued now is newer than any written one).
func (g *GroupCommitter) GetCallByToolCallID(ctx context.Context, sessionID, toolCallID string) (*Call, error) {
	if c := g.unwritten(func(c *Call) bool { return c.SessionID == sessionID && c.ToolCallID == toolCallID }); c != nil {
		return c, nil
	}
	return g.store.GetCallByToolCallID(ctx, sessionID, toolCallID)
}

// ListCalls is the store's, after committing the Enqueue'd records (see Flush).
func (g *GroupCommitter) ListCalls(ctx context.Context, sessionID string, p CallPage) ([]*Call, error) {
	if err := g.Flush(ctx); err != nil {
		return nil, err
	}
	return g.store.ListCalls(ctx, sessionID, p)
}

// CloseCallOutput is the store's. The mark it clears was set by a Finish; a Finish
// that returned nil is committed, so a CloseCallOutput after it is not overtaken.
func (g *GroupCommitter) CloseCallOutput(ctx context.Context, id string) error {
	return g.store.CloseCallOutput(ctx, id)
}

// ListRecentCalls is the store's, after committing the Enqueue'd records (see Flush).
func (g *GroupCommitter) ListRecentCalls(ctx context.Context, f CallFilter) ([]*Call, error) {
	if err := g.Flush(ctx); err != nil {
		return nil, err
	}
	return g.store.ListRecentCalls(ctx, f)
}

// unwritten returns a copy of the newest insert not yet committed that match
// accepts, or nil.
func (g *GroupCommitter) unwritten(match func(*Call) bool) *Call {
	g.mu.Lock()
	defer g.mu.Unlock()
	var found *Call
	consider := func(op *gcOp) {
		if op.call != nil && match(op.call) && (found == nil || op.call.CreatedAt.After(found.CreatedAt)) {
			found = op.call
		}
	}
	for _, op := range g.held {
		consider(op)
	}
	for _, op := range g.queue {
		consider(op)
	}
	for _, op := range g.inflight {
		consider(op)
	}
	if found == nil {
		return nil
	}
	cp := *found
	cp.StartedAt = copyTime(found.StartedAt)
	cp.FinishedAt = copyTime(found.FinishedAt)
	return &cp
}

// take removes up to MaxBatch operations from the queue. The caller holds g.mu.
func (g *GroupCommitter) take() []*gcOp {
	if len(g.queue) == 0 {
		return nil
	}
	var batch []*gcOp
	if len(g.queue) <= g.cfg.MaxBatch {
		batch, g.queue = g.queue, g.free
	} else {
		batch = append(g.free, g.queue[:g.cfg.MaxBatch]...)
		n := copy(g.queue, g.queue[g.cfg.MaxBatch:])
		clear(g.queue[n:])
		g.queue = g.queue[:n]
	}
	g.free = nil
	return batch
}

// finalErr is a finish's answer when the record was already final.
func (op *gcOp) finalErr() error {
	return fmt.Errorf("the record is already %s; this result was not written: %w", op.final, ErrAlreadyFinal)
}

// write writes w in one transaction. final holds, by index in w.Finishes, the
// finishes that changed nothing because their record was already final (the record's
// status); it holds only when err is nil.
func (g *GroupCommitter) write(ctx context.Context, w CallWrites) (final map[int]CallStatus, err error) {
	g.batches.Add(1)
	if g.cfg.Observe != nil {
		defer g.cfg.Observe("write_calls", time.Now())
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.WriteTimeout)
	defer cancel()
	w.Final = func(i int, st CallStatus) {
		if final == nil {
			final = map[int]CallStatus{}
		}
		final[i] = st
	}
	if g.batch != nil {
		err = g.batch.WriteCallBatch(ctx, w)
	} else {
		err = g.store.WriteCalls(ctx, w.Inserts, w.Finishes) // no starts: MarkRunning refused them
	}
	switch {
	case err == nil:
		g.refused.Store(nil)
	case isRecordError(err), errors.Is(err, context.Canceled):
		// One record's fault, or the daemon stopping: the store itself took writes.
	default: // full disk, I/O error, unwritable WAL, database unreachable or locked
		g.refused.Store(&refusal{at: time.Now(), err: err})
	}
	return final, err
}

// WriteRefused reports that call records cannot be written: the last transaction was
// refused by the store (not by one record's fault), less than d ago, and none has
// committed since. It is nil otherwise. Past d without a write it is nil again, so
// that a daemon taken out of service on this (its /readyz failing) is tried again
// after the cause was mended (space freed, the file made writable again).
func (g *GroupCommitter) WriteRefused(d time.Duration) error {
	r := g.refused.Load()
	if r == nil {
		return nil
	}
	ago := time.Since(r.at)
	if ago >= d {
		return nil
	}
	if IsStorageFull(r.err) {
		return fmt.Errorf("call records cannot be written, the store is out of space (last refused %s ago): %w", ago.Round(time.Second), r.err)
	}
	return fmt.Errorf("call records cannot be written (last refused %s ago): %w", ago.Round(time.Second), r.err)
}

// Wrote tells the committer that another write to the same store, begun at began,
// committed (a replica heartbeat on PostgreSQL): the store takes writes again, so a
// refusal recorded before began no longer makes WriteRefused fail. Without it a daemon
// taken out of service for a refusal stayed out until a call record was written or
// the window passed, and a load balancer sends no calls to a daemon that is not ready:
// every replica stayed unready for up to the window with the database well again.
func (g *GroupCommitter) Wrote(began time.Time) {
	if r := g.refused.Load(); r != nil && r.at.Before(began) {
		g.refused.CompareAndSwap(r, nil)
	}
}

// writeOne replays one operation of a batch that a single record made fail.
func (g *GroupCommitter) writeOne(ctx context.Context, op *gcOp) error {
	var w CallWrites
	switch {
	case op.flush:
		return nil
	case op.call != nil:
		w.Inserts = []*Call{op.call}
	case op.start != nil:
		w.Starts = []CallStart{*op.start}
	default:
		w.Finishes = []CallFinish{op.finish}
	}
	final, err := g.write(ctx, w)
	if err != nil {
		g.failed.Add(1)
		return err
	}
	if st, ok := final[0]; ok && op.start == nil && op.call == nil {
		op.final = st
		g.final.Add(1)
		return op.finalErr()
	}
	return nil
}

// isRecordError reports an error caused by one record rather than by the database: the
// transaction rolled back before commit, so replaying the others is safe.
func isRecordError(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid)
}

// foldFinish applies a finish to the private copy of a call not yet written.
func foldFinish(c *Call, f CallFinish) {
	c.Status = f.Status
	c.Result = f.Result
	c.ErrorKind = resultErrorKind(f.Result)
	at := f.FinishedAt
	c.FinishedAt = &at
	c.OutputOpen = f.OutputOpen
}

func startedInBatch(starts []CallStart, id string) bool {
	for _, s := range starts {
		if s.ID == id {
			return true
		}
	}
	return false
}

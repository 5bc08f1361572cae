package store

import (
	"context"
	"fmt"
	"time"
)

// CallStart moves a call that was recorded as pending or waiting to running on Owner.
// It is a claim: only a pending or waiting call can be started, so of two replicas (or
// two code paths) trying to start the same call, one wins and the other gets
// ErrConflict. Starting an unknown call is ErrNotFound.
type CallStart struct {
	ID        string
	Owner     string
	StartedAt time.Time
}

// CallWrites is one transaction's worth of call writes, applied in this order: inserts,
// then starts, then finishes (each list in its order).
type CallWrites struct {
	Inserts  []*Call
	Starts   []CallStart
	Finishes []CallFinish
	// Final, when set, is told of each finish that changed nothing because its call
	// was already terminal (status: the record's), by its index in Finishes. It is
	// called before the transaction commits: what it learns holds only if that
	// returns nil. (A finish of a terminal call is no error: the first result wins.)
	Final func(i int, status CallStatus)
}

func (w CallWrites) empty() bool {
	return len(w.Inserts) == 0 && len(w.Starts) == 0 && len(w.Finishes) == 0
}

// BatchWriter is WriteCalls with starts: SQLite and Postgres implement it, and the
// GroupCommitter uses it so that MarkRunning is batched like Insert and Finish.
// (It is separate from Store so the Store contract stays as it was declared.)
type BatchWriter interface {
	// WriteCallBatch applies w in one transaction with WriteCalls' rules, plus: a start
	// of a call that is not pending or waiting is ErrConflict, of an unknown call
	// ErrNotFound; either rolls back everything.
	WriteCallBatch(ctx context.Context, w CallWrites) error
}

var (
	_ BatchWriter = (*SQLite)(nil)
	_ BatchWriter = (*Postgres)(nil)
)

// prepareStart validates s and fills a zero StartedAt with the current time.
func prepareStart(s *CallStart) error {
	if s.ID == "" {
		return fmt.Errorf("start: call id is empty: %w", ErrInvalid)
	}
	if s.StartedAt.IsZero() {
		s.StartedAt = now()
	}
	return nil
}

// prepareWrite validates a write, filling defaults in place.
func prepareWrite(w CallWrites) error {
	for _, c := range w.Inserts {
		if err := prepareCall(c); err != nil {
			return err
		}
	}
	for i := range w.Starts {
		if err := prepareStart(&w.Starts[i]); err != nil {
			return err
		}
	}
	for i := range w.Finishes {
		if err := prepareFinish(&w.Finishes[i]); err != nil {
			return err
		}
	}
	return nil
}

package session

import (
	"context"
	"errors"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// A result the store refused (the database unreachable for a moment, the disk full) is
// written again in the background: its record must not say running, for as long as
// this process lives, about a call that ended and whose result the client already
// has. Pollers of GET /v1/tool-calls/{id} see the outcome once the store is back.
const (
	maxFinishRetries   = 10000 // results retried at once; beyond, they are logged and left
	finishRetryFirst   = time.Second
	finishRetryLongest = 30 * time.Second
)

// finishLater writes f until the store takes it, this executor is closed or the
// recorder stops. rec, when set, is the call's record as inserted: when the store never
// got it either (a queued insert lost with its batch), it is written whole, finished.
func (x *Executor) finishLater(rec *store.Call, f store.CallFinish, err error) {
	if errors.Is(err, store.ErrCommitterStopped) {
		return // the daemon stops; recovery at the next start marks the call
	}
	x.retryLater(f.ID, "call result", func() error { return x.writeFinish(rec, f) })
}

// retryLater writes in the background, with write, what the store refused (what: how
// the log names it) until the store takes it, this executor is closed or the recorder
// stops: first after finishRetryFirst, then after twice the last delay, at most
// finishRetryLongest. What a closed executor leaves, the next start sets right.
func (x *Executor) retryLater(id, what string, write func() error) {
	if x.retrying.Add(1) > maxFinishRetries {
		x.retrying.Add(-1)
		x.log.Error("too many records wait to be written; this one is left until the next start", "record", what, "call_id", id)
		return
	}
	go func() {
		defer x.retrying.Add(-1)
		delay := finishRetryFirst
		for try := 1; ; try++ {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-x.closed:
				t.Stop()
				return
			}
			delay = min(2*delay, finishRetryLongest)
			err := write()
			switch {
			case err == nil:
				x.log.Info("record written after a retry", "record", what, "call_id", id, "tries", try)
				return
			case errors.Is(err, store.ErrCommitterStopped):
				return
			case errors.Is(err, store.ErrAlreadyFinal):
				// Meanwhile another replica's lease sweep (or nothing else: the first
				// result wins) made the record final; it keeps what it says.
				x.log.Warn("record not written after a retry: the call's record was already final", "record", what, "call_id", id, "tries", try, "err", err)
				return
			case try%10 == 0:
				x.log.Warn("record still not written; retrying", "record", what, "call_id", id, "tries", try, "err", err)
			}
		}
	}()
}

// writeFinish writes f, or rec finished with f when the store does not have rec.
func (x *Executor) writeFinish(rec *store.Call, f store.CallFinish) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := x.rec.Finish(ctx, f)
	if !errors.Is(err, store.ErrNotFound) || rec == nil {
		return err
	}
	whole := *rec
	whole.Status, whole.Result, whole.FinishedAt = f.Status, f.Result, &f.FinishedAt
	if f.Result != nil {
		whole.ErrorKind = f.Result.ErrorKind
	}
	if err = x.rec.Insert(ctx, &whole); errors.Is(err, store.ErrConflict) {
		return x.rec.Finish(ctx, f) // it arrived meanwhile
	}
	return err
}

// Close ends the background retries of results (finishLater). Call it when the daemon
// stops, after Wait.
func (x *Executor) Close() {
	x.closeOnce.Do(func() { close(x.closed) })
}

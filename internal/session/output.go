package session

import (
	"context"
	"time"
)

// A call that starts a background job (execute_command with background: true) answers
// at once, but the job's output goes on streaming under the call until the job ends
// (tool.ProgressHolder). Its record says so (store.Call.OutputOpen) so that consoles
// on any replica list it as live: the mark is written with the call's finish and
// cleared here when the output ends, again and again while the store refuses the
// write. A replica that dies or restarts leaves marks behind; its recovery and the
// sweep of dead replicas clear them (store.AbandonCalls, ExpireReplicas).

// heldOutput is a call's progress whose output may outlive the call (progress.Emitter).
type heldOutput interface {
	// Held says the progress was closed but goes on (a Hold is not released).
	Held() bool
	// WhenEnded runs fn once the progress has ended (at once if it has).
	WhenEnded(fn func())
}

// OutputCloser clears a record's open-output mark; the Recorder implements it where
// records can carry the mark (store.GroupCommitter).
type OutputCloser interface {
	CloseCallOutput(ctx context.Context, id string) error
}

// outputOpen reports whether c's output goes on past its result and can be marked so.
// It is asked once the call has run (its progress was closed).
func (x *Executor) outputOpen(c *Call) (OutputCloser, bool) {
	h, ok := c.progress.(heldOutput)
	if !ok || !h.Held() {
		return nil, false
	}
	closer, ok := x.rec.(OutputCloser)
	return closer, ok
}

// closeOutputWhenEnded clears c's mark once its output ends. It is called after the
// finish that set the mark was committed, so the clear cannot come first.
func (x *Executor) closeOutputWhenEnded(c *Call, closer OutputCloser) {
	id := c.ID
	x.outputs.Add(1)
	c.progress.(heldOutput).WhenEnded(func() {
		defer x.outputs.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := closer.CloseCallOutput(ctx, id); err != nil {
			x.log.Warn("recording that a call's output ended failed; retrying in the background", "call_id", id, "err", err)
			x.closeOutputLater(closer, id)
		}
	})
}

// closeOutputLater clears id's mark once the store takes writes again (the database
// was away, the disk full when the output ended), as finishLater writes results:
// otherwise the record would say the output is open, and live listings show the
// call, until this replica restarted.
func (x *Executor) closeOutputLater(closer OutputCloser, id string) {
	x.retryLater(id, "end of the call's output", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return closer.CloseCallOutput(ctx, id)
	})
}

// WaitOutputs waits, up to d, for the clears of open-output marks whose output has
// ended. A stopping daemon calls it once the progress hub has stopped (which ends
// every call's output) and before the store closes: its jobs' calls are then no
// longer listed as live. What is left is cleared at the next start.
func (x *Executor) WaitOutputs(d time.Duration) {
	done := make(chan struct{})
	go func() {
		x.outputs.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

package session

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// finalRecord is what the client of call c is told when its result res came after the
// call's record was final (the finish answered ferr, store.ErrAlreadyFinal): on
// PostgreSQL, the replica running it lost its lease and another one's sweep marked it
// failed; or a restart of this replica's id did. The record is what survives — GET
// /v1/tool-calls/{id}, a resumed batch, other replicas all say what it says — so the
// stream says it too: the record's result (its is_error and error_kind), followed by
// a note and by res, which the record does not have, so that the model learns that the
// call did run and what it answered rather than being told only one of the two. The
// WARN names the call for the operator.
func (x *Executor) finalRecord(ctx context.Context, sess *Session, c *Call, res *tool.Result, ferr error) *tool.Result {
	rec, err := x.rec.GetCall(ctx, c.ID)
	attrs := []any{"call_id", c.ID, "tool", c.Name, "dropped_status", resultStatus(res), "dropped_error_kind", string(res.ErrorKind)}
	if sess != nil {
		attrs = append(attrs, "session_id", sess.ID)
	}
	if err == nil {
		attrs = append(attrs, "record_status", string(rec.Status), "record_error_kind", string(rec.ErrorKind), "record_owner", rec.Owner)
	} else {
		attrs = append(attrs, "read_err", err)
	}
	x.log.WarnContext(ctx, "call result not recorded: the call's record was already final (failed by another replica's lease sweep or by a restart) when the result came; its client is told what the record says", attrs...)

	var out *tool.Result
	recorded := "failed"
	if err == nil && rec.Result != nil {
		r := *rec.Result
		r.Content = slices.Clone(r.Content)
		r.Truncated = false
		out, recorded = &r, string(rec.Status)
	} else {
		out = tool.ErrorResult(tool.KindFailed, "%s; the record could not be read: %v", ferr, err)
	}
	note := fmt.Sprintf("[Not recorded: %s then finished on this replica (%s), but its record had already been marked %s — the replica running it lost its lease on the shared database, or the daemon restarted — so the record keeps the result above and the one below was not written. The call may have taken effect: check before running it again.]",
		c.Name, resultStatus(res), recorded)
	out.Content = append(out.Content, tool.Content{Type: tool.ContentText, Text: note})
	out.Content = append(out.Content, res.Content...)
	return out
}

// resultStatus is how the note and the log name a result's outcome.
func resultStatus(res *tool.Result) string {
	if !res.IsError {
		return string(store.CallSucceeded)
	}
	return string(store.CallFailed) + ": " + string(res.ErrorKind)
}

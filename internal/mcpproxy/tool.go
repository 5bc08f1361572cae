package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Call outcomes, the values of the outcome label of toolserverd_mcp_calls_total.
const (
	outcomeOK          = "ok"
	outcomeError       = "error" // the tool answered isError
	outcomeFailed      = "failed"
	outcomeInvalidArgs = "invalid_args"
	outcomeUnavailable = "unavailable"
	outcomeTimeout     = "timeout"
	outcomeCancelled   = "cancelled"
)

// proxyTool is one upstream tool in the registry. It holds no connection: each call
// takes the server's current one, so the tool survives reconnections.
type proxyTool struct {
	srv      *server
	upstream string // the tool's name on the server
	spec     tool.Spec
	// asTask: the server requires the tool to run as a task (see callTask).
	asTask bool
}

func (t *proxyTool) Spec() tool.Spec { return t.spec }

// Run calls the upstream tool under a deadline (the server's call timeout, or the
// call's own if shorter). The server being down is an unavailable error at once.
func (t *proxyTool) Run(tc *tool.Context, args json.RawMessage) (*tool.Result, error) {
	s := t.srv
	c := s.liveConn()
	if c == nil {
		return t.done(outcomeUnavailable, nil, s.unavailable())
	}
	if s.cfg.Pooling == PoolPerSession && sessionKey(tc) != "" {
		return t.runPooled(tc, args)
	}
	res, err := t.call(tc, c, args)
	if err != nil && isSessionLost(err) && tc.Err() == nil {
		// An HTTP server restarted and forgot the session; it refused the request
		// before running it, so the call may go again once a new session is up.
		// The supervisor opens one at once (the upstream answered); if that fails,
		// the server is in backoff and the call is unavailable now.
		c.markDead(fmt.Errorf("session lost: %w", err))
		wait := min(s.cfg.ConnectTimeout, remaining(tc))
		nc := s.awaitConn(tc, c, wait)
		if nc == nil && tc.Err() == nil {
			return t.done(outcomeUnavailable, nil, s.unavailable())
		}
		if nc != nil {
			c = nc
			res, err = t.call(tc, c, args)
		}
	}
	return t.outcome(tc, c, res, err)
}

// runPooled calls through the daemon session's own upstream session.
func (t *proxyTool) runPooled(tc *tool.Context, args json.RawMessage) (*tool.Result, error) {
	s, key := t.srv, sessionKey(tc)
	c, release, ended, err := s.sessionConn(tc, key)
	if err != nil {
		if tc.Err() != nil {
			return t.done(t.classify(tc, s.liveConn(), err))
		}
		return t.done(outcomeUnavailable, nil, err)
	}
	res, err := t.call(tc, c, args)
	release()
	// A deadline that passed, the server's call timeout or the caller's (the
	// daemon's sessions give every call one, no longer than the call timeout, so
	// theirs passes first), is the sign of a hung upstream session.
	var ce callError
	if errors.As(err, &ce) && (ce.deadline || errors.Is(tc.Err(), context.DeadlineExceeded)) {
		s.checkPooled(c)
	}
	if err != nil && isSessionLost(err) && tc.Err() == nil {
		// The upstream forgot this session (it restarted): open a new one, once.
		c.markDead(fmt.Errorf("session lost: %w", err))
		nc, release, _, nerr := s.sessionConn(tc, key)
		if nerr != nil {
			return t.done(outcomeUnavailable, nil, nerr)
		}
		c, ended = nc, "was forgotten by the server (it restarted)"
		res, err = t.call(tc, c, args)
		release()
	}
	res, err = t.outcome(tc, c, res, err)
	if ended != "" && res != nil {
		// First: the model reads that the state it relied on is gone before the rest.
		note := tool.Content{Type: tool.ContentText, Text: fmt.Sprintf("[mcp server %s: the session it kept for this conversation %s; "+
			"this call ran in a new one, so what the old one held (open pages, logins, other state) is gone]", s.cfg.Name, ended)}
		res.Content = append([]tool.Content{note}, res.Content...)
	}
	return res, err
}

func (t *proxyTool) outcome(tc *tool.Context, c *conn, res *tool.Result, err error) (*tool.Result, error) {
	if err == nil {
		if res.IsError {
			return t.done(outcomeError, res, nil)
		}
		return t.done(outcomeOK, res, nil)
	}
	return t.done(t.classify(tc, c, err))
}

func (t *proxyTool) call(tc *tool.Context, c *conn, args json.RawMessage) (*tool.Result, error) {
	ctx, cancel := context.WithTimeout(tc.Context, t.srv.cfg.CallTimeout)
	defer cancel()
	ctx, trace := withCallTrace(ctx)
	trace.strayAt = c.strays.mark()
	// The connection dying ends the call now: mcp-go's SSE client would wait for
	// the deadline.
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	token := t.srv.m.progress.add(tc)
	defer t.srv.m.progress.remove(token)

	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = t.upstream
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: token}
	if t.asTask {
		return t.callTask(ctx, tc, c, req, trace, token)
	}
	trace.plain = true
	rctx, release := requestContext(ctx)
	defer release()
	res, err := c.client.CallTool(rctx, req)
	if err != nil {
		return t.callFailed(ctx, tc, c, trace, err)
	}
	if trace.read != nil {
		return trace.read, nil
	}
	return convertResult(res), nil
}

// requestContext is ctx for a request of the call, ended with it but with no
// deadline of its own: mcp-go's SSE transport arms its own response timer at the
// context's remaining time, which can fire before the context ends and answer
// "timeout waiting for SSE response" in place of the deadline (a call that timed
// out read as a transport failure, and no notifications/cancelled sent). Its timer
// now falls past the call's end (response_timeout is at least call_timeout). The
// cause it ends with is ctx's error, for the notice (cancelNotifier). release,
// called before ctx ends, ends it as ctx's end would (context.Canceled) without
// the goroutine that ctx's end would start for it.
func requestContext(ctx context.Context) (rctx context.Context, release func()) {
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	return rctx, func() {
		if stop() {
			cancel(context.Canceled)
		}
	}
}

// callFailed is the outcome of a request of the call (ctx) that failed: a result
// mcp-go could not read but the proxy can, or the error with what stopped it.
func (t *proxyTool) callFailed(ctx context.Context, tc *tool.Context, c *conn, trace *callTrace, err error) (*tool.Result, error) {
	if r, ok := lenientResult(trace.result); ok {
		return r, nil
	}
	return nil, callError{err: err, deadline: ctx.Err() != nil && tc.Err() == nil && c.ctx.Err() == nil,
		tooLarge: trace.tooLarge.Load() || isTooLarge(err), stray: c.strayNote(trace)}
}

// callError remembers whether the call's own deadline (not the caller's, not the
// connection's end) stopped it, or an answer too large to read.
type callError struct {
	err      error
	deadline bool
	tooLarge bool
	// stray quotes what the server wrote on stdout during the call that is not
	// JSON-RPC (conn.strayNote); empty when nothing.
	stray string
}

func (e callError) Error() string { return e.err.Error() }
func (e callError) Unwrap() error { return e.err }

// classify turns a failed call into an outcome and a tool error.
func (t *proxyTool) classify(tc *tool.Context, c *conn, err error) (string, *tool.Result, error) {
	name := t.srv.cfg.Name
	var ce callError
	errors.As(err, &ce)
	var te *tool.Error
	switch {
	case errors.As(err, &te):
		// Already said (a task that failed, waits for input it cannot have, or
		// whose session the server forgot).
		switch te.Kind {
		case tool.KindCancelled:
			return outcomeCancelled, nil, te
		case tool.KindUnavailable:
			return outcomeUnavailable, nil, te
		}
		return outcomeFailed, nil, te
	case tc.Err() != nil:
		if errors.Is(tc.Err(), context.DeadlineExceeded) {
			return outcomeTimeout, nil, tool.Errorf(tool.KindTimeout, "%s did not finish before the deadline and was stopped%s", t.spec.Name, ce.stray)
		}
		return outcomeCancelled, nil, tool.Errorf(tool.KindCancelled, "%s was cancelled before it finished", t.spec.Name)
	case ce.tooLarge:
		return outcomeFailed, nil, tool.Errorf(tool.KindFailed, "mcp server %s answered %s with a message larger than %d MiB, which was not read",
			name, t.upstream, maxMessageBytes>>20)
	case ce.deadline:
		return outcomeTimeout, nil, tool.Errorf(tool.KindTimeout, "%s did not finish within %s (timeout of mcp server %s) and was stopped%s",
			t.spec.Name, t.srv.cfg.CallTimeout, name, ce.stray)
	case isTooLarge(c.err()):
		// Over stdio a message cannot be told apart from the call it answers before
		// it is read: the call of the connection that likely sent it is told so.
		return outcomeFailed, nil, tool.Errorf(tool.KindFailed, "mcp server %s wrote a message larger than %d MiB during the call of %s, which was not read; the connection was closed and is opened again",
			name, maxMessageBytes>>20, t.upstream)
	case c.retiredBy() != nil:
		// Closed on purpose: what the process wrote on stderr (often only its
		// startup banner) says nothing of why, and neither does how it ended.
		return outcomeUnavailable, nil, tool.Errorf(tool.KindUnavailable,
			"mcp server %s %v during the call of %s, before its answer came, so whether it ran is unknown",
			name, c.retiredBy(), t.upstream)
	case c.ended() != nil:
		return outcomeUnavailable, nil, t.lostDuringCall(c.lastWords(c.ended()))
	case isAnswerCutOff(err):
		// The request reached the server; the stream its answer was to come on
		// ended first. mcp-go says "unexpected nil response".
		t.srv.checkNow()
		return outcomeUnavailable, nil, t.lostDuringCall(err)
	case isTransportFailure(err) || isSessionLost(err):
		if isConnectionGone(err) {
			c.markDead(err)
			if errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, syscall.ECONNRESET) {
				// The connection ended while the call waited for its answer (a
				// stdio child that died says only "transport closed").
				return outcomeUnavailable, nil, t.lostDuringCall(c.lastWords(err))
			}
		} else {
			t.srv.checkNow()
		}
		return outcomeUnavailable, nil, tool.Errorf(tool.KindUnavailable, "mcp server %s is not available: %v", name, err)
	case errors.Is(err, mcp.ErrInvalidParams):
		return outcomeInvalidArgs, nil, tool.Errorf(tool.KindInvalidArgs, "mcp server %s rejected the arguments of %s: %v", name, t.upstream, err)
	default:
		return outcomeFailed, nil, tool.Errorf(tool.KindFailed, "mcp server %s failed to run %s: %v", name, t.upstream, err)
	}
}

// lostDuringCall is the error of a call whose connection ended while it waited for
// the answer: the request had gone out, so the server may have run it, and a model
// told only that the server is not available could run it twice.
func (t *proxyTool) lostDuringCall(why error) error {
	return tool.Errorf(tool.KindUnavailable,
		"mcp server %s is not available: it went away during the call of %s, before its answer came, so whether it ran is unknown (%v)",
		t.srv.cfg.Name, t.upstream, why)
}

// done counts the call and redacts its error: the error quotes what the transport
// said, and Go's HTTP client says the whole URL, query string included (see
// redactor).
func (t *proxyTool) done(outcome string, res *tool.Result, err error) (*tool.Result, error) {
	t.srv.m.countCall(t.srv, outcome)
	var te *tool.Error
	switch {
	case errors.As(err, &te):
		err = &tool.Error{Kind: te.Kind, Message: t.srv.redact.text(te.Message)}
	case err != nil:
		if msg := t.srv.redact.text(err.Error()); msg != err.Error() {
			err = tool.Errorf(tool.KindFailed, "%s", msg)
		}
	}
	return res, err
}

// remaining is the time left before ctx's deadline, or a long time without one.
func remaining(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Hour
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = "…" + s[len(s)-300:]
	}
	return s
}

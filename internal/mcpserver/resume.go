package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Resuming a broken stream. A tools/call is answered on its POST's event stream, and
// a call may wait minutes (a person's approval); a proxy's idle timeout or a flaky
// network can break the stream meanwhile. Its events have ids and are kept
// (replayStore), and the POST runs detached from its connection: the call runs on,
// and its client resumes the stream with a GET carrying Last-Event-ID and gets what
// it missed, the result included. A call nobody resumes within the resume window is
// cancelled, as by a client that went away: a client that gives up on a request by
// dropping it (mcp-go's Go client does) still cancels it, a little later.

// errStreamAbandoned ends a call whose stream broke and was not resumed in time.
var errStreamAbandoned = errors.New("the client went away and did not resume the call's event stream")

type postStreamKey struct{}

// postStream is one POST's event stream as far as its call's life goes: how many
// connections are attached to it (the POST's own, resuming GETs), and the timer that
// cancels the call once none has been for the resume window.
type postStream struct {
	e      *Endpoint
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	id       string // mcp-go's stream id, once an event was stored on it
	attached int
	timer    *time.Timer
	finished bool
}

// detachPOST returns r running under run (until the daemon stops) instead of its
// connection, and the func to call when the request is over. When the connection
// ends first, the request's context ends only if no client resumes its stream
// within the resume window.
func (e *Endpoint) detachPOST(r *http.Request, run context.Context) (*http.Request, func()) {
	ctx, cancel := context.WithCancelCause(run)
	p := &postStream{e: e, cancel: cancel, attached: 1}
	stop := context.AfterFunc(r.Context(), p.detach)
	return r.WithContext(context.WithValue(ctx, postStreamKey{}, p)), func() {
		stop()
		p.finish()
		cancel(nil)
	}
}

// onStoreEvent learns the id of a POST's stream from its first stored event (the
// context is its request's), so that a GET resuming that stream is counted, and the
// JSON-RPC ids of the elicitation requests the endpoint sends (see asked).
func (e *Endpoint) onStoreEvent(ctx context.Context, sessionID, streamID string, message json.RawMessage) {
	e.noteElicitation(sessionID, message)
	p, ok := ctx.Value(postStreamKey{}).(*postStream)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.id != "" || p.finished {
		return
	}
	p.id = streamID
	e.mu.Lock()
	e.streams[streamID] = p
	e.mu.Unlock()
}

// resuming counts a GET that resumes stream as attached to it while it lasts; the
// returned func ends that.
func (e *Endpoint) resuming(streamID string) (end func()) {
	e.mu.Lock()
	p := e.streams[streamID]
	e.mu.Unlock()
	if p == nil || !p.attach() {
		return func() {}
	}
	return p.detach
}

func (p *postStream) attach() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return false
	}
	p.attached++
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	return true
}

func (p *postStream) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attached--
	if p.attached > 0 || p.finished || p.timer != nil {
		return
	}
	p.timer = time.AfterFunc(p.e.cfg.ResumeWindow, func() { p.cancel(errStreamAbandoned) })
}

func (p *postStream) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if p.id != "" {
		p.e.mu.Lock()
		delete(p.e.streams, p.id)
		p.e.mu.Unlock()
	}
}

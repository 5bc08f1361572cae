package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// progressEvent is a tool_progress line. Text carries the output as text (bytes that
// are not UTF-8 become U+FFFD); when the chunk is not valid UTF-8, Data carries its
// exact bytes in base64. Offset is where the chunk starts in the call's stream, so a
// client that sees a gap can fetch it from the progress endpoint.
type progressEvent struct {
	Type       string `json:"type"`
	ToolCallID string `json:"tool_call_id"`
	CallID     string `json:"call_id"`
	Stream     string `json:"stream"`
	Text       string `json:"text"`
	Data       string `json:"data,omitempty"`
	Offset     int64  `json:"offset"`
	Closed     bool   `json:"closed"`
	// OutputLost, on the closed event of a progress stream: the call ran on a
	// replica that has stopped, which held its output (see getProgress).
	OutputLost bool `json:"output_lost,omitempty"`
	// Progress is the call's latest numeric progress, on an event written after it
	// changed (see valueGate).
	Progress *progressValue `json:"progress,omitempty"`
	TS       float64        `json:"ts"`
}

// progressValue is a call's numeric progress on the wire: progress of total units,
// total omitted when unknown.
type progressValue struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

func toProgressValue(v *progress.Value) *progressValue {
	if v == nil {
		return nil
	}
	return &progressValue{Progress: v.Progress, Total: v.Total, Message: v.Message}
}

// toProgressEvent shapes an event as a tool_progress line; its value, if any, goes
// out as it is: callers pass values through a valueGate first.
func toProgressEvent(e progress.Event) progressEvent {
	pe := progressEvent{Type: "tool_progress", ToolCallID: e.ToolCallID, CallID: e.CallID, Stream: e.Stream,
		Text: e.Text, Offset: e.Offset, Closed: e.Closed, Progress: toProgressValue(e.Progress), TS: unixSeconds(e.TS)}
	if !utf8.ValidString(e.Text) {
		pe.Data = base64.StdEncoding.EncodeToString([]byte(e.Text))
	}
	return pe
}

// valueGate keeps, per call, the report a client was last sent, so that it gets each
// value at most once and never an older one after a newer: a live event's value may
// be older than the latest, which an event filled from the log carries.
type valueGate map[string]uint64

// pass returns v if it is newer than what callID's client has, and records it.
func (g valueGate) pass(callID string, v *progress.Value) *progress.Value {
	if v == nil || v.Seq <= g[callID] {
		return nil
	}
	g[callID] = v.Seq
	return v
}

// latest passes the call's latest value from the hub, for events read from the log.
func (g valueGate) latest(hub *progress.Hub, callID string) *progress.Value {
	if hub == nil {
		return nil
	}
	v, ok := hub.Latest(callID)
	if !ok {
		return nil
	}
	return g.pass(callID, &v)
}

// streamBatch runs a planned batch and writes its NDJSON stream. One goroutine writes:
// executor events arrive on a channel, progress events from the hub subscription.
// Before a call's message, every progress event already published is written and the
// rest of the call's output is read from its log (a call's progress is closed before
// its message is emitted), so a call's tool_progress lines sit between its tool_start
// and its message and are complete: events the subscription dropped because the
// client was slow are filled in from the log.
//
// Flushing: events that arrive together share one write. When nothing more is queued,
// a tool_start or message line waits up to flushDelay for what usually follows at
// once (the call's message, the next call's line, done), so a fast batch goes out in
// one write; every other line (progress, approval_required, input_required, results)
// is flushed as soon as nothing more is queued. done is not flushed here: the handler
// returns right after it and net/http sends the rest of the buffer with the end of
// the response in the same write.
func (s *Server) streamBatch(w http.ResponseWriter, r *http.Request, f msgFormat, st stream) {
	sw := &streamWriter{out: nil, format: f, hub: s.Progress, keepAlive: s.cfg.KeepAlive}
	if s.Exec != nil {
		sw.truncate = s.Exec
	}
	runCtx := st.ctx
	if runCtx == nil {
		runCtx = r.Context()
	}
	var relayed chan progress.Event
	if s.Progress != nil {
		ids := make([]string, 0, len(st.followed)+len(st.planned()))
		for _, rec := range st.followed {
			ids = append(ids, rec.ID)
		}
		for _, c := range st.planned() {
			ids = append(ids, c.ID)
		}
		// A small buffer: the writer fills whatever is dropped from the call logs.
		sub := s.Progress.Subscribe(progress.Filter{CallIDs: ids, Buffer: 16})
		defer sub.Close()
		sw.prog = sub.Events()
		sw.closed = map[string]bool{}
		if s.Replicas != nil && len(st.followed) > 0 {
			// The output of followed calls other replicas run (relay.go).
			relayed = make(chan progress.Event, 16)
			sw.relayed = relayed
		}
	}
	if st.plan != nil {
		// Results of the session's background calls arrive on any open stream of it.
		bg, stopBG := st.plan.Session.Subscribe(16)
		defer stopBG()
		sw.background = bg
	}
	sw.out = newNDJSON(w)
	events := newEventQueue()
	written := make(chan struct{})
	go func() {
		defer close(written)
		sw.run(events)
	}()
	if len(st.followed) > 0 && s.followAll(runCtx, r, st.followed, relayed, events.push) {
		// Read by the writer once it takes the close (the queue's lock orders them).
		sw.cut = true
	}
	// Calls after followed ones run once those are over; not at all when the client
	// that would cancel them is gone already (nothing ran, so nothing is recorded,
	// and a resumed request runs them).
	if st.plan != nil && runCtx.Err() == nil && !sw.cut {
		s.Exec.Execute(runCtx, st.plan, events.push)
	}
	events.close()
	<-written
}

// stream is what one NDJSON response carries: records of earlier calls it follows
// until they have their messages, then a plan it runs.
type stream struct {
	followed []*store.Call
	plan     *session.Plan
	// ctx is what the calls run and are followed under; nil: the request's.
	ctx context.Context
}

func (st stream) planned() []*session.Call {
	if st.plan == nil {
		return nil
	}
	return st.plan.Calls
}

// eventQueue carries the executor's events to the stream's writer without ever making
// a call wait: a client that stops reading blocks the writer (until write_timeout
// ends the stream), and a call must not wait for it to emit its tool_start or its
// message, or it would neither run nor be recorded as finished. What the queue holds
// is bounded by the batch: a few events per call, results cut to the token budget.
type eventQueue struct {
	mu     sync.Mutex
	items  []session.Event
	closed bool
	ready  chan struct{} // holds a token while items or the close wait to be taken
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev session.Event) {
	q.mu.Lock()
	q.items = append(q.items, ev)
	q.mu.Unlock()
	q.signal()
}

// close says no more events come (Execute has returned).
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *eventQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// waiting reports whether take has something to return: events, or the close.
func (q *eventQueue) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) > 0 || q.closed
}

// take returns the events queued so far, and whether they are the last.
func (q *eventQueue) take() ([]session.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items, q.closed
}

// flushDelay bounds how long a tool_start or message line may wait in the buffer for
// the lines that usually follow it at once (see streamBatch).
const flushDelay = time.Millisecond

type streamWriter struct {
	out *ndjsonWriter
	// truncate cuts a followed call's recorded result to the token budget when its
	// message is written, not before: a stalled client then holds the record only.
	truncate interface {
		Truncate(*tool.Result) *tool.Result
	}
	background <-chan session.Event
	format     msgFormat
	hub        *progress.Hub
	prog       <-chan progress.Event
	relayed    <-chan progress.Event       // output of followed calls of other replicas
	cursors    map[string]map[string]int64 // call → stream → bytes written to the client
	closed     map[string]bool             // calls whose closed event was written
	values     valueGate                   // the numeric progress each call's client has
	keepAlive  time.Duration               // a quiet stream's keepalive interval (0: none)
	cut        bool                        // end without done (see followAll)
}

func (sw *streamWriter) run(events *eventQueue) {
	// flushAt is armed while lines wait for a delayed flush; created on first use.
	var flushAt *time.Timer
	var flushC <-chan time.Time
	ka, kaC := keepalive(sw.keepAlive)
	defer func() {
		if flushAt != nil {
			flushAt.Stop()
		}
		if ka != nil {
			ka.Stop()
		}
	}()
	var queued []session.Event // taken from events, not written yet
	ended := false             // events is closed and queued holds the last of them
	for {
		delay := false // the line written this turn may wait for flushDelay
		switch {
		case len(queued) > 0:
			delay = sw.event(queued[0])
			queued[0] = session.Event{} // let its result go once written
			queued = queued[1:]
		case ended && sw.cut:
			sw.drain()
			return // no done: the forwarding replica follows on (followAll)
		case ended:
			sw.drain()
			// Not flushed: streamBatch returns at once and net/http writes the
			// buffered lines with the end of the response.
			sw.out.Encode(doneEvent{Type: "done", TS: unixSeconds(time.Now())})
			return
		default:
			select {
			case <-flushC:
				flushC = nil
				sw.out.Flush()
				continue
			case <-kaC:
				sw.out.keepAlive(ka, sw.keepAlive)
				continue
			case pe, ok := <-sw.prog:
				if !ok {
					sw.prog = nil
					continue
				}
				// A call's tool_start is queued before it can publish output, but
				// select picks among ready cases at random: write the queued events
				// first, so that no output comes before its call's tool_start.
				if events.waiting() {
					queued, ended = events.take()
					for len(queued) > 0 {
						sw.event(queued[0])
						queued[0] = session.Event{}
						queued = queued[1:]
					}
				}
				sw.progress(pe)
			case pe := <-sw.relayed:
				sw.progress(pe)
			case ev := <-sw.background:
				if ev.Type == session.EventApproval {
					sw.out.Encode(toApprovalEvent(ev))
				} else {
					sw.out.Encode(resultLine(ev.Type, sw.format, ev))
				}
			case <-events.ready:
				queued, ended = events.take()
				continue
			}
		}
		if len(queued) > 0 || events.waiting() || len(sw.prog) > 0 || len(sw.relayed) > 0 || len(sw.background) > 0 {
			continue // more lines to write first
		}
		if !delay {
			sw.out.Flush()
			if flushC != nil {
				flushAt.Stop()
				flushC = nil
			}
			continue
		}
		if flushC == nil { // keep an armed deadline: the first waiting line sets it
			if flushAt == nil {
				flushAt = time.NewTimer(flushDelay)
			} else {
				flushAt.Reset(flushDelay)
			}
			flushC = flushAt.C
		}
	}
}

// eventReplay is the writer's own event, never written as such: followAll queues it
// after a followed call's tool_start and approval requests, and the writer writes the
// call's output so far there.
const eventReplay session.EventType = "replay"

// event writes one of the executor's events; it reports whether the line may wait
// for flushDelay (see streamBatch).
func (sw *streamWriter) event(ev session.Event) (delay bool) {
	switch ev.Type {
	case session.EventStart:
		sw.out.Encode(startEvent{Type: string(ev.Type), ToolCallID: ev.Call.ToolCallID, CallID: ev.Call.ID, Name: ev.Call.Name, Resumed: ev.Resumed, TS: unixSeconds(ev.TS)})
		return true
	case eventReplay:
		if sw.hub != nil {
			// A followed call's output so far, before what it writes from now on.
			for _, st := range sw.hub.Streams(ev.Call.ID) {
				sw.fill(ev.Call.ID, ev.Call.ToolCallID, st, -1)
			}
		}
		return true
	case session.EventApproval:
		sw.drain()
		sw.out.Encode(toApprovalEvent(ev))
	case session.EventExternal:
		sw.drain()
		sw.out.Encode(inputEvent{Type: string(ev.Type), ToolCallID: ev.Call.ToolCallID, CallID: ev.Call.ID, Name: ev.Call.Name,
			Arguments: ev.Call.Arguments, TS: unixSeconds(ev.TS)})
	case session.EventYield:
		sw.drain()
		sw.out.Encode(resultLine(ev.Type, sw.format, ev))
	case session.EventMessage:
		sw.drain()
		sw.complete(ev.Call.ID, ev.Call.ToolCallID)
		if ev.Resumed && sw.truncate != nil {
			ev.Result = sw.truncate.Truncate(ev.Result)
		}
		sw.out.Encode(resultLine(ev.Type, sw.format, ev))
		return true
	}
	return false
}

// drain writes the progress events already delivered to the subscription, and those
// relayed from other replicas (all of a call's, before its message: its relay has
// ended by then).
func (sw *streamWriter) drain() {
	for {
		select {
		case pe := <-sw.relayed:
			sw.progress(pe)
			continue
		default:
		}
		select {
		case pe, ok := <-sw.prog:
			if !ok {
				sw.prog = nil
				return
			}
			sw.progress(pe)
		default:
			return
		}
	}
}

// progress writes one event, first filling any gap before it from the call's log.
func (sw *streamWriter) progress(pe progress.Event) {
	if sw.closed[pe.CallID] {
		// Its message (or closed event) ended the call here. A call whose work goes on
		// after it returned (a background job) still writes output: that is for its
		// pollers, after the closed event this stream sent.
		return
	}
	if pe.Closed {
		sw.complete(pe.CallID, pe.ToolCallID)
		return
	}
	cur := sw.cursor(pe.CallID)
	if pe.Offset > cur[pe.Stream] {
		sw.fill(pe.CallID, pe.ToolCallID, pe.Stream, pe.Offset)
	}
	end := pe.Offset + int64(len(pe.Text))
	if end <= cur[pe.Stream] {
		return // already written from the log
	}
	if skip := cur[pe.Stream] - pe.Offset; skip > 0 {
		pe.Text, pe.Offset = pe.Text[skip:], pe.Offset+skip
	}
	pe.Progress = sw.gate().pass(pe.CallID, pe.Progress)
	sw.out.Encode(toProgressEvent(pe))
	cur[pe.Stream] = end
}

// complete writes what is left of a finished call's output, then its closed event.
func (sw *streamWriter) complete(callID, toolCallID string) {
	if sw.hub == nil || sw.closed[callID] {
		return
	}
	streams := sw.hub.Streams(callID)
	sw.closed[callID] = true
	if len(streams) == 0 && len(sw.cursors[callID]) == 0 {
		// The call wrote no progress (here, nor relayed from its replica): there is
		// nothing to close.
		return
	}
	for _, st := range streams {
		sw.fill(callID, toolCallID, st, -1)
	}
	// The closed event carries the final value if the client has not had it.
	sw.out.Encode(toProgressEvent(progress.Event{CallID: callID, ToolCallID: toolCallID, Closed: true,
		Progress: sw.gate().latest(sw.hub, callID), TS: time.Now()}))
}

// fill writes a stream's bytes from the client's cursor up to `to` (-1: the end of
// the log), read from the call's output log.
func (sw *streamWriter) fill(callID, toolCallID, stream string, to int64) {
	cur := sw.cursor(callID)
	for to < 0 || cur[stream] < to {
		max := progressPiece // what a client that stops reading holds, escaped
		if to >= 0 {
			max = int(min(to-cur[stream], progressPiece))
		}
		data, next, _, err := sw.hub.Read(callID, stream, cur[stream], max)
		if err != nil || len(data) == 0 {
			return
		}
		sw.out.Encode(toProgressEvent(progress.Event{CallID: callID, ToolCallID: toolCallID, Stream: stream, Text: string(data), Offset: cur[stream],
			Progress: sw.gate().latest(sw.hub, callID), TS: time.Now()}))
		cur[stream] = next
	}
}

func (sw *streamWriter) gate() valueGate {
	if sw.values == nil {
		sw.values = valueGate{}
	}
	return sw.values
}

func (sw *streamWriter) cursor(callID string) map[string]int64 {
	c, ok := sw.cursors[callID]
	if !ok {
		if sw.cursors == nil { // most streams carry no output: made on its first line
			sw.cursors = map[string]map[string]int64{}
		}
		c = map[string]int64{}
		sw.cursors[callID] = c
	}
	return c
}

// resultLine shapes a result-carrying event (message, tool_yield, tool_result).
func resultLine(t session.EventType, f msgFormat, ev session.Event) messageEvent {
	return messageEvent{
		Type: string(t), ToolCallID: ev.Call.ToolCallID, CallID: ev.Call.ID, Name: ev.Call.Name,
		IsError: ev.Result.IsError, ErrorKind: ev.Result.ErrorKind, Truncated: ev.Result.Truncated, Resumed: ev.Resumed, GoesOn: ev.GoesOn,
		Message: message(f, ev.Call, ev.Result), TS: unixSeconds(ev.TS),
	}
}

// inputEvent is the input_required line: an external tool's call (ask_user) waits for
// an answer posted to POST /v1/tool-calls/{id}/result.
type inputEvent struct {
	Type       string          `json:"type"`
	ToolCallID string          `json:"tool_call_id"`
	CallID     string          `json:"call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	TS         float64         `json:"ts"`
}

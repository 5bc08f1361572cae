package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/store"
)

// forwardEvents is forwardToOwner for a call's events stream (NDJSON ending with
// done). When the owner's stream breaks before done (the owner was killed, the link
// between the replicas broke), the client is not left with a stream cut short: the
// rest is served here, following the call's record to its result (the sweep fails
// the call of a dead owner once its lease runs out), without the events the client
// already has.
//
// When the owner cannot be reached at all while it is alive (its lease holds), the
// events of a call still running are 503 unavailable with Retry-After, as the
// progress reads are: followed from here the stream would have none of the output.
// A finished call's events, and those of a dead owner's call, are served here.
func (s *Server) forwardEvents(w http.ResponseWriter, r *http.Request, rec *store.Call, handler http.HandlerFunc) bool {
	var relayed *relayedEvents
	answered := s.forward(w, r, rec, handler, s.outputUnreachable(rec, true), func(resp *http.Response) error {
		if resp.StatusCode == http.StatusOK {
			relayed = &relayedEvents{body: resp.Body, approvals: map[string]bool{},
				output: map[outputKey]int64{}, closed: map[string]bool{}, toolCallIDs: map[string]string{}}
			resp.Body = relayed
		}
		return nil
	})
	if !answered || relayed == nil || relayed.done || r.Context().Err() != nil {
		return answered
	}
	s.log.Warn("the events stream of the call's replica ended before done; following the call here",
		"call_id", rec.ID, "owner", rec.Owner, "err", relayed.err)
	r = r.Clone(r.Context())
	r.Header.Set(forwardedHeader, s.Replicas.Self)
	handler(&eventsContinued{ResponseWriter: w, sent: relayed}, r)
	return true
}

// eventLine is what forwardEvents reads of an event.
type eventLine struct {
	Type     string `json:"type"`
	Approval struct {
		ID string `json:"id"`
	} `json:"approval"`
	// A tool_progress event's (call_id and tool_call_id also a message's).
	CallID     string `json:"call_id"`
	ToolCallID string `json:"tool_call_id"`
	Stream     string `json:"stream"`
	Text       string `json:"text"`
	Offset     int64  `json:"offset"`
	Closed     bool   `json:"closed"`
}

// outputKey is one output stream of a call.
type outputKey struct{ call, stream string }

// relayedEvents is the owner's events stream as it is relayed: whole lines only (a
// line cut off by a broken stream is dropped, so that what follows it from here is
// not glued to half an event), noting what the client got. A broken stream reads as
// its end, so that the relay finishes cleanly and forwardEvents can go on.
type relayedEvents struct {
	body      io.ReadCloser
	chunk     []byte // read buffer
	buf       []byte // read, not yet relayed: a line's start
	out       []byte // whole lines to relay
	done      bool
	started   bool
	answered  bool // the call's message was relayed
	approvals map[string]bool
	// output is how far into each output stream the client has the call's output,
	// closed the calls whose output the client has to its end.
	output map[outputKey]int64
	closed map[string]bool
	// toolCallIDs are the tool_call_id of the calls with output, for their closed
	// event.
	toolCallIDs map[string]string
	err         error // why the stream ended, nil at its clean end
}

func (e *relayedEvents) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.body == nil {
			return 0, io.EOF
		}
		if e.chunk == nil {
			e.chunk = make([]byte, 32<<10)
		}
		n, err := e.body.Read(e.chunk)
		e.buf = append(e.buf, e.chunk[:n]...)
		if i := bytes.LastIndexByte(e.buf, '\n'); i >= 0 {
			e.note(e.buf[:i+1])
			e.out = append(e.out, e.buf[:i+1]...)
			e.buf = append(e.buf[:0], e.buf[i+1:]...)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				e.err = err
			}
			e.body = nil
		}
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

func (e *relayedEvents) Close() error {
	if e.body != nil {
		return e.body.Close()
	}
	return nil
}

// note records the events of lines.
func (e *relayedEvents) note(lines []byte) {
	for line := range bytes.Lines(lines) {
		var ev eventLine
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch ev.Type {
		case "done":
			e.done = true
		case "tool_start":
			e.started = true
		case "message":
			e.answered = true
		case "approval_required":
			e.approvals[ev.Approval.ID] = true
		case "tool_progress":
			e.toolCallIDs[ev.CallID] = ev.ToolCallID
			if ev.Closed {
				e.closed[ev.CallID] = true
				continue
			}
			k := outputKey{ev.CallID, ev.Stream}
			e.output[k] = max(e.output[k], ev.Offset+int64(len(ev.Text)))
		}
	}
}

// eventsContinued writes the events stream served here after the owner's broke off:
// the response has begun, so its head is not written again, and the events the
// client already has from the owner (the call's start, its approval requests, the
// output it has read, its message when only done was missing) are left out. This
// replica relays the owner's output again from its start when the owner can still
// be reached (the link broke, not the owner).
type eventsContinued struct {
	http.ResponseWriter
	sent    *relayedEvents
	partial []byte
}

func (c *eventsContinued) WriteHeader(int) {}

func (c *eventsContinued) Write(p []byte) (int, error) {
	c.partial = append(c.partial, p...)
	i := bytes.LastIndexByte(c.partial, '\n')
	if i < 0 {
		return len(p), nil
	}
	var keep []byte
	for line := range bytes.Lines(c.partial[:i+1]) {
		var ev eventLine
		if json.Unmarshal(line, &ev) == nil {
			switch ev.Type {
			case "message":
				keep = c.sent.close(keep, ev.CallID)
			case "done":
				keep = c.sent.close(keep, "")
			}
			if ev.Type == "tool_start" && c.sent.started || ev.Type == "message" && c.sent.answered ||
				ev.Type == "approval_required" && c.sent.approvals[ev.Approval.ID] {
				continue
			}
			if ev.Type == "tool_progress" {
				line = c.sent.unseen(line, ev)
				if line != nil && ev.Closed {
					c.sent.closed[ev.CallID] = true
				}
			}
		}
		keep = append(keep, line...)
	}
	c.partial = append(c.partial[:0], c.partial[i+1:]...)
	if _, err := c.ResponseWriter.Write(keep); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *eventsContinued) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// unseen is a tool_progress line (ev) without the output the client already has
// from the owner: nil when it has all of it, the line with its text cut to what
// the client lacks when it has the start.
func (e *relayedEvents) unseen(line []byte, ev eventLine) []byte {
	if ev.Closed {
		if e.closed[ev.CallID] {
			return nil
		}
		return line
	}
	had, ok := e.output[outputKey{ev.CallID, ev.Stream}]
	end := ev.Offset + int64(len(ev.Text))
	switch {
	case !ok || ev.Offset >= had:
		return line
	case end <= had:
		return nil
	}
	var fields map[string]any
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if d.Decode(&fields) != nil {
		return line
	}
	fields["text"], fields["offset"] = ev.Text[had-ev.Offset:], had
	b, err := json.Marshal(fields)
	if err != nil {
		return line
	}
	return append(b, '\n')
}

// close appends to lines the closed event of callID's output (of every call's, when
// callID is ""), if the client has output of it from the owner but not its end: the
// stream served here has none of the output of a call whose owner is gone, and so
// would not close it, and clients take the closed event for the end of the output.
func (e *relayedEvents) close(lines []byte, callID string) []byte {
	ids := make([]string, 0, len(e.toolCallIDs))
	for id := range e.toolCallIDs {
		if !e.closed[id] && (callID == "" || id == callID) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		e.closed[id] = true
		b, err := json.Marshal(toProgressEvent(progress.Event{CallID: id, ToolCallID: e.toolCallIDs[id], Closed: true, TS: time.Now()}))
		if err != nil {
			continue
		}
		lines = append(append(lines, b...), '\n')
	}
	return lines
}

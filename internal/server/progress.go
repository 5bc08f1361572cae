package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/store"
)

type progressChunk struct {
	CallID      string `json:"call_id"`
	Stream      string `json:"stream"`
	Offset      int64  `json:"offset"`
	NextOffset  int64  `json:"next_offset"`
	Data        string `json:"data"`
	Encoding    string `json:"encoding"`
	InvalidUTF8 bool   `json:"invalid_utf8,omitempty"`
	Finished    bool   `json:"finished"`
	// OutputLost: the call ran on a replica that has stopped, which held its output.
	OutputLost bool     `json:"output_lost,omitempty"`
	Streams    []string `json:"streams"`
	// Progress is the call's latest numeric progress, when it reported any.
	Progress *progressValue `json:"progress,omitempty"`
}

// getProgress serves a call's live output by byte offset: exactly the bytes from
// offset (up to max_bytes), the offset to ask for next, and whether the output is
// complete. Polling with next_offset loses nothing and repeats nothing.
func (s *Server) getProgress(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stream := q.Get("stream")
	if stream == "" {
		stream = "stdout"
	}
	offset, err := queryInt(q.Get("offset"), 0, 0, 1<<62)
	if err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, "offset: "+err.Error()))
		return
	}
	max, err := queryInt(q.Get("max_bytes"), progress.DefaultReadMax, 1, progress.MaxRead)
	if err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, "max_bytes: "+err.Error()))
		return
	}
	encoding := q.Get("encoding")
	if encoding == "" {
		encoding = "text"
	}
	if encoding != "text" && encoding != "base64" {
		s.writeError(w, r, errorf(CodeBadRequest, "encoding must be text or base64"))
		return
	}
	rec, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.forwardOutputRead(w, r, rec, s.getProgress) {
		return
	}
	resp := progressChunk{CallID: rec.ID, Stream: stream, Offset: offset, NextOffset: offset, Encoding: encoding, Streams: []string{}}
	if s.Progress == nil {
		resp.Finished = rec.Status.Terminal()
		writeJSON(w, http.StatusOK, resp)
		return
	}
	data, next, finished, err := s.Progress.Read(rec.ID, stream, offset, int(min(max, progressPiece)))
	switch {
	case errors.Is(err, progress.ErrUnknownCall):
		// No output was recorded here (the call printed nothing, its logs expired, or
		// it ran elsewhere): nothing to read, finished once the call is. Output held
		// by a replica that has stopped is said to be lost, not shown as none.
		resp.Finished = rec.Status.Terminal()
		resp.OutputLost = ownerGone(r.Context())
		writeJSON(w, http.StatusOK, resp)
		return
	case errors.Is(err, progress.ErrBadOffset):
		s.writeError(w, r, errorf(CodeBadRequest, err.Error()))
		return
	case err != nil:
		s.writeError(w, r, fmt.Errorf("progress read %s: %w", rec.ID, err))
		return
	}
	s.writeProgress(w, resp, data, next, finished, max)
}

// progressPiece is how much of a log a poll, or a stream's event, holds at a time
// while it is written: a poll may ask for 16 MiB, text of control characters escapes
// to six times that in JSON, and a client that stops reading holds what is unsent.
const progressPiece = 64 << 10

// writeProgress writes the answer to a poll whose first piece, read from
// resp.Offset, is data: the data field goes out piece by piece, read from the log as
// it goes, and the fields that depend on how much was read follow it.
func (s *Server) writeProgress(w http.ResponseWriter, resp progressChunk, data []byte, next int64, finished bool, max int64) {
	head, _ := json.Marshal(struct {
		CallID   string `json:"call_id"`
		Stream   string `json:"stream"`
		Offset   int64  `json:"offset"`
		Encoding string `json:"encoding"`
	}{resp.CallID, resp.Stream, resp.Offset, resp.Encoding})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// A write that fails (the client closed its connection, or took nothing for
	// write_timeout) ends the answer: the rest of max_bytes would be read from the log
	// and encoded for no one.
	sent := func(_ int, err error) {
		if err != nil {
			panic(http.ErrAbortHandler)
		}
	}
	sent(w.Write(head[:len(head)-1]))
	sent(io.WriteString(w, `,"data":"`))
	var b64 io.WriteCloser
	if resp.Encoding == "base64" {
		b64 = base64.NewEncoder(base64.StdEncoding, w)
	}
	var held []byte // text: the start of a character the next piece completes
	invalid := false
	for read := int64(0); ; {
		read += int64(len(data))
		last := len(data) == 0 || read >= max
		if b64 != nil {
			sent(b64.Write(data))
		} else {
			text := append(held, data...)
			cut := incompleteTail(text)
			if last && (finished || (int64(cut) == read && read >= max)) {
				// The end of the output, or max_bytes smaller than one character: a
				// partial character is all there is to send.
				cut = 0
			}
			text, held = text[:len(text)-cut], append([]byte(nil), text[len(text)-cut:]...)
			invalid = invalid || !utf8.Valid(text)
			q, _ := json.Marshal(string(text))
			sent(w.Write(q[1 : len(q)-1]))
			if last {
				// Do not split a character between two reads: a trailing partial one
				// is read again by the next poll.
				next -= int64(len(held))
			}
		}
		if last {
			break
		}
		var err error
		data, next, finished, err = s.Progress.Read(resp.CallID, resp.Stream, next, int(min(max-read, progressPiece)))
		if err != nil {
			// The answer has begun: only cutting it short tells the client it failed.
			panic(http.ErrAbortHandler)
		}
	}
	if b64 != nil {
		sent(0, b64.Close())
	}
	resp.Streams = s.Progress.Streams(resp.CallID)
	if resp.Streams == nil {
		resp.Streams = []string{}
	}
	if v, ok := s.Progress.Latest(resp.CallID); ok {
		resp.Progress = toProgressValue(&v)
	}
	tail, _ := json.Marshal(struct {
		NextOffset  int64          `json:"next_offset"`
		InvalidUTF8 bool           `json:"invalid_utf8,omitempty"`
		Finished    bool           `json:"finished"`
		Streams     []string       `json:"streams"`
		Progress    *progressValue `json:"progress,omitempty"`
	}{next, invalid, finished && next >= resp.Offset, resp.Streams, resp.Progress})
	sent(io.WriteString(w, `",`))
	sent(w.Write(tail[1:]))
	_, _ = io.WriteString(w, "\n")
}

// incompleteTail is how many bytes at the end of b start a UTF-8 sequence that is
// not complete yet.
func incompleteTail(b []byte) int {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

func queryInt(v string, def, lo, hi int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("must be an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// streamProgress pushes a call's output as server-sent events: what was written so far,
// then live output, then a closed event. Each event's id is the cursor of every stream
// ("stdout:120,stderr:7"); a browser that reconnects sends it back as Last-Event-ID and
// continues exactly where it stopped. Gaps (a slow client's dropped events) are filled
// from the call's output log, so nothing is lost or repeated.
func (s *Server) streamProgress(w http.ResponseWriter, r *http.Request) {
	rec, err := s.call(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.forwardOutputRead(w, r, rec, s.streamProgress) {
		return
	}
	cursor, err := parseCursor(r.Header.Get("Last-Event-ID"))
	if err != nil {
		s.writeError(w, r, errorf(CodeBadRequest, "Last-Event-ID: "+err.Error()))
		return
	}
	if s.Progress == nil {
		s.writeError(w, r, errorf(CodeUnavailable, "live progress is disabled (progress.enabled=false)"))
		return
	}
	sub := s.Progress.Subscribe(progress.Filter{CallIDs: []string{rec.ID}})
	defer sub.Close()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// Open the stream now: a quiet call may send nothing for a long while.
	if rc.Flush() != nil {
		return
	}
	values := valueGate{}
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\nid: %s\ndata: %s\n\n", event, cursor.String(), b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// catchUp sends everything in the logs beyond the cursor; it reports whether the
	// call's output is complete.
	catchUp := func() (finished, ok bool) {
		streams := s.Progress.Streams(rec.ID)
		finished = true
		for _, st := range streams {
			for {
				data, next, fin, err := s.Progress.Read(rec.ID, st, cursor[st], progressPiece)
				if err != nil {
					return false, !errors.Is(err, progress.ErrUnknownCall)
				}
				if len(data) > 0 {
					off := cursor[st]
					cursor[st] = next
					if !send("tool_progress", toProgressEvent(progress.Event{CallID: rec.ID, ToolCallID: rec.ToolCallID, Stream: st, Text: string(data), Offset: off,
						Progress: values.latest(s.Progress, rec.ID), TS: time.Now()})) {
						return false, false
					}
					continue
				}
				finished = finished && fin
				break
			}
		}
		if len(streams) == 0 {
			_, _, fin, err := s.Progress.Read(rec.ID, "stdout", 0, 1)
			finished = fin || (errors.Is(err, progress.ErrUnknownCall) && rec.Status.Terminal())
		}
		return finished, true
	}
	closed := func() {
		e := toProgressEvent(progress.Event{CallID: rec.ID, ToolCallID: rec.ToolCallID, Closed: true,
			Progress: values.latest(s.Progress, rec.ID), TS: time.Now()})
		// Served here because the replica that ran the call has stopped, with none of
		// its output here: it is lost, not empty (as getProgress says).
		e.OutputLost = ownerGone(r.Context()) && len(s.Progress.Streams(rec.ID)) == 0
		send("closed", e)
	}
	if finished, ok := catchUp(); !ok {
		return
	} else if finished {
		closed()
		return
	}
	// A client that reconnects with everything read still gets the call's value now,
	// on an event without text, rather than at the next report.
	if v := values.latest(s.Progress, rec.ID); v != nil {
		if !send("tool_progress", toProgressEvent(progress.Event{CallID: rec.ID, ToolCallID: rec.ToolCallID, Stream: "info", Offset: cursor["info"],
			Progress: v, TS: time.Now()})) {
			return
		}
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	// A call that never starts (denied, cancelled or expired while it waited) writes
	// no output, so no closed event comes: its record says when it is over. Read it
	// when this process's call ends, on decisions, and every 2 s while it has no output.
	watch := s.watchCall(rec.ID)
	defer watch.close()
	callID := rec.ID
	stopping := s.stopping()
	endedUnstarted := func() bool {
		if len(s.Progress.Streams(callID)) > 0 {
			return false // it ran: its closed event ends the stream
		}
		if _, _, fin, err := s.Progress.Read(callID, "stdout", 0, 1); err == nil && !fin {
			// It ran and its output is not over, though it printed nothing yet (a
			// background job it started still runs): its closed event ends the stream.
			return false
		}
		cur, err := s.Calls.GetCall(r.Context(), callID)
		if err != nil {
			return false
		}
		if rs := s.Replicas; rs != nil && rec.StartedAt == nil && cur.StartedAt != nil && cur.Owner != "" && cur.Owner != rs.Self {
			// It waited when this stream began and then ran on another replica
			// (approved there, nobody waiting here): its output is there.
			s.relayProgressStream(w, r, rc, cur, cursor, stopping)
			return true
		}
		if !cur.Status.Terminal() {
			return false
		}
		closed()
		return true
	}
	var dropped int64
	for {
		// Once the daemon stops, a stream of output no call of this process is
		// producing (a background job's, which the stop ends; a call waiting for a
		// decision) ends, without a closed event, rather than hold the drain: the
		// client reconnects with its Last-Event-ID. A running call's goes on: the
		// drain waits for it.
		leave := stopping
		if watch.over != nil {
			leave = nil
		}
		// Events the subscription dropped (this client was slow) may include the last
		// output and the closed event: once the backlog is drained, read the rest from
		// the logs, and end the stream if the call has finished.
		if n := sub.Dropped(); n > dropped && len(sub.Events()) == 0 {
			dropped = n
			finished, ok := catchUp()
			if !ok {
				return
			}
			if finished {
				closed()
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-leave:
			catchUp() // the output so far
			return
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-watch.over:
			watch.rearm()
			if endedUnstarted() {
				return
			}
		case <-watch.decided:
			if endedUnstarted() {
				return
			}
		case <-watch.tick.C:
			if endedUnstarted() {
				return
			}
		case ev, ok := <-sub.Events():
			if !ok {
				return
			}
			if ev.Closed {
				if _, ok := catchUp(); ok {
					closed()
				}
				return
			}
			end := ev.Offset + int64(len(ev.Text))
			switch {
			case end <= cursor[ev.Stream]:
				continue // already sent (replayed from the log)
			case ev.Offset > cursor[ev.Stream]:
				if _, ok := catchUp(); !ok { // a gap: fill it from the log
					return
				}
				continue
			}
			skip := cursor[ev.Stream] - ev.Offset
			ev.Text = ev.Text[skip:]
			ev.Offset += skip
			ev.Progress = values.pass(rec.ID, ev.Progress)
			cursor[ev.Stream] = end
			if !send("tool_progress", toProgressEvent(ev)) {
				return
			}
		}
	}
}

// streamCursor is the byte offset reached in each stream.
type streamCursor map[string]int64

func (c streamCursor) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + strconv.FormatInt(c[k], 10)
	}
	return strings.Join(parts, ",")
}

func parseCursor(s string) (streamCursor, error) {
	c := streamCursor{}
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || k == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not stream:offset", part)
		}
		c[k] = n
	}
	return c, nil
}

// relayProgressStream hands a progress stream that began here over to rec's replica,
// which ran the call after the stream began (a call approved on another replica while
// it waited with nobody waiting here): the rest of the stream, from cursor, is that
// replica's. When it cannot be reached, or this daemon stops, the stream ends without
// a closed event, and the client reconnects with its Last-Event-ID (through any
// replica: it is forwarded to that one).
func (s *Server) relayProgressStream(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, rec *store.Call, cursor streamCursor, stopping <-chan struct{}) {
	rs := s.Replicas
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	fail := func(err error) {
		if ctx.Err() != nil {
			// The client left, or this daemon stops: nothing failed.
			s.log.DebugContext(ctx, "a progress stream handed over to the replica that ran the call ended early",
				"call_id", rec.ID, "owner", rec.Owner, "err", err)
			return
		}
		s.log.WarnContext(ctx, "handing a progress stream over to the replica that ran the call failed; the client reconnects",
			"call_id", rec.ID, "owner", rec.Owner, "err", err)
	}
	rep, err := rs.Lookup.GetReplica(ctx, rec.Owner)
	if err != nil {
		fail(err)
		return
	}
	u, err := url.JoinPath(rep.Address, "v1", "tool-calls", rec.ID, "progress", "stream")
	if err != nil {
		fail(err)
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fail(err)
		return
	}
	for _, h := range []string{"Authorization", "X-API-Key"} { // the caller's key (auth.go)
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(forwardedHeader, rs.Self)
	req.Header.Set("X-Request-Id", requestID(r.Context()))
	if c := cursor.String(); c != "" {
		req.Header.Set("Last-Event-ID", c)
	}
	transport := rs.Transport
	if transport == nil {
		transport = s.replicaTransport()
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail(fmt.Errorf("replica %s (%s) answered HTTP %d", rec.Owner, rep.Address, resp.StatusCode))
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// ndjsonWriter writes one JSON object per line. It is used by one goroutine; lines go
// into net/http's own response buffer and Flush sends them. After the client goes away
// writes fail quietly; the handler notices through its request context.
type ndjsonWriter struct {
	w      http.ResponseWriter
	rc     http.ResponseController // by value: one allocation less per stream
	line   bytes.Buffer            // the line being written, reused
	enc    *json.Encoder           // encodes into line: as json.Marshal does, plus the newline
	failed bool
	last   time.Time // when the last line was written
}

func newNDJSON(w http.ResponseWriter) *ndjsonWriter {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &ndjsonWriter{w: w, rc: *http.NewResponseController(w), last: time.Now()}
}

// Encode writes v as one line (buffered until Flush or the buffer fills).
func (n *ndjsonWriter) Encode(v any) {
	if n.failed {
		return
	}
	n.line.Reset()
	if n.enc == nil {
		n.enc = json.NewEncoder(&n.line)
	}
	if n.enc.Encode(v) != nil {
		return
	}
	if _, err := n.w.Write(n.line.Bytes()); err != nil {
		n.failed = true
	}
	n.last = time.Now()
}

// Flush sends the buffered lines.
func (n *ndjsonWriter) Flush() {
	if !n.failed && n.rc.Flush() != nil {
		n.failed = true
	}
}

// keepaliveEvent is the line a stream writes when it had nothing to say for a while
// (a call waiting for a person, a quiet session), so that a proxy's idle timeout
// (60 s is common) does not cut it. Clients skip it.
type keepaliveEvent struct {
	Type string  `json:"type"`
	TS   float64 `json:"ts"`
}

// keepalive gives a stream its keepalive timer: nil (never fires) when every is 0.
func keepalive(every time.Duration) (*time.Timer, <-chan time.Time) {
	if every <= 0 {
		return nil, nil
	}
	t := time.NewTimer(every)
	return t, t.C
}

// keepAlive writes a keepalive line when nothing was written for every, and resets
// t to fire when the stream will next have been quiet that long.
func (n *ndjsonWriter) keepAlive(t *time.Timer, every time.Duration) {
	idle := time.Since(n.last)
	if idle >= every {
		n.Encode(keepaliveEvent{Type: "keepalive", TS: unixSeconds(time.Now())})
		n.Flush()
		idle = 0
	}
	t.Reset(every - idle)
}

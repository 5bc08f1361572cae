package server

import (
	"encoding/json"
	"net/http"
)

// ndjsonWriter writes one JSON object per line. It is used by one goroutine; lines go
// into net/http's own response buffer and Flush sends them. After the client goes away
// writes fail quietly; the handler notices through its request context.
type ndjsonWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	line   []byte
	failed bool
}

func newNDJSON(w http.ResponseWriter) *ndjsonWriter {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &ndjsonWriter{w: w, rc: http.NewResponseController(w)}
}

// Encode writes v as one line (buffered until Flush or the buffer fills).
func (n *ndjsonWriter) Encode(v any) {
	if n.failed {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	n.line = append(append(n.line[:0], b...), '\n')
	if _, err := n.w.Write(n.line); err != nil {
		n.failed = true
	}
}

// Flush sends the buffered lines.
func (n *ndjsonWriter) Flush() {
	if !n.failed && n.rc.Flush() != nil {
		n.failed = true
	}
}

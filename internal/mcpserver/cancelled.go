package mcpserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
)

// A request the client cancelled (notifications/cancelled) gets no response: MCP says
// its receiver SHOULD NOT send one, and clients that forgot the request report the
// response as an error (the TypeScript SDK: "Received a response for an unknown
// message ID"). mcp-go answers every request its handler returned from, and its
// handlers cannot return "no response"; so the POST of a tools/call writes through
// unanswered, which drops the response of a request cancelled by its client: on an
// event stream its event, and a JSON answer becomes 202 Accepted with no body.

type unansweredKey struct{}

// unanswered is a tools/call request whose response is dropped once its client
// cancelled it.
type unanswered struct {
	id        json.RawMessage // the request's JSON-RPC id, compact
	cancelled atomic.Bool
}

// cancelledByClient marks the request of ctx's tools/call as cancelled by its client.
func cancelledByClient(ctx interface{ Value(any) any }) {
	if u, ok := ctx.Value(unansweredKey{}).(*unanswered); ok {
		u.cancelled.Store(true)
	}
}

// requestID is the compact JSON-RPC id of a request body; nil for none.
func requestID(body []byte) json.RawMessage {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, msg.ID) != nil {
		return nil
	}
	return b.Bytes()
}

// answers reports whether a JSON-RPC message is the response to the request id.
func (u *unanswered) answers(message []byte) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(message, &msg) != nil || msg.Method != "" || (msg.Result == nil && msg.Error == nil) {
		return false
	}
	var b bytes.Buffer
	return json.Compact(&b, msg.ID) == nil && bytes.Equal(b.Bytes(), u.id)
}

// unansweredWriter is the response writer of a tools/call POST. Event streams pass
// through whole events (mcp-go writes an event's id and data in two writes, and
// flushes after each event); once the request is cancelled by its client, its
// response event is left out, and a JSON response becomes 202 with no body.
type unansweredWriter struct {
	http.ResponseWriter
	u *unanswered

	mu      sync.Mutex
	sse     bool         // the response is an event stream
	dropped bool         // the response is dropped: writes are discarded
	pending bytes.Buffer // the start of an event not yet written
}

func (w *unansweredWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ct := w.Header().Get("Content-Type")
	w.sse = ct == "text/event-stream"
	if status == http.StatusOK && ct == "application/json" && w.u.cancelled.Load() {
		w.dropped = true
		w.Header().Del("Content-Type")
		status = http.StatusAccepted
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *unansweredWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.dropped:
		return len(p), nil
	case !w.sse:
		return w.ResponseWriter.Write(p)
	}
	w.pending.Write(p)
	return len(p), w.writeEvents()
}

// writeEvents writes the complete events pending, but for the response of a
// request cancelled by its client. Callers hold mu.
func (w *unansweredWriter) writeEvents() error {
	for {
		buf := w.pending.Bytes()
		end := bytes.Index(buf, []byte("\n\n"))
		if end < 0 {
			return nil
		}
		event := buf[:end+2]
		if !w.u.cancelled.Load() || !w.u.answers(eventData(event)) {
			if _, err := w.ResponseWriter.Write(event); err != nil {
				w.pending.Reset()
				return err
			}
		}
		w.pending.Next(end + 2)
	}
}

// eventData is the data of an SSE event (its data lines joined).
func eventData(event []byte) []byte {
	var data [][]byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" ")))
		}
	}
	return bytes.Join(data, []byte("\n"))
}

func (w *unansweredWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *unansweredWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
)

// TestProgressPollStopsWhenItsClientIsGone: a poll's answer is written piece by piece
// from the log (up to max_bytes, 16 MiB, six times that once escaped), and the writes
// failing (the client closed its connection, or took nothing for write_timeout) did
// not stop it: it read and encoded every piece to the end for no one, keeping a
// handler busy (and a shutdown's drain waiting) for seconds per poll. Now the first
// write that fails ends it. The answer goes to a writer that fails as such a
// connection does once the client's buffers are full, and counts the bytes offered
// after that.
func TestProgressPollStopsWhenItsClientIsGone(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	const size = 4 << 20
	evs := streamSkippingOutput(t, d, "/v1/sessions/"+id+"/tool-calls", fmt.Sprintf(
		`{"calls":[{"id":"a","name":"execute_command","arguments":{"command":"head -c %d /dev/zero | tr '\\0' a"}}]}`, size))
	callID := messages(t, evs)["a"].str("call_id")
	h := d.app.API.Handler()
	for _, enc := range []string{"text", "base64"} {
		t.Run(enc, func(t *testing.T) {
			w := &goneWriter{ResponseRecorder: httptest.NewRecorder(), room: 256 << 10}
			req := httptest.NewRequest("GET", fmt.Sprintf("/v1/tool-calls/%s/progress?encoding=%s&max_bytes=%d", callID, enc, size), nil)
			req.Host = "localhost"
			func() {
				defer func() {
					if p := recover(); p != nil && p != http.ErrAbortHandler {
						panic(p)
					}
				}()
				h.ServeHTTP(w, req)
			}()
			if w.Code != http.StatusOK || w.failed == 0 {
				t.Fatalf("%d, %d bytes taken, %d writes failed: the answer must fill the client's room (%d bytes) first",
					w.Code, w.Body.Len(), w.failed, w.room)
			}
			if w.failed > 1 {
				t.Errorf("after its first write failed the poll went on: %d more writes, %d bytes (%d MiB asked for)",
					w.failed-1, w.offered, size>>20)
			}
		})
	}
}

// goneWriter takes room bytes, then fails every write as a connection whose client
// has gone does, counting the writes and bytes offered after that.
type goneWriter struct {
	*httptest.ResponseRecorder
	room    int
	failed  int
	offered int
}

func (g *goneWriter) Write(b []byte) (int, error) {
	if g.failed == 0 && g.Body.Len()+len(b) <= g.room {
		return g.ResponseRecorder.Write(b)
	}
	if g.failed > 0 {
		g.offered += len(b)
	}
	g.failed++
	return 0, fmt.Errorf("write tcp: %w", errors.Join(syscall.EPIPE))
}

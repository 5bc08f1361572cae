package server

import (
	"net/http"
	"time"
)

// writeTimeoutMiddleware cuts a response whose client has taken none of its bytes for
// cfg.WriteTimeout: before each write the connection's write deadline is moved to
// that long from now, so a client that reads, however slowly, is never cut, and one
// that stopped reading without closing its connection (TCP backpressure) is. Without
// it such a client held its handler, its connection and its key's request slot for
// ever, and the calls of its stream ran on for nobody. net/http cancels the request's
// context when a write fails, so the handler sees the client as gone: a tool-calls
// stream cancels the calls still running, as for a disconnect, and their records are
// written. http.Server.WriteTimeout cannot do this: it bounds the whole response,
// and streams last as long as their calls.
func (s *Server) writeTimeoutMiddleware(next http.Handler) http.Handler {
	every := s.cfg.WriteTimeout
	if every <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: *http.NewResponseController(w), every: every}
		next.ServeHTTP(dw, r)
		// net/http sends what is left of the response after the handler returns, under
		// the deadline set last: give that its full time too.
		dw.extend(true)
	})
}

// deadlineWriter moves the connection's write deadline ahead before each write.
type deadlineWriter struct {
	http.ResponseWriter
	rc    http.ResponseController // by value: one allocation less per request
	every time.Duration
	set   time.Time // when the deadline was last moved
	off   bool      // the connection takes no deadlines (a test's recorder)
}

// extend moves the write deadline to every from now. Moving it costs a timer update:
// a stream writing many lines a second moves it when an eighth of every (at most a
// second) has passed, so a write always has at least seven eighths of it.
func (d *deadlineWriter) extend(force bool) {
	if d.off {
		return
	}
	now := time.Now()
	if !force && now.Sub(d.set) < min(d.every/8, time.Second) {
		return
	}
	d.set = now
	if d.rc.SetWriteDeadline(now.Add(d.every)) != nil {
		d.off = true
	}
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.extend(false)
	return d.ResponseWriter.Write(b)
}

// FlushError moves the deadline, then flushes (http.ResponseController calls it).
func (d *deadlineWriter) FlushError() error {
	d.extend(false)
	return d.rc.Flush()
}

// Unwrap lets http.ResponseController reach the real writer.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

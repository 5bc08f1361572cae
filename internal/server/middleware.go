package server

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"runtime/debug"

	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/telemetry"
)

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestIDMiddleware takes X-Request-Id from the client when it is sane, or makes one,
// and echoes it back.
func (s *Server) requestIDMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(id) {
			id = session.NewID("req_")
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(telemetry.WithRequestID(r.Context(), id)))
	})
}

func requestID(ctx context.Context) string { return telemetry.RequestID(ctx) }

// recoverMiddleware turns a handler panic into a logged 500 instead of a dead connection.
func (s *Server) recoverMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "request_id", requestID(r.Context()), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				s.writeError(w, r, errorf(CodeInternal, "internal error (request id "+requestID(r.Context())+")"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

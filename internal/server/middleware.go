package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"unicode/utf8"

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

// textURLMiddleware refuses a request whose path, query or session header holds a NUL
// character or bytes that are not UTF-8 (%00, %C3%28): no id or name the daemon gives
// or takes holds either, and PostgreSQL refuses such text outright (SQLSTATE 22021),
// which made every lookup by such an id an internal error there while SQLite found
// nothing. Checked once here rather than at each of the dozens of lookups.
func (s *Server) textURLMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if where := badText(r); where != "" {
			s.writeError(w, r, errorf(CodeBadRequest, "the request's "+where+" is not UTF-8 text without NUL characters; no id or name holds a NUL (%00) or bytes that are not UTF-8"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerSession names the session at /mcp (mcpserver.SessionHeader).
const headerSession = "X-Toolserver-Session"

// badText names the part of r that is not text (path, query, header), or "".
func badText(r *http.Request) string {
	if !isText(r.URL.Path) {
		return "path"
	}
	if q := r.URL.RawQuery; q != "" {
		if !utf8.ValidString(q) {
			return "query"
		}
		if strings.IndexByte(q, '%') >= 0 { // only escapes can hide a NUL or a stray byte
			vals, _ := url.ParseQuery(q) // what does not parse, handlers refuse themselves
			for k, vs := range vals {
				if !isText(k) {
					return "query"
				}
				for _, v := range vs {
					if !isText(v) {
						return "query"
					}
				}
			}
		}
	}
	if v := r.Header.Get(headerSession); v != "" && !isText(v) {
		return headerSession + " header"
	}
	return ""
}

func isText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

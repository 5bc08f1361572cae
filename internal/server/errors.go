package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/toolserverd/toolserverd/internal/store"
)

// Error codes of HTTP errors. Each maps to one status.
const (
	CodeBadRequest       = "bad_request"
	CodeInvalidJSON      = "invalid_json"
	CodeTooLarge         = "body_too_large"
	CodeRequestTimeout   = "request_timeout"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeNotFound         = "not_found"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeRateLimited      = "rate_limited"
	CodeConflict         = "conflict"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
	// CodeClientClosed answers a request whose client went away before its answer
	// was ready; nobody reads it, but the metrics and a half-closed client do.
	CodeClientClosed = "client_closed_request"
)

// statusClientClosedRequest is nginx's 499 "client closed request": not a standard
// status, but the one operators' dashboards already tell apart from server errors.
const statusClientClosedRequest = 499

var statusOf = map[string]int{
	CodeBadRequest:       http.StatusBadRequest,
	CodeInvalidJSON:      http.StatusBadRequest,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeRequestTimeout:   http.StatusRequestTimeout,
	CodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	CodeNotFound:         http.StatusNotFound,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeRateLimited:      http.StatusTooManyRequests,
	CodeConflict:         http.StatusConflict,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeInternal:         http.StatusInternalServerError,
	CodeClientClosed:     statusClientClosedRequest,
}

// apiError is an error with a code and a message safe to show the client.
type apiError struct {
	Code    string
	Message string
	// typ is the JSON type error behind an invalid_json error, for decodeBytes to
	// locate in the body.
	typ *json.UnmarshalTypeError
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, msg string) *apiError { return &apiError{Code: code, Message: msg} }

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers with {"error":{"code","message"}}. Errors that are not apiErrors
// are logged with the request id and shown as "internal error", but for a store that
// is out of space or cannot be reached: 503 unavailable with Retry-After.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case store.IsStorageFull(err):
		s.log.ErrorContext(r.Context(), "the store is out of space", "err", err, "request_id", requestID(r.Context()), "path", r.URL.Path)
		w.Header().Set("Retry-After", "30")
		ae = errorf(CodeUnavailable, "the daemon's store is out of disk space; nothing was recorded for this request. Retry once an operator has freed space (request id "+requestID(r.Context())+")")
	case store.IsUnreachable(err):
		// Neither the request's fault nor a bug: the same request succeeds once the
		// database is back (/readyz says when), so say that rather than "internal error".
		s.log.ErrorContext(r.Context(), "the store is unreachable", "err", err, "request_id", requestID(r.Context()), "path", r.URL.Path)
		w.Header().Set("Retry-After", "5")
		ae = errorf(CodeUnavailable, "the daemon's database cannot be reached just now; try again shortly (request id "+requestID(r.Context())+")")
	case clientGone(r, err):
		// The store read or wait the request needed was cancelled by its client
		// closing the connection (or half-closing it, which net/http takes for the
		// same): neither the daemon's failure nor the request's. Logged as an error and
		// counted as a 500 it would page an operator for every impatient client.
		s.log.DebugContext(r.Context(), "request cancelled: its client went away", "err", err, "request_id", requestID(r.Context()), "path", r.URL.Path)
		ae = errorf(CodeClientClosed, "the request was cancelled: its client closed the connection before the answer was ready")
	default:
		s.log.ErrorContext(r.Context(), "request failed", "err", err, "request_id", requestID(r.Context()), "path", r.URL.Path)
		ae = errorf(CodeInternal, "internal error (request id "+requestID(r.Context())+")")
	}
	status, ok := statusOf[ae.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	var body errorBody
	body.Error.Code = ae.Code
	body.Error.Message = ae.Message
	writeJSON(w, status, body)
}

// clientGone reports whether err comes from r's context having been cancelled by
// net/http because the client went away: cancelled without a cause of the daemon's
// own (a shutdown cancels with session.ErrShuttingDown, a revoked key with its error).
func clientGone(r *http.Request, err error) bool {
	ctx := r.Context()
	return ctx.Err() != nil && errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), context.Canceled)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encoding response", "err", err)
		http.Error(w, `{"error":{"code":"internal","message":"internal error"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

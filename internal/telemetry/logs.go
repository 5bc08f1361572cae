package telemetry

import (
	"context"
	"log/slog"
)

type ctxKey struct{}

// logIDs are the ids a context carries into every log line written with it.
type logIDs struct {
	requestID, sessionID, callID string
}

func idsOf(ctx context.Context) logIDs {
	ids, _ := ctx.Value(ctxKey{}).(logIDs)
	return ids
}

// WithRequestID returns ctx carrying the HTTP request's id.
func WithRequestID(ctx context.Context, id string) context.Context {
	ids := idsOf(ctx)
	ids.requestID = id
	return context.WithValue(ctx, ctxKey{}, ids)
}

// RequestID is the request id ctx carries, or "".
func RequestID(ctx context.Context) string { return idsOf(ctx).requestID }

// WithCall returns ctx carrying a tool call's session and call ids.
func WithCall(ctx context.Context, sessionID, callID string) context.Context {
	ids := idsOf(ctx)
	ids.sessionID, ids.callID = sessionID, callID
	return context.WithValue(ctx, ctxKey{}, ids)
}

// LogHandler adds request_id, session_id and call_id from the context to every record
// logged with one (the *Context methods of slog.Logger), unless the record names them
// already.
type LogHandler struct{ inner slog.Handler }

// NewLogHandler wraps inner.
func NewLogHandler(inner slog.Handler) *LogHandler {
	if h, ok := inner.(*LogHandler); ok {
		return h
	}
	return &LogHandler{inner: inner}
}

// Enabled implements slog.Handler.
func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	ids := idsOf(ctx)
	if ids == (logIDs{}) {
		return h.inner.Handle(ctx, r)
	}
	var has struct{ req, ses, call bool }
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "request_id":
			has.req = true
		case "session_id":
			has.ses = true
		case "call_id":
			has.call = true
		}
		return true
	})
	r = r.Clone()
	if ids.requestID != "" && !has.req {
		r.AddAttrs(slog.String("request_id", ids.requestID))
	}
	if ids.sessionID != "" && !has.ses {
		r.AddAttrs(slog.String("session_id", ids.sessionID))
	}
	if ids.callID != "" && !has.call {
		r.AddAttrs(slog.String("call_id", ids.callID))
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogHandler{inner: h.inner.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{inner: h.inner.WithGroup(name)}
}

package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
)

// clientGoneLog is the logger mcp-go's streamable HTTP server writes to, with its
// errors about writing to a client that went away (a stream it dropped: broken
// pipe, connection reset) lowered to DEBUG. A client giving up on a call drops its
// stream (mcp-go's Go client does so on cancellation) while the call runs on for
// mcp_endpoint.resume_window: each notification then failed to be written and was
// logged at ERROR, naming no session, for what is no fault of the daemon.
func clientGoneLog(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(clientGoneHandler{l.Handler()})
}

type clientGoneHandler struct{ slog.Handler }

func (h clientGoneHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError || !mentionsClientGone(r) {
		return h.Handler.Handle(ctx, r)
	}
	if !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	low := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		low.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, low)
}

func (h clientGoneHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return clientGoneHandler{h.Handler.WithAttrs(as)}
}

func (h clientGoneHandler) WithGroup(name string) slog.Handler {
	return clientGoneHandler{h.Handler.WithGroup(name)}
}

// mentionsClientGone reports whether an error of the record is a write to a
// connection the client closed.
func mentionsClientGone(r slog.Record) bool {
	gone := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny &&
			(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)) {
			gone = true
		}
		return !gone
	})
	return gone
}

package mcpproxy

import (
	"context"
	"log/slog"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// Bounds of what mcp-go logs about one connection. The server decides how often
// mcp-go logs (each event of its stream that cannot be read is a record: some
// 270,000 a second) and what the records quote (a failed request's whole body).
const (
	sdkLogsPerSec = 10
	sdkLogBurst   = 20
)

// sdkLogger is the logger mcp-go gets for one connection: at warning level, at a
// bounded rate, each value redacted (mcp-go quotes the server's URL) and cut at
// maxErrText. said, if not nil, receives the text of each error mcp-go logs, the
// last one kept: some failures it only logs (an SSE endpoint it refuses), and the
// connection attempt that then times out can say why.
func sdkLogger(log *slog.Logger, red *redactor, said *atomic.Pointer[string]) *slog.Logger {
	h := sdkLog{Handler: log.Handler(), min: slog.LevelWarn, redact: red,
		budget: &sdkLogBudget{lim: rate.NewLimiter(sdkLogsPerSec, sdkLogBurst), said: said}}
	return slog.New(h).With("component", "mcp-go")
}

// sdkLog logs mcp-go at one level: it logs at info what an operator does not need
// (it is listening, it retries a stream), and what it calls an error (a stream
// broke, a DELETE failed) is a symptom the proxy reports itself, as "connection
// lost".
type sdkLog struct {
	slog.Handler
	min    slog.Level
	redact *redactor
	budget *sdkLogBudget // shared by the handlers WithAttrs and WithGroup derive
}

type sdkLogBudget struct {
	lim     *rate.Limiter
	dropped atomic.Int64
	said    *atomic.Pointer[string] // the last error logged, or nil
}

func (h sdkLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, min(l, h.min))
}

// Handle passes a record on, if the budget allows, at level min, with its values
// redacted and cut; the first record after some were dropped says how many.
func (h sdkLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && h.budget.said != nil {
		text := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				text += ": " + a.Value.String()
			}
			return true
		})
		text = h.redact.clip(text)
		h.budget.said.Store(&text)
	}
	if !h.budget.lim.Allow() {
		h.budget.dropped.Add(1)
		return nil
	}
	out := slog.NewRecord(r.Time, min(r.Level, h.min), h.redact.clip(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() != slog.KindGroup {
			s := a.Value.String()
			if c := h.redact.clip(s); c != s {
				a.Value = slog.StringValue(c)
			}
		}
		out.AddAttrs(a)
		return true
	})
	if n := h.budget.dropped.Swap(0); n > 0 {
		out.AddAttrs(slog.Int64("dropped_before", n))
	}
	return h.Handler.Handle(ctx, out)
}

func (h sdkLog) WithAttrs(a []slog.Attr) slog.Handler {
	return sdkLog{h.Handler.WithAttrs(a), h.min, h.redact, h.budget}
}

func (h sdkLog) WithGroup(g string) slog.Handler {
	return sdkLog{h.Handler.WithGroup(g), h.min, h.redact, h.budget}
}

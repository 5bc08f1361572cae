package session

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolserverd/toolserverd/internal/telemetry"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// QueueObserver is told how long a call that is not concurrency-safe waited for its
// session's serial lock. An Observer may implement it.
type QueueObserver interface {
	CallQueued(tool string, waited time.Duration)
}

// UseTracer makes the executor record one span per tool call, a child of the span in
// the call's context (the HTTP request's). nil turns tracing off. Call before serving.
func (x *Executor) UseTracer(tp trace.TracerProvider) {
	if tp == nil {
		x.tracer = nil
		return
	}
	x.tracer = tp.Tracer("github.com/toolserverd/toolserverd/internal/session")
}

// beginCall stamps ctx with the call's ids for logs and, with tracing on, starts the
// call's span (ended by finish).
func (x *Executor) beginCall(ctx context.Context, sessionID, tenant string, c *Call) context.Context {
	ctx = telemetry.WithCall(ctx, sessionID, c.ID)
	if x.tracer == nil {
		return ctx
	}
	ctx, c.span = x.tracer.Start(ctx, "tool_call "+c.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("toolserverd.tool.name", c.Name),
			attribute.String("toolserverd.call.id", c.ID),
			attribute.String("toolserverd.tool_call.id", c.ToolCallID),
			attribute.String("toolserverd.session.id", sessionID),
			attribute.String("toolserverd.tenant", tenant),
		))
	return ctx
}

// endCall reports a finished call to the logs (debug) and ends its span.
func (x *Executor) endCall(ctx context.Context, c *Call, name string, res *tool.Result, elapsed time.Duration) {
	outcome := "ok"
	if res.ErrorKind != "" {
		outcome = string(res.ErrorKind)
	} else if res.IsError {
		outcome = "error"
	}
	if x.log != nil && x.log.Enabled(ctx, slog.LevelDebug) {
		x.log.DebugContext(ctx, "tool call finished", "tool", name, "tool_call_id", c.ToolCallID, "outcome", outcome,
			"duration_ms", float64(elapsed.Microseconds())/1000)
	}
	if c.span == nil {
		return
	}
	c.span.SetAttributes(attribute.String("toolserverd.call.outcome", outcome),
		attribute.Float64("toolserverd.call.duration_ms", float64(elapsed.Microseconds())/1000))
	if res.IsError {
		c.span.SetStatus(codes.Error, outcome)
	}
	c.span.End()
	c.span = nil
}

// queued reports the wait for the session's serial lock.
func (x *Executor) queued(ctx context.Context, name string, waited time.Duration) {
	if q, ok := x.obs.(QueueObserver); ok {
		q.CallQueued(name, waited)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Float64("toolserverd.call.queue_wait_ms", float64(waited.Microseconds())/1000))
	}
}

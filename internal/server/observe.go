package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// observeMiddleware gives each request an HTTP server span (continuing the trace of an
// incoming W3C traceparent) when tracing is on, and a debug-level access log line.
// With tracing off and debug logging off it adds nothing to a request.
func (s *Server) observeMiddleware(next http.Handler) http.Handler {
	var tracer trace.Tracer
	if s.Tracer != nil {
		tracer = s.Tracer.Tracer("github.com/toolserverd/toolserverd/internal/server")
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logged := s.log != nil && s.log.Enabled(r.Context(), slog.LevelDebug)
		if tracer == nil && !logged {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		ctx := r.Context()
		var span trace.Span
		if tracer != nil {
			ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path),
				attribute.String("toolserverd.request.id", requestID(ctx)),
			))
			defer span.End()
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		if span != nil {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", rec.code))
			if rec.code >= 500 {
				span.SetStatus(codes.Error, http.StatusText(rec.code))
			}
		}
		if logged {
			s.log.DebugContext(ctx, "request", "method", r.Method, "route", route, "path", r.URL.Path, "status", rec.code,
				"duration_ms", float64(time.Since(start).Microseconds())/1000)
		}
	})
}

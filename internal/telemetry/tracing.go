// Package telemetry holds what the daemon reports about itself beyond its API: the
// OpenTelemetry tracer provider (off by default), store and approval metrics, and the
// log handler that stamps request, session and call ids on every line.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracingConfig turns on OpenTelemetry tracing with an OTLP/HTTP exporter.
type TracingConfig struct {
	Enabled bool
	// Endpoint is the collector's OTLP/HTTP traces URL, e.g.
	// http://otel-collector:4318/v1/traces. A URL without a path gets /v1/traces.
	Endpoint string
	// SampleRatio is the share of new traces recorded (0..1). A request carrying a
	// W3C traceparent follows its caller's sampling decision instead.
	SampleRatio float64
	// ServiceName is the service.name resource attribute.
	ServiceName string
	// InstanceID is the service.instance.id resource attribute (the replica id).
	InstanceID string
	// Log receives OpenTelemetry's own errors (an export the collector refused or
	// that could not reach it) and messages, which would otherwise go to stderr as
	// plain text among the JSON lines. Nil: OpenTelemetry's defaults.
	Log *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c TracingConfig) Validate() error {
	if !c.Enabled {
		return nil
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("tracing.sample_ratio %v is not between 0 and 1", c.SampleRatio)
	}
	if c.ServiceName == "" {
		return errors.New("tracing.service_name is empty")
	}
	if _, err := traceURL(c.Endpoint); err != nil {
		return err
	}
	return nil
}

func traceURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("tracing.endpoint %q is not an http(s) URL", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Tracing is the daemon's tracer provider. Disabled, it is nil-valued: Provider
// returns nil and the components built with it skip tracing entirely.
type Tracing struct {
	sdk *sdktrace.TracerProvider // nil when disabled
}

// NewTracing builds the tracer provider; with tracing disabled it starts nothing.
func NewTracing(ctx context.Context, c TracingConfig) (*Tracing, error) {
	if !c.Enabled {
		return &Tracing{}, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Log != nil {
		// Process-wide, as OpenTelemetry's handlers are: the daemon has one log.
		log := c.Log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: OpenTelemetry error (spans may be lost)", "err", err)
		}))
		otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	}
	endpoint, _ := traceURL(c.Endpoint)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", c.ServiceName)}
	if c.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.InstanceID))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
	)
	return &Tracing{sdk: tp}, nil
}

// Provider is the tracer provider, or nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// ForceFlush exports every finished span now.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

// Shutdown flushes the spans still queued and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

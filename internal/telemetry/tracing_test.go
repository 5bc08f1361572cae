package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// receiver is an OTLP/HTTP trace receiver: it decodes what the exporter posts.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // resource attributes
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{attrs: map[string]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != "POST" || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(req.Body)
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				r.attrs[kv.Key] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) named(prefix string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// attr renders a span attribute as text ("" when absent).
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			return strconv.FormatFloat(v.DoubleValue, 'f', -1, 64)
		}
	}
	return ""
}

// TestTracingExportsSpans runs calls through a daemon with tracing on and checks, at a
// real OTLP/HTTP receiver, one server span per request and under it one span per tool
// call with its attributes, and that an incoming traceparent is continued.
func TestTracingExportsSpans(t *testing.T) {
	rcv := newReceiver(t)
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Tracing.Enabled = true
		c.Tracing.Endpoint = rcv.URL // no path: /v1/traces is added
		c.Tracing.ServiceName = "toolserverd-test"
	})
	sid := createSession(t, d.URL, `{"available_tools":["execute_command","get_server_info"]}`)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	hdr := http.Header{"Traceparent": {"00-" + traceID + "-" + parentID + "-01"}}
	code, _, b := request(t, "POST", d.URL+"/v1/sessions/"+sid+"/tool-calls",
		`{"calls":[{"id":"a","name":"execute_command","arguments":{"command":"echo hi"}},{"id":"b","name":"no_such_tool","arguments":{}}]}`, hdr)
	evs := ndjson(t, b)
	if code != 200 || message(t, evs, "a")["is_error"] != false || message(t, evs, "b")["is_error"] != true {
		t.Fatalf("calls: %d %s", code, b)
	}
	if err := d.App.Tracing.ForceFlush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}

	var server *tracepb.Span
	for _, s := range rcv.named("POST /v1/sessions/{sessionID}/tool-calls") {
		server = s
	}
	if server == nil {
		t.Fatalf("no server span for the tool-calls request; got %d spans", len(rcv.named("")))
	}
	if got := hex.EncodeToString(server.TraceId); got != traceID {
		t.Errorf("server span trace id %s, want the traceparent's %s", got, traceID)
	}
	if got := hex.EncodeToString(server.ParentSpanId); got != parentID {
		t.Errorf("server span parent %s, want the traceparent's %s", got, parentID)
	}
	if server.Kind != tracepb.Span_SPAN_KIND_SERVER || attr(server, "http.route") != "/v1/sessions/{sessionID}/tool-calls" || attr(server, "http.response.status_code") != "200" {
		t.Errorf("server span: kind %v, attributes %v", server.Kind, server.Attributes)
	}
	if rcv.attrs["service.name"] != "toolserverd-test" || rcv.attrs["service.instance.id"] != "test" {
		t.Errorf("resource attributes: %v", rcv.attrs)
	}

	calls := map[string]*tracepb.Span{}
	for _, s := range rcv.named("tool_call ") {
		calls[attr(s, "toolserverd.tool_call.id")] = s
	}
	for id, want := range map[string]struct{ name, outcome string }{
		"a": {"execute_command", "ok"}, "b": {"no_such_tool", "not_found"},
	} {
		s := calls[id]
		if s == nil {
			t.Fatalf("no tool_call span for call %s", id)
		}
		if s.Name != "tool_call "+want.name || !bytes.Equal(s.TraceId, server.TraceId) || !bytes.Equal(s.ParentSpanId, server.SpanId) {
			t.Errorf("call %s: span %q, trace %x parent %x; want a child of the server span %x", id, s.Name, s.TraceId, s.ParentSpanId, server.SpanId)
		}
		if d, err := strconv.ParseFloat(attr(s, "toolserverd.call.duration_ms"), 64); err != nil || d < 0 {
			t.Errorf("call %s: duration_ms %q", id, attr(s, "toolserverd.call.duration_ms"))
		}
		for k, v := range map[string]string{
			"toolserverd.tool.name": want.name, "toolserverd.session.id": sid, "toolserverd.tenant": "default",
			"toolserverd.call.outcome": want.outcome,
		} {
			if got := attr(s, k); got != v {
				t.Errorf("call %s: %s = %q, want %q", id, k, got, v)
			}
		}
		if !strings.HasPrefix(attr(s, "toolserverd.call.id"), "tc_") {
			t.Errorf("call %s: no call id attribute: %v", id, s.Attributes)
		}
	}
	if s := calls["b"]; s != nil && s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed call's span status %v, want error", s.Status)
	}
}

// TestTracingOffStartsNothing checks the default: no tracer provider, no exporter
// goroutine, and requests served without spans.
func TestTracingOffStartsNothing(t *testing.T) {
	d := testdaemon.Start(t, nil)
	if d.App.Tracing.Enabled() || d.App.Tracing.Provider() != nil {
		t.Fatal("tracing is on by default")
	}
	sid := createSession(t, d.URL, `{"available_tools":["execute_command"]}`)
	code, _, b := request(t, "POST", d.URL+"/v1/sessions/"+sid+"/tool-calls", `{"calls":[{"id":"a","name":"execute_command","arguments":{"command":"echo hi"}}]}`,
		http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	if code != 200 || message(t, ndjson(t, b), "a")["is_error"] != false {
		t.Fatalf("call: %d %s", code, b)
	}
	buf := make([]byte, 8<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "go.opentelemetry.io/") {
		t.Fatalf("an OpenTelemetry goroutine runs with tracing off:\n%s", stacks)
	}
}

// TestLogLinesCarryIDs captures a daemon's JSON logs at debug level and checks that a
// call's request and call lines carry its request, session and call ids.
func TestLogLinesCarryIDs(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &out}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := testdaemon.StartWithLog(t, nil, log)
	sid := createSession(t, d.URL, `{"available_tools":["execute_command"]}`)
	code, h, b := request(t, "POST", d.URL+"/v1/sessions/"+sid+"/tool-calls", `{"calls":[{"id":"a","name":"execute_command","arguments":{"command":"echo hi"}}]}`,
		http.Header{"X-Request-Id": {"req-test-1"}})
	if code != 200 || h.Get("X-Request-Id") != "req-test-1" {
		t.Fatalf("call: %d %s", code, b)
	}
	var callID string
	for _, ev := range ndjson(t, b) {
		if ev["type"] == "tool_start" {
			callID, _ = ev["call_id"].(string)
		}
	}
	var reqLine, callLine map[string]any
	eventually(t, "the request's log line", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range strings.Split(out.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil || m["request_id"] != "req-test-1" {
				continue
			}
			switch m["msg"] {
			case "request":
				reqLine = m
			case "tool call finished":
				callLine = m
			}
		}
		return reqLine != nil && callLine != nil
	})
	if reqLine["route"] != "/v1/sessions/{sessionID}/tool-calls" || reqLine["status"] != float64(200) {
		t.Errorf("request line: %v", reqLine)
	}
	if callLine["session_id"] != sid || callLine["call_id"] == nil || callLine["tool"] != "execute_command" || callLine["outcome"] != "ok" {
		t.Errorf("call line: %v", callLine)
	}
	if !strings.HasPrefix(callID, "tc_") || callLine["call_id"] != callID {
		t.Errorf("call line call_id %v, tool_start says %s", callLine["call_id"], callID)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTracingErrorsAreLogged: a collector that refuses the spans is reported in the
// daemon's own JSON log, at warn level. Before, OpenTelemetry's default error handler
// printed it with the standard log package, a plain-text line
// ("2026/11/28 12:33:57 traces export: …") in the middle of the JSON lines on stderr,
// and the daemon's log never said anything.
// status400 finds the HTTP status 400 in a log line, not digits of a longer number.
var status400 = regexp.MustCompile(`(^|[^0-9])400([^0-9]|$)`)

func TestTracingErrorsAreLogged(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "collector says no", http.StatusBadRequest)
	}))
	t.Cleanup(refusing.Close)
	var mu sync.Mutex
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &out}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d := testdaemon.StartWithLog(t, func(c *config.Config) {
		c.Tracing.Enabled = true
		c.Tracing.Endpoint = refusing.URL
	}, log)
	if code, _, b := request(t, "GET", d.URL+"/healthz", "", nil); code != 200 {
		t.Fatalf("healthz: %d %s", code, b)
	}
	// Shutdown exports the queued span, which the collector refuses.
	_ = d.App.Tracing.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	for _, l := range strings.Split(out.String(), "\n") {
		var m map[string]any
		// The status as a number of its own: a timestamp's digits hold "400" too
		// (16:43:56.301404004 made the start-up line match).
		if json.Unmarshal([]byte(l), &m) != nil || !status400.MatchString(l) {
			continue
		}
		if m["level"] != "WARN" || !strings.HasPrefix(m["msg"].(string), "tracing") {
			t.Errorf("export error line: %s; want level WARN and a msg starting with tracing", l)
		}
		return
	}
	t.Fatalf("no log line reports the refused export; log:\n%s", out.String())
}

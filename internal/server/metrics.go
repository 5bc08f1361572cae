package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Metrics are the daemon's Prometheus metrics for HTTP and tool calls. They are
// registered on the registry given, never on the global one.
type Metrics struct {
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	calls        *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	inFlight     prometheus.Gauge
	queueWait    *prometheus.HistogramVec

	// toolsMu: ToolsChanged deletes a removed tool's series while no call is being
	// counted (read-locked there), so a call in flight then cannot bring them back.
	toolsMu sync.RWMutex
	// gone names the tools removed at run time (an MCP server's, its server removed
	// or no longer listing them) and not registered since: late calls of theirs are
	// counted under "unknown".
	gone map[string]bool
}

// NewMetrics creates and registers the metrics. maxCall is the longest a call may run
// (calls.max_timeout): the call duration and queue wait histograms reach past it.
func NewMetrics(reg prometheus.Registerer, maxCall time.Duration) *Metrics {
	buckets := CallBuckets(maxCall)
	m := &Metrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolserverd_http_requests_total", Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolserverd_http_request_duration_seconds", Help: "HTTP request duration by route pattern (whole stream for NDJSON routes).",
			Buckets: reaching(prometheus.ExponentialBuckets(0.0005, 4, 10), maxCall),
		}, []string{"route", "method"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolserverd_tool_calls_total", Help: "Tool calls by tool and outcome (ok or the error kind).",
		}, []string{"tool", "outcome"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolserverd_tool_call_duration_seconds", Help: "Tool call duration by tool, from start to result.",
			Buckets: buckets,
		}, []string{"tool"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolserverd_tool_calls_in_flight", Help: "Tool calls executing now.",
		}),
	}
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "toolserverd_tool_call_queue_wait_seconds", Help: "Time calls of tools that are not concurrency-safe waited for their session's serial lock, by tool.",
		Buckets: buckets,
	}, []string{"tool"})
	reg.MustRegister(m.httpRequests, m.httpDuration, m.calls, m.callDuration, m.inFlight, m.queueWait)
	return m
}

// CallBuckets are the bounds of the call duration histograms: from 100 µs, ×4 each,
// twelve at least (to 419 s) and as many more as it takes to pass maxCall by a tenth
// (a call stopped at its timeout takes a little longer to end), so that a call that
// runs for as long as it may still lands in a finite bucket: 14 for 30 minutes.
func CallBuckets(maxCall time.Duration) []float64 {
	return reaching(prometheus.ExponentialBuckets(0.0001, 4, 12), maxCall)
}

// reaching is b (×4 each) with as many more bounds as it takes to pass maxCall by a
// tenth. The HTTP duration histogram gets it too: a tool-call request's stream lasts
// as long as its calls (131 s was its top bound, below a call's default maximum).
func reaching(b []float64, maxCall time.Duration) []float64 {
	for b[len(b)-1] < 1.1*maxCall.Seconds() {
		b = append(b, b[len(b)-1]*4)
	}
	return b
}

// ToolsChanged deletes the per-tool series of the tools removed, so that /metrics does
// not keep a series for every tool an MCP server ever listed (Prometheus sees a
// counter that ends; if the tool comes back, its counts start again from zero, which
// rate() and increase() handle as a reset). Wire it to toolmgr.Manager.OnChange.
func (m *Metrics) ToolsChanged(removed, added []string) {
	m.toolsMu.Lock()
	defer m.toolsMu.Unlock()
	for _, name := range added {
		delete(m.gone, name)
	}
	for _, name := range removed {
		if m.gone == nil || len(m.gone) >= maxGoneTools {
			// A server that keeps listing new names and removing them must not grow
			// this without bound: forgetting the old names only lets a late call of
			// one of them bring its series back.
			m.gone = map[string]bool{}
		}
		m.gone[name] = true
		m.calls.DeletePartialMatch(prometheus.Labels{"tool": name})
		m.callDuration.DeleteLabelValues(name)
		m.queueWait.DeleteLabelValues(name)
	}
}

// maxGoneTools bounds the names of removed tools kept to label their late calls.
const maxGoneTools = 10000

// toolLabel is name, or "unknown" for a tool removed since; the caller holds toolsMu
// read-locked until its series is updated.
func (m *Metrics) toolLabel(name string) string {
	if m.gone[name] {
		return "unknown"
	}
	return name
}

// CallQueued implements session.QueueObserver.
func (m *Metrics) CallQueued(name string, waited time.Duration) {
	m.toolsMu.RLock()
	defer m.toolsMu.RUnlock()
	m.queueWait.WithLabelValues(m.toolLabel(name)).Observe(waited.Seconds())
}

// CallStarted implements session.Observer.
func (m *Metrics) CallStarted(string) { m.inFlight.Inc() }

// CallFinished implements session.Observer. Calls that never started (unknown tool,
// bad arguments) are counted but were not in flight.
func (m *Metrics) CallFinished(name string, kind tool.ErrorKind, d time.Duration, started bool) {
	if started {
		m.inFlight.Dec()
	}
	outcome := "ok"
	switch {
	case kind.Known():
		outcome = string(kind)
	case kind != "": // a label value per unknown kind would let anyone grow /metrics
		outcome = string(tool.KindFailed)
	}
	m.toolsMu.RLock()
	defer m.toolsMu.RUnlock()
	name = m.toolLabel(name)
	m.calls.WithLabelValues(name, outcome).Inc()
	m.callDuration.WithLabelValues(name).Observe(d.Seconds())
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (to flush streams).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (m *Metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		// RoutePattern joins the pattern anew (two allocations) each time: once.
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" {
				route = p
			}
		}
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		method := methodLabel(r.Method)
		m.httpRequests.WithLabelValues(route, method, strconv.Itoa(rec.code)).Inc()
		m.httpDuration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// methodLabel is the method, or "other" for one outside RFC 9110's: a client may send
// any token, and a label value per made-up method would grow /metrics without bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

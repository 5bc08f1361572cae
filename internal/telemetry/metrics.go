package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreMetrics time store operations by name.
type StoreMetrics struct {
	duration *prometheus.HistogramVec
}

// NewStoreMetrics creates and registers toolserverd_store_operation_duration_seconds.
func NewStoreMetrics(reg prometheus.Registerer) *StoreMetrics {
	m := &StoreMetrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolserverd_store_operation_duration_seconds",
		Help:    "Store operation latency by operation (write_calls is one group-commit transaction).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}, []string{"operation"})}
	reg.MustRegister(m.duration)
	return m
}

// Observe records one operation that began at start.
func (m *StoreMetrics) Observe(op string, start time.Time) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// ApprovalMetrics are the approval request series: decision latency, and the number
// pending counted from the store.
type ApprovalMetrics struct {
	decision *prometheus.HistogramVec
}

// PendingCounter counts the approvals pending in the store, across tenants.
type PendingCounter func(ctx context.Context) (int, error)

// NewApprovalMetrics creates and registers the approval series. Pending approvals are
// counted from the store at scrape time (at most once per cacheFor, each count bounded
// by timeout): with several replicas sharing one store, an approval is created on one
// replica and decided on any, so an in-process count would drift on each of them.
func NewApprovalMetrics(reg prometheus.Registerer, count PendingCounter, cacheFor, timeout time.Duration) *ApprovalMetrics {
	m := &ApprovalMetrics{decision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolserverd_approval_decision_duration_seconds",
		Help:    "Time from an approval request's creation to its decision, by decision.",
		Buckets: prometheus.ExponentialBuckets(0.5, 4, 9),
	}, []string{"decision"})}
	reg.MustRegister(m.decision, &pendingCollector{
		desc: prometheus.NewDesc("toolserverd_approvals_pending",
			"Approval requests waiting for a decision in the store (all tenants; counted at scrape time, cached briefly; absent while the store does not answer the count).", nil, nil),
		upDesc: prometheus.NewDesc("toolserverd_approvals_pending_up",
			"1 if the store answered the last count of pending approvals, 0 if not (toolserverd_approvals_pending is then absent).", nil, nil),
		count: count, cacheFor: cacheFor, timeout: timeout,
	})
	return m
}

// Decided records a decision taken at decided on a request created at created.
func (m *ApprovalMetrics) Decided(decision string, created, decided time.Time) {
	if m == nil {
		return
	}
	m.decision.WithLabelValues(decision).Observe(max(decided.Sub(created), 0).Seconds())
}

type pendingCollector struct {
	desc, upDesc      *prometheus.Desc
	count             PendingCounter
	cacheFor, timeout time.Duration

	mu    sync.Mutex
	at    time.Time // of the last count, whether it succeeded or not
	value float64
	ok    bool // the last count succeeded: value is current
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.upDesc }

// Collect serves the cached count, refreshing it when older than cacheFor. A store
// that does not answer in time does not fail the whole scrape, nor is the last count
// it gave shown as current: the gauge is left out (Prometheus marks it stale) and
// toolserverd_approvals_pending_up says 0 until a count succeeds again.
func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.cacheFor {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		n, err := c.count(ctx)
		cancel()
		c.at = time.Now()
		c.value, c.ok = float64(n), err == nil
	}
	up := 0.0
	if c.ok {
		up = 1
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.value)
	}
	ch <- prometheus.MustNewConstMetric(c.upDesc, prometheus.GaugeValue, up)
}

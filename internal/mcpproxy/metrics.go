package mcpproxy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus series.
type metrics struct {
	serverUp *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	calls    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		serverUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolserverd_mcp_server_up",
			Help: "1 while the MCP server is connected and answering, else 0.",
		}, []string{"server"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolserverd_mcp_server_restarts_total",
			Help: "Connection attempts to an MCP server after its first (reconnections and restarts).",
		}, []string{"server"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolserverd_mcp_calls_total",
			Help: "Tool calls sent to MCP servers, by outcome (ok, error, failed, invalid_args, unavailable, timeout, cancelled).",
		}, []string{"server", "outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.serverUp, err = register(reg, m.serverUp)
	if err != nil {
		return nil, err
	}
	if m.restarts, err = register(reg, m.restarts); err != nil {
		return nil, err
	}
	if m.calls, err = register(reg, m.calls); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name
// (two proxies on one registry share their series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *metrics) up(server string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.serverUp.WithLabelValues(server).Set(v)
}

func (m *metrics) restart(server string) { m.restarts.WithLabelValues(server).Inc() }

func (m *metrics) call(server, outcome string) { m.calls.WithLabelValues(server, outcome).Inc() }

// forget drops a removed server's series.
func (m *metrics) forget(server string) {
	m.serverUp.DeleteLabelValues(server)
	m.restarts.DeleteLabelValues(server)
	m.calls.DeletePartialMatch(prometheus.Labels{"server": server})
}

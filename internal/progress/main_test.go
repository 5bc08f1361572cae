package progress

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolserverd/toolserverd/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// waitLimit bounds every wait in the tests; it only matters when a test fails.
const waitLimit = 10 * time.Second

// newTestHub builds a started hub on a fresh directory and its own registry.
func newTestHub(t testing.TB, edit func(*Config)) (*Hub, *prometheus.Registry) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	reg := prometheus.NewPedanticRegistry()
	h, err := NewHub(cfg, reg)
	if err != nil {
		t.Fatalf("NewHub: %v", err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(h.Stop)
	return h, reg
}

// next returns the next event or fails the test after waitLimit.
func next(t testing.TB, s *Subscription) Event {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(waitLimit):
		t.Fatal("no event within the wait limit")
	}
	return Event{}
}

// pending drains the events already buffered for s without waiting.
func pending(s *Subscription) []Event {
	var evs []Event
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		default:
			return evs
		}
	}
}

// counter reads a counter of the registry by name.
func counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// readAll reads a stream's whole log by repeated Read calls of at most max bytes.
func readAll(t testing.TB, h *Hub, callID, stream string, max int) []byte {
	t.Helper()
	var out []byte
	var off int64
	for {
		data, next, finished, err := h.Read(callID, stream, off, max)
		if err != nil {
			t.Fatalf("Read(%s, %s, %d): %v", callID, stream, off, err)
		}
		if next != off+int64(len(data)) {
			t.Fatalf("Read next = %d, want %d", next, off+int64(len(data)))
		}
		out = append(out, data...)
		off = next
		if finished {
			return out
		}
		if len(data) == 0 {
			t.Fatalf("Read at end of an unfinished call")
		}
	}
}

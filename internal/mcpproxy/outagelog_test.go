package mcpproxy

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// records parses the JSON log lines written to l.
func (l *lockedBuffer) records(t *testing.T) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, rec)
	}
	return out
}

// TestOutageLogReadsAtThreeAM: the daemon logs JSON, where a time.Duration is a
// count of nanoseconds ("retry_in":16395000000), which the on-call engineer reading
// the log of a crashed server had to divide out; the other retry loops of the
// daemon log "1.5s". And the line saying the server is back said nothing of how long
// it was gone: that needed the line of its loss, perhaps hours of log before. Now
// retry_in reads as a duration and the reconnection says down_for.
func TestOutageLogReadsAtThreeAM(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	tools := toolmgr.New()
	m, err := New(Config{Servers: []ServerConfig{stdioEverything(t, "ev")}}, tools, nil, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	h := &harness{m: m, tools: tools}
	h.start(t)
	h.waitState(t, "ev", StateReady, 30*time.Second)
	if err := syscall.Kill(h.stdioPid(t, "ev"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, func() bool { st := h.status(t, "ev"); return st.Restarts >= 1 && st.State == StateReady }) {
		t.Fatalf("ev did not come back: %+v", h.status(t, "ev"))
	}
	var lost, back map[string]any
	for _, rec := range buf.records(t) {
		switch {
		case rec["msg"] == "mcp server: connection lost":
			lost = rec
		case rec["msg"] == "mcp server: connected" && lost != nil:
			back = rec
		}
	}
	if lost == nil || back == nil {
		t.Fatalf("no connection lost and connected lines:\n%s", buf.String())
	}
	if s, ok := lost["retry_in"].(string); !ok {
		t.Errorf("retry_in %v (%T), want a duration such as 250ms", lost["retry_in"], lost["retry_in"])
	} else if _, err := time.ParseDuration(s); err != nil {
		t.Errorf("retry_in %q: %v", s, err)
	}
	if s, ok := back["down_for"].(string); !ok {
		t.Errorf("connected after the loss: %v, want down_for", back)
	} else if d, err := time.ParseDuration(s); err != nil || d <= 0 {
		t.Errorf("down_for %q (%v), want a positive duration", s, err)
	}
}

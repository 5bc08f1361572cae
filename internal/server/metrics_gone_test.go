package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRemovedToolNamesBounded: the names of removed tools kept to label their late
// calls "unknown" are bounded, so an upstream that lists ever new tool names and
// removes them cannot grow the daemon's memory without end.
func TestRemovedToolNamesBounded(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), time.Minute)
	for i := range 3 * maxGoneTools {
		m.ToolsChanged([]string{fmt.Sprintf("mcp__hostile__t%d", i)}, nil)
	}
	if n := len(m.gone); n > maxGoneTools {
		t.Fatalf("%d removed names kept, want at most %d", n, maxGoneTools)
	}
	m.ToolsChanged([]string{"mcp__s__gone"}, nil)
	if m.toolLabel("mcp__s__gone") != "unknown" || m.toolLabel("mcp__s__kept") != "mcp__s__kept" {
		t.Error("the latest removed tool is not labelled unknown, or a present one is")
	}
}

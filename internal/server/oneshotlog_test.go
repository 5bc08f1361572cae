package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestOneShotWhitelistWarningsLogOnce: a one-shot request whose inline session names
// thousands of tools that do not exist (names it chooses, as long as it likes) writes
// one bounded log line, not one line per name. Before, each unknown name was an info
// line quoting it: a 900 KB request wrote 1.7 MB of log, so one agent key could flood
// the daemon's log at its request rate.
func TestOneShotWhitelistWarningsLogOnce(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	d := startDaemon(t, daemonOpts{infoLog: &logs})
	names := make([]string, 0, 1001)
	for i := range 1000 {
		names = append(names, fmt.Sprintf("no_such_tool_%04d_%s", i, strings.Repeat("x", 200)))
	}
	names = append(names, "echo")
	code, evs := d.stream("/v1/tool-calls", map[string]any{
		"session": map[string]any{"available_tools": names},
		"calls":   []map[string]any{{"id": "c1", "name": "echo", "arguments": map[string]any{"text": "hi"}}},
	})
	if code != 200 || messages(t, evs)["c1"].m["is_error"] != false {
		t.Fatalf("one-shot call: %d %v", code, evs)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "no_such_tool_") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines name the unknown tools, want 1", len(lines))
	}
	if n := len(lines[0]); n > 4096 {
		t.Errorf("the line is %d bytes, want at most 4096: %.300s…", n, lines[0])
	}
	if !strings.Contains(lines[0], `"warnings":1000`) {
		t.Errorf("the line does not count the 1000 warnings: %.600s", lines[0])
	}
}

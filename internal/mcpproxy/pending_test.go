package mcpproxy

import (
	"strings"
	"testing"
	"time"
)

// TestPending: which declared servers, not connected now, a whitelist entry names. A
// ready server's tools are registered (nothing is pending), a disabled one never
// connects, a name of no server or one no tool could have is nobody's; a server
// making its first attempt is starting in the summary, one whose attempts failed is
// down but not starting.
func TestPending(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{MinBackoff: time.Minute, MaxBackoff: time.Minute, Servers: []ServerConfig{
		stdioEverything(t, "good"),
		{Name: "slow", Transport: TransportSSE, URL: "http://" + hangingListener(t) + "/sse", ConnectTimeout: time.Minute, Enabled: true},
		{Name: "slow2", Transport: TransportSSE, URL: "http://" + hangingListener(t) + "/sse", ConnectTimeout: time.Minute, Enabled: true},
		{Name: "missing", Transport: TransportStdio, Command: "/nonexistent/mcp-server", Enabled: true},
		{Name: "off", Transport: TransportStdio, Command: "node", Enabled: false},
		{Name: "own", Transport: TransportSSE, URL: "http://" + hangingListener(t) + "/sse", ConnectTimeout: time.Minute, Enabled: true, Prefix: "jira_"},
	}})
	h.start(t)
	h.waitState(t, "good", StateReady, 30*time.Second)
	h.waitState(t, "missing", StateFailed, 10*time.Second)

	connecting := func(s string) string { return "mcp server " + s + " is connecting" }
	failed := "mcp server missing is down (failed) and is retried"
	cases := []struct {
		entry   string
		pattern bool
		want    []string
	}{
		{"mcp__slow__echo", false, []string{connecting("slow")}},
		{"mcp__slow2__echo", false, []string{connecting("slow2")}},
		{"jira_create", false, []string{connecting("own")}},
		{"mcp__missing__echo", false, []string{failed}},
		{"mcp__good__echo", false, nil},
		{"mcp__good__nope", false, nil},
		{"mcp__off__echo", false, nil},
		{"mcp__nope__echo", false, nil},
		{"mcp__slow__bad name", false, nil},
		{"mcp__slow__*", true, []string{connecting("slow")}},
		{"mcp__s*", true, []string{connecting("slow"), connecting("slow2")}},
		{"mcp__good__*", true, nil},
		{"*", true, []string{failed, connecting("own"), connecting("slow"), connecting("slow2")}},
	}
	for _, c := range cases {
		if got := h.m.Pending(c.entry, c.pattern); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Pending(%q) = %q, want %q", c.entry, got, c.want)
		}
	}
	sum := h.m.Summary()
	if got := strings.Join(sum.Starting, " "); got != "own slow slow2" {
		t.Errorf("starting = %q, want own slow slow2 (summary %+v)", got, sum)
	}
	if got := strings.Join(sum.Down, " "); got != "missing own slow slow2" {
		t.Errorf("down = %q, want missing own slow slow2", got)
	}
}

// TestPendingBareNames: with unprefixed names (prefix modes on_collision and never) a
// name cannot be told apart from a typo before the server lists its tools.
func TestPendingBareNames(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{PrefixOnCollision, PrefixNever} {
		h := newHarness(t, Config{PrefixMode: mode, Servers: []ServerConfig{
			{Name: "slow", Transport: TransportSSE, URL: "http://" + hangingListener(t) + "/sse", ConnectTimeout: time.Minute, Enabled: true},
		}})
		h.start(t)
		for _, entry := range []string{"echo", "mcp__slow__echo"} {
			if got := h.m.Pending(entry, false); got != nil {
				t.Errorf("%s: Pending(%q) = %q, want none", mode, entry, got)
			}
		}
	}
}

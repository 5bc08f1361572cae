package mcpproxy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// pidRecorder returns a shell prefix that appends the shell's pid to a file before
// exec'ing the rest, and a function reading the pids recorded so far: how a test
// finds children that never became a connection.
func pidRecorder(t *testing.T) (prefix string, pids func() []int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pids")
	return `echo $$ >> ` + file + `; exec `, func() []int {
		b, _ := os.ReadFile(file)
		var out []int
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
}

// TestStdioUpstreamNeverInitializes: a child that reads its stdin and never answers
// fails each attempt at the connect timeout with an error saying so, is killed each
// time (no child piles up), and never holds up a good server or its calls.
func TestStdioUpstreamNeverInitializes(t *testing.T) {
	t.Parallel()
	prefix, pids := pidRecorder(t)
	h := newHarness(t, Config{MaxBackoff: 300 * time.Millisecond, Servers: []ServerConfig{
		stdioEverything(t, "good"),
		{Name: "mute", Transport: TransportStdio, Command: "sh", Enabled: true, ConnectTimeout: 700 * time.Millisecond,
			Args: []string{"-c", prefix + `node -e 'process.stdin.on("data", () => {})'`}},
	}})
	h.start(t)
	h.waitState(t, "good", StateReady, 30*time.Second)
	wantText(t, h.call(t.Context(), t, "mcp__good__echo", `{"message":"unaffected"}`, nil), "Echo: unaffected")

	var st ServerStatus
	if !eventually(20*time.Second, func() bool { st = h.status(t, "mute"); return st.Restarts >= 2 && len(pids()) >= 3 }) {
		t.Fatalf("mute: restarts %d, %d children started; want repeated attempts", st.Restarts, len(pids()))
	}
	if st.State == StateReady || !strings.Contains(st.LastError, "not connected within 700ms") {
		t.Errorf("mute: state %s, last error %q; want a failed attempt naming the connect timeout", st.State, st.LastError)
	}
	if st.Tools != 0 {
		t.Errorf("mute has %d tools registered", st.Tools)
	}
	// Every child but the one of the attempt under way has been killed and reaped.
	all := pids()
	alive := 0
	for _, pid := range all {
		if processAlive(pid) {
			alive++
		}
	}
	if alive > 1 {
		t.Errorf("%d of %d children of the mute server are still alive; want at most the current attempt's", alive, len(all))
	}
	h.m.Stop()
	for _, pid := range pids() {
		if processAlive(pid) {
			t.Errorf("child %d still alive after Stop", pid)
		}
	}
}

// TestStdioUpstreamWritesGarbage: a child whose stdout is not JSON-RPC never becomes
// ready and says why; one that prints a banner line before a real server still
// connects and works.
func TestStdioUpstreamWritesGarbage(t *testing.T) {
	t.Parallel()
	prefix, pids := pidRecorder(t)
	script := npmPackage(t, "server-everything")
	// A shell, not node, writes the garbage: node's start took longer than the connect
	// timeout on a loaded CI machine, and the attempt saw no line at all.
	garbage := filepath.Join(t.TempDir(), "garbage.sh")
	if err := os.WriteFile(garbage, []byte(`while :; do printf '\000\377{not json]]\n<html>garbage</html>\n'; printf '%070000d\n' 0; sleep 0.02; done`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{MaxBackoff: 300 * time.Millisecond, Servers: []ServerConfig{
		{Name: "garbage", Transport: TransportStdio, Command: "sh", Enabled: true, ConnectTimeout: 1500 * time.Millisecond,
			Args: []string{"-c", prefix + "sh " + garbage}},
		{Name: "banner", Transport: TransportStdio, Command: "sh", Enabled: true,
			Args: []string{"-c", `echo "Welcome to my MCP server v1 {"; echo '{"jsonrpc":"2.0","method":"bogus"'; exec node "$0" stdio`, script}},
	}})
	h.start(t)
	h.waitState(t, "banner", StateReady, 30*time.Second)
	wantText(t, h.call(t.Context(), t, "mcp__banner__echo", `{"message":"after the banner"}`, nil), "Echo: after the banner")

	var st ServerStatus
	if !eventually(20*time.Second, func() bool { st = h.status(t, "garbage"); return st.Restarts >= 2 }) {
		t.Fatalf("garbage: restarts %d; want repeated attempts", st.Restarts)
	}
	// mcp-go skips lines that are not JSON-RPC without a word: the error must show
	// the operator what the server wrote, or all it says is "context canceled".
	if st.State == StateReady || !strings.Contains(st.LastError, "not JSON-RPC") || !strings.Contains(st.LastError, "{not json]]") ||
		strings.Contains(st.LastError, "raise it") {
		t.Errorf("garbage: state %s, last error %q; want failed, quoting the first line that is not JSON-RPC (and not advising a longer connect_timeout)", st.State, st.LastError)
	}
	t.Logf("garbage server: %s", st.LastError)
	if _, ok := h.tools.Lookup("mcp__garbage__echo"); ok {
		t.Error("a tool of the garbage server is registered")
	}
	// The daemon side is unhurt: the good server still answers.
	res := h.call(t.Context(), t, "mcp__banner__get-sum", `{"a":2,"b":3}`, nil)
	wantText(t, res, "5")
	if res.IsError {
		wantKind(t, res, tool.KindUnavailable)
	}
	h.m.Stop()
	for _, pid := range pids() {
		if processAlive(pid) {
			t.Errorf("garbage child %d still alive after Stop", pid)
		}
	}
}

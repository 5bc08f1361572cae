package mcpproxy

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// strayAfterConnect is a stdio MCP server in sh that connects cleanly, then answers
// tools/call with a log line on stdout and its answer behind a log prefix, which
// mcp-go skips as not JSON-RPC: the answer never comes.
const strayAfterConnect = `while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
  *'"method":"initialize"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"stray","version":"1"}}}' ;;
  *'"method":"tools/list"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}' ;;
  *'"method":"ping"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{}}' ;;
  *'"method":"tools/call"'*) echo "INFO handling call $id"; echo 'INFO {"jsonrpc":"2.0","id":'"$id"',"result":{"content":[]}}' ;;
  esac
done`

// TestStdioStrayAfterConnect: a stdio server that writes non-JSON on stdout only
// after connecting, losing a call's answer in it, made the call end in a plain
// timeout; it now quotes the first stray line of the call and says logs go to
// stderr.
func TestStdioStrayAfterConnect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		{Name: "stray", Transport: TransportStdio, Command: "sh", Args: []string{"-c", strayAfterConnect},
			CallTimeout: time.Second, Enabled: true}}})
	h.start(t)
	h.waitState(t, "stray", StateReady, 20*time.Second)
	var before string
	for i := range 2 { // the second call quotes its own line, not the first call's
		res := h.call(t.Context(), t, "mcp__stray__echo", `{}`, nil)
		wantKind(t, res, tool.KindTimeout)
		text := res.Text()
		if !strings.Contains(text, `"INFO handling call `) || !strings.Contains(text, "stderr") {
			t.Fatalf("call %d: %q; want the timeout to quote the stray line and say logs go to stderr", i, text)
		}
		line := text[strings.Index(text, `"INFO handling call `):]
		line = line[:strings.Index(line[1:], `"`)+2]
		if line == before {
			t.Errorf("call %d quotes %s, the line of the call before", i, line)
		}
		before = line
		t.Logf("call %d: %s", i, text)
	}
}

// TestStdioStrayLinesLogged: the lines a stdio server writes on stdout that are not
// JSON-RPC, skipped by mcp-go, were only ever quoted in a call's timeout; they are
// logged, naming the server.
func TestStdioStrayLinesLogged(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	h := &harness{tools: toolmgr.New(), reg: prometheus.NewRegistry()}
	m, err := New(Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		{Name: "stray", Transport: TransportStdio, Command: "sh", Args: []string{"-c", strayAfterConnect},
			CallTimeout: time.Second, Enabled: true}}}, h.tools, nil, slog.New(slog.NewTextHandler(&buf, nil)), h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	t.Cleanup(m.Stop)
	h.start(t)
	h.waitState(t, "stray", StateReady, 20*time.Second)
	wantKind(t, h.call(t.Context(), t, "mcp__stray__echo", `{}`, nil), tool.KindTimeout)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var line string
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.Contains(l, "INFO handling call") {
				line = l
			}
		}
		if strings.Contains(line, "mcp_server=stray") && strings.Contains(line, "not JSON-RPC") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line naming the server quotes the stray line; log:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStrayLogBounded: a server that writes nothing but stray lines costs at most a
// burst of log lines and then one a second, saying how many were not logged.
func TestStrayLogBounded(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var s strayLines
	for i := range 1000 {
		s.add(log, fmt.Sprintf("noise %d", i))
	}
	logged := strings.Count(buf.String(), "not JSON-RPC")
	if logged < strayLogBurst || logged > strayLogBurst+2 {
		t.Fatalf("logged %d of 1000 stray lines at once; want the burst, %d", logged, strayLogBurst)
	}
	if _, n := s.since(0); n != 1000 {
		t.Fatalf("counted %d stray lines, want 1000 (the timeout note counts them all)", n)
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share: it keeps
// every log line, for tests that look for what must or must not be logged.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

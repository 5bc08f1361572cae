package mcpproxy

import (
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
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

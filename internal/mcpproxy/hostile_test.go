package mcpproxy

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

const hostileServerEnv = "TOOLSERVERD_TEST_HOSTILE_MCP"

// serveHostileStdio is a stdio MCP server written by hand (raw JSON-RPC lines, no
// SDK) that misbehaves as its mode says. Tests start the test binary itself as it.
//
//   - deaf: answers the handshake and tools/list, then never reads its stdin again.
//   - bigline: answers tools/call "big" with one line of 200 MiB.
func serveHostileStdio(mode string) {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	tools := []map[string]any{
		{"name": "echo", "inputSchema": map[string]any{"type": "object"}},
		{"name": "big", "inputSchema": map[string]any{"type": "object"}},
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			os.Exit(0)
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &req) != nil || len(req.ID) == 0 {
			continue
		}
		answer := func(result any) {
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		switch req.Method {
		case "initialize":
			answer(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "hostile-" + mode, "version": "1"}})
		case "tools/list":
			answer(map[string]any{"tools": tools})
			if mode == "deaf" {
				select {}
			}
		case "ping":
			answer(map[string]any{})
		case "tools/call":
			switch req.Params.Name {
			case "big":
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[{"type":"text","text":"`)
				chunk := strings.Repeat("x", 1<<20)
				for range 200 {
					out.WriteString(chunk)
				}
				out.WriteString(`"}]}}` + "\n")
				out.Flush()
			default:
				b, _ := json.Marshal(req.Params.Arguments)
				answer(map[string]any{"content": []map[string]any{{"type": "text", "text": "echo " + string(b)}}})
			}
		}
	}
}

func hostileServer(t *testing.T, name, mode string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, Transport: TransportStdio, Command: exe, Enabled: true,
		Env: map[string]string{hostileServerEnv: mode}}
}

// TestStdioServerStopsReading: a server that stops reading its stdin blocks the
// write of a call's arguments once the pipe is full. The call ends at its deadline,
// the health check still runs (and finds the server dead), and Stop returns.
func TestStdioServerStopsReading(t *testing.T) {
	t.Parallel()
	cfg := hostileServer(t, "deaf", "deaf")
	cfg.CallTimeout = time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: 300 * time.Millisecond, MaxBackoff: time.Hour, MinBackoff: time.Hour})
	h.start(t)
	h.waitState(t, "deaf", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "deaf")

	// More than a pipe holds.
	args := `{"pad":"` + strings.Repeat("p", 1<<20) + `"}`
	start := time.Now()
	res := h.call(t.Context(), t, "mcp__deaf__echo", args, nil)
	if !res.IsError || (res.ErrorKind != tool.KindTimeout && res.ErrorKind != tool.KindUnavailable) {
		t.Fatalf("call to a deaf server: is_error=%v kind=%q (%s)", res.IsError, res.ErrorKind, res.Text())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("call took %s, want about its 1s timeout", took)
	}
	st := h.waitState(t, "deaf", StateFailed, 10*time.Second)
	t.Logf("deaf server: %s", st.LastError)
	if !eventually(5*time.Second, func() bool { return !processAlive(pid) }) {
		t.Errorf("deaf child %d still alive after it was found dead", pid)
	}
	stopped := make(chan struct{})
	go func() {
		h.m.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop still waiting 10s later on a server that stopped reading its stdin")
	}
}

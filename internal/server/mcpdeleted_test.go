package server_test

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// TestMCPSessionsEndWithTheirSession checks the MCP sessions bound to a session end
// when the session is deleted (DELETE /v1/sessions/{id}), event stream included.
// Before, each one whose client had opened its event stream kept a goroutine (mcp-go's
// listening pump), its replay buffer and its place under mcp_endpoint.max_sessions for
// the whole session_idle_ttl (30 min): its client could not end it either, as every
// request naming it, its DELETE included, was answered 404 "session not found".
// Not parallel: it counts goroutines of the whole process.
func TestMCPSessionsEndWithTheirSession(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	const clients = 3
	for range clients {
		mcpSID := mcpInitialize(t, client, d.url+"/mcp", sess)
		// Open the client's event stream, as clients do after initialize, then drop it.
		req, _ := http.NewRequest(http.MethodGet, d.url+"/mcp", nil)
		req.Header = mcpHeaders(sess, mcpSID)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /mcp: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if n := pumps(); n < clients {
		t.Fatalf("%d listening pumps run for %d MCP sessions with an event stream", n, clients)
	}
	if code, _, body := d.do(http.MethodDelete, "/v1/sessions/"+sess, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE session: %d %s", code, body)
	}
	for deadline := time.Now().Add(30 * time.Second); pumps() > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d MCP sessions of a deleted session still run their listening pump", pumps())
		}
	}
}

// pumps counts the goroutines of mcp-go's per-session listening pumps.
func pumps() int {
	buf := make([]byte, 1<<22)
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("startListeningPump.func1("))
}

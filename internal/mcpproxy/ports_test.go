package mcpproxy

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPServerRestartWaitsForItsPort: a server-everything restarted on its port
// while another listener of the test run holds it for a moment comes up there once
// the port is free, instead of the test going on against the other listener (the
// old readiness check only dialled the port) with no server behind it.
func TestHTTPServerRestartWaitsForItsPort(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"streamableHttp", "sse"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv := startHTTPServer(t, mode, 0)
			port := srv.port
			srv.kill()
			var squatter net.Listener
			if !eventually(5*time.Second, func() bool {
				var err error
				squatter, err = net.Listen("tcp", srv.addr())
				return err == nil
			}) {
				t.Fatalf("could not take port %d after the server died", port)
			}
			released := make(chan struct{})
			go func() {
				defer close(released)
				time.Sleep(time.Second)
				squatter.Close()
			}()
			srv = startHTTPServer(t, mode, port)
			<-released
			if srv.port != port {
				t.Fatalf("restarted on port %d, want %d", srv.port, port)
			}
			// server-everything itself answers there.
			client := &http.Client{Timeout: 10 * time.Second}
			var resp *http.Response
			var err error
			if mode == "sse" {
				resp, err = client.Get(srv.url())
			} else {
				req, _ := http.NewRequest("POST", srv.url(), strings.NewReader(
					`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err = client.Do(req)
			}
			if err != nil {
				t.Fatalf("server-everything %s restarted on port %d does not answer: %v", mode, port, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("server-everything %s restarted on port %d: %s", mode, port, resp.Status)
			}
		})
	}
}

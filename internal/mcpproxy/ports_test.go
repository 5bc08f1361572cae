package mcpproxy

import (
	"net"
	"net/http"
	"path/filepath"
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
			released := holdPortASecond(t, srv.addr())
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

// holdPortASecond listens on addr, as another test's listener that took the port
// would, and closes the listener a second later (the channel closes then).
func holdPortASecond(t *testing.T, addr string) <-chan struct{} {
	t.Helper()
	var squatter net.Listener
	if !eventually(5*time.Second, func() bool {
		var err error
		squatter, err = net.Listen("tcp", addr)
		return err == nil
	}) {
		t.Fatalf("could not take %s after its server died", addr)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(time.Second)
		squatter.Close()
	}()
	return released
}

// TestGoSDKServerRestartWaitsForItsPort: the same for the go-sdk server, which
// exited at once when its port was taken.
func TestGoSDKServerRestartWaitsForItsPort(t *testing.T) {
	t.Parallel()
	notes := filepath.Join(t.TempDir(), "notes")
	srv := startGoSDKServer(t, "http", "0", notes)
	port := srv.port
	srv.kill()
	released := holdPortASecond(t, "127.0.0.1:"+port)
	srv = startGoSDKServer(t, "http", port, notes)
	<-released
	if srv.port != port {
		t.Fatalf("restarted on port %s, want %s", srv.port, port)
	}
	req, _ := http.NewRequest("POST", srv.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("the go-sdk server restarted on port %s does not answer: %v", port, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the go-sdk server restarted on port %s: %s", port, resp.Status)
	}
}

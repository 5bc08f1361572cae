package mcpproxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// TestHTTPRedirectToAnotherOrigin: an upstream that redirects its MCP endpoint to
// another origin is refused, and the server configured headers (credentials) never
// reach that origin.
func TestHTTPRedirectToAnotherOrigin(t *testing.T) {
	t.Parallel()
	var leaked atomic.Int32
	real := mcpserver.NewStreamableHTTPServer(mcpserver.NewMCPServer("elsewhere", "1"))
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			leaked.Add(1)
		}
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		other.CloseClientConnections()
		other.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = real.Shutdown(ctx)
	})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(func() {
		redirector.CloseClientConnections()
		redirector.Close()
	})

	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		name := strings.ReplaceAll(transport, "_", "-")
		h := newHarness(t, Config{MaxBackoff: time.Hour, MinBackoff: time.Hour, Servers: []ServerConfig{{
			Name: name, Transport: transport, URL: redirector.URL + "/mcp", Enabled: true,
			Headers: map[string]string{"X-Api-Key": "secret"}, ConnectTimeout: 3 * time.Second}}})
		h.start(t)
		st := h.waitState(t, name, StateFailed, 10*time.Second)
		if !strings.Contains(st.LastError, "redirect") {
			t.Errorf("%s: last error %q does not name the redirect", transport, st.LastError)
		}
		h.m.Stop()
	}
	if n := leaked.Load(); n > 0 {
		t.Errorf("the configured headers reached another origin %d times", n)
	}
}

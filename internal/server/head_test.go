package server_test

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestHeadOnEveryGetRoute: every GET route of api/openapi.yaml answers HEAD (RFC 9110
// §9.3.2) with the status and Content-Type of its GET and no body, and the streaming
// ones (event streams, the MCP endpoint's listening stream), whose GET stays open,
// end their HEAD at once. The contract documents HEAD once, as implied by GET.
func TestHeadOnEveryGetRoute(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	sess := d.createSession(map[string]any{"available_tools": []string{"block", "echo"}})["id"].(string)
	// A call that runs until the test ends: its event and progress streams stay open.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	callID := d.startBlocked(ctx, sess)
	defer close(d.tools.release)
	mcpSID := mcpInitialize(t, http.DefaultClient, d.url+"/mcp", sess)
	args := strings.NewReplacer("{sessionID}", sess, "{callID}", callID, "{toolCallID}", "b",
		"{name}", "nosuchskill", "{approvalID}", "apr_nosuch", "{path}", "index.html")

	// A client of one connection that shows redirects instead of following them. A
	// HEAD whose handler went on streaming (into nothing) would hold its connection:
	// the request after it would wait for ever, and the timeout fail it.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel() // ends a GET stream once its head is read
		req, _ := http.NewRequestWithContext(ctx, method, d.url+path, nil)
		req.Header = mcpHeaders(sess, mcpSID)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var body []byte
		if method == http.MethodHead {
			if body, err = io.ReadAll(resp.Body); err != nil {
				t.Fatalf("HEAD %s: %v", path, err)
			}
		}
		return resp, body
	}
	var routes []string
	for p, item := range loadSpec(t)["paths"].(map[string]any) {
		if _, ok := item.(map[string]any)["get"]; ok {
			routes = append(routes, p)
		}
	}
	sort.Strings(routes)
	streams := 0
	for _, route := range routes {
		path := args.Replace(route)
		get, _ := do(http.MethodGet, path)
		head, body := do(http.MethodHead, path)
		if head.StatusCode != get.StatusCode || head.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("HEAD %s: %d, GET %d", route, head.StatusCode, get.StatusCode)
		}
		if h, g := head.Header.Get("Content-Type"), get.Header.Get("Content-Type"); h != g {
			t.Errorf("HEAD %s: Content-Type %q, GET %q", route, h, g)
		}
		if len(body) != 0 {
			t.Errorf("HEAD %s: a body of %d bytes", route, len(body))
		}
		// The connection is free for the next request.
		next, err := c.Head(d.url + "/healthz")
		if err != nil {
			t.Fatalf("HEAD %s held its connection: the next request got %v", route, err)
		}
		next.Body.Close()
		ct := get.Header.Get("Content-Type")
		if get.StatusCode == http.StatusOK && (ct == "application/x-ndjson" || ct == "text/event-stream") {
			streams++
		}
	}
	// Both event streams, the progress stream and the two MCP endpoints.
	if streams != 5 {
		t.Errorf("%d streaming GET routes answered 200; the test set up 5", streams)
	}
}

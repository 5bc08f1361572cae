package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClientGoneIsNotAnInternalError checks a request whose client closed its
// connection before the answer was ready (net/http then cancels the request's
// context, as it does for a client that half-closes after sending) is neither logged
// as an error nor counted as a 500: the store read it needed was cancelled by the
// client, not failed by the daemon. Before, every such request wrote an error line
// "request failed … context canceled" and a 500 to the metrics, and a client that
// half-closed its connection read "internal error". On PostgreSQL the cancelled
// query must not read as the database being unreachable (503) either.
func TestClientGoneIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	onBothStores(t, nil, func(t *testing.T, opts daemonOpts) {
		var logs syncBuffer
		opts.errorLog = &logs
		d := startDaemon(t, opts)
		clientGone(t, d, &logs)
	})
}

func clientGone(t *testing.T, d *daemon, logs *syncBuffer) {
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+sess+"/tool-calls", `{"calls":[{"id":"c1","name":"echo","arguments":{"text":"hi"}}]}`)
	tc := messages(t, evs)["c1"].str("call_id")
	h := d.app.API.Handler()
	for _, path := range []string{
		"/v1/tool-calls/" + tc,
		"/v1/tool-calls/" + tc + "/progress",
		"/v1/sessions/" + sess + "/tool-calls/c1",
		"/v1/sessions/" + sess + "/tool-calls",
		"/v1/tool-calls",
		"/v1/approvals",
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // what net/http does when the client goes away
		req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
		req.Host = "localhost"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 499 && rec.Code != http.StatusOK {
			t.Errorf("GET %s with its client gone: %d %s", path, rec.Code, rec.Body)
		}
		if rec.Code == 499 && !strings.Contains(rec.Body.String(), `"client_closed_request"`) {
			t.Errorf("GET %s: 499 without its code: %s", path, rec.Body)
		}
	}
	if l := logs.String(); strings.Contains(l, "request failed") {
		t.Errorf("a client going away was logged as an error:\n%s", l)
	}
	_, _, metrics := d.do("GET", "/metrics", nil)
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "toolserverd_http_requests_total{") && strings.Contains(line, `code="500"`) {
			t.Errorf("counted as a server error: %s", line)
		}
	}
}

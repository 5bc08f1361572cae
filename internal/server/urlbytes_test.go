package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestIDsWithNULOrInvalidUTF8 checks ids and query values holding a NUL character or
// bytes that are not UTF-8 (%00, %C3%28) get a 400 naming the problem on both stores.
// No id the daemon gives holds either, but PostgreSQL refuses such text outright
// (SQLSTATE 22021): before, on PostgreSQL every route with such an id, and
// GET /v1/approvals?session_id=%00 and GET /v1/audit?action=%FF, answered 500
// "internal error" and logged an error, where SQLite answered 404.
func TestIDsWithNULOrInvalidUTF8(t *testing.T) {
	t.Parallel()
	onBothStores(t, nil, func(t *testing.T, opts daemonOpts) {
		var logs syncBuffer
		opts.errorLog = &logs
		d := startDaemon(t, opts)
		sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
		for _, bad := range []string{"a%00b", "%C3%28", "ses_%FF"} {
			for _, r := range []struct{ method, path string }{
				{"GET", "/v1/sessions/" + bad},
				{"DELETE", "/v1/sessions/" + bad},
				{"GET", "/v1/sessions/" + bad + "/tools"},
				{"POST", "/v1/sessions/" + bad + "/tool-calls"},
				{"GET", "/v1/sessions/" + sess + "/tool-calls/" + bad},
				{"POST", "/v1/sessions/" + bad + "/interrupt"},
				{"GET", "/v1/sessions/" + bad + "/events"},
				{"POST", "/v1/sessions/" + bad + "/mcp"},
				{"GET", "/v1/tool-calls/" + bad},
				{"GET", "/v1/tool-calls/" + bad + "/progress"},
				{"POST", "/v1/tool-calls/" + bad + "/cancel"},
				{"GET", "/v1/approvals/" + bad},
				{"POST", "/v1/approvals/" + bad + "/decision"},
				{"POST", "/v1/keys/" + bad + "/revoke"},
				{"GET", "/v1/approvals?session_id=" + bad},
				{"GET", "/v1/audit?action=" + bad},
				{"GET", "/v1/tool-calls?session_id=" + bad},
			} {
				var body any
				if r.method == "POST" {
					body = `{}`
				}
				code, _, out := d.do(r.method, r.path, body)
				var e struct {
					Error struct{ Code, Message string }
				}
				_ = json.Unmarshal(out, &e)
				if code != http.StatusBadRequest || e.Error.Code != "bad_request" || !strings.Contains(e.Error.Message, "UTF-8") {
					t.Errorf("%s %s: %d %s", r.method, r.path, code, out)
				}
			}
		}
		// The MCP endpoint's session header reaches the store the same way.
		h := mcpHeaders("ses_\xff", "")
		code, _, out := send(t, http.DefaultClient, "POST", d.url+"/mcp", h, mcpInitializeBody)
		if code != http.StatusBadRequest && code != http.StatusNotFound {
			t.Errorf("POST /mcp with X-Toolserver-Session ses_\\xff: %d %s", code, out)
		}
		if l := logs.String(); l != "" {
			t.Errorf("bad bytes in a request were logged as errors:\n%s", l)
		}
	})
}

package server_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// TestApprovalWhosePolicyCannotBeCheckedStaysPending: approving a waiting call
// re-checks the policy (a deny rule added meanwhile wins). When that check cannot
// read what the policy needs (here the session, whose stored spec the restarted
// daemon cannot load), the approval let the call through and the run then failed on
// its own. Fail closed: the decision is not applied, the approver gets a retryable
// 503 that says so, the request stays pending, and a denial still works.
func TestApprovalWhosePolicyCannotBeCheckedStaysPending(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	opts := daemonOpts{dataDir: t.TempDir(), mutate: func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Sessions.WorkdirRoots = []string{work}
	}}
	d := startDaemon(t, opts)
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": work})["id"].(string)
	apr, _, leave := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"p","name":"execute_command","arguments":{"command":"echo pushed >> ran.txt"}}]}`)
	leave()
	d.stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(opts.dataDir, store.SQLiteFileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	// A row the daemon cannot read back (a bad hand edit, a botched migration).
	if _, err := db.Exec(`UPDATE sessions SET spec = '{"rules":{"deny":["execute_command(unclosed"]}}' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	d = startDaemon(t, opts)
	aprID := apr["id"].(string)
	code, h, body := d.do("POST", "/v1/approvals/"+aprID+"/decision", `{"decision":"approve","actor":"ada"}`)
	validate(t, "Error", body)
	if code != 503 || !strings.Contains(string(body), `"code":"unavailable"`) || !strings.Contains(string(body), "still pending") {
		t.Fatalf("approving a call whose policy cannot be checked: %d %s, want a 503 saying the request is still pending", code, body)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("503 with Retry-After %q", h.Get("Retry-After"))
	}
	time.Sleep(time.Second) // a run would start after the grace (300ms)
	if code, _, body := d.do("GET", "/v1/approvals/"+aprID, nil); code != 200 || !strings.Contains(string(body), `"status":"pending"`) {
		t.Fatalf("the request after the refused approval: %d %s, want still pending", code, body)
	}
	if _, err := os.Stat(filepath.Join(work, "ran.txt")); !os.IsNotExist(err) {
		t.Fatalf("the command ran although its approval was refused (stat: %v)", err)
	}
	// Denying needs no policy check: the approver can still close the request.
	if code, _, body := d.do("POST", "/v1/approvals/"+aprID+"/decision", `{"decision":"deny","actor":"ada","reason":"cannot check it"}`); code != 200 {
		t.Fatalf("denying it: %d %s", code, body)
	}
}

// TestDecisionWithADuplicateKeyIsRefused: encoding/json keeps the last of two values
// of one key, and matches keys regardless of case, so {"decision":"deny",
// "decision":"approve"} approved (a proxy or a log reading the first saw a denial).
// For a security decision that is a 400 naming the key, and the request stays
// pending; the same decision sent plainly is then applied.
func TestDecisionWithADuplicateKeyIsRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"touch x"}}]}`)
	defer stop()
	decision := "/v1/approvals/" + apr["id"].(string) + "/decision"
	for _, bad := range []struct{ body, want string }{
		{`{"decision":"deny","decision":"approve"}`, `duplicate key "decision"`},
		{`{"decision":"deny","reason":"no","actor":"ada","Decision":"approve"}`, `duplicate key "Decision" (the same field as "decision")`},
		{`{"decision":"approve","reason":"a","reason":"b"}`, `duplicate key "reason"`},
	} {
		code, _, body := d.do("POST", decision, bad.body)
		validate(t, "Error", body)
		if code != 400 || !strings.Contains(string(body), `"code":"invalid_json"`) || !strings.Contains(string(body), strconv.Quote(bad.want)[1:len(strconv.Quote(bad.want))-1]) {
			t.Fatalf("decide with %s: %d %s, want a 400 saying %s", bad.body, code, body, bad.want)
		}
	}
	if code, _, resp := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil); code != 200 || !strings.Contains(string(resp), `"status":"pending"`) {
		t.Fatalf("approval after refused decisions: %d %s", code, resp)
	}
	code, _, body := d.do("POST", decision, `{"decision":"deny","reason":"once","actor":"ada"}`)
	wantStatus(t, "deny sent plainly", code, 200, body)
	if m := restMessages(t, <-rest)["w"]; m.str("error_kind") != "denied" || !strings.Contains(string(m.raw), "denied by ada: once") {
		t.Fatalf("the model reads %s", m.raw)
	}
}

// TestKeyWithADuplicateFieldIsRefused: a key creation body naming its tenant or roles
// twice made a key with the last values (a proxy or log reading the first saw another
// tenant, other roles). It is a 400 naming the key, and no key is made.
func TestKeyWithADuplicateFieldIsRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, bad := range []struct{ body, want string }{
		{`{"name":"k","tenant":"a","roles":["agent"],"tenant":"b"}`, `duplicate key "tenant"`},
		{`{"name":"k","roles":["agent"],"Roles":["admin"]}`, `duplicate key "Roles" (the same field as "roles")`},
	} {
		code, _, body := d.do("POST", "/v1/keys", bad.body)
		validate(t, "Error", body)
		if code != 400 || !strings.Contains(string(body), `"code":"invalid_json"`) || !strings.Contains(string(body), strconv.Quote(bad.want)[1:len(strconv.Quote(bad.want))-1]) {
			t.Fatalf("create key with %s: %d %s, want a 400 saying %s", bad.body, code, body, bad.want)
		}
	}
	code, _, body := d.do("GET", "/v1/keys", nil)
	if code != 200 || strings.Contains(string(body), `"name":"k"`) {
		t.Fatalf("keys after refused bodies: %d %s; want none named k", code, body)
	}
	code, _, body = d.do("POST", "/v1/keys", `{"name":"k","roles":["agent"]}`)
	wantStatus(t, "create key sent plainly", code, 201, body)
}

// TestSessionAndServerWithADuplicateFieldAreRefused: a session spec naming its
// permission mode, rules or workdir twice was created with the last values, and an MCP
// server naming its command twice started the last (a proxy or log reading the first
// saw another mode, another command). Both are a 400 naming the key, and nothing is
// made.
func TestSessionAndServerWithADuplicateFieldAreRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, bad := range []struct{ path, body, want string }{
		{"/v1/sessions", `{"available_tools":["echo"],"permission_mode":"explore","permission_mode":"bypass"}`, `duplicate key "permission_mode"`},
		{"/v1/sessions", `{"available_tools":["echo"],"permission_mode":"explore","Permission_Mode":"bypass"}`, `duplicate key "Permission_Mode" (the same field as "permission_mode")`},
		{"/v1/sessions", `{"available_tools":["echo"],"workdir":"a","workdir":"/"}`, `duplicate key "workdir"`},
		{"/v1/mcp/servers", `{"name":"dup","transport":"stdio","command":"/bin/true","command":"/bin/sh"}`, `duplicate key "command"`},
	} {
		code, _, body := d.do("POST", bad.path, bad.body)
		validate(t, "Error", body)
		if code != 400 || !strings.Contains(string(body), `"code":"invalid_json"`) || !strings.Contains(string(body), strconv.Quote(bad.want)[1:len(strconv.Quote(bad.want))-1]) {
			t.Fatalf("POST %s %s: %d %s, want a 400 saying %s", bad.path, bad.body, code, body, bad.want)
		}
	}
	if code, _, body := d.do("GET", "/v1/mcp/servers", nil); code != 200 || strings.Contains(string(body), `"dup"`) {
		t.Fatalf("servers after the refused body: %d %s; want none named dup", code, body)
	}
	code, _, body := d.do("POST", "/v1/sessions", `{"available_tools":["echo"],"permission_mode":"explore"}`)
	wantStatus(t, "session sent plainly", code, 201, body)
}

// TestOneShotSessionWithADuplicateFieldIsRefused: POST /v1/tool-calls creates its
// session from the spec in "session"; one naming its permission mode twice ran its
// calls with the last (explore then bypass: a bypass session), as POST /v1/sessions
// did. It is a 400 naming the key, and no call runs. A key twice in a call's
// arguments is the model's and still passes.
func TestOneShotSessionWithADuplicateFieldIsRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	calls := `"calls":[{"id":"a","name":"echo","arguments":{"text":"hi"}}]`
	for _, bad := range []struct{ body, want string }{
		{`{"session":{"available_tools":["echo"],"permission_mode":"explore","permission_mode":"bypass"},` + calls + `}`, `duplicate key "permission_mode" in session`},
		{`{"session":{"available_tools":["echo"],"rules":{"deny":["echo"],"Deny":[]}},` + calls + `}`, `duplicate key "Deny" (the same field as "deny") in session.rules`},
		{`{"session":{"available_tools":["echo"],"permission_mode":"explore"},"session":{"available_tools":["echo"],"permission_mode":"bypass"},` + calls + `}`, `duplicate key "session"`},
	} {
		code, _, body := d.do("POST", "/v1/tool-calls", bad.body)
		validate(t, "Error", body)
		if code != 400 || !strings.Contains(string(body), `"code":"invalid_json"`) || !strings.Contains(string(body), strconv.Quote(bad.want)[1:len(strconv.Quote(bad.want))-1]) {
			t.Fatalf("POST /v1/tool-calls %s: %d %s, want a 400 saying %s", bad.body, code, body, bad.want)
		}
	}
	code, _, body := d.do("POST", "/v1/tool-calls", `{"session":{"available_tools":["echo"]},"calls":[{"id":"a","name":"echo","arguments":{"text":"a","text":"b"}}]}`)
	wantStatus(t, "one-shot call whose arguments name a key twice", code, 200, body)
}

// TestMapKeysInOtherCaseAreNoDuplicates: the keys of a map (an MCP server's env and
// headers, a session's metadata) are taken as written, so HTTP_PROXY and http_proxy are
// two variables; only a struct's fields are matched regardless of case. Both were
// refused as "the same field".
func TestMapKeysInOtherCaseAreNoDuplicates(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	code, _, body := d.do("POST", "/v1/sessions", `{"available_tools":["echo"],"metadata":{"requestId":"a","requestID":"b","x":{"k":1,"K":2}}}`)
	wantStatus(t, "session whose metadata has keys differing in case", code, 201, body)
	code, _, body = d.do("POST", "/v1/mcp/servers", `{"name":"proxied","transport":"stdio","command":"/bin/true","env":{"HTTP_PROXY":"http://p:3128","http_proxy":"http://p:3128"}}`)
	if code == 400 {
		t.Fatalf("MCP server with env HTTP_PROXY and http_proxy: %d %s", code, body)
	}
	// HTTP header names are one name in any case: which of two the server got would
	// depend on map order.
	code, _, body = d.do("POST", "/v1/mcp/servers", `{"name":"hdr","transport":"streamable_http","url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer a","authorization":"Bearer b"}}`)
	if code != 400 || !strings.Contains(string(body), "authorization") {
		t.Fatalf("MCP server with headers Authorization and authorization: %d %s, want a 400", code, body)
	}
	code, _, body = d.do("POST", "/v1/sessions", `{"available_tools":["echo"],"metadata":{"k":1,"k":2}}`)
	if code != 400 || !strings.Contains(string(body), `duplicate key \"k\" in metadata`) {
		t.Fatalf("session whose metadata names k twice: %d %s, want a 400", code, body)
	}
}

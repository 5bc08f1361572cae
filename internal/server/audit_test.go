package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
)

// TestAuditTrail: who did what is readable through GET /v1/audit: an approval and its
// denial (under the call's tenant, naming the person and the key), keys created and
// revoked and MCP servers removed (under the acting key's tenant). Approvers read
// their tenant's trail only; admins read every tenant's; pages follow each other.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Auth.Unauthenticated = false
		c.Permissions.Allow = []string{"echo"} // execute_command asks
	}})
	ctx := t.Context()
	admin, me := bootstrapAdmin(t, d)
	keys := map[string]*client.APIKey{}
	mk := func(tenant, role string) *client.Client {
		k, err := admin.CreateKey(ctx, tenant+" "+role, tenant, []string{role})
		if err != nil {
			t.Fatal(err)
		}
		keys[tenant+" "+role] = k
		return client.New(d.url, client.WithAPIKey(k.Key))
	}
	agent, approver, otherApprover := mk("acme", "agent"), mk("acme", "approver"), mk("globex", "approver")

	// An acme call asks, and acme's approver denies it for bob.
	sess, err := agent.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	aprID := runUntilApproval(t, rctx, agent, sess.ID, client.Call{ID: "c1", Name: "execute_command",
		Arguments: json.RawMessage(`{"command":"rm -rf build"}`)})
	if _, err := approver.Decide(ctx, aprID, client.Decision{Decision: "deny", Reason: "not today", Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RevokeKey(ctx, keys["globex approver"].ID); err != nil {
		t.Fatal(err)
	}

	// acme's approver: the approval's story, newest first, and nothing of the keys.
	got, err := approver.Audit(ctx, client.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Action != "approval.denied" || got[1].Action != "approval.requested" ||
		got[0].Subject != aprID || got[0].Tenant != "acme" {
		t.Fatalf("acme's trail: %+v", got)
	}
	if want := "bob via key acme approver (" + keys["acme approver"].ID + ")"; got[0].Actor != want {
		t.Errorf("denial actor %q, want %q", got[0].Actor, want)
	}
	var m map[string]any
	_ = json.Unmarshal(got[0].Detail, &m)
	if m["tool"] != "execute_command" || m["kind"] != "deny" || m["reason"] != "not today" || m["session_id"] != sess.ID {
		t.Errorf("denial detail: %s", got[0].Detail)
	}
	st, _, b := keyed(t, d, approver.APIKey(), "GET", "/v1/audit?limit=1", "")
	wantStatus(t, "GET /v1/audit", st, 200, b)
	validateResponse(t, "GET", "/v1/audit", "200", "application/json", b)
	var page struct {
		NextBefore int64 `json:"next_before"`
	}
	if err := json.Unmarshal(b, &page); err != nil || page.NextBefore != got[0].ID {
		t.Errorf("a full page of one: next_before %d (%v), want the id of its entry %d", page.NextBefore, err, got[0].ID)
	}
	st, _, b = keyed(t, d, approver.APIKey(), "GET", "/v1/audit?limit=5", "")
	wantStatus(t, "GET /v1/audit?limit=5", st, 200, b)
	if strings.Contains(string(b), "next_before") {
		t.Errorf("a page that is not full has next_before: %s", b)
	}

	// Roles and tenants.
	forbidden := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 403 {
			t.Errorf("%s: %v, want 403", what, err)
		}
	}
	_, err = agent.Audit(ctx, client.AuditQuery{})
	forbidden("an agent reading the audit trail", err)
	_, err = approver.Audit(ctx, client.AuditQuery{Tenant: me.Tenant})
	forbidden("acme's approver reading another tenant's trail", err)
	_, err = otherApprover.Audit(ctx, client.AuditQuery{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 401 {
		t.Errorf("a revoked key reading the trail: %v, want 401", err)
	}

	// The admin reads every tenant's: its own key changes are in its tenant.
	all, err := admin.Audit(ctx, client.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range all {
		actions = append(actions, e.Tenant+":"+e.Action+":"+e.Subject)
	}
	wantActions := []string{
		me.Tenant + ":key.revoked:" + keys["globex approver"].ID,
		"acme:approval.denied:" + aprID,
		"acme:approval.requested:" + aprID,
		me.Tenant + ":key.created:" + keys["globex approver"].ID,
		me.Tenant + ":key.created:" + keys["acme approver"].ID,
		me.Tenant + ":key.created:" + keys["acme agent"].ID,
		me.Tenant + ":key.created:" + me.KeyID, // the first start's admin key, by the system
	}
	if !slices.Equal(actions, wantActions) {
		t.Errorf("every tenant's trail:\n got %q\nwant %q", actions, wantActions)
	}
	for _, e := range all {
		if e.Action == "key.revoked" && !strings.Contains(string(e.Detail), `"tenant":"globex"`) {
			t.Errorf("key.revoked entry %+v: want the revoked key's tenant", e)
		}
		if e.Action != "key.created" {
			continue
		}
		wantActor := "key bootstrap admin (" + me.KeyID + ")"
		if e.Subject == me.KeyID {
			wantActor = "system"
		}
		if !strings.Contains(string(e.Detail), `"roles"`) || e.Actor != wantActor {
			t.Errorf("key.created entry %+v: want the key's roles, actor %q", e, wantActor)
		}
	}
	if only, err := admin.Audit(ctx, client.AuditQuery{Tenant: "acme", Action: "approval.denied"}); err != nil || len(only) != 1 || only[0].Subject != aprID {
		t.Errorf("admin, acme's denials: %+v, %v", only, err)
	}
	if only, err := admin.Audit(ctx, client.AuditQuery{Subject: keys["globex approver"].ID}); err != nil || len(only) != 2 {
		t.Errorf("admin, one key's story: %+v, %v", only, err)
	}

	// Pages of two follow each other without gaps or repeats.
	var paged []string
	var before int64
	for range 10 {
		page, err := admin.Audit(ctx, client.AuditQuery{Limit: 2, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			paged = append(paged, e.Tenant+":"+e.Action+":"+e.Subject)
		}
		before = page[len(page)-1].ID
	}
	if !slices.Equal(paged, wantActions) {
		t.Errorf("paged:\n got %q\nwant %q", paged, wantActions)
	}

	// Bad input.
	for _, q := range []string{"before=abc", "before=0", "before=" + strconv.FormatInt(all[0].ID+1000, 10), "limit=0", "limit=1001", "action=a%00b"} {
		st, _, b := keyed(t, d, admin.APIKey(), "GET", "/v1/audit?"+q, "")
		wantStatus(t, "GET /v1/audit?"+q, st, 400, b)
		validate(t, "Error", b)
	}
}

// TestAuditAdministrativeEntriesAreAdmins: key and MCP server changes are recorded in
// the acting admin's tenant, but what they tell (every tenant's keys, their names and
// roles; the MCP servers) is an admin's to read (GET /v1/keys and /v1/mcp/servers are
// admin-only): an approver of the admin's tenant reads that tenant's approvals only.
func TestAuditAdministrativeEntriesAreAdmins(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Auth.Unauthenticated = false }})
	ctx := t.Context()
	admin, me := bootstrapAdmin(t, d)
	if _, err := admin.CreateKey(ctx, "globex ci deploy", "globex", []string{"agent", "admin"}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateKey(ctx, "console", me.Tenant, []string{"approver"})
	if err != nil {
		t.Fatal(err)
	}
	approver := client.New(d.url, client.WithAPIKey(k.Key))
	for _, q := range []client.AuditQuery{{}, {Action: "key.created"}, {Tenant: me.Tenant}} {
		got, err := approver.Audit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			if !strings.HasPrefix(e.Action, "approval.") {
				t.Errorf("an approver read %+v (%s %s)", q, e.Action, e.Detail)
			}
		}
	}
	if all, err := admin.Audit(ctx, client.AuditQuery{Action: "key.created"}); err != nil || len(all) != 3 {
		t.Errorf("the admin's key entries: %d, %v; want 3", len(all), err)
	}
}

// TestAuditNamesRulesApprovedForSession: the audit entry of an approve_for_session
// names the rules it gave the session, as an approve_with_rule's names its rule: the
// approval (which holds the suggestions) is deleted by retention, the audit is not.
func TestAuditNamesRulesApprovedForSession(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"s","name":"execute_command","arguments":{"command":"rm -rf build && git push --force"}}]}`)
	defer stop()
	want, _ := json.Marshal(apr["suggestions"])
	if len(apr["suggestions"].([]any)) == 0 {
		t.Fatalf("no suggestions: %v", apr)
	}
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve_for_session","actor":"ada"}`); code != 200 {
		t.Fatalf("decide: %d %s", code, body)
	}
	<-rest
	code, _, body := d.do("GET", "/v1/audit?action=approval.approved&subject="+apr["id"].(string), nil)
	var page struct {
		Entries []struct {
			Detail struct {
				Kind  string          `json:"kind"`
				Rules json.RawMessage `json:"rules"`
			} `json:"detail"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Entries) != 1 {
		t.Fatalf("audit: %d %s (%v)", code, body, err)
	}
	if e := page.Entries[0].Detail; e.Kind != "approve_for_session" || string(e.Rules) != string(want) {
		t.Fatalf("audit detail: %s, want rules %s", body, want)
	}
}

package mcpserver_test

import (
	"context"
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// TestElicitationApprovalRechecksDenyRules: an approval answered through the MCP
// client's elicitation is re-checked against the policy, as a REST decision is. While
// the client was asked, the link the command reads was turned to the daemon's
// database (a protected read, which this policy denies): accepting ran it, and the
// model read the database; now the request is denied in the policy's name, and the
// model reads that.
func TestElicitationApprovalRechecksDenyRules(t *testing.T) {
	t.Parallel()
	work, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "notes.txt"), []byte("harmless notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(work, "notes")
	if err := os.Symlink(filepath.Join(outside, "notes.txt"), link); err != nil {
		t.Fatal(err)
	}
	d := start(t, func(c *config.Config) {
		c.Sessions.WorkdirRoots = []string{work}
		// Only what a rule asks about may run (after a person's approval); a read of
		// the daemon's data is protected, which with this policy denies it.
		c.Permissions.Allow = nil
		c.Permissions.Ask = []string{"execute_command(cat:*)"}
		c.Permissions.RiskPolicy = map[string]string{"safe": "deny", "low": "deny", "medium": "deny", "high": "deny", "critical": "deny"}
	})
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default", "workdir": work})
	c := d.connect(s.ID, client.WithElicitationHandler(elicitFunc(func(mcp.ElicitationRequest) *mcp.ElicitationResult {
		// The rules' inputs change while the person reads the question.
		if err := os.Remove(link); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(filepath.Join(d.App.DataDir, "toolserverd.db"), link); err != nil {
			t.Error(err)
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}
	})))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": "cat notes"}))
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if text := resultText(res); !res.IsError || metaString(res, "toolserverd/error_kind") != "denied" || !strings.HasPrefix(text, "denied by the policy: ") {
		t.Fatalf("the call accepted after the policy turned to deny it: is_error=%v kind=%q text=%.200q; want denied by the policy",
			res.IsError, metaString(res, "toolserverd/error_kind"), text)
	}
	var list struct {
		Approvals []approvalRec `json:"approvals"`
	}
	d.do(http.MethodGet, "/v1/approvals?session_id="+s.ID, nil, http.StatusOK, &list)
	if len(list.Approvals) != 1 {
		t.Fatalf("approvals of the session: %+v", list.Approvals)
	}
	apr := list.Approvals[0]
	if apr.Status != "denied" || apr.Decision == nil || apr.Decision.Kind != "deny" || apr.Decision.Actor != "mcp-client" ||
		!apr.Decision.ByPolicy || !strings.HasPrefix(apr.Decision.Reason, "the policy now denies it (") {
		t.Fatalf("recorded: status %s decision %+v; want denied by the policy over mcp-client's approval", apr.Status, apr.Decision)
	}
}

// TestElicitationApprovalPolicyUncheckedAsksAgain: the client accepts, but the policy
// cannot be checked against the call just then (here its record cannot be read: the
// table is moved away while the person answers). The approval is not applied, as on
// REST; the client used to be told nothing (a log line only) and the call waited on.
// Now it is asked again, told why, and its second accept, checked, runs the call.
func TestElicitationApprovalPolicyUncheckedAsksAgain(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Permissions.Ask = []string{"execute_command(echo:*)"}
	})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.App.DataDir, store.SQLiteFileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
	var mu sync.Mutex
	var questions []string
	asked := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(questions) }
	c := d.connect(s.ID, client.WithElicitationHandler(elicitFunc(func(req mcp.ElicitationRequest) *mcp.ElicitationResult {
		mu.Lock()
		defer mu.Unlock()
		questions = append(questions, req.Params.Message)
		stmt := `ALTER TABLE tool_calls RENAME TO tool_calls_away` // the call's record cannot be read
		if len(questions) > 1 {
			stmt = `ALTER TABLE tool_calls_away RENAME TO tool_calls`
		}
		if len(questions) <= 2 {
			if _, err := db.Exec(stmt); err != nil {
				t.Error(err)
			}
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}
	})))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, callReq("execute_command", map[string]any{"command": "echo approved-twice"}))
	got := asked()
	if err != nil {
		t.Fatalf("tools/call: %v (the client was asked %d times: %q)", err, len(got), got)
	}
	if text := resultText(res); res.IsError || !strings.Contains(text, "approved-twice") {
		t.Fatalf("the call approved again: is_error=%v text=%.300q", res.IsError, text)
	}
	if len(got) != 2 || !strings.Contains(got[1], "Your approval of execute_command was not applied") ||
		!strings.Contains(got[1], "could not be checked") || !strings.Contains(got[1], "Accept to try again, decline to deny it") {
		t.Fatalf("the client was asked %d times: %q; want a second question saying the first approval was not applied", len(got), got)
	}
}

// TestElicitationApprovalPolicyUncheckedGivesUp: while the policy stays uncheckable
// the client is asked a bounded number of times, then told (progress) that the
// request is still pending and where to decide it; a REST decision still ends it.
func TestElicitationApprovalPolicyUncheckedGivesUp(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Permissions.Ask = []string{"execute_command(echo:*)"}
	})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.App.DataDir, store.SQLiteFileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
	var mu sync.Mutex
	var asked int
	var notes []string
	c := d.connect(s.ID, client.WithElicitationHandler(elicitFunc(func(mcp.ElicitationRequest) *mcp.ElicitationResult {
		mu.Lock()
		defer mu.Unlock()
		if asked++; asked == 1 {
			if _, err := db.Exec(`ALTER TABLE tool_calls RENAME TO tool_calls_away`); err != nil {
				t.Error(err)
			}
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}
	})))
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		if m, ok := n.Params.AdditionalFields["message"].(string); ok {
			mu.Lock()
			notes = append(notes, m)
			mu.Unlock()
		}
	})
	req := callReq("execute_command", map[string]any{"command": "echo never-approved"})
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-unchecked"}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := c.CallTool(ctx, req) // an error: nil, which the end says
		done <- res
	}()
	var told string
	for deadline := time.Now().Add(30 * time.Second); told == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		for _, m := range notes {
			if strings.Contains(m, "was not applied") {
				told = m
			}
		}
		mu.Unlock()
	}
	mu.Lock()
	n := asked
	mu.Unlock()
	if told == "" || n != 3 || !strings.Contains(told, "still pending") || !strings.Contains(told, "/decision") {
		t.Fatalf("asked %d times; progress said %q; want 3 questions, then a note that the request is still pending", n, told)
	}
	if _, err := db.Exec(`ALTER TABLE tool_calls_away RENAME TO tool_calls`); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Approvals []approvalRec `json:"approvals"`
	}
	d.do(http.MethodGet, "/v1/approvals?session_id="+s.ID, nil, http.StatusOK, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].Status != "pending" {
		t.Fatalf("approvals of the session: %+v; want the one still pending", list.Approvals)
	}
	d.do(http.MethodPost, "/v1/approvals/"+list.Approvals[0].ID+"/decision", map[string]any{"decision": "deny", "actor": "ada", "reason": "not now"}, http.StatusOK, nil)
	if res := <-done; res == nil || !res.IsError || !strings.Contains(resultText(res), "not now") {
		t.Fatalf("the call after the REST denial: %+v", res)
	}
}

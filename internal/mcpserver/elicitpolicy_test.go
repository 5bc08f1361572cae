package mcpserver_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
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

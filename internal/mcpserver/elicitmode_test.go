package mcpserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestElicitationOnlyInFormModeClients: the approval question is a form-mode
// elicitation, which MCP forbids sending to a client that declared only URL mode
// (the TypeScript SDK refuses it with -32602, and the daemon logged a failure on
// every risky call). Such a client is not asked; the approval waits for REST.
func TestElicitationOnlyInFormModeClients(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
	post := d.rawMCP(s.ID, mcp.ProtocolVersion20251125)
	mcpSID := d.rawSessionWith(s.ID, mcp.ProtocolVersion20251125, `{"elicitation":{"url":{}}}`)
	result := make(chan string, 1)
	go func() {
		_, _, body := post(mcpSID, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"`+riskyCommand+`"}}}`)
		result <- body
	}()
	apr := d.pendingApproval(s.ID)
	time.Sleep(500 * time.Millisecond) // an elicitation goes out as the approval is asked for
	d.do(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision", map[string]any{"decision": "approve"}, http.StatusOK, nil)
	var out string
	select {
	case out = <-result:
	case <-time.After(waitLimit):
		t.Fatal("the approved call did not end")
	}
	if strings.Contains(out, "elicitation/create") {
		t.Fatalf("a client that declared only URL-mode elicitation was sent a form: %s", out)
	}
	if !strings.Contains(out, "removed") {
		t.Fatalf("the approved call's answer: %s", out)
	}
}

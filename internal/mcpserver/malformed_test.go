package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestMalformedMessagesSayWhatIsWrong: a tools/list cursor this server never gave
// used to be answered "illegal base64 data at input byte 4", and a JSON-RPC batch
// "request body is not valid json". A cursor is refused as invalid params saying the
// server gave no such cursor; a batch, which MCP removed in 2025-06-18, as an invalid
// request saying batches are not supported.
func TestMalformedMessagesSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"read_file"}})
	post := d.rawMCP(s.ID, mcp.ProtocolVersion20250618)
	mcpSID := d.rawSession(s.ID, mcp.ProtocolVersion20250618)
	type rpcError struct {
		ID    any `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	decode := func(body string) rpcError {
		t.Helper()
		// The answer may come as JSON or as one SSE event.
		if i := strings.Index(body, "data: "); i >= 0 {
			body = strings.TrimSpace(body[i+len("data: "):])
		}
		var e rpcError
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil {
			t.Fatalf("not a JSON-RPC error: %s", body)
		}
		return e
	}
	for _, cursor := range []string{"garbage!", "cmVhZF9maWxl"} { // not base64; base64 of read_file
		code, _, body := post(mcpSID, `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"`+cursor+`"}}`)
		e := decode(body)
		if code != http.StatusOK || e.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Error.Message, "not one this server gave") ||
			strings.Contains(e.Error.Message, "base64") || e.ID != float64(5) {
			t.Errorf("cursor %q: %d %s", cursor, code, body)
		}
	}
	if code, _, body := post(mcpSID, `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`); code != http.StatusOK || !strings.Contains(body, "read_file") {
		t.Errorf("tools/list without a cursor: %d %s", code, body)
	}
	for _, sid := range []string{mcpSID, ""} {
		code, _, body := post(sid, ` [{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
		e := decode(body)
		if code != http.StatusBadRequest || e.Error.Code != mcp.INVALID_REQUEST || !strings.Contains(e.Error.Message, "batches are not supported") || e.ID != nil {
			t.Errorf("batch (MCP session %q): %d %s", sid, code, body)
		}
	}
}

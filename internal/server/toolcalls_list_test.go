package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestListToolCallsAcrossSessions: GET /v1/tool-calls lists the calls of every session,
// newest first, filtered by state.
func TestListToolCallsAcrossSessions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	s1 := d.createSession(map[string]any{})["id"].(string)
	s2 := d.createSession(map[string]any{})["id"].(string)
	if code, _ := d.stream("/v1/sessions/"+s1+"/tool-calls", `{"calls":[{"id":"a","name":"echo","arguments":{"text":"first"}}]}`); code != 200 {
		t.Fatal(code)
	}
	if code, _ := d.stream("/v1/sessions/"+s2+"/tool-calls", `{"calls":[{"id":"b","name":"echo","arguments":{"text":42}}]}`); code != 200 {
		t.Fatal(code)
	}
	list := func(query string) []map[string]any { return listCalls(t, d, query) }
	all := list("")
	if len(all) != 2 || all[0]["session_id"] != s2 || all[1]["session_id"] != s1 {
		t.Fatalf("all calls, newest first: %v", all)
	}
	if all[0]["status"] != "failed" || all[0]["error_kind"] != "invalid_args" || all[1]["status"] != "succeeded" {
		t.Fatalf("statuses: %v / %v", all[0], all[1])
	}
	if got := list("?status=failed"); len(got) != 1 || got[0]["session_id"] != s2 {
		t.Fatalf("failed only: %v", got)
	}
	if got := list("?status=pending,running,waiting"); len(got) != 0 {
		t.Fatalf("nothing runs, got %v", got)
	}
	if got := list("?limit=1"); len(got) != 1 || got[0]["id"] != all[0]["id"] {
		t.Fatalf("limit 1: %v", got)
	}
	for _, q := range []string{"?status=done", "?status=running,", "?limit=0", "?limit=x"} {
		code, _, body := d.do("GET", "/v1/tool-calls"+q, nil)
		if code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		validate(t, "Error", body)
	}
}

// listCalls is GET /v1/tool-calls with query: its records, each checked against the
// contract.
func listCalls(t *testing.T, d *daemon, query string) []map[string]any {
	t.Helper()
	code, hdr, body := d.do("GET", "/v1/tool-calls"+query, nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/tool-calls%s: %d %s %s", query, code, hdr.Get("Content-Type"), body)
	}
	var resp struct {
		Calls []json.RawMessage `json:"calls"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(resp.Calls))
	for i, raw := range resp.Calls {
		validate(t, "CallRecord", raw)
		_ = json.Unmarshal(raw, &out[i])
	}
	return out
}

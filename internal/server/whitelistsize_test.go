package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestWhitelistSize: a session's whitelist is checked against every tool when it is
// made and on every call, so its length is bounded. A 1 MB body of 100,000 patterns
// held a request for 31 s of CPU, and an 8 MB one for minutes; any agent key could
// send one.
func TestWhitelistSize(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("x%d*", i)
		}
		return out
	}
	for _, field := range []string{"available_tools", "available_skills"} {
		code, _, body := d.do("POST", "/v1/sessions", map[string]any{field: many(4097)})
		if code != http.StatusBadRequest || !strings.Contains(string(body), field) || !strings.Contains(string(body), "4096") {
			t.Errorf("%s of 4097 entries: %d %.300s; want 400 naming the field and the bound", field, code, body)
		}
		if code == http.StatusBadRequest {
			validate(t, "Error", body)
		}
		// The one-shot form takes the same spec.
		code, _, body = d.do("POST", "/v1/tool-calls", map[string]any{"session": map[string]any{field: many(4097)},
			"calls": []any{map[string]any{"id": "a", "name": "echo", "arguments": map[string]any{"text": "x"}}}})
		if code != http.StatusBadRequest || !strings.Contains(string(body), field) {
			t.Errorf("one-shot %s of 4097 entries: %d %.300s; want 400", field, code, body)
		}
		if code, _, body := d.do("POST", "/v1/sessions", map[string]any{field: many(4096)}); code != http.StatusCreated {
			t.Errorf("%s of 4096 entries: %d %.300s; want 201", field, code, body)
		}
		// Entries are bounded too: 4096 patterns of 900 bytes, globs throughout, took
		// 2 s to make a session and 0.8 s for each call on it.
		long := []string{"echo", strings.Repeat("*a", 128) + "b"}
		code, _, body = d.do("POST", "/v1/sessions", map[string]any{field: long})
		if code != http.StatusBadRequest || !strings.Contains(string(body), field+"[1]") || !strings.Contains(string(body), "256") {
			t.Errorf("%s with a 257-byte entry: %d %.300s; want 400 naming the entry and the bound", field, code, body)
		}
		if code, _, body := d.do("POST", "/v1/sessions", map[string]any{field: []string{strings.Repeat("a", 256)}}); code != http.StatusCreated {
			t.Errorf("%s with a 256-byte entry: %d %.300s; want 201", field, code, body)
		}
	}
}

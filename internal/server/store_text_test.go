package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestCallTextPostgreSQLCannotKeep: PostgreSQL keeps no NUL byte and no invalid UTF-8
// in text. A call id or name holding a NUL is refused as a bad request on every store
// (on PostgreSQL its record could not be written); arguments that are not UTF-8 (a
// client sending Latin-1) run with U+FFFD in place of the bad bytes, as the tool reads
// them, and are recorded so.
func TestCallTextPostgreSQLCannotKeep(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, store := range []string{"", url} {
		d := startDaemon(t, daemonOpts{store: store})
		id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
		for _, body := range []string{
			`{"calls":[{"id":"a\u0000b","name":"echo","arguments":{"text":"hi"}}]}`,
			`{"calls":[{"id":"c1","name":"ec\u0000ho","arguments":{}}]}`,
		} {
			code, _, out := d.do("POST", "/v1/sessions/"+id+"/tool-calls", body)
			if code != 400 || !strings.Contains(string(out), "NUL") {
				t.Errorf("store %q: %q: %d %s, want 400 naming the bad text", store, body, code, out)
			}
		}

		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", "{\"calls\":[{\"id\":\"latin1\",\"name\":\"echo\",\"arguments\":{\"text\":\"Jos\xe9\"}}]}")
		m := messages(t, evs)["latin1"]
		if m.m["is_error"] != false {
			t.Fatalf("store %q: the Latin-1 call: %s", store, m.raw)
		}
		code, _, rec := d.do("GET", "/v1/tool-calls/"+m.str("call_id"), nil)
		var r struct {
			Status    string          `json:"status"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(rec, &r); code != 200 || err != nil || r.Status != "succeeded" || string(r.Arguments) != `{"text":"Jos`+"\uFFFD"+`"}` {
			t.Errorf("store %q: the Latin-1 call's record: %d %s", store, code, rec)
		}
	}
}

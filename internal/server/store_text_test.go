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

		// A lone UTF-16 surrogate escaped in the arguments (\ud800, as a model that cut
		// an emoji in half writes it) reached the tool as U+FFFD but was recorded as
		// sent, so every listing holding the record was JSON that jq and Rust's
		// serde_json refuse. It is recorded as the tool read it, \ufffd; a pair and an
		// escaped backslash before "u" are kept.
		_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[`+
			`{"id":"lone","name":"echo","arguments":{"text":"a\ud800b\udc00 \ud83c\udf0d \\ud800 \ud83c"}},`+
			`{"id":"lone2","type":"function","function":{"name":"echo","arguments":"{\"text\":\"x\\udfff\"}"}}]}`)
		for call, want := range map[string]string{
			"lone":  `{"text":"a\ufffdb\ufffd \ud83c\udf0d \\ud800 \ufffd"}`,
			"lone2": `{"text":"x\ufffd"}`,
		} {
			m := messages(t, evs)[call]
			code, _, rec = d.do("GET", "/v1/tool-calls/"+m.str("call_id"), nil)
			if err := json.Unmarshal(rec, &r); code != 200 || err != nil || string(r.Arguments) != want {
				t.Errorf("store %q: %s's record: %d %s, want arguments %s", store, call, code, rec, want)
			}
		}
	}
}

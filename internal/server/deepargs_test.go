package server_test

import (
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestDeepArgumentsRefused: arguments nested deeper than structured output may
// (tool.MaxStructuredDepth) were run and kept as they came, so the call's record (and
// an approval's event, the arguments an upstream server is sent) held JSON that
// Python's json module cannot decode. Such a call is answered invalid_args saying
// why, for a tool the session has or not, and its record keeps the arguments as a
// string.
func TestDeepArgumentsRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	s := d.createSession(map[string]any{})
	deep := strings.Repeat(`{"a":`, 900) + "1" + strings.Repeat("}", 900)
	for _, name := range []string{"echo", "no_such_tool"} {
		body := `{"calls":[{"id":"1","name":"` + name + `","arguments":{"text":"x","more":` + deep + `}}]}`
		code, evs := d.stream("/v1/sessions/"+s["id"].(string)+"/tool-calls", body)
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, evs[0].raw)
		}
		var callID string
		for _, e := range evs {
			if e.str("type") != "message" {
				continue
			}
			callID = e.str("call_id")
			if name == "echo" && (e.str("error_kind") != "invalid_args" || !strings.Contains(string(e.raw), "more than 256 levels deep")) {
				t.Errorf("%s: message %.400s", name, e.raw)
			}
		}
		code, _, rec := d.do("GET", "/v1/tool-calls/"+callID, nil)
		if code != 200 || jsontext.Deeper(rec, tool.MaxStructuredDepth) {
			t.Errorf("%s: record %d, nesting more than %d levels: %.200s", name, code, tool.MaxStructuredDepth, rec)
		}
	}
}

package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUnknownNamesAreAnsweredWithTheNearest: a model often drops the mcp__server__
// prefix of a name, spells it with _ for - or names the wrong server. A call of such a
// name, and tool_expand_tools given it, used to answer with the first 30 (or 25) names
// in alphabetical order, which with hundreds of tools never held the one meant, so
// the model could only guess again. They name the nearest tools the session has, and
// with more than 30 tools list none in name order.
func TestUnknownNamesAreAnsweredWithTheNearest(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	d := startDaemon(t, daemonOpts{})
	addEverything(t, d, js)
	s := d.createSession(map[string]any{})
	id := s["id"].(string)
	if n := len(toStrings(s["tools"])); n <= 30 {
		t.Fatalf("need more than 30 tools, have %d", n)
	}
	if code, _, _ := d.do("GET", "/v1/sessions/"+id+"/tools?query=read+the+contents+of+a+file", nil); code != 200 {
		t.Fatal(code)
	}
	calls := "/v1/sessions/" + id + "/tool-calls"
	_, evs := d.stream(calls, `{"calls":[{"id":"a","name":"get-sum","arguments":{"a":1,"b":2}},
		{"id":"b","name":"get_sum","arguments":{"a":1,"b":2}},
		{"id":"c","name":"mcp__evrything__get-sum","arguments":{"a":1,"b":2}}]}`)
	msgs := messages(t, evs)
	for _, c := range []string{"a", "b", "c"} {
		m := msgs[c]
		if m.str("error_kind") != "not_found" || !strings.Contains(string(m.raw), "did you mean mcp__everything__get-sum") ||
			strings.Contains(string(m.raw), "artifact_read") {
			t.Errorf("call %s of a near name: %s", c, m.raw)
		}
	}
	_, evs = d.stream(calls, `{"calls":[{"id":"x","name":"tool_expand_tools","arguments":{"tool_names":["get-sum","mcp__evrything__get-sum","echo"]}}]}`)
	var res struct {
		Invalid    []string            `json:"invalid_tools"`
		DidYouMean map[string][]string `json:"did_you_mean"`
	}
	raw, _ := json.Marshal(messages(t, evs)["x"].m["message"].(map[string]any)["structured"])
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"get-sum", "mcp__evrything__get-sum"} {
		if near := res.DidYouMean[n]; len(near) == 0 || near[0] != "mcp__everything__get-sum" {
			t.Errorf("expand %s: %s", n, raw)
		}
	}
	if len(res.Invalid) != 2 {
		t.Errorf("invalid names: %s", raw)
	}
}

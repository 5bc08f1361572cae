package server_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

func toolNames(t *testing.T, body []byte) []string {
	var tl struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(body, &tl); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range tl.Tools {
		out = append(out, x.Name)
	}
	return out
}

// TestToolSuggestionAndExpansion follows seed contract §3.1: a ranked turn list with
// tool_expand_tools; an allowed but unoffered tool is refused until expanded;
// expansion takes exact names, validated against the session's allowed set only.
func TestToolSuggestionAndExpansion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	s := d.createSession(map[string]any{}) // every tool: more than 15
	id := s["id"].(string)
	if len(toStrings(s["tools"])) <= 15 {
		t.Fatalf("need more than 15 tools, have %v", s["tools"])
	}
	code, _, body := d.do("GET", "/v1/sessions/"+id+"/tools?query=read+the+contents+of+a+file&limit=5", nil)
	if code != 200 {
		t.Fatal(code)
	}
	names := toolNames(t, body)
	joined := strings.Join(names, ",")
	if len(names) != 6 || !strings.Contains(joined, "read_file") || !strings.Contains(joined, "tool_expand_tools") {
		t.Fatalf("ranked list: %v", names)
	}
	calls := "/v1/sessions/" + id + "/tool-calls"
	_, evs := d.stream(calls, `{"calls":[{"id":"a","name":"echo","arguments":{"text":"x"}}]}`)
	if m := messages(t, evs)["a"]; m.str("error_kind") != "not_found" || !strings.Contains(string(m.raw), "tool_expand_tools") {
		t.Fatalf("unoffered tool: %s", m.raw)
	}
	_, evs = d.stream(calls, `{"calls":[{"id":"x","name":"tool_expand_tools","arguments":{"tool_names":[" echo ","echo","read_file","no_such_tool"]}}]}`)
	var res struct {
		Success             bool     `json:"success"`
		Expanded            []string `json:"expanded_tools"`
		Invalid             []string `json:"invalid_tools"`
		Already             []string `json:"already_selected_tools"`
		AvailableExpandable []string `json:"available_expandable_tools"`
	}
	raw, _ := json.Marshal(messages(t, evs)["x"].m["message"].(map[string]any)["structured"])
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Success || strings.Join(res.Expanded, ",") != "echo" || strings.Join(res.Invalid, ",") != "no_such_tool" ||
		strings.Join(res.Already, ",") != "read_file" || len(res.AvailableExpandable) == 0 || strings.Contains(strings.Join(res.AvailableExpandable, ","), "echo") {
		t.Fatalf("expand result: %s", raw)
	}
	_, evs = d.stream(calls, `{"calls":[{"id":"a","name":"echo","arguments":{"text":"now"}},{"id":"y","name":"tool_expand_tools","arguments":{"tool_names":"echo"}}]}`)
	msgs := messages(t, evs)
	// Expanding a tool loaded already is no failure: it is callable (success true).
	if msgs["a"].m["is_error"] != false || !strings.Contains(string(msgs["y"].raw), `\"success\":true`) || !strings.Contains(string(msgs["y"].raw), `\"already_selected_tools\":[\"echo\"]`) {
		t.Fatalf("after expansion: %s / %s", msgs["a"].raw, msgs["y"].raw)
	}

	// A tool expanded in the same batch as its call is offered to that call (a model
	// often sends both together); one the batch does not expand is still refused.
	_, evs = d.stream(calls, `{"calls":[{"id":"x","name":"tool_expand_tools","arguments":{"tool_names":["memory_save"]}},
		{"id":"m","name":"memory_save","arguments":{"content":"batched with its expansion"}},
		{"id":"g","name":"glob","arguments":{"pattern":"*"}}]}`)
	msgs = messages(t, evs)
	if msgs["m"].m["is_error"] != false || msgs["g"].str("error_kind") != "not_found" {
		t.Fatalf("expansion and call in one batch: %s / %s", msgs["m"].raw, msgs["g"].raw)
	}

	// Expansion never reaches past the session's whitelist.
	narrow := d.createSession(map[string]any{"available_tools": []string{"echo", "info"}})["id"].(string)
	_, evs = d.stream("/v1/sessions/"+narrow+"/tool-calls", `{"calls":[{"id":"x","name":"tool_expand_tools","arguments":{"tool_names":["execute_command"]}}]}`)
	if !strings.Contains(string(messages(t, evs)["x"].raw), `\"invalid_tools\":[\"execute_command\"]`) {
		t.Fatalf("expansion outside the whitelist: %s", messages(t, evs)["x"].raw)
	}
	// A small toolset is returned whole, with nothing narrowed.
	_, _, body = d.do("GET", "/v1/sessions/"+narrow+"/tools?query=anything", nil)
	if got := strings.Join(toolNames(t, body), ","); got != "echo,info" {
		t.Fatalf("small toolset: %s", got)
	}

	// A limit as large as the set narrows nothing: the turn keeps every tool.
	all := len(toStrings(s["tools"]))
	other := d.createSession(map[string]any{})["id"].(string)
	_, _, body = d.do("GET", "/v1/sessions/"+other+"/tools?query=read+a+file&limit=200", nil)
	if got := len(toolNames(t, body)); got < all {
		t.Errorf("limit 200: %d tools listed, want all %d", got, all)
	}

	// A query nothing matches ("thanks!") is bounded like any other: on a first turn
	// only tool_expand_tools (the model searches with it), said in no_match; it used
	// to list every allowed tool (111 KB with 400 tools).
	fresh := d.createSession(map[string]any{})["id"].(string)
	_, _, body = d.do("GET", "/v1/sessions/"+fresh+"/tools?query=bonjour+comment+%C3%A7a+va&limit=5", nil)
	var nm struct {
		NoMatch bool `json:"no_match"`
	}
	_ = json.Unmarshal(body, &nm)
	if got := strings.Join(toolNames(t, body), ","); got != "tool_expand_tools" || !nm.NoMatch {
		t.Fatalf("first turn, nothing matches: %s, no_match %v", got, nm.NoMatch)
	}
	_, evs = d.stream("/v1/sessions/"+fresh+"/tool-calls", `{"calls":[{"id":"g","name":"echo","arguments":{"text":"x"}}]}`)
	if m := messages(t, evs)["g"]; m.str("error_kind") != "not_found" || !strings.Contains(string(m.raw), "tool_expand_tools") {
		t.Fatalf("first turn, nothing matched, then a call of echo: %s", m.raw)
	}
	// Later in the conversation, it keeps the tools the turn before offered and
	// expanded (a "thanks!" or "do it again" goes on with them), at most limit.
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools", nil)
	before := toolNames(t, body)
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools?query=thanks%21&limit=20", nil)
	_ = json.Unmarshal(body, &nm)
	if got := toolNames(t, body); !slices.Equal(got, before) || !nm.NoMatch {
		t.Fatalf("later turn, nothing matches: %v, want the turn before's %v (no_match %v)", got, before, nm.NoMatch)
	}
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools?query=thanks%21&limit=3", nil)
	if got := toolNames(t, body); len(got) != 4 || !slices.Contains(got, "tool_expand_tools") {
		t.Fatalf("later turn, nothing matches, limit 3: %v", got)
	}
	// A query that matches says nothing of it.
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools?query=read+a+file&limit=3", nil)
	if strings.Contains(string(body), "no_match") {
		t.Fatalf("a query that matched: %s", body)
	}
}

func TestToolGroups(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ToolGroups = []config.ToolGroupConfig{
			{Name: "web", Description: "Fetch web pages.", Instructions: "Cite every URL you used.", Tools: []string{"web_*"}},
			{Name: "memory", Description: "Long-term memory.", Instructions: "Save only durable facts.", Tools: []string{"memory_*"}},
		}
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"echo", "web_fetch", "memory_save", "memory_search"}})["id"].(string)
	_, _, body := d.do("GET", "/v1/sessions/"+id+"/tools", nil)
	if got := strings.Join(toolNames(t, body), ","); got != "echo,reset_tools" {
		t.Fatalf("inactive groups' tools listed: %s", got)
	}
	calls := "/v1/sessions/" + id + "/tool-calls"
	_, evs := d.stream(calls, `{"calls":[{"id":"m","name":"memory_search","arguments":{"query":"x"}}]}`)
	if m := messages(t, evs)["m"]; m.str("error_kind") != "not_found" {
		t.Fatalf("tool of an inactive group ran: %s", m.raw)
	} else if text := m.m["message"].(map[string]any)["content"].(string); !strings.Contains(text, `tool group "memory", which is switched off`) ||
		!strings.Contains(text, `reset_tools with {"memory":true}`) {
		// The model is told how to get the tool, not only that it is not there.
		t.Fatalf("not_found for a tool of an inactive group does not say how to switch it on: %q", text)
	}
	_, evs = d.stream(calls, `{"calls":[{"id":"r","name":"reset_tools","arguments":{"memory":true,"web":false}}]}`)
	if m := messages(t, evs)["r"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "Save only durable facts") || strings.Contains(string(m.raw), "Cite every URL") {
		t.Fatalf("reset_tools: %s", m.raw)
	}
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools", nil)
	if got := strings.Join(toolNames(t, body), ","); got != "echo,memory_save,memory_search,reset_tools" {
		t.Fatalf("after reset_tools: %s", got)
	}
	// reset_tools sets the whole set: the way back to web keeps memory on.
	_, evs = d.stream(calls, `{"calls":[{"id":"w","name":"web_fetch","arguments":{"url":"http://127.0.0.1:1/"}}]}`)
	if m := messages(t, evs)["w"]; m.str("error_kind") != "not_found" ||
		!strings.Contains(m.m["message"].(map[string]any)["content"].(string), `reset_tools with {"memory":true,"web":true}`) {
		t.Fatalf("web_fetch with web off: %s", m.raw)
	}
	// An unknown group changes nothing, and the answer names it and the groups there
	// are (the schema's words, "additional properties not allowed", did neither).
	_, evs = d.stream(calls, `{"calls":[{"id":"r","name":"reset_tools","arguments":{"nope":true,"memory":true}}]}`)
	if m := messages(t, evs)["r"]; m.str("error_kind") != "invalid_args" {
		t.Fatalf("unknown group: %s", m.raw)
	} else if text := m.m["message"].(map[string]any)["content"].(string); !strings.Contains(text, `unknown group "nope"`) ||
		!strings.Contains(text, "memory (on)") || !strings.Contains(text, "web (off)") || strings.Contains(text, "additional properties") {
		t.Fatalf("unknown group: %q, want it named and the session's groups listed", text)
	}
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools", nil)
	if got := strings.Join(toolNames(t, body), ","); got != "echo,memory_save,memory_search,reset_tools" {
		t.Fatalf("an invalid reset changed the set: %s", got)
	}
	// The active groups are part of the persisted session.
	_, _, sb := d.do("GET", "/v1/sessions/"+id, nil)
	if !strings.Contains(string(sb), `"tools":["echo","memory_save","memory_search"]`) {
		t.Fatalf("session: %s", sb)
	}
}

// TestSessionToolListingIsTheTurnsSelection: after a ranked listing, the listing
// without a query is what the turn may call (the ranked tools, those expanded since,
// tool_expand_tools), so a backend that lists again after an expansion gets the
// expanded tool's schema and never offers a tool its call would refuse. A present but
// empty query lifts the narrowing.
func TestSessionToolListingIsTheTurnsSelection(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	_, _, body := d.do("GET", "/v1/sessions/"+id+"/tools?query=read+the+contents+of+a+file&limit=5", nil)
	ranked := toolNames(t, body)
	if strings.Contains(strings.Join(ranked, ","), "echo") {
		t.Fatalf("echo ranked for a file query: %v", ranked)
	}
	calls := "/v1/sessions/" + id + "/tool-calls"
	d.stream(calls, `{"calls":[{"id":"x","name":"tool_expand_tools","arguments":{"tool_names":["echo"]}}]}`)
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools", nil)
	listed := toolNames(t, body)
	want := append(append([]string(nil), ranked...), "echo")
	slices.Sort(want)
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Fatalf("listing after the ranked one and an expansion:\n got %v\nwant %v", listed, want)
	}
	for _, name := range listed {
		if name == "glob" {
			t.Fatalf("glob listed though not offered this turn")
		}
	}
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/tools?query=", nil)
	if got := toolNames(t, body); len(got) <= len(want) || !slices.Contains(got, "glob") {
		t.Fatalf("an empty query should list every tool: %v", got)
	}
	_, evs := d.stream(calls, `{"calls":[{"id":"g","name":"glob","arguments":{"pattern":"*"}}]}`)
	if m := messages(t, evs)["g"]; m.m["is_error"] != false {
		t.Fatalf("glob after an empty query: %s", m.raw)
	}
}

package server_test

import (
	"encoding/json"
	"fmt"
	"github.com/toolserverd/toolserverd/internal/config"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAgentBackendFlow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})

	s := d.createSession(map[string]any{"available_tools": []string{"echo", "whoami", "sleep_*", "nope", "ghost_*"}})
	id := s["id"].(string)
	if got := fmt.Sprint(s["tools"]); got != "[echo sleep_safe sleep_unsafe whoami]" {
		t.Fatalf("session tools = %s", got)
	}
	if got := fmt.Sprint(s["warnings"]); !strings.Contains(got, "unknown tool: nope") || !strings.Contains(got, "ghost_*") {
		t.Fatalf("warnings = %s", got)
	}

	// Schemas in each provider's format, sorted by name.
	for _, f := range []string{"openai", "openai_responses", "anthropic", "gemini", "mcp", "native"} {
		code, _, body := d.do("GET", "/v1/sessions/"+id+"/tools?format="+f, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", f, code, body)
		}
		validate(t, "ToolList", body)
		var tl struct {
			Tools []map[string]any `json:"tools"`
		}
		_ = json.Unmarshal(body, &tl)
		if len(tl.Tools) != 4 {
			t.Fatalf("%s: %d tools", f, len(tl.Tools))
		}
		name := func(m map[string]any) string {
			if fn, ok := m["function"].(map[string]any); ok {
				return fn["name"].(string)
			}
			return m["name"].(string)
		}
		if name(tl.Tools[0]) != "echo" || name(tl.Tools[3]) != "whoami" {
			t.Fatalf("%s: not sorted: %s", f, body)
		}
	}

	// The model's tool_calls forwarded untouched (OpenAI shape), one with broken JSON,
	// one for a tool outside the whitelist, one with bad arguments.
	body := `{"calls":[
	  {"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hello\"}"}},
	  {"id":"call_2","type":"function","function":{"name":"echo","arguments":"{\"text\": \"unterminated"}},
	  {"id":"call_3","type":"function","function":{"name":"panics","arguments":"{}"}},
	  {"id":"call_4","type":"function","function":{"name":"echo","arguments":"{\"text\":5}"}},
	  {"id":"call_5","type":"function","function":{"name":"whoami","arguments":"{\"q\":\"x\",\"session_id\":\"ses_other\"}"}}
	]}`
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=openai", body)
	if code != 200 {
		t.Fatalf("tool-calls: %d %s", code, evs[0].raw)
	}
	msgs := messages(t, evs)
	want := map[string]struct {
		isErr bool
		kind  string
		text  string
	}{
		"call_1": {false, "", "hello"},
		"call_2": {true, "invalid_args", "malformed JSON"},
		"call_3": {true, "not_found", "not available in this session"},
		"call_4": {true, "invalid_args", "/text"},
		"call_5": {false, "", id + ` {"q":"x"}`},
	}
	for cid, w := range want {
		m, ok := msgs[cid]
		if !ok {
			t.Fatalf("no message for %s", cid)
		}
		msg := m.m["message"].(map[string]any)
		if m.m["is_error"] != w.isErr || m.str("error_kind") != w.kind || !strings.Contains(msg["content"].(string), w.text) {
			t.Errorf("%s: is_error=%v kind=%q content=%q; want %v %q containing %q", cid, m.m["is_error"], m.str("error_kind"), msg["content"], w.isErr, w.kind, w.text)
		}
		if len(msg) != 3 || msg["role"] != "tool" || msg["tool_call_id"] != cid {
			t.Errorf("%s: not an OpenAI tool message: %v", cid, msg)
		}
	}

	// The record, by the daemon's id and by the model's id.
	tc := msgs["call_1"].str("call_id")
	if !strings.HasPrefix(tc, "tc_") {
		t.Fatalf("call id %q", tc)
	}
	code, _, rec := d.do("GET", "/v1/tool-calls/"+tc, nil)
	if code != 200 {
		t.Fatalf("get call: %d %s", code, rec)
	}
	validate(t, "CallRecord", rec)
	var r struct {
		Status    string          `json:"status"`
		Arguments json.RawMessage `json:"arguments"`
		Result    struct {
			Details    json.RawMessage `json:"details"`
			Structured json.RawMessage `json:"structured"`
		} `json:"result"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
	}
	_ = json.Unmarshal(rec, &r)
	if r.Status != "succeeded" || string(r.Arguments) != `{"text":"hello"}` || string(r.Result.Details) != `{"len":5}` || r.StartedAt == nil || r.FinishedAt == nil {
		t.Fatalf("record = %s", rec)
	}
	code, _, rec2 := d.do("GET", "/v1/sessions/"+id+"/tool-calls/call_2", nil)
	if code != 200 || !strings.Contains(string(rec2), `"failed"`) || !strings.Contains(string(rec2), "unterminated") {
		t.Fatalf("by model id: %d %s", code, rec2)
	}
	code, _, list := d.do("GET", "/v1/sessions/"+id+"/tool-calls?limit=10", nil)
	if code != 200 || strings.Count(string(list), `"tc_`) != 5 {
		t.Fatalf("list: %d %s", code, list)
	}
}

func TestMessageFormats(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)

	// Anthropic tool_use blocks in, Anthropic tool_result out.
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=anthropic",
		`{"calls":[{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"hi"},"caller":{"type":"direct"}},
		           {"type":"tool_use","id":"toolu_2","name":"echo","input":{}}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, evs[0].raw)
	}
	msgs := messages(t, evs)
	var m struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"content"`
	}
	raw, _ := json.Marshal(msgs["toolu_1"].m["message"])
	_ = json.Unmarshal(raw, &m)
	if m.Role != "user" || len(m.Content) != 1 || m.Content[0].Type != "tool_result" || m.Content[0].ToolUseID != "toolu_1" || m.Content[0].Content[0].Text != "hi" || m.Content[0].IsError {
		t.Fatalf("anthropic message = %s", raw)
	}
	raw, _ = json.Marshal(msgs["toolu_2"].m["message"])
	if !strings.Contains(string(raw), `"is_error":true`) || !strings.Contains(string(raw), "missing property") {
		t.Fatalf("anthropic error message = %s", raw)
	}

	// Native: structured content is passed, details are not.
	code, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"a","name":"echo","arguments":{"text":"yo"}}]}`)
	if code != 200 {
		t.Fatal(code)
	}
	raw, _ = json.Marshal(messages(t, evs)["a"].m["message"])
	if !strings.Contains(string(raw), `"structured":{"echo":"yo"}`) || strings.Contains(string(raw), "len") || !strings.Contains(string(raw), `"name":"echo"`) {
		t.Fatalf("native message = %s", raw)
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.MaxBodyBytes = 4096 }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		ctype  string
		status int
		code   string
		msg    string
	}{
		{"malformed json", "POST", calls, `{"calls":[`, "", 400, "invalid_json", "malformed JSON"},
		{"trailing data", "POST", calls, `{"calls":[{"id":"a","name":"echo"}]} {}`, "", 400, "invalid_json", "after it"},
		{"unknown field", "POST", calls, `{"calls":[{"id":"a","name":"echo"}],"stratgy":"x"}`, "", 400, "invalid_json", "stratgy"},
		// The model's message or output sent as the body: where its calls go.
		{"an OpenAI message as the body", "POST", calls, `{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"echo","arguments":"{}"}}]}`, "", 400, "invalid_json", `unknown field "role": the model's calls go in "calls"`},
		{"OpenAI tool_calls as the body", "POST", calls, `{"tool_calls":[]}`, "", 400, "invalid_json", `unknown field "tool_calls": the model's calls go in "calls"`},
		{"an Anthropic message as the body", "POST", "/v1/tool-calls", `{"content":[{"type":"tool_use","id":"a","name":"echo","input":{}}],"session":{}}`, "", 400, "invalid_json", `the model's calls go in "calls"`},
		{"a Responses output as the body", "POST", calls, `{"output":[]}`, "", 400, "invalid_json", `the model's calls go in "calls"`},
		{"a Gemini candidate as the body", "POST", calls, `{"parts":[]}`, "", 400, "invalid_json", `the model's calls go in "calls"`},
		{"wrong type", "POST", calls, `{"calls":{}}`, "", 400, "invalid_json", "calls must be an array"},
		{"empty body", "POST", calls, ``, "", 400, "invalid_json", "empty"},
		// null is no object: it must not create a session with every tool.
		{"null session spec", "POST", "/v1/sessions", `null`, "", 400, "invalid_json", "JSON object"},
		{"null batch", "POST", calls, ` null `, "", 400, "invalid_json", "JSON object"},
		{"null interrupt", "POST", "/v1/sessions/" + id + "/interrupt", `null`, "", 400, "invalid_json", "JSON object"},
		{"too large", "POST", calls, `{"calls":[{"id":"a","name":"echo","arguments":{"text":"` + strings.Repeat("x", 5000) + `"}}]}`, "", 413, "body_too_large", "4096"},
		{"duplicate ids", "POST", calls, `{"calls":[{"id":"a","name":"echo"},{"id":"a","name":"echo"}]}`, "", 400, "bad_request", "unique"},
		{"missing id", "POST", calls, `{"calls":[{"name":"echo"}]}`, "", 400, "bad_request", "id is required"},
		{"no calls", "POST", calls, `{"calls":[]}`, "", 400, "bad_request", "at least one"},
		{"wrong type in the third call", "POST", calls, `{"calls":[{"id":"a","name":"echo"},{"id":"b","name":"echo"},{"id":"c","name":5}]}`, "", 400, "invalid_json", "calls[2].name must be a string"},
		{"wrong type in a whitelist", "POST", "/v1/sessions", `{"available_tools":["echo","info",7]}`, "", 400, "invalid_json", "available_tools[2] must be a string"},
		{"fractional timeout", "POST", calls, `{"calls":[{"id":"a","name":"echo"}],"timeout_ms":1.5}`, "", 400, "invalid_json", "timeout_ms must be an integer"},
		{"calls absent", "POST", calls, `{}`, "", 400, "bad_request", "calls is required"},
		{"bad strategy", "POST", calls, `{"calls":[{"id":"a","name":"echo"}],"strategy":"random"}`, "", 400, "bad_request", "strategy"},
		{"session on session route", "POST", calls, `{"calls":[{"id":"a","name":"echo"}],"session":{}}`, "", 400, "bad_request", "only accepted"},
		{"wrong content type", "POST", calls, `x`, "text/plain", 415, "unsupported_media_type", "application/json"},
		{"unknown session", "POST", "/v1/sessions/ses_nope/tool-calls", `{"calls":[{"id":"a","name":"echo"}]}`, "", 404, "not_found", "session"},
		{"unknown session get", "GET", "/v1/sessions/ses_nope", nil, "", 404, "not_found", "session"},
		{"unknown call", "GET", "/v1/tool-calls/tc_nope", nil, "", 404, "not_found", "tool call"},
		{"unknown route", "GET", "/v1/nothing", nil, "", 404, "not_found", "no route"},
		{"wrong method", "DELETE", "/v1/sessions", nil, "", 405, "method_not_allowed", "DELETE"},
		{"bad format", "GET", "/v1/tools?format=xml", nil, "", 400, "bad_request", "format"},
		{"bad permission mode", "POST", "/v1/sessions", `{"permission_mode":"yolo"}`, "", 400, "bad_request", "permission_mode"},
		{"relative workdir", "POST", "/v1/sessions", `{"workdir":"../etc"}`, "", 400, "bad_request", "absolute"},
		{"workdir outside roots", "POST", "/v1/sessions", `{"workdir":"/etc"}`, "", 400, "bad_request", "allowed root"},
		{"one-shot without session", "POST", "/v1/tool-calls", `{"calls":[{"id":"a","name":"echo"}]}`, "", 400, "bad_request", "session is required"},
		{"bad limit", "GET", "/v1/sessions/" + id + "/tool-calls?limit=0", nil, "", 400, "bad_request", "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, d.url+c.path, nil)
			if s, ok := c.body.(string); ok {
				req, _ = http.NewRequest(c.method, d.url+c.path, strings.NewReader(s))
				req.Header.Set("Content-Type", "application/json")
			}
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body []byte
			body, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			validate(t, "Error", body)
			var e struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(body, &e)
			if e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("error = %s; want code %s with %q", body, c.code, c.msg)
			}
		})
	}
}

func TestInfoToolSeesOnlyTheWhitelist(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"info", "echo", "read_file"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[
		{"id":"a","name":"info","arguments":{"tool":"read_file"}},
		{"id":"b","name":"info","arguments":{"tool":"big"}}]}`)
	msgs := messages(t, evs)
	a := msgs["a"].m["message"].(map[string]any)["content"].(string)
	if msgs["a"].m["is_error"] != false || !strings.Contains(a, "# read_file") || !strings.Contains(a, `"offset"`) || !strings.Contains(a, "read-only: true") {
		t.Fatalf("info read_file: %s", a)
	}
	if msgs["b"].str("error_kind") != "not_found" || !strings.Contains(string(msgs["b"].raw), "echo, info, read_file") {
		t.Fatalf("info on a tool outside the whitelist: %s", msgs["b"].raw)
	}
}

// TestToolCallIDInPath: a model's tool_call_id may hold characters that clients
// percent-encode in a path (encodeURIComponent encodes ":" and "/"); the record is
// found either way.
func TestToolCallIDInPath(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	body := `{"calls":[{"id":"functions.echo:0","name":"echo","arguments":{"text":"a"}},
	  {"id":"x/y","name":"echo","arguments":{"text":"b"}}]}`
	if code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", body); code != 200 {
		t.Fatalf("tool-calls: %d %s", code, evs[0].raw)
	}
	for _, tt := range []struct{ path, want string }{
		{"functions.echo:0", "functions.echo:0"},
		{"functions.echo%3A0", "functions.echo:0"},
		{"x%2Fy", "x/y"},
	} {
		code, _, rec := d.do("GET", "/v1/sessions/"+id+"/tool-calls/"+tt.path, nil)
		if code != 200 || !strings.Contains(string(rec), `"tool_call_id":"`+tt.want+`"`) {
			t.Errorf("GET .../tool-calls/%s = %d %s; want the record of %s", tt.path, code, rec, tt.want)
		}
	}
	// Session ids are decoded too.
	if code, _, body := d.do("GET", "/v1/sessions/"+strings.Replace(id, "_", "%5F", 1), nil); code != 200 {
		t.Errorf("GET session with an escaped id = %d %s", code, body)
	}
}

package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestExportedSchemasAreObjects: a tool declared in the config with a schema that
// leaves out "type" or "properties" (valid JSON Schema) is still exported as the
// providers require: OpenAI refuses a function whose parameters lack
// "properties" ("object schema missing properties") or "type":"object", Anthropic an
// input_schema without "type". One such tool would fail every request of the turn.
func TestExportedSchemasAreObjects(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ExternalTools = []config.ExternalToolConfig{
			{Name: "pick_color", Description: "Ask the user for a color.", Parameters: map[string]any{"type": "object"}},
			{Name: "pick_size", Description: "Ask the user for a size.", Parameters: map[string]any{
				"properties": map[string]any{"unit": map[string]any{"type": "string"}}}},
		}
	}})
	for _, f := range []string{"openai", "anthropic"} {
		code, _, body := d.do("GET", "/v1/tools?format="+f, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", f, code, body)
		}
		var list struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"input_schema"`
				Function    struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tl := range list.Tools {
			name, schema := tl.Name, tl.InputSchema
			if f == "openai" {
				name, schema = tl.Function.Name, tl.Function.Parameters
			}
			if name != "pick_color" && name != "pick_size" {
				continue
			}
			found++
			var s struct {
				Type       any             `json:"type"`
				Properties json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(schema, &s); err != nil {
				t.Fatal(err)
			}
			if s.Type != "object" || len(s.Properties) == 0 || s.Properties[0] != '{' {
				t.Errorf("%s: %s exported with a schema the provider refuses: %s", f, name, schema)
			}
		}
		if found != 2 {
			t.Fatalf("%s: %d of the 2 tools listed: %s", f, found, body)
		}
	}
}

// firstEvents posts a batch and reads its stream for at most wait: the events read,
// and whether done was among them.
func firstEvents(t *testing.T, d *daemon, path, body string, wait time.Duration) ([]event, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []event
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return evs, false
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", line, err)
		}
		evs = append(evs, event{raw: line, m: m})
		if m["type"] == "done" {
			return evs, true
		}
	}
}

func rawLines(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		b.Write(e.raw)
	}
	return b.String()
}

// TestArgumentsCheckedBeforeAnyoneIsAsked: arguments are validated (and stripped of
// identity fields) before the permission check and before an external tool's call
// is handed out (the design's order: validate, then permission). Bad arguments come
// back at once as invalid_args the model can fix, instead of a person being asked to
// approve, or to answer, a call that cannot run; and spoofed identity fields never
// reach the UI that answers an external tool.
func TestArgumentsCheckedBeforeAnyoneIsAsked(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"ask_user", "execute_command"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	for _, c := range []struct{ name, args string }{
		{"ask_user", `{"question":5}`},
		{"execute_command", `{"command":"echo ran >> ran.txt","no_such_option":true}`},
	} {
		evs, done := firstEvents(t, d, calls, `{"calls":[{"id":"a","name":"`+c.name+`","arguments":`+c.args+`}]}`, 5*time.Second)
		if !done {
			t.Errorf("%s %s: the call waits instead of being answered: %s", c.name, c.args, rawLines(evs))
			continue
		}
		if m := messages(t, evs)["a"]; m.str("error_kind") != "invalid_args" {
			t.Fatalf("%s %s: %s", c.name, c.args, m.raw)
		}
	}

	evs, _ := firstEvents(t, d, calls, `{"calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which colour?","user_id":"admin","session_id":"ses_other"}}]}`, 3*time.Second)
	var input *event
	for i := range evs {
		if evs[i].str("type") == "input_required" {
			input = &evs[i]
		}
	}
	if input == nil {
		t.Fatalf("no input_required: %s", rawLines(evs))
	}
	if args := string(input.raw); !strings.Contains(args, "Which colour?") || strings.Contains(args, "admin") || strings.Contains(args, "ses_other") {
		t.Fatalf("input_required carries identity fields the model made up: %s", args)
	}
}

// TestAnthropicToolResultBlocks: Anthropic refuses a tool_result whose text block is
// empty or only whitespace ("text content blocks must contain non-whitespace text")
// and an image whose media type is not JPEG, PNG, GIF or WebP. A command that prints
// a blank line, or an MCP tool returning an SVG chart, must not make the backend's
// next request fail.
func TestAnthropicToolResultBlocks(t *testing.T) {
	t.Parallel()
	const png = "iVBORw0KGgo="
	d, id := withDraw(t, tool.Content{Type: tool.ContentText, Text: "\n"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/svg+xml", Data: "PHN2Zy8+"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/png", Data: png})
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=anthropic",
		`{"calls":[{"type":"tool_use","id":"blank","name":"echo","input":{"text":" \n\t"}},{"type":"tool_use","id":"img","name":"draw","input":{}}]}`)
	msgs := messages(t, evs)
	for _, id := range []string{"blank", "img"} {
		var m struct {
			Content []struct {
				Type    string `json:"type"`
				Content []struct {
					Type   string `json:"type"`
					Text   *string
					Source *struct {
						MediaType string `json:"media_type"`
						Data      string `json:"data"`
					} `json:"source"`
				} `json:"content"`
			} `json:"content"`
		}
		raw, _ := json.Marshal(msgs[id].m["message"])
		if err := json.Unmarshal(raw, &m); err != nil || len(m.Content) != 1 || len(m.Content[0].Content) == 0 {
			t.Fatalf("%s: %s", id, raw)
		}
		images := 0
		for _, b := range m.Content[0].Content {
			switch b.Type {
			case "text":
				if b.Text == nil || strings.TrimSpace(*b.Text) == "" {
					t.Errorf("%s: a text block Anthropic refuses: %s", id, raw)
				}
			case "image":
				images++
				if mt := b.Source.MediaType; mt != "image/png" || b.Source.Data != png {
					t.Errorf("%s: an image block Anthropic refuses: %s", id, raw)
				}
			}
		}
		if id == "img" && (images != 1 || !strings.Contains(string(raw), "image/svg+xml")) {
			t.Errorf("%s: the PNG must stay an image and the SVG be named in text: %s", id, raw)
		}
	}
}

// TestExternalToolNamedLikeABuiltin: an external tool may not take a built-in tool's
// name (a file tool, a task tool registered later); start-up stops naming the key.
func TestExternalToolNamedLikeABuiltin(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"read_file", "task_list"} {
		cfg := config.Defaults()
		cfg.DataDir, cfg.Auth.Unauthenticated = t.TempDir(), true
		cfg.ExternalTools = []config.ExternalToolConfig{{Name: "ask_boss", Description: "Asks the boss."}, {Name: name, Description: "Asks a person."}}
		a, err := app.New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			a.Close()
			t.Fatalf("an external tool named %s was accepted", name)
		}
		if want := `external_tools[1].name: "` + name + `" is the name of a built-in tool`; !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not say %q", err, want)
		}
	}
}

// TestOpenAIResponsesFunctionCall: an OpenAI Responses API function_call item
// forwarded untouched ({"type":"function_call","id":"fc_…","call_id":"call_…",…})
// is answered under its call_id, the id its function_call_output must name; the
// item's own id (fc_…) names the output item, and an answer under it is refused by
// OpenAI ("No tool call found for function call output").
func TestOpenAIResponsesFunctionCall(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=openai", `{"calls":[
	  {"type":"function_call","id":"fc_1","call_id":"call_r1","name":"echo","arguments":"{\"text\":\"hi\"}","status":"completed"},
	  {"type":"function_call","id":"fc_2","call_id":"call_r2","name":"echo","arguments":"{\"text\":"}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, evs[0].raw)
	}
	msgs := messages(t, evs)
	for cid, want := range map[string]string{"call_r1": "hi", "call_r2": "malformed JSON"} {
		m, ok := msgs[cid]
		if !ok {
			t.Fatalf("no message under %s: %s", cid, rawLines(evs))
		}
		msg := m.m["message"].(map[string]any)
		if msg["tool_call_id"] != cid || !strings.Contains(msg["content"].(string), want) {
			t.Errorf("%s: message %v, want content with %q", cid, msg, want)
		}
	}
	if code, _, rec := d.do("GET", "/v1/sessions/"+id+"/tool-calls/call_r1", nil); code != 200 || !strings.Contains(string(rec), `"succeeded"`) {
		t.Errorf("record by call_id: %d %s", code, rec)
	}
}

// TestOpenAIResponsesFormat: with ?format=openai_responses each message is the
// function_call_output item the Responses API takes, under the call's call_id, so a
// backend appends it to its input as it is. A result with images OpenAI reads gives
// the output as content parts (input_text, input_image as a data URL); an image of
// another type is named in text.
func TestOpenAIResponsesFormat(t *testing.T) {
	t.Parallel()
	const png = "iVBORw0KGgo="
	d, id := withDraw(t, tool.Content{Type: tool.ContentText, Text: "chart:"},
		tool.Content{Type: tool.ContentText, Text: " \n"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/svg+xml", Data: "PHN2Zy8+"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/PNG", Data: png})
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=openai_responses", `{"calls":[
	  {"type":"function_call","id":"fc_1","call_id":"call_r1","name":"echo","arguments":"{\"text\":\"hi\"}","status":"completed"},
	  {"type":"function_call","id":"fc_2","call_id":"call_r2","name":"draw","arguments":"{}"}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, evs[0].raw)
	}
	msgs := messages(t, evs)
	raw, _ := json.Marshal(msgs["call_r1"].m["message"])
	if want := `{"call_id":"call_r1","output":"hi","type":"function_call_output"}`; string(raw) != want {
		t.Errorf("text result:\n got %s\nwant %s", raw, want)
	}
	raw, _ = json.Marshal(msgs["call_r2"].m["message"])
	if want := `{"call_id":"call_r2","output":[{"text":"chart:","type":"input_text"},{"text":"[image/svg+xml image not shown: the model takes JPEG, PNG, GIF and WebP images only]","type":"input_text"},` +
		`{"detail":"auto","image_url":"data:image/png;base64,` + png + `","type":"input_image"}],"type":"function_call_output"}`; string(raw) != want {
		t.Errorf("image result:\n got %s\nwant %s", raw, want)
	}
}

// TestGeminiMultimodal: with ?format=gemini a function response is text only and
// says which images are not shown; with &multimodal=true its PNG, JPEG and WebP
// images go in the functionResponse's parts as inlineData, each named in the text
// where it was, and an image of another type is still named as not shown.
func TestGeminiMultimodal(t *testing.T) {
	t.Parallel()
	const png, jpeg = "iVBORw0KGgo=", "/9j/4AAQ"
	d, id := withDraw(t, tool.Content{Type: tool.ContentText, Text: "chart:"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/PNG", Data: png},
		tool.Content{Type: tool.ContentImage, MimeType: "image/svg+xml", Data: "PHN2Zy8+"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/jpeg", Data: jpeg})
	for _, c := range []struct{ query, want string }{
		{"", `{"functionResponse":{"id":"g1","name":"draw","response":{"output":"chart:\n` +
			`[image/PNG image not shown: Gemini function responses carry only text here]\n` +
			`[image/svg+xml image not shown: Gemini function responses carry only text here]\n` +
			`[image/jpeg image not shown: Gemini function responses carry only text here]"}}}`},
		{"&multimodal=true", `{"functionResponse":{"id":"g1","name":"draw","parts":[` +
			`{"inlineData":{"data":"` + png + `","displayName":"image_1.png","mimeType":"image/png"}},` +
			`{"inlineData":{"data":"` + jpeg + `","displayName":"image_2.jpg","mimeType":"image/jpeg"}}],` +
			`"response":{"output":"chart:\n[image/png image attached: image_1.png]\n` +
			`[image/svg+xml image not shown: Gemini takes PNG, JPEG and WebP images in function responses]\n` +
			`[image/jpeg image attached: image_2.jpg]"}}}`},
	} {
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=gemini"+c.query, `{"calls":[{"functionCall":{"id":"g1","name":"draw","args":{}}}]}`)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.query, code, evs[0].raw)
		}
		raw, _ := json.Marshal(messages(t, evs)["g1"].m["message"])
		if string(raw) != c.want {
			t.Errorf("format=gemini%s:\n got %s\nwant %s", c.query, raw, c.want)
		}
	}
	if code, _, body := d.do("POST", "/v1/sessions/"+id+"/tool-calls?format=gemini&multimodal=yes-please", `{"calls":[]}`); code != 400 || !strings.Contains(string(body), "multimodal must be true or false") {
		t.Errorf("a bad multimodal value: %d %s", code, body)
	}
}

// TestGeminiFunctionCalls: Gemini functionCall parts are taken as the model gave
// them (thoughtSignature and all), and ?format=gemini answers each with a
// functionResponse part: the model's id when it gave one, its output, or "error" for
// a failed call. Gemini often gives no id: such a call runs (it was a 400 "id is
// required") under the daemon's id, several in one batch too, and its
// functionResponse names no id, as the model named none.
func TestGeminiFunctionCalls(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	batch := `{"calls":[
	  {"functionCall":{"id":"g1","name":"echo","args":{"text":"one"}},"thoughtSignature":"c2ln"},
	  {"functionCall":{"name":"echo","args":{"text":"two"}},"thoughtSignature":"c2ln"},
	  {"functionCall":{"name":"echo","args":{"text":"three"}}},
	  {"name":"echo","args":{"text":"four"}},
	  {"functionCall":{"name":"nope"}}]}`
	validate(t, "ToolCallsRequest", []byte(batch))
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=gemini", batch)
	if code != 200 {
		t.Fatalf("%d %s", code, evs[0].raw)
	}
	type part struct {
		FunctionResponse struct {
			ID       *string           `json:"id"`
			Name     string            `json:"name"`
			Response map[string]string `json:"response"`
		} `json:"functionResponse"`
	}
	byOutput := map[string]event{}
	for id, m := range messages(t, evs) {
		raw, _ := json.Marshal(m.m["message"])
		var p part
		if err := json.Unmarshal(raw, &p); err != nil || len(p.FunctionResponse.Response) != 1 {
			t.Fatalf("%s: not a functionResponse part: %s", id, raw)
		}
		fr := p.FunctionResponse
		key := fr.Response["output"]
		if e, ok := fr.Response["error"]; ok {
			key = "error"
			if m.m["is_error"] != true || fr.Name != "nope" || !strings.Contains(e, "not available") {
				t.Errorf("failed call: %s", m.raw)
			}
		}
		byOutput[key] = m
		switch {
		case key == "one" && (fr.ID == nil || *fr.ID != "g1" || id != "g1"):
			t.Errorf("the model's id is not kept: %s", m.raw)
		case key != "one" && (fr.ID != nil || id != m.str("call_id") || !strings.HasPrefix(id, "tc_")):
			t.Errorf("a call without an id must be answered under the daemon's id and name none: %s", m.raw)
		case fr.Name != m.str("name"):
			t.Errorf("functionResponse names %q: %s", fr.Name, m.raw)
		}
	}
	for _, k := range []string{"one", "two", "three", "four", "error"} {
		if _, ok := byOutput[k]; !ok {
			t.Fatalf("no message with %q: %s", k, rawLines(evs))
		}
	}
	tc := byOutput["two"].str("call_id")
	if code, _, rec := d.do("GET", "/v1/sessions/"+id+"/tool-calls/"+tc, nil); code != 200 || !strings.Contains(string(rec), `"two"`) {
		t.Errorf("record of a call without an id, by its tool_call_id: %d %s", code, rec)
	}

	// A call without an id has nothing resume could find it by: it runs.
	code, evs = d.stream("/v1/sessions/"+id+"/tool-calls?format=gemini", `{"resume":true,"calls":[
	  {"functionCall":{"id":"g1","name":"echo","args":{"text":"one"}}},
	  {"functionCall":{"name":"echo","args":{"text":"two"}}}]}`)
	if code != 200 {
		t.Fatalf("resume: %d %s", code, evs[0].raw)
	}
	for id, m := range messages(t, evs) {
		if resumed := m.m["resumed"] == true; resumed != (id == "g1") {
			t.Errorf("resume: %s resumed=%v: %s", id, resumed, m.raw)
		}
	}

	// The daemon's shape still needs its id.
	if code, _, body := d.do("POST", "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"name":"echo","arguments":{"text":"x"}}]}`); code != 400 || !strings.Contains(string(body), "id is required") {
		t.Errorf("a native call without an id: %d %s", code, body)
	}
	// A bare FunctionCall of a function without parameters has neither args nor,
	// often, an id: under format gemini it runs.
	if code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=gemini", `{"calls":[{"name":"echo"}]}`); code != 200 {
		t.Errorf("a bare FunctionCall without args or id: %d %s", code, evs[0].raw)
	} else if m := messages(t, evs); len(m) != 1 {
		t.Errorf("a bare FunctionCall without args or id: %s", rawLines(evs))
	}
}

// TestGeminiToolList: the gemini listing holds function declarations with the
// schema in parametersJsonSchema, and leaves out a tool whose name Gemini refuses
// (it must start with a letter or '_'), naming it in omitted: one such name would
// make Gemini refuse every request of the session.
func TestGeminiToolList(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ExternalTools = []config.ExternalToolConfig{{Name: "2fa_code", Description: "Asks the user for a code."}}
	}})
	code, _, body := d.do("GET", "/v1/tools?format=gemini", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	validate(t, "ToolList", body)
	var list struct {
		Tools   []map[string]json.RawMessage `json:"tools"`
		Omitted []struct {
			Name, Reason string
		} `json:"omitted"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range list.Tools {
		if string(tl["name"]) == `"2fa_code"` {
			t.Errorf("a name Gemini refuses is listed: %s", body)
		}
		if string(tl["name"]) == `"echo"` {
			found = true
			if len(tl) != 3 || !strings.HasPrefix(string(tl["parametersJsonSchema"]), "{") {
				t.Errorf("echo: %v", tl)
			}
		}
	}
	if !found || len(list.Omitted) != 1 || list.Omitted[0].Name != "2fa_code" || list.Omitted[0].Reason == "" {
		t.Fatalf("listing: %s", body)
	}
}

// withDraw starts a daemon with a tool "draw" that answers content, and a session
// with echo and draw.
func withDraw(t *testing.T, content ...tool.Content) (*daemon, string) {
	t.Helper()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = append(c.Permissions.Allow, "draw") }})
	draw := fn{spec: tool.Spec{Name: "draw", Description: "Draws.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`), Risk: tool.RiskSafe},
		run: func(*tool.Context, json.RawMessage) (*tool.Result, error) {
			return &tool.Result{Content: append([]tool.Content(nil), content...)}, nil
		}}
	if err := d.app.Tools.Register(draw); err != nil {
		t.Fatal(err)
	}
	return d, d.createSession(map[string]any{"available_tools": []string{"echo", "draw"}})["id"].(string)
}

// TestTextOnlyFormatsSayImagesAreNotShown: an OpenAI Chat Completions tool message
// and a Gemini functionResponse carry text only, so a screenshot cannot reach the
// model there; the text in its place says that it is not shown, and why, so that
// the model neither believes it has seen the image nor asks for it again. Formats
// that do carry images name the types they refuse the same way.
func TestTextOnlyFormatsSayImagesAreNotShown(t *testing.T) {
	t.Parallel()
	const png = "iVBORw0KGgo="
	d, id := withDraw(t, tool.Content{Type: tool.ContentText, Text: "screenshot:"},
		tool.Content{Type: tool.ContentImage, MimeType: "image/png", Data: png},
		tool.Content{Type: tool.ContentImage, MimeType: "image/svg+xml", Data: "PHN2Zy8+"})
	for _, tc := range []struct {
		format, call string
		texts        []string // in the message's text
		json         string   // in the message as it is
	}{
		{"openai", `{"id":"c","type":"function","function":{"name":"draw","arguments":"{}"}}`, []string{
			"screenshot:\n[image/png image not shown: OpenAI Chat Completions tool messages carry only text]\n[image/svg+xml image not shown: OpenAI Chat Completions tool messages carry only text]"}, ""},
		{"gemini", `{"functionCall":{"id":"c","name":"draw","args":{}}}`, []string{
			"[image/png image not shown: Gemini function responses carry only text here]"}, ""},
		{"anthropic", `{"type":"tool_use","id":"c","name":"draw","input":{}}`, []string{
			"[image/svg+xml image not shown: the model takes JPEG, PNG, GIF and WebP images only]"}, `"media_type":"image/png"`},
		{"openai_responses", `{"type":"function_call","call_id":"c","name":"draw","arguments":"{}"}`, []string{
			"[image/svg+xml image not shown: the model takes JPEG, PNG, GIF and WebP images only]"}, `"image_url":"data:image/png;base64,` + png},
	} {
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format="+tc.format, `{"calls":[`+tc.call+`]}`)
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.format, code, evs[0].raw)
		}
		raw, _ := json.Marshal(messages(t, evs)["c"].m["message"])
		for _, w := range tc.texts {
			if wj, _ := json.Marshal(w); !strings.Contains(string(raw), strings.Trim(string(wj), `"`)) {
				t.Errorf("%s: message %s does not hold %q", tc.format, raw, w)
			}
		}
		if !strings.Contains(string(raw), tc.json) {
			t.Errorf("%s: message %s does not hold %s", tc.format, raw, tc.json)
		}
	}
}

// TestProviderContentThatIsNotACall: a backend that forwards a model's whole output
// (Anthropic content, Responses output, Gemini parts) gets the calls in it run and
// the other entries left out, with no result of their own (a result under an id
// that names no call is refused by the provider); a list with no call at all is a
// 400 naming what it holds.
func TestProviderContentThatIsNotACall(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for _, tc := range []struct{ format, calls, want string }{
		{"anthropic", `[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"x"}}]`, "toolu_1"},
		{"anthropic", `[{"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"tool_use","id":"toolu_2","name":"echo","input":{"text":"x"}}]`, "toolu_2"},
		{"openai_responses", `[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"x\"}"}]`, "call_1"},
		{"openai_responses", `[{"type":"function_call","id":"fc_2","call_id":"call_2","name":"echo","arguments":"{\"text\":\"x\"}"},{"type":"message","id":"msg_1","role":"assistant","content":[]}]`, "call_2"},
		{"gemini", `[{"text":"Let me look."},{"functionCall":{"id":"g_1","name":"echo","args":{"text":"x"}}}]`, "g_1"},
		{"gemini", `[{"functionCall":{"id":"g_2","name":"echo","args":{"text":"x"}}},{"text":"thinking…","thought":true}]`, "g_2"},
		// Entries of the providers' current SDKs (testdata/sdktypes): Anthropic's tool
		// search and code execution results have no id (a 400 "id is required"), and
		// Responses items such as compaction or a custom tool's call were answered as
		// calls under their item id, which the Responses API refuses.
		{"anthropic", `[{"type":"server_tool_use","id":"srvtoolu_1","name":"tool_search_tool_regex","input":{"pattern":"echo"}},` +
			`{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"echo"}]}},` +
			`{"type":"tool_use","id":"toolu_3","name":"echo","input":{"text":"x"}}]`, "toolu_3"},
		{"anthropic", `[{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"bash_code_execution_result","stdout":"","stderr":"","return_code":0,"content":[]}},` +
			`{"type":"text_editor_code_execution_tool_result","tool_use_id":"srvtoolu_3","content":{"type":"text_editor_code_execution_create_result","is_file_update":false}},` +
			`{"type":"container_upload","file_id":"file_1"},{"type":"tool_use","id":"toolu_4","name":"echo","input":{"text":"x"}}]`, "toolu_4"},
		{"openai_responses", `[{"type":"compaction","id":"cmp_1","encrypted_content":"gAAA"},{"type":"custom_tool_call","id":"ctc_1","call_id":"call_c","name":"apply_patch","input":"*** Begin Patch"},` +
			`{"type":"shell_call","id":"sh_1","call_id":"call_s","action":{"commands":["ls"]},"status":"completed"},{"type":"local_shell_call","id":"lsh_1","call_id":"call_l","action":{"type":"exec","command":["ls"],"env":{}},"status":"completed"},` +
			`{"type":"apply_patch_call","id":"ap_1","call_id":"call_a","operation":{"type":"delete_file","path":"x"},"status":"completed"},{"type":"tool_search_call","id":"ts_1","call_id":"call_t","arguments":{},"execution":"server","status":"completed"},` +
			`{"type":"program","id":"pg_1","call_id":"call_p","code":"x","fingerprint":"f"},{"type":"mcp_approval_response","id":"mar_1","approval_request_id":"mr_1","approve":true},` +
			`{"type":"function_call","id":"fc_3","call_id":"call_3","name":"echo","arguments":"{\"text\":\"x\"}"}]`, "call_3"},
		// Gemini 3's parts of its own tools (Google Search beside functions): they were
		// answered with a functionResponse named "", which Gemini refuses.
		{"gemini", `[{"toolCall":{"id":"gs_1","toolType":"GOOGLE_SEARCH_WEB","args":{"queries":["x"]}}},{"toolResponse":{"id":"gs_1","toolType":"GOOGLE_SEARCH_WEB","response":{}}},` +
			`{"audioTranscription":{"text":"hi"}},{"functionCall":{"id":"g_3","name":"echo","args":{"text":"x"}}}]`, "g_3"},
		// An OpenAI Chat Completions assistant message's tool_calls, forwarded untouched,
		// may hold a custom tool's call (the SDK's ChatCompletionMessageCustomToolCall),
		// which the backend answers: it was run as a call without a name, and the
		// backend got a second tool message under that call's id.
		{"openai", `[{"id":"call_c","type":"custom","custom":{"name":"grammar_tool","input":"SELECT 1"}},` +
			`{"id":"call_4","type":"function","function":{"name":"echo","arguments":"{\"text\":\"x\"}"}}]`, "call_4"},
	} {
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format="+tc.format, `{"calls":`+tc.calls+`}`)
		if code != 200 {
			t.Errorf("%s %s: %d %s", tc.format, tc.calls, code, rawLines(evs))
			continue
		}
		msgs := messages(t, evs)
		if len(msgs) != 1 || msgs[tc.want].raw == nil {
			t.Errorf("%s %s: results %s, want one, for %s", tc.format, tc.calls, rawLines(evs), tc.want)
			continue
		}
		if m := msgs[tc.want]; m.m["is_error"] == true {
			t.Errorf("%s %s: %s", tc.format, tc.calls, m.raw)
		}
	}
	for _, tc := range []struct{ format, calls, want string }{
		{"anthropic", `[{"type":"text","text":"All done."}]`, `calls[0] is a "text" item`},
		{"openai_responses", `[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"message","id":"msg_1","role":"assistant","content":[]}]`, `calls[0] is a "reasoning" item`},
		{"gemini", `[{"text":"Hello."}]`, `calls[0] is a Gemini "text" part`},
		{"openai", `[{"id":"call_c","type":"custom","custom":{"name":"grammar_tool","input":"x"}}]`, `calls[0] is an OpenAI "custom" tool call`},
		{"gemini", `[{"toolCall":{"id":"gs_1","toolType":"GOOGLE_SEARCH_WEB","args":{}}}]`, `calls[0] is a Gemini "toolCall" part`},
		// A call the provider ran itself: its result is already in the model's output.
		{"anthropic", `[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}]`, `calls[0] is a "server_tool_use" item`},
	} {
		code, _, body := d.do("POST", "/v1/sessions/"+id+"/tool-calls?format="+tc.format, `{"calls":`+tc.calls+`}`)
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal(body, &e)
		if code != 400 || !strings.Contains(e.Error.Message, tc.want) || !strings.Contains(e.Error.Message, "holds no call for toolserverd to run") {
			t.Errorf("%s %s: %d %s, want 400 with %q", tc.format, tc.calls, code, body, tc.want)
		}
	}
	// The calls themselves still run, in every shape, LangChain's ToolCall
	// ({"name","args","id","type":"tool_call"}) among them: a type this list does
	// not know is not taken for something else.
	for _, calls := range []string{
		`[{"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"x"}}]`,
		`[{"name":"echo","args":{"text":"x"},"id":"lc_1","type":"tool_call"}]`,
	} {
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":`+calls+`}`)
		if code != 200 {
			t.Errorf("%s: %d %s", calls, code, rawLines(evs))
			continue
		}
		for _, m := range messages(t, evs) {
			if m.m["is_error"] == true {
				t.Errorf("%s: %s", calls, m.raw)
			}
		}
	}
}

// TestOpenAIArgumentsNull: arguments "null", which models emit for a function they
// call without arguments, mean no arguments, as "" and an absent or null input do.
func TestOpenAIArgumentsNull(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls?format=openai", `{"calls":[
	  {"id":"c_null","type":"function","function":{"name":"echo","arguments":"null"}},
	  {"id":"c_empty","type":"function","function":{"name":"echo","arguments":" "}}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, rawLines(evs))
	}
	for cid, m := range messages(t, evs) {
		content := m.m["message"].(map[string]any)["content"].(string)
		if !strings.Contains(content, "missing property 'text'") {
			t.Errorf("%s: %q, want the arguments read as {} (missing property 'text')", cid, content)
		}
	}
}

// TestProviderContentErrorsNameTheRequestsEntry: with entries that are no call left
// out, an error about a call names its place in the request's calls, not its place
// among the calls kept (calls[0] would point at the text block).
func TestProviderContentErrorsNameTheRequestsEntry(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for _, tc := range []struct{ calls, want string }{
		{`[{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"echo","input":{}},{"type":"tool_use","id":"t1","name":"echo","input":{}}]`,
			`calls[2]: id "t1" is also used by calls[1]`},
		{`[{"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"tool_use","id":"","name":"echo","input":{}}]`, `calls[1]: id is required`},
	} {
		for _, path := range []string{"/v1/sessions/" + id + "/tool-calls?format=anthropic", "/v1/sessions/" + id + "/tool-calls?format=anthropic&resume=true"} {
			body := `{"calls":` + tc.calls + `}`
			if strings.Contains(path, "resume") {
				path, body = strings.TrimSuffix(path, "&resume=true"), `{"resume":true,"calls":`+tc.calls+`}`
			}
			code, _, out := d.do("POST", path, body)
			var e struct{ Error struct{ Message string } }
			_ = json.Unmarshal(out, &e)
			if code != 400 || !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("%s: %d %s, want 400 with %q", body, code, out, tc.want)
			}
		}
	}
	code, _, out := d.do("POST", "/v1/tool-calls?format=anthropic", `{"session":{"available_tools":["echo"]},"calls":[{"type":"text","text":"x"},{"type":"tool_use","id":"","name":"echo","input":{}}]}`)
	if code != 400 || !strings.Contains(string(out), `calls[1]: id is required`) {
		t.Errorf("one-shot: %d %s, want 400 naming calls[1]", code, out)
	}
}

// TestToolCallsBodyIsAnArray: a backend that posts the model's tool_calls array as
// the body was told "field (top level) must be an object, not JSON array", which
// does not say what object. The answer now names the calls field.
func TestToolCallsBodyIsAnArray(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	body := `[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{}"}}]`
	for _, path := range []string{"/v1/sessions/" + id + "/tool-calls", "/v1/tool-calls"} {
		code, _, out := d.do("POST", path, body)
		if code != 400 || !strings.Contains(string(out), `{\"calls\": [`) {
			t.Errorf("%s: %d %s, want 400 saying to send {\"calls\": [...]}", path, code, out)
		}
	}
}

package mcpproxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// decodeTool reads a tool as mcp-go reads tools/list.
func decodeTool(t *testing.T, wire string) mcp.Tool {
	t.Helper()
	var tl mcp.Tool
	if err := json.Unmarshal([]byte(wire), &tl); err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestSpecFor(t *testing.T) {
	t.Parallel()
	cfg := ServerConfig{Name: "gh", CallTimeout: 7 * time.Second}
	untrusted := cfg
	untrusted.TrustAnnotations = ptr(false)
	tests := []struct {
		name     string
		cfg      *ServerConfig
		wire     string
		risk     tool.Risk
		readOnly bool
		label    string
		why      string // in RiskWhy, "" for none
	}{
		{"read-only", &cfg, `{"name":"list","title":"List things","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":true}}`, tool.RiskLow, true, "List things", ""},
		{"destructive", &cfg, `{"name":"rm","inputSchema":{"type":"object"},"annotations":{"title":"Remove","destructiveHint":true}}`, tool.RiskHigh, false, "Remove", "MCP server gh marks it destructive"},
		{"no annotations", &cfg, `{"name":"poke","inputSchema":{"type":"object"}}`, tool.RiskMedium, false, "poke", ""},
		{"not destructive", &cfg, `{"name":"add","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":false}}`, tool.RiskMedium, false, "add", ""},
		{"untrusted read-only", &untrusted, `{"name":"list","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"idempotentHint":true}}`, tool.RiskMedium, false, "list", "annotations are not trusted"},
		{"untrusted read-only and destructive", &untrusted, `{"name":"list","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":true}}`, tool.RiskHigh, false, "list", "marks it destructive"},
		{"untrusted destructive", &untrusted, `{"name":"rm","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`, tool.RiskHigh, false, "rm", "marks it destructive"},
		{"trusted explicitly", &ServerConfig{Name: "gh", CallTimeout: 7 * time.Second, TrustAnnotations: ptr(true)}, `{"name":"list","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`, tool.RiskLow, true, "list", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := decodeTool(t, tt.wire)
			s, note, err := specFor(tt.cfg, "mcp__gh__x", &tl)
			if err != nil || note != "" {
				t.Fatal(err, note)
			}
			if s.Risk != tt.risk || s.ReadOnly != tt.readOnly || s.ConcurrencySafe != tt.readOnly || s.Label != tt.label {
				t.Errorf("spec risk %q read_only %v concurrency_safe %v label %q; want %q %v %q", s.Risk, s.ReadOnly, s.ConcurrencySafe, s.Label, tt.risk, tt.readOnly, tt.label)
			}
			if (tt.why == "") != (s.RiskWhy == "") || !strings.Contains(s.RiskWhy, tt.why) {
				t.Errorf("RiskWhy %q, want %q", s.RiskWhy, tt.why)
			}
			// A trusted server's destructiveHint of a tool that is not read-only
			// is passed on as said.
			var said *bool
			if a := tl.Annotations; tt.cfg.trustsAnnotations() && !tt.readOnly {
				said = a.DestructiveHint
			}
			if (said == nil) != (s.Destructive == nil) || said != nil && *said != *s.Destructive {
				t.Errorf("Destructive = %v, want %v", s.Destructive, said)
			}
			if s.Name != "mcp__gh__x" || s.Source != "mcp:gh" || s.Timeout != 7*time.Second || s.Mode != tool.ModeDirect {
				t.Errorf("spec = %+v", s)
			}
		})
	}
	tl := decodeTool(t, `{"name":"web","description":"Fetch.","inputSchema":{"properties":{"url":{"type":"string","format":"uri"}},"required":["url"],"$defs":{"x":{"type":"string"}}},"annotations":{"openWorldHint":true}}`)
	s, note, err := specFor(&cfg, "n", &tl)
	if err != nil || note != "" {
		t.Fatal(err, note)
	}
	var schema map[string]any
	if err := json.Unmarshal(s.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["type"] != "object" || schema["$defs"] == nil || !reflect.DeepEqual(schema["required"], []any{"url"}) {
		t.Errorf("parameters = %s: want type object added, required and $defs kept", s.Parameters)
	}
	if !strings.Contains(s.Documentation, `MCP server "gh" as tool "web"`) || !strings.Contains(s.Documentation, "open-world (reaches outside systems): true") || s.Description != "Fetch." {
		t.Errorf("description %q documentation %q", s.Description, s.Documentation)
	}
}

// TestSpecForDefaultsNotRequired: a property with a default is not required, at the
// top and in nested objects, as @playwright/mcp's browser_take_screenshot lists
// "scale" (default "css") among its required properties although the server fills
// it in; the other required properties stay, in their order, and a call without the
// defaulted ones passes validation.
func TestSpecForDefaultsNotRequired(t *testing.T) {
	t.Parallel()
	tl := decodeTool(t, `{"name":"browser_take_screenshot","inputSchema":{"type":"object","properties":{
		"type":{"type":"string","enum":["png","jpeg"],"default":"png"},
		"filename":{"type":"string"},
		"scale":{"type":"string","enum":["css","device"],"default":"css"},
		"clip":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number","default":0}},"required":["x","y"]}},
		"required":["filename","type","scale"],"additionalProperties":false}}`)
	s, _, err := specFor(&ServerConfig{Name: "pw"}, "mcp__pw__browser_take_screenshot", &tl)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Required   []string `json:"required"`
		Properties struct {
			Clip struct {
				Required []string `json:"required"`
			} `json:"clip"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(s.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(schema.Required, []string{"filename"}) || !reflect.DeepEqual(schema.Properties.Clip.Required, []string{"x"}) {
		t.Errorf("required %v, clip required %v; want [filename] and [x]: %s", schema.Required, schema.Properties.Clip.Required, s.Parameters)
	}
	if i, j := strings.Index(string(s.Parameters), `"type":{`), strings.Index(string(s.Parameters), `"filename"`); i < 0 || j < i {
		t.Errorf("properties lost their order: %s", s.Parameters)
	}
	m := toolmgr.New()
	if err := m.Register(&proxyTool{spec: s}); err != nil {
		t.Fatal(err)
	}
	e, _ := m.Lookup(s.Name)
	if _, bad := e.Prepare(json.RawMessage(`{"filename":"a.png","clip":{"x":1}}`)); bad != nil {
		t.Errorf("a call leaving out the defaulted properties: %s", bad.Text())
	}
}

// TestSpecForOutputSchema: an outputSchema is taken as the server wrote it when the
// listing's bytes are at hand, as mcp-go decoded it otherwise; one MCP clients would
// refuse is left out with a note, and the tool is still described.
func TestSpecForOutputSchema(t *testing.T) {
	t.Parallel()
	cfg := ServerConfig{Name: "w"}
	const raw = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","description":"Weather.","properties":{"t":{"type":"number"}},"required":["t"],"anyOf":[{"required":["t"]}]}`
	tests := []struct {
		name, wire, raw string
		want            string // a substring of the spec's output schema; "" for none
		note            string // a substring of the note; "" for none
	}{
		{"none", `{"name":"x","inputSchema":{"type":"object"}}`, "", "", ""},
		{"raw, whole", `{"name":"x","inputSchema":{"type":"object"},"outputSchema":` + raw + `}`, raw, raw, ""},
		{"typed only", `{"name":"x","inputSchema":{"type":"object"},"outputSchema":` + raw + `}`, "", `"t":{"type":"number"}`, ""},
		{"not an object schema", `{"name":"x","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}`, `{"type":"array","items":{}}`, "", `tool "x": its outputSchema is not passed on, as MCP clients would refuse it: its type must be "object", not "array"`},
		{"property schema not an object", `{"name":"x","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"a":true}}}`, `{"type":"object","properties":{"a":true}}`, "", `property "a"`},
		{"null", `{"name":"x","inputSchema":{"type":"object"}}`, `null`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := decodeTool(t, tt.wire)
			if tt.raw != "" {
				tl.RawOutputSchema, tl.OutputSchema = json.RawMessage(tt.raw), mcp.ToolOutputSchema{}
			}
			s, note, err := specFor(&cfg, "mcp__w__x", &tl)
			if err != nil {
				t.Fatal(err)
			}
			if (tt.want == "") != (s.OutputSchema == nil) || !strings.Contains(string(s.OutputSchema), tt.want) {
				t.Errorf("output schema = %s, want %s", s.OutputSchema, tt.want)
			}
			if (tt.note == "") != (note == "") || !strings.Contains(note, tt.note) {
				t.Errorf("note = %q, want %q", note, tt.note)
			}
			if s.Name != "mcp__w__x" || s.Parameters == nil {
				t.Errorf("the tool is not described: %+v", s)
			}
		})
	}
}

// TestListingKeepsOutputSchemas: the output schemas of a listing's pages are the
// servers' own bytes, the first of a name listed twice, and a tool without one gets
// none.
func TestListingKeepsOutputSchemas(t *testing.T) {
	t.Parallel()
	var l toolListing
	list := transport.JSONRPCRequest{Method: string(mcp.MethodToolsList)}
	page := func(result string) *transport.JSONRPCResponse {
		return &transport.JSONRPCResponse{Result: json.RawMessage(result)}
	}
	if err := l.screen(list, page(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"object","$comment":"first"}},{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"2"}`)); err != nil {
		t.Fatal(err)
	}
	next := transport.JSONRPCRequest{Method: string(mcp.MethodToolsList), Params: mcp.PaginatedParams{Cursor: "2"}}
	if err := l.screen(next, page(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"object","$comment":"second"}},{"name":"c","inputSchema":{"type":"object"},"outputSchema":{"type":"object","$comment":"c"}}]}`)); err != nil {
		t.Fatal(err)
	}
	tools := []mcp.Tool{{Name: "a"}, {Name: "b"}, {Name: "c", OutputSchema: mcp.ToolOutputSchema{Type: "object"}}}
	l.withSchemas(tools)
	got := map[string]string{}
	for _, tl := range tools {
		got[tl.Name] = string(tl.RawOutputSchema)
		if tl.RawOutputSchema != nil && tl.OutputSchema.Type != "" {
			t.Errorf("%s has both a raw and a typed output schema: mcp-go refuses to write such a tool", tl.Name)
		}
	}
	want := map[string]string{"a": `{"type":"object","$comment":"first"}`, "b": "", "c": `{"type":"object","$comment":"c"}`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("output schemas = %q, want %q", got, want)
	}
}

func TestConvertResult(t *testing.T) {
	t.Parallel()
	wire := `{"content":[
		{"type":"text","text":"hello"},
		{"type":"image","data":"aW1n","mimeType":"image/png"},
		{"type":"audio","data":"YXVk","mimeType":"audio/wav"},
		{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"inline"}},
		{"type":"resource","resource":{"uri":"file:///b.bin","mimeType":"application/octet-stream","blob":"Ymxi"}},
		{"type":"resource_link","uri":"file:///c","name":"c","mimeType":"text/csv"},
		{"type":"resource_link","uri":"file:///r/7","name":"report.txt","title":"Report","description":"The quarterly report","mimeType":"text/plain"}
	],"structuredContent":{"n": 12345678901234567890},"isError":true}`
	r, err := mcp.ParseCallToolResult(ptr(json.RawMessage(wire)))
	if err != nil {
		t.Fatal(err)
	}
	got := convertResult(r)
	want := []tool.Content{
		{Type: tool.ContentText, Text: "hello"},
		{Type: tool.ContentImage, Data: "aW1n", MimeType: "image/png"},
		{Type: tool.ContentAudio, Data: "YXVk", MimeType: "audio/wav"},
		{Type: tool.ContentResource, URI: "file:///a.txt", MimeType: "text/plain", Text: "inline"},
		{Type: tool.ContentResource, URI: "file:///b.bin", MimeType: "application/octet-stream", Data: "Ymxi"},
		{Type: tool.ContentResource, URI: "file:///c", MimeType: "text/csv", Name: "c"},
		{Type: tool.ContentResource, URI: "file:///r/7", MimeType: "text/plain", Name: "report.txt", Description: "The quarterly report"},
	}
	if !reflect.DeepEqual(got.Content, want) {
		t.Errorf("content = %+v\nwant      %+v", got.Content, want)
	}
	// A model reads a link's name and description, not only its URI.
	if text := got.Text(); !strings.Contains(text, "[resource: file:///c (c)]") || !strings.Contains(text, "[resource: file:///r/7 (report.txt): The quarterly report]") {
		t.Errorf("text = %q: want the links' names and description", text)
	}
	if !got.IsError || got.ErrorKind != tool.KindFailed {
		t.Errorf("is_error %v kind %q, want failed", got.IsError, got.ErrorKind)
	}
	if !bytes.Contains(got.Structured, []byte("12345678901234567890")) {
		t.Errorf("structured = %s, want the big number kept exactly", got.Structured)
	}
}

func ptr[T any](v T) *T { return &v }

func TestProgressText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fields map[string]any
		want   string
	}{
		{map[string]any{"progress": 2.0, "total": 5.0}, "2/5"},
		{map[string]any{"progress": 0.5}, "0.5"},
		{map[string]any{"progress": 1.0, "total": 3.0, "message": "cloning"}, "cloning (1/3)"},
		{map[string]any{"progress": 1.0, "message": "cloning"}, "cloning"},
		{map[string]any{"message": "cloning", "total": 3.0}, "cloning"},
		{map[string]any{}, ""},
	} {
		if got := progressText(tt.fields); got != tt.want {
			t.Errorf("progressText(%v) = %q, want %q", tt.fields, got, tt.want)
		}
	}
	p := newProgressRouter()
	log := &progressLog{}
	token := p.add(&tool.Context{Progress: log})
	other := p.add(&tool.Context{Progress: &progressLog{}})
	if token == other {
		t.Fatal("two calls got the same progress token")
	}
	note := func(tok any, progress float64) mcp.JSONRPCNotification {
		n := mcp.JSONRPCNotification{}
		n.Method = string(mcp.MethodNotificationProgress)
		n.Params.AdditionalFields = map[string]any{"progressToken": tok, "progress": progress, "total": 2.0}
		return n
	}
	p.handle(note(token, 1))
	p.handle(note("unknown", 1))
	p.remove(token)
	p.handle(note(token, 2))
	if got := log.all(); !reflect.DeepEqual(got, []string{"1/2\n"}) {
		t.Errorf("emitted %q, want only one line 1/2 (nothing after remove, nothing for other tokens)", got)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := []ServerConfig{
		{Name: "a", Transport: TransportStdio, Command: "x"},
		{Name: "b-1_2", Transport: TransportSSE, URL: "http://127.0.0.1:1/sse"},
		{Name: "c", Transport: TransportStreamableHTTP, URL: "https://example.com/mcp", Prefix: "c_"},
	}
	for _, sc := range ok {
		if err := sc.Validate(); err != nil {
			t.Errorf("%+v: %v", sc, err)
		}
	}
	bad := map[string]ServerConfig{
		"name":          {Name: "GitHub", Transport: TransportStdio, Command: "x"},
		"empty name":    {Transport: TransportStdio, Command: "x"},
		"transport":     {Name: "a", Transport: "websocket", URL: "http://x"},
		"no command":    {Name: "a", Transport: TransportStdio},
		"no url":        {Name: "a", Transport: TransportSSE},
		"relative url":  {Name: "a", Transport: TransportStreamableHTTP, URL: "/mcp"},
		"ftp url":       {Name: "a", Transport: TransportStreamableHTTP, URL: "ftp://x/mcp"},
		"url for stdio": {Name: "a", Transport: TransportStdio, Command: "x", URL: "http://x"},
		"negative":      {Name: "a", Transport: TransportStdio, Command: "x", CallTimeout: -1},
		"prefix":        {Name: "a", Transport: TransportStdio, Command: "x", Prefix: "a.b"},
		// mcp__ev__evil__x would read as tool evil__x of server ev.
		"name with __": {Name: "ev__evil", Transport: TransportStdio, Command: "x"},
	}
	for what, sc := range bad {
		if err := sc.Validate(); err == nil {
			t.Errorf("%s: %+v passed Validate", what, sc)
		}
	}
	if err := (&Config{PrefixMode: "sometimes"}).Validate(); err == nil {
		t.Error("unknown prefix mode passed")
	}
	if err := (&Config{Servers: []ServerConfig{ok[0], ok[0]}}).Validate(); err == nil {
		t.Error("duplicate server names passed")
	}
	// Servers whose tool names would overlap (one prefix begins the other) stop
	// start-up, naming both; mcp__ev__ and mcp__evx__ do not overlap.
	ev := ServerConfig{Name: "ev", Transport: TransportStdio, Command: "x"}
	for what, other := range map[string]ServerConfig{
		"the same prefix":      {Name: "e", Transport: TransportStdio, Command: "x", Prefix: "mcp__ev__"},
		"a longer prefix":      {Name: "e", Transport: TransportStdio, Command: "x", Prefix: "mcp__ev__x_"},
		"a shorter prefix":     {Name: "e", Transport: TransportStdio, Command: "x", Prefix: "mcp__"},
		"a name ending in _":   {Name: "ev_", Transport: TransportStdio, Command: "x"},
		"a prefix under ev's":  {Name: "z", Transport: TransportStdio, Command: "x", Prefix: "mcp__ev__z_"},
		"the other way around": {Name: "a", Transport: TransportStdio, Command: "x", Prefix: "mcp__ev"},
	} {
		err := (&Config{Servers: []ServerConfig{ev, other}}).Validate()
		if err == nil || !strings.Contains(err.Error(), "mcp server ev ") || !strings.Contains(err.Error(), "mcp server "+other.Name+" ") {
			t.Errorf("%s: Validate = %v, want an error naming ev and %s", what, err, other.Name)
		}
	}
	if err := (&Config{Servers: []ServerConfig{ev, {Name: "evx", Transport: TransportStdio, Command: "x"}}}).Validate(); err != nil {
		t.Errorf("ev and evx: %v", err)
	}
}

func TestServerConfigJSON(t *testing.T) {
	t.Parallel()
	in := ServerConfig{Name: "gh", Transport: TransportStreamableHTTP, URL: "http://127.0.0.1:1/mcp",
		Headers: map[string]string{"Authorization": "Bearer t"}, ConnectTimeout: 5 * time.Second,
		CallTimeout: 90 * time.Second, Enabled: false, Prefix: "gh_"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"call_timeout":"1m30s"`) || !strings.Contains(string(b), `"enabled":false`) {
		t.Errorf("JSON %s", b)
	}
	var out ServerConfig
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("round trip = %+v (%v), want %+v", out, err, in)
	}
	if err := json.Unmarshal([]byte(`{"name":"x","transport":"stdio","command":"y"}`), &out); err != nil || !out.Enabled {
		t.Errorf("missing enabled decoded as %v (%v), want enabled", out.Enabled, err)
	}
	if err := json.Unmarshal([]byte(`{"name":"x","call_timeout":"soon"}`), &out); err == nil {
		t.Error("bad duration accepted")
	}
	// trust_annotations: absent is true (so stored configs keep today's behaviour),
	// false is kept through the store's JSON, and it takes only a boolean.
	if out, err := DecodeServerConfig([]byte(`{"name":"x","transport":"stdio","command":"y"}`)); err != nil || !out.trustsAnnotations() {
		t.Errorf("missing trust_annotations decoded as %v (%v), want trusted", out.TrustAnnotations, err)
	}
	out, err = DecodeServerConfig([]byte(`{"name":"x","transport":"stdio","command":"y","trust_annotations":false}`))
	if err != nil || out.trustsAnnotations() {
		t.Fatalf("trust_annotations false decoded as %v (%v)", out.TrustAnnotations, err)
	}
	if b, _ := json.Marshal(out); !strings.Contains(string(b), `"trust_annotations":false`) {
		t.Errorf("JSON %s lost trust_annotations", b)
	} else if err := json.Unmarshal(b, &out); err != nil || out.trustsAnnotations() {
		t.Errorf("round trip of %s: %v (%v)", b, out.TrustAnnotations, err)
	}
	if _, err := DecodeServerConfig([]byte(`{"name":"x","transport":"stdio","command":"y","trust_annotations":"no"}`)); err == nil || !strings.Contains(err.Error(), "trust_annotations") {
		t.Errorf("trust_annotations \"no\": %v, want an error naming it", err)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	m := &Manager{cfg: Config{MaxBackoff: 4 * time.Second}.withDefaults()}
	for _, tt := range []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 125 * time.Millisecond, 250 * time.Millisecond},
		{2, 250 * time.Millisecond, 500 * time.Millisecond},
		{5, 2 * time.Second, 4 * time.Second},
		{50, 2 * time.Second, 4 * time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := m.backoff(tt.attempt)
			if d < tt.min || d > tt.max {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", tt.attempt, d, tt.min, tt.max)
			}
			seen[d] = true
		}
		if len(seen) < 5 {
			t.Errorf("backoff(%d) has no jitter: %v", tt.attempt, seen)
		}
	}
}

func TestStderrLogBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	s := newStderrLog(slog.New(slog.NewTextHandler(&buf, nil)))
	long := strings.Repeat("x", 10_000)
	for i := range 200 {
		if i == 0 {
			s.Write([]byte(long + "\n"))
			continue
		}
		s.Write([]byte("line " + strings.Repeat("y", i%3) + "\n"))
	}
	s.Write([]byte("partial without newline"))
	logged := strings.Count(buf.String(), `msg="mcp server stderr"`)
	if logged != stderrLinesPerSec {
		t.Errorf("logged %d lines in one second, want the cap %d", logged, stderrLinesPerSec)
	}
	if strings.Contains(buf.String(), strings.Repeat("x", stderrMaxLine+1)) {
		t.Error("a line longer than the cap was logged")
	}
	if strings.Contains(buf.String(), "partial without newline") {
		t.Error("a line was logged before its newline")
	}
}

// TestUnreadableToolNotes: a tool list entry that does not decode is named with what
// is wrong in MCP's words, not the Go types of the decoder.
func TestUnreadableToolNotes(t *testing.T) {
	t.Parallel()
	page := `{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":"x"},{"name":7,"inputSchema":{"type":"object"}}]}`
	_, n, notes := readableTools(json.RawMessage(page))
	got := strings.Join(notes, "\n")
	if n != 1 || !strings.Contains(got, `tool "bad" is not registered: its entry in tools/list does not decode: inputSchema is a JSON string where MCP wants an object`) ||
		!strings.Contains(got, `tool 7 is not registered: its entry in tools/list does not decode: name is a JSON number where MCP wants a string`) ||
		strings.Contains(got, "Go struct") {
		t.Errorf("%d kept; notes:\n%s", n, got)
	}
}

// TestReadResultAsMCPGo: the proxy's one-pass reading of a tools/call result gives
// what mcp-go's parsing and convertResult give, and declines (leaving the result to
// mcp-go) every result mcp-go fails or that asks for input.
func TestReadResultAsMCPGo(t *testing.T) {
	t.Parallel()
	img := "iVBORw0KGgo="
	for _, c := range []struct {
		raw  string
		fast bool // read in one pass, not left to mcp-go
	}{
		{`{"content":[{"type":"text","text":"Echo: hi"}]}`, true},
		{`{"content":[{"type":"text","text":"a","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":1}},{"type":"text","text":""}]}`, true},
		{`{"content":[],"isError":true}`, true},
		{`{"content":[{"type":"text","text":"bad"}],"isError":true,"_meta":{"progressToken":3}}`, true},
		{`{"content":[{"type":"image","data":"` + img + `","mimeType":"image/png"},{"type":"audio","data":"","mimeType":"audio/wav"}]}`, true},
		{`{"content":[{"type":"image","data":"not base64!","mimeType":"image/png"}]}`, true},
		{`{"content":[{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"x"}},{"type":"resource","resource":{"uri":"file:///b","blob":"AA=="}}]}`, true},
		{`{"content":[{"type":"resource_link","uri":"file:///c","name":"c","description":"d"}]}`, true},
		{`{"content":[{"type":"text","text":"s"}],"structuredContent":{"n":1,"s":["x"]}}`, true},
		{`{"content":[],"structuredContent":null}`, true},
		{`{"content":[],"resultType":"complete"}`, true},
		{`{"Content":[{"Type":"text","Text":"case"}]}`, true},
		{`{"content":[{"type":"text","text":"a","type":"image","data":"` + img + `","mimeType":"image/png"}]}`, true},
		// Left to mcp-go: it fails these, or answers the request for input.
		{`{"content":[{"type":"text","text":7}]}`, false},
		{`{"content":[{"type":7,"text":"x"}]}`, false},
		{`{"content":[{"type":"widget"}]}`, false},
		{`{"content":["text"]}`, false},
		{`{"content":[{"text":"no type"}]}`, false},
		{`{"content":[],"structuredContent":{"n":1e999}}`, false},
		{`{"content":[],"isError":"yes"}`, false},
		{`{"content":[],"_meta":[1]}`, false},
		{`{"content":{}}`, false},
		{`{"isError":false}`, false},
		{`{"content":null}`, false},
		{`{"resultType":"input_required","inputRequests":{}}`, false},
		{`[]`, false},
		{`{"content":[]`, false},
	} {
		raw := json.RawMessage(c.raw)
		got, ok := readResult(raw)
		if ok != c.fast {
			t.Errorf("%s: read in one pass %v, want %v", c.raw, ok, c.fast)
		}
		parsed, err := mcp.ParseCallToolResult(&raw)
		if err != nil || parsed.NeedsInput() {
			if ok {
				t.Errorf("%s: read in one pass, but mcp-go fails it (%v) or asks for input", c.raw, err)
			}
			continue
		}
		if want := convertResult(parsed); ok && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.raw, got, want)
		}
	}
}

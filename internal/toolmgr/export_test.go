package toolmgr

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestExportShapes(t *testing.T) {
	t.Parallel()
	specs := []tool.Spec{
		{Name: "read_file", Label: "Read", Description: "reads", Parameters: json.RawMessage(`{"type":"object"}`), Flags: tool.Flags{ReadOnly: true}, Risk: tool.RiskSafe},
		{Name: "web_search_preview", Description: "hosted", Parameters: json.RawMessage(`{"type":"object"}`), Flags: tool.Flags{Hosted: true}},
	}
	cases := []struct {
		f    Format
		want string
	}{
		{FormatOpenAI, `[{"type":"function","function":{"name":"read_file","description":"reads","parameters":{"type":"object"}}}]`},
		{FormatAnthropic, `[{"name":"read_file","description":"reads","input_schema":{"type":"object"}}]`},
		{FormatMCP, `[{"name":"read_file","title":"Read","description":"reads","inputSchema":{"type":"object"},"annotations":{"title":"Read","readOnlyHint":true,"destructiveHint":false}}]`},
		// Flat, and strict false: the Responses API makes a function without strict
		// strict, and every optional argument required with it.
		{FormatOpenAIResponses, `[{"type":"function","name":"read_file","description":"reads","parameters":{"type":"object"},"strict":false}]`},
		{FormatGemini, `[{"name":"read_file","description":"reads","parametersJsonSchema":{"type":"object"}}]`},
	}
	for _, c := range cases {
		b, err := json.Marshal(Export(specs, c.f))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.f, b, c.want)
		}
	}
	native := Export(specs, FormatNative)
	if len(native) != 2 {
		t.Fatalf("native export should keep hosted tools, got %d", len(native))
	}
	// An MCP tool's idempotentHint and openWorldHint pass on as it gave them.
	no := false
	hinted := tool.Spec{Name: "fetch", Description: "fetches", Parameters: json.RawMessage(`{"type":"object"}`),
		Flags: tool.Flags{ReadOnly: true, Idempotent: true, OpenWorld: &no}, Risk: tool.RiskLow}
	b, err := json.Marshal(Export([]tool.Spec{hinted}, FormatMCP))
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"fetch","description":"fetches","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}]`; string(b) != want {
		t.Errorf("mcp with hints:\n got %s\nwant %s", b, want)
	}
	// destructiveHint: what was said, else by risk; unknown (left out, which MCP
	// clients take as true) for a medium-risk tool nobody said anything of.
	yes := true
	for _, c := range []struct {
		flags tool.Flags
		risk  tool.Risk
		want  string
	}{
		{tool.Flags{}, tool.RiskMedium, `{"readOnlyHint":false}`},
		{tool.Flags{Destructive: &no}, tool.RiskMedium, `{"readOnlyHint":false,"destructiveHint":false}`},
		{tool.Flags{Destructive: &yes}, tool.RiskMedium, `{"readOnlyHint":false,"destructiveHint":true}`},
		{tool.Flags{}, tool.RiskHigh, `{"readOnlyHint":false,"destructiveHint":true}`},
		{tool.Flags{}, tool.RiskLow, `{"readOnlyHint":false,"destructiveHint":false}`},
		{tool.Flags{ReadOnly: true, Destructive: &yes}, tool.RiskLow, `{"readOnlyHint":true,"destructiveHint":false}`},
	} {
		sp := tool.Spec{Name: "x", Parameters: json.RawMessage(`{"type":"object"}`), Flags: c.flags, Risk: c.risk}
		b, err := json.Marshal(Export([]tool.Spec{sp}, FormatMCP))
		if err != nil {
			t.Fatal(err)
		}
		if want := `[{"name":"x","description":"","inputSchema":{"type":"object"},"annotations":` + c.want + `}]`; string(b) != want {
			t.Errorf("flags %+v risk %s:\n got %s\nwant %s", c.flags, c.risk, b, want)
		}
	}
	// Declarations in a provider's own shape: hosted tools go only to their providers.
	hosted := tool.Spec{Name: "code_interpreter", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`), Flags: tool.Flags{Hosted: true},
		ProviderSpecs: map[string]json.RawMessage{"openai": json.RawMessage(`{"type":"code_interpreter"}`)}}
	defined := tool.Spec{Name: "bash", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`),
		ProviderSpecs: map[string]json.RawMessage{"anthropic": json.RawMessage(`{"type":"bash_20250124","name":"bash"}`)}}
	both := []tool.Spec{hosted, defined}
	for f, want := range map[Format]string{
		// Chat Completions takes functions only (OpenAI's hosted tools are the
		// Responses API's).
		FormatOpenAI:    `[{"type":"function","function":{"name":"bash","description":"d","parameters":{"type":"object"}}}]`,
		FormatAnthropic: `[{"type":"bash_20250124","name":"bash"}]`,
		// The Responses API takes OpenAI's hosted tools (declared once, as openai).
		FormatOpenAIResponses: `[{"type":"code_interpreter"},{"type":"function","name":"bash","description":"d","parameters":{"type":"object"},"strict":false}]`,
		FormatGemini:          `[{"name":"bash","description":"d","parametersJsonSchema":{"type":"object"}}]`,
	} {
		b, _ := json.Marshal(Export(both, f))
		if string(b) != want {
			t.Errorf("%s provider declarations:\n got %s\nwant %s", f, b, want)
		}
	}
	if o := Omitted(both, FormatAnthropic); len(o) != 1 || o[0].Name != "code_interpreter" || o[0].HostedBy[0] != "openai" {
		t.Errorf("omitted from anthropic: %+v", o)
	}
	if o := Omitted(both, FormatOpenAI); len(o) != 1 || o[0].Name != "code_interpreter" || o[0].HostedBy[0] != "openai" || o[0].Reason != chatCompletionsHosted {
		t.Errorf("omitted from openai: %+v", o)
	}
	if o := Omitted(both, FormatOpenAIResponses); len(o) != 0 {
		t.Errorf("omitted from openai_responses: %+v", o)
	}
	if o := Omitted(both, FormatGemini); len(o) != 1 || o[0].Name != "code_interpreter" || o[0].HostedBy[0] != "openai" {
		t.Errorf("omitted from gemini: %+v", o)
	}
	for _, f := range []string{"openai_responses", "gemini"} {
		if got, err := ParseFormat(f); err != nil || string(got) != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}

// TestExportOutputSchema: a tool's output schema is MCP's outputSchema, kept as
// declared, and in the native listing; the provider formats have no place for it and
// stay as they were. A background tool's result is a handle, so MCP is not told of
// its schema.
func TestExportOutputSchema(t *testing.T) {
	t.Parallel()
	out := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`
	spec := tool.Spec{Name: "count", Description: "counts", Parameters: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(out), Risk: tool.RiskSafe, Mode: tool.ModeDirect}
	for f, want := range map[Format]string{
		FormatMCP:             `[{"name":"count","description":"counts","inputSchema":{"type":"object"},"outputSchema":` + out + `,"annotations":{"readOnlyHint":false,"destructiveHint":false}}]`,
		FormatOpenAI:          `[{"type":"function","function":{"name":"count","description":"counts","parameters":{"type":"object"}}}]`,
		FormatOpenAIResponses: `[{"type":"function","name":"count","description":"counts","parameters":{"type":"object"},"strict":false}]`,
		FormatAnthropic:       `[{"name":"count","description":"counts","input_schema":{"type":"object"}}]`,
		FormatGemini:          `[{"name":"count","description":"counts","parametersJsonSchema":{"type":"object"}}]`,
	} {
		b, err := json.Marshal(Export([]tool.Spec{spec}, f))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s:\n got %s\nwant %s", f, b, want)
		}
	}
	b, _ := json.Marshal(Export([]tool.Spec{spec}, FormatNative))
	if !strings.Contains(string(b), `"output_schema":`+out) {
		t.Errorf("native listing lacks the output schema: %s", b)
	}
	bg := spec
	bg.Mode = tool.ModeBackground
	b, _ = json.Marshal(Export([]tool.Spec{bg}, FormatMCP))
	if strings.Contains(string(b), "outputSchema") {
		t.Errorf("a background tool's output schema is advertised: %s", b)
	}
}

// TestExportOpenAIDescriptionCap: OpenAI refuses a whole request whose tool list has
// a function description longer than 1,024 characters ("string_above_max_length"),
// and MCP servers in common use have longer ones (server-sequential-thinking: 2,780).
// The OpenAI export cuts them; the other formats keep them whole.
func TestExportOpenAIDescriptionCap(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 3000) // two bytes a character: the cap counts characters
	specs := []tool.Spec{{Name: "think", Description: long, Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "exact", Description: strings.Repeat("x", maxOpenAIDescription), Parameters: json.RawMessage(`{"type":"object"}`)}}
	got := Export(specs, FormatOpenAI)
	resp := Export(specs, FormatOpenAIResponses)
	for f, ds := range map[Format][2]string{
		FormatOpenAI:          {got[0].(openAITool).Function.Description, got[1].(openAITool).Function.Description},
		FormatOpenAIResponses: {resp[0].(openAIResponsesTool).Description, resp[1].(openAIResponsesTool).Description},
	} {
		d := ds[0]
		if n := utf8.RuneCountInString(d); n > maxOpenAIDescription || !utf8.ValidString(d) || !strings.HasPrefix(d, strings.Repeat("é", 1000)) {
			t.Errorf("%s description of %d characters (valid UTF-8 %v): %.80q…", f, n, utf8.ValidString(d), d)
		}
		if ds[1] != specs[1].Description {
			t.Errorf("%s: a description of exactly %d characters was changed", f, maxOpenAIDescription)
		}
	}
	if d := Export(specs, FormatAnthropic)[0].(anthropicTool).Description; d != long {
		t.Errorf("anthropic description cut to %d bytes", len(d))
	}
	if d := Export(specs, FormatGemini)[0].(geminiTool).Description; d != long {
		t.Errorf("gemini description cut to %d bytes", len(d))
	}
}

// TestExportOpenAIArrayItems: OpenAI refuses a whole request when any function's
// parameters hold an array schema without "items" ("array schema missing items"),
// which JSON Schema allows and MCP servers publish (a bare {"type":"array"}). The
// OpenAI export gives such schemas "items": {} (any item, what no items means) in
// every place a schema can be, and leaves values that only look like schemas
// (default, const, enum, examples) alone.
func TestExportOpenAIArrayItems(t *testing.T) {
	t.Parallel()
	params := `{"type":"object","properties":{` +
		`"tags":{"type":"array","description":"d"},` +
		`"grid":{"type":"array","items":{"type":"array"}},` +
		`"maybe":{"type":["array","null"]},` +
		`"pair":{"type":"array","items":[{"type":"string"},{"type":"array"}]},` +
		`"either":{"anyOf":[{"type":"array"},{"type":"string"}]},` +
		`"kept":{"type":"array","items":{"type":"string"}},` +
		`"items":{"type":"string","default":{"type":"array"},"const":{"type":"array"},"enum":[{"type":"array"}],"examples":[{"type":"array"}]}},` +
		`"$defs":{"A":{"type":"object","properties":{"l":{"type":"array"}}}},` +
		`"definitions":{"B":{"type":"array"}},` +
		`"additionalProperties":{"type":"array"}}`
	specs := []tool.Spec{{Name: "t", Description: "d", Parameters: json.RawMessage(params)}}
	b, err := json.Marshal(Export(specs, FormatOpenAI)[0].(openAITool).Function.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	// The Responses API refuses the same schemas.
	if r := Export(specs, FormatOpenAIResponses)[0].(openAIResponsesTool).Parameters; string(r) != string(b) {
		t.Errorf("openai_responses parameters differ from openai's:\n%s\n%s", r, b)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	at := func(path ...any) any {
		var v any = got
		for _, p := range path {
			switch k := p.(type) {
			case string:
				v = v.(map[string]any)[k]
			case int:
				v = v.([]any)[k]
			}
		}
		return v
	}
	hasItems := func(v any) bool { _, ok := v.(map[string]any)["items"]; return ok }
	props := func(name string) any { return at("properties", name) }
	for what, schema := range map[string]any{
		"properties/tags": props("tags"), "properties/grid/items": at("properties", "grid", "items"),
		"properties/maybe": props("maybe"), "properties/pair/items/1": at("properties", "pair", "items", 1),
		"properties/either/anyOf/0": at("properties", "either", "anyOf", 0),
		"$defs/A/properties/l":      at("$defs", "A", "properties", "l"), "definitions/B": at("definitions", "B"),
		"additionalProperties": at("additionalProperties"),
	} {
		if !hasItems(schema) {
			t.Errorf("%s: an array schema without items in the openai export: %v", what, schema)
		}
	}
	if s, _ := json.Marshal(props("kept")); string(s) != `{"items":{"type":"string"},"type":"array"}` {
		t.Errorf("an array schema with items was changed: %s", s)
	}
	if s, _ := json.Marshal(props("items")); strings.Contains(string(s), `"items"`) {
		t.Errorf("values that are not schemas were changed: %s", s)
	}
	// The tool's own schema (validation, the other formats) keeps its words.
	if string(specs[0].Parameters) != params {
		t.Errorf("the spec's parameters were modified")
	}
	if a := Export(specs, FormatAnthropic)[0].(anthropicTool).InputSchema; string(a) != params {
		t.Errorf("anthropic export changed: %s", a)
	}
	// Schemas with nothing to add are sent as they are, byte for byte.
	plain := `{"type":"object","properties":{"a":{"type":"array","items":{}}}}`
	if p := Export([]tool.Spec{{Name: "p", Parameters: json.RawMessage(plain)}}, FormatOpenAI)[0].(openAITool).Function.Parameters; string(p) != plain {
		t.Errorf("unchanged schema re-encoded: %s", p)
	}
}

// TestExportGeminiNames: Gemini wants a function name to start with a letter or an
// underscore and refuses the whole request over one that does not, while registry
// names may start with a digit or '-' (an MCP tool "2fa_code" under prefix: never).
// Such a tool is left out of the gemini listing and named in omitted with the reason;
// the other formats list it.
func TestExportGeminiNames(t *testing.T) {
	t.Parallel()
	obj := json.RawMessage(`{"type":"object"}`)
	specs := []tool.Spec{{Name: "2fa_code", Description: "d", Parameters: obj}, {Name: "-x", Description: "d", Parameters: obj},
		{Name: "_ok", Description: "d", Parameters: obj}, {Name: "Ok9", Description: "d", Parameters: obj}}
	b, _ := json.Marshal(Export(specs, FormatGemini))
	if want := `[{"name":"_ok","description":"d","parametersJsonSchema":{"type":"object"}},{"name":"Ok9","description":"d","parametersJsonSchema":{"type":"object"}}]`; string(b) != want {
		t.Errorf("gemini:\n got %s\nwant %s", b, want)
	}
	o := Omitted(specs, FormatGemini)
	if len(o) != 2 || o[0].Name != "2fa_code" || o[1].Name != "-x" || !strings.Contains(o[0].Reason, "letter") || o[0].HostedBy != nil {
		t.Errorf("omitted from gemini: %+v", o)
	}
	for _, f := range []Format{FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatMCP} {
		if n := len(Export(specs, f)); n != 4 || len(Omitted(specs, f)) != 0 {
			t.Errorf("%s lists %d of 4 tools, omits %+v", f, n, Omitted(specs, f))
		}
	}
}

// TestOptionalDefaults: defaulted properties leave "required" wherever a schema sits
// (here in $defs and anyOf), an emptied list goes, and a schema with nothing to change
// keeps its bytes.
func TestOptionalDefaults(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string","default":"x"}},"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":"string","default":"x"}}}`},
		{`{"$defs":{"o":{"type":"object","properties":{"n":{"default":1},"m":{}},"required":["m","n"]}},"anyOf":[{"properties":{"k":{"default":true}},"required":["k"]}]}`,
			`{"$defs":{"o":{"type":"object","properties":{"n":{"default":1},"m":{}},"required":["m"]}},"anyOf":[{"properties":{"k":{"default":true}}}]}`},
		// "default" as a property name, and a default that is a value, not a schema: unchanged.
		{`{"properties":{"default":{"type":"string"},"b":{"enum":[{"default":1}]}},"required":["default","b"]}`, ``},
	}
	for _, c := range cases {
		out, changed := OptionalDefaults(json.RawMessage(c.in))
		if c.want == "" {
			if changed || string(out) != c.in {
				t.Errorf("OptionalDefaults(%s) = %s, %v; want it unchanged", c.in, out, changed)
			}
			continue
		}
		if !changed || string(out) != c.want {
			t.Errorf("OptionalDefaults(%s)\n got %s (%v)\nwant %s", c.in, out, changed, c.want)
		}
	}
}

// deepSchema is a parameters schema shaped like a large OpenAPI operation's: objects
// nested depth levels deep, each with a few scalar properties, an array with items
// and one without.
func deepSchema(depth int) json.RawMessage {
	s := `{"type":"string","description":"a leaf"}`
	for i := range depth {
		s = fmt.Sprintf(`{"type":"object","description":"level %d","properties":{"a":{"type":"string","description":"some text to read"},"b":{"type":"integer","minimum":0},`+
			`"list":{"type":"array","items":{"type":"string"}},"bare":{"type":"array"},"next":%s,"alt":{"anyOf":[{"type":"string"},{"type":"number"}]}},"required":["a"]}`, i, s)
	}
	return json.RawMessage(s)
}

// BenchmarkExportOpenAI lists 50 tools with deep schemas in format openai (which gives
// arrays without items an "items": {}) against format anthropic (which sends the
// schemas as they are): the ratio is what the rewriting costs a listing.
func BenchmarkExportOpenAI(b *testing.B) {
	specs := make([]tool.Spec, 50)
	for i := range specs {
		specs[i] = tool.Spec{Name: fmt.Sprintf("op%d", i), Description: "an operation", Parameters: deepSchema(12)}
	}
	for _, f := range []Format{FormatAnthropic, FormatOpenAI} {
		b.Run(string(f), func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(Export(specs, f)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSchemaCache: answers are found by content (an equal schema in another slice
// too), a different schema is not given another's answer, and a full cache starts
// over.
func TestSchemaCache(t *testing.T) {
	t.Parallel()
	c := schemaCache{max: 60}
	a, b := json.RawMessage(`{"type":"array"}`), json.RawMessage(`{"type":"array","x":1}`)
	c.put(a, json.RawMessage(`{"type":"array","items":{}}`))
	if out, ok := c.get(json.RawMessage(string(a))); !ok || string(out) != `{"type":"array","items":{}}` {
		t.Errorf("get(an equal copy) = %s, %v", out, ok)
	}
	if _, ok := c.get(b); ok {
		t.Error("another schema got a cached answer")
	}
	c.put(b, json.RawMessage(strings.Repeat("x", 20)))
	if _, ok := c.get(a); ok || c.bytes > c.max {
		t.Errorf("the cache did not start over when full: %d bytes", c.bytes)
	}
	if _, ok := c.get(b); !ok {
		t.Error("the entry that filled the cache is not in it")
	}
	// The listing's own cache gives what the walk gives.
	raw := deepSchema(3)
	first := withArrayItems(raw)
	if again := withArrayItems(json.RawMessage(string(raw))); string(again) != string(first) || !strings.Contains(string(first), `"bare":{"type":"array","items":{}}`) {
		t.Errorf("cached listing differs or lacks items: %s", again)
	}
}

// TestExportRootAlternatives: OpenAI, Anthropic and Gemini refuse a whole request
// over one function whose parameters hold anyOf, oneOf, allOf (or, OpenAI, not, enum,
// const) at the root, as MCP servers publish them. Their exports leave those out,
// the alternatives' properties joining the root's (allOf's required too, as it holds
// either way); MCP and native keep the schema as written, and the tool validates
// against all of it.
func TestExportRootAlternatives(t *testing.T) {
	t.Parallel()
	params := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","description":"Find a user.",` +
		`"properties":{"limit":{"type":"integer"}},"required":["limit"],"minProperties":2,` +
		`"anyOf":[{"properties":{"email":{"type":"string"}},"required":["email"]},{"properties":{"id":{"type":"integer"},"limit":{"type":"string"}},"required":["id"]}],` +
		`"allOf":[{"properties":{"team":{"type":"string"}},"required":["team"]}],` +
		`"not":{"required":["both"]},"dependentRequired":{"email":["team"]}}`
	want := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","description":"Find a user.",` +
		`"properties":{"limit":{"type":"integer"},"email":{"type":"string"},"id":{"type":"integer"},"team":{"type":"string"}},"required":["limit","team"],"minProperties":2,` +
		`"dependentRequired":{"email":["team"]}}`
	specs := []tool.Spec{{Name: "find", Description: "d", Parameters: json.RawMessage(params)}}
	for f, got := range map[Format]json.RawMessage{
		FormatOpenAI:          Export(specs, FormatOpenAI)[0].(openAITool).Function.Parameters,
		FormatOpenAIResponses: Export(specs, FormatOpenAIResponses)[0].(openAIResponsesTool).Parameters,
		FormatAnthropic:       Export(specs, FormatAnthropic)[0].(anthropicTool).InputSchema,
		FormatGemini:          Export(specs, FormatGemini)[0].(geminiTool).ParametersJSONSchema,
	} {
		if string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", f, got, want)
		}
	}
	if got := Export(specs, FormatMCP)[0].(mcpTool).InputSchema; string(got) != params {
		t.Errorf("mcp export changed the schema: %s", got)
	}
	if string(specs[0].Parameters) != params {
		t.Errorf("the spec's parameters were modified")
	}
	// A root enum or const (OpenAI names them too) goes; a property of that name stays.
	odd := `{"type":"object","properties":{"enum":{"type":"string","enum":["a"]}},"enum":[{"enum":"a"}]}`
	if got := Export([]tool.Spec{{Name: "o", Parameters: json.RawMessage(odd)}}, FormatAnthropic)[0].(anthropicTool).InputSchema; string(got) != `{"type":"object","properties":{"enum":{"type":"string","enum":["a"]}}}` {
		t.Errorf("root enum: %s", got)
	}
	// A root without a type gets "type":"object" (OpenAI refuses one without), with or
	// without alternatives to take out; the MCP export keeps the schema as it is.
	for in, want := range map[string]string{
		`{"properties":{"x":{"type":"string"}},"required":["x"]}`:    `{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}`,
		`{"anyOf":[{"properties":{"x":{"type":"string"}}}]}`:         `{"type":"object","properties":{"x":{"type":"string"}}}`,
		` {"properties":{"type":{"type":"string"}},"type":"object"}`: ` {"properties":{"type":{"type":"string"}},"type":"object"}`,
	} {
		specs := []tool.Spec{{Name: "t", Parameters: json.RawMessage(in)}}
		for _, f := range []Format{FormatOpenAI, FormatAnthropic} {
			var got json.RawMessage
			if f == FormatOpenAI {
				got = Export(specs, f)[0].(openAITool).Function.Parameters
			} else {
				got = Export(specs, f)[0].(anthropicTool).InputSchema
			}
			if string(got) != want {
				t.Errorf("%s of %s:\n got %s\nwant %s", f, in, got, want)
			}
		}
		if got := Export(specs, FormatMCP)[0].(mcpTool).InputSchema; string(got) != in {
			t.Errorf("mcp export of %s changed it: %s", in, got)
		}
	}
	// Nested alternatives are what providers take: the schema is sent as it is.
	nested := `{"type":"object","properties":{"x":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`
	if got := Export([]tool.Spec{{Name: "n", Parameters: json.RawMessage(nested)}}, FormatOpenAI)[0].(openAITool).Function.Parameters; string(got) != nested {
		t.Errorf("nested anyOf changed: %s", got)
	}

	// The registry validates against the schema as written: the root anyOf holds.
	m := New()
	ft := &fnTool{spec: tool.Spec{Name: "find", Description: "d", Parameters: json.RawMessage(params)},
		run: func(*tool.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("found"), nil }}
	if err := m.Register(ft); err != nil {
		t.Fatal(err)
	}
	e, _ := m.Lookup("find")
	for args, ok := range map[string]bool{
		`{"limit":1,"team":"t","email":"a@b"}`:   true,
		`{"limit":1,"team":"t"}`:                 false, // neither email nor id
		`{"limit":1,"email":"a@b"}`:              false, // allOf: team
		`{"limit":1,"team":"t","id":2,"both":1}`: false, // not
	} {
		res := m.Run(e, Invocation{Ctx: &tool.Context{Context: t.Context(), Progress: tool.NoProgress}, Args: json.RawMessage(args)})
		if res.IsError == ok {
			t.Errorf("args %s: is_error=%v (%s), want valid=%v", args, res.IsError, res.Text(), ok)
		}
	}
}

// TestExportRootRefAlternatives: a root union whose alternatives are local $refs
// (zod-to-json-schema with named definitions) was exported with no properties at
// all: the model was shown an empty object. The properties of the alternatives the
// $refs name join the root's, as for inline ones; the definitions stay, for the
// $refs inside them.
func TestExportRootRefAlternatives(t *testing.T) {
	t.Parallel()
	defs := `{"ByEmail":{"type":"object","properties":{"email":{"type":"string"},"tenant":{"type":"string"}},"required":["email","tenant"],"additionalProperties":false},"ById":{"type":"object","properties":{"id":{"type":"number"}},"required":["id"],"additionalProperties":false}}`
	want := `{"type":"object","definitions":` + defs + `,"$schema":"http://json-schema.org/draft-07/schema#","properties":{"email":{"type":"string"},"tenant":{"type":"string"},"id":{"type":"number"}}}`
	specs := []tool.Spec{{Name: "find", Parameters: json.RawMessage(zodUnionRefs)}}
	if got := Export(specs, FormatAnthropic)[0].(anthropicTool).InputSchema; string(got) != want {
		t.Errorf("anthropic:\n got %s\nwant %s", got, want)
	}
	// $defs, a JSON pointer with an escaped "/" (~1), and an allOf's required.
	in := `{"type":"object","allOf":[{"$ref":"#/$defs/a~1b"}],"$defs":{"a/b":{"properties":{"q":{"type":"string"}},"required":["q"]}}}`
	want = `{"type":"object","$defs":{"a/b":{"properties":{"q":{"type":"string"}},"required":["q"]}},"properties":{"q":{"type":"string"}},"required":["q"]}`
	if got := Export([]tool.Spec{{Name: "q", Parameters: json.RawMessage(in)}}, FormatOpenAI)[0].(openAITool).Function.Parameters; string(got) != want {
		t.Errorf("openai:\n got %s\nwant %s", got, want)
	}
}

// TestExportRootRefFanOut: a root whose thousands of alternatives are each a $ref
// into the root's own list (an MCP server's schema, 210 KB) was decoded whole again
// at every step of every $ref followed: minutes of CPU for one tools listing
// (2,000 alternatives took 19 s). Each object or array is decoded once; the
// properties the $refs lead to still join the root's.
func TestExportRootRefFanOut(t *testing.T) {
	t.Parallel()
	// Every $ref but the first names itself: each is followed maxRefHops times.
	alts := `{"properties":{"p":{"type":"string"}}}` + strings.Repeat(`,{"$ref":"#/anyOf/1"}`, 10000)
	in := json.RawMessage(`{"type":"object","anyOf":[` + alts + `]}`)
	done := make(chan json.RawMessage, 1)
	go func() {
		done <- Export([]tool.Spec{{Name: "fan", Parameters: in}}, FormatAnthropic)[0].(anthropicTool).InputSchema
	}()
	select {
	case got := <-done:
		if want := `{"type":"object","properties":{"p":{"type":"string"}}}`; string(got) != want {
			t.Errorf("got %s, want %s", got, want)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("exporting a 210 KB schema of $ref alternatives did not end in 2 minutes")
	}
}

// TestExportRootUnionDiscriminator: a zod discriminated union at the root (one
// alternative per action, each with its own "action" const) was exported with the
// first alternative's "action" alone, {"const":"create"}: a model holding to the
// schema (Gemini's constrained decoding does) could never ask for a delete. A
// property the alternatives declare differently is exported as any of them.
func TestExportRootUnionDiscriminator(t *testing.T) {
	t.Parallel()
	params := `{"type":"object","oneOf":[` +
		`{"properties":{"action":{"const":"create"},"name":{"type":"string"}},"required":["action","name"]},` +
		`{"properties":{"action":{"const":"delete"},"id":{"type":"integer"}},"required":["action","id"]},` +
		`{"properties":{"action":{"const":"create"},"name":{"type":"string"},"dry":{"type":"boolean"}}}]}`
	want := `{"type":"object","properties":{"action":{"anyOf":[{"const":"create"},{"const":"delete"}]},"name":{"type":"string"},"id":{"type":"integer"},"dry":{"type":"boolean"}}}`
	got := Export([]tool.Spec{{Name: "act", Parameters: json.RawMessage(params)}}, FormatGemini)[0].(geminiTool).ParametersJSONSchema
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

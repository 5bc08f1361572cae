package toolmgr

import (
	"encoding/json"
	"strings"
	"testing"
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
	// Declarations in a provider's own shape: hosted tools go only to their providers.
	hosted := tool.Spec{Name: "code_interpreter", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`), Flags: tool.Flags{Hosted: true},
		ProviderSpecs: map[string]json.RawMessage{"openai": json.RawMessage(`{"type":"code_interpreter"}`)}}
	defined := tool.Spec{Name: "bash", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`),
		ProviderSpecs: map[string]json.RawMessage{"anthropic": json.RawMessage(`{"type":"bash_20250124","name":"bash"}`)}}
	both := []tool.Spec{hosted, defined}
	for f, want := range map[Format]string{
		FormatOpenAI:    `[{"type":"code_interpreter"},{"type":"function","function":{"name":"bash","description":"d","parameters":{"type":"object"}}}]`,
		FormatAnthropic: `[{"type":"bash_20250124","name":"bash"}]`,
	} {
		b, _ := json.Marshal(Export(both, f))
		if string(b) != want {
			t.Errorf("%s provider declarations:\n got %s\nwant %s", f, b, want)
		}
	}
	if o := Omitted(both, FormatAnthropic); len(o) != 1 || o[0].Name != "code_interpreter" || o[0].HostedBy[0] != "openai" {
		t.Errorf("omitted from anthropic: %+v", o)
	}
	if o := Omitted(both, FormatOpenAI); len(o) != 0 {
		t.Errorf("omitted from openai: %+v", o)
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Fatal("unknown format accepted")
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
	d := got[0].(openAITool).Function.Description
	if n := utf8.RuneCountInString(d); n > maxOpenAIDescription || !utf8.ValidString(d) || !strings.HasPrefix(d, strings.Repeat("é", 1000)) {
		t.Errorf("openai description of %d characters (valid UTF-8 %v): %.80q…", n, utf8.ValidString(d), d)
	}
	if d := got[1].(openAITool).Function.Description; d != specs[1].Description {
		t.Errorf("a description of exactly %d characters was changed", maxOpenAIDescription)
	}
	if d := Export(specs, FormatAnthropic)[0].(anthropicTool).Description; d != long {
		t.Errorf("anthropic description cut to %d bytes", len(d))
	}
}

package toolmgr

import (
	"encoding/json"
	"testing"

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

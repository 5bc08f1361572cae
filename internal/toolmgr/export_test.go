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
	if _, err := ParseFormat("xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}

package server_test

import (
	"encoding/json"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
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

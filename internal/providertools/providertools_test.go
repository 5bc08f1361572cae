package providertools_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/providertools"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

func post(t *testing.T, url, body string, want int) []byte {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

type listing struct {
	Format  string            `json:"format"`
	Tools   []json.RawMessage `json:"tools"`
	Omitted []struct {
		Name     string   `json:"name"`
		HostedBy []string `json:"hosted_by"`
		Reason   string   `json:"reason"`
	} `json:"omitted"`
}

func list(t *testing.T, url string) (map[string]string, listing) {
	t.Helper()
	var l listing
	if err := json.Unmarshal(get(t, url), &l); err != nil {
		t.Fatal(err)
	}
	// Index each declaration by the name the model sees (or its type for OpenAI
	// hosted tools, which have none).
	out := map[string]string{}
	for _, raw := range l.Tools {
		var d struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		_ = json.Unmarshal(raw, &d)
		key := d.Name
		if key == "" {
			key = d.Function.Name
		}
		if key == "" {
			key = "type:" + d.Type
		}
		out[key] = string(raw)
	}
	return out, l
}

func daemon(t *testing.T) *testdaemon.Daemon {
	return testdaemon.Start(t, func(c *config.Config) {
		c.ProviderTools = []config.ProviderToolConfig{
			{Name: "web_search", Kind: "hosted", Specs: map[string]map[string]any{
				"openai": {"type": "web_search"}, "anthropic": {"type": "web_search_20250305", "max_uses": 3}}},
			{Name: "code_interpreter", Kind: "hosted", Description: "Run Python at OpenAI.", Specs: map[string]map[string]any{
				"openai": {"type": "code_interpreter", "container": map[string]any{"type": "auto"}}}},
			{Name: "bash", Kind: "provider_defined", Handler: "execute_command", Specs: map[string]map[string]any{
				"anthropic": {"type": "bash_20250124"}}},
			{Name: "computer", Kind: "provider_defined", Handler: "external", Specs: map[string]map[string]any{
				"anthropic": {"type": "computer_20250124", "display_width_px": 1024, "display_height_px": 768}}},
		}
		c.Permissions.Allow = []string{"bash(echo:*)"}
	})
}

func TestExportPerProvider(t *testing.T) {
	t.Parallel()
	d := daemon(t)

	responses, l := list(t, d.URL+"/v1/tools?format=openai_responses")
	if responses["type:web_search"] != `{"type":"web_search"}` || !strings.Contains(responses["type:code_interpreter"], `"container":{"type":"auto"}`) {
		t.Errorf("openai_responses hosted declarations: %v", responses)
	}
	if !strings.HasPrefix(responses["bash"], `{"type":"function"`) || !strings.HasPrefix(responses["computer"], `{"type":"function"`) {
		t.Errorf("provider-defined tools without an openai declaration should be functions: %s / %s", responses["bash"], responses["computer"])
	}
	if responses["web_search"] != "" || len(l.Omitted) != 0 {
		t.Errorf("openai_responses: nothing should be omitted: %+v", l.Omitted)
	}

	// Chat Completions takes functions only: OpenAI's hosted tools, which it refuses
	// ("Invalid value: 'web_search'"), are left out, saying where they run.
	openai, l := list(t, d.URL+"/v1/tools?format=openai")
	if openai["type:web_search"] != "" || openai["type:code_interpreter"] != "" || len(l.Omitted) != 2 {
		t.Errorf("openai: hosted declarations listed: %v, omitted %+v", openai, l.Omitted)
	}
	for _, o := range l.Omitted {
		if !slices.Contains(o.HostedBy, "openai") || !strings.Contains(o.Reason, "openai_responses") {
			t.Errorf("openai: %s omitted without saying the Responses API runs it: %+v", o.Name, o)
		}
	}
	if !strings.HasPrefix(openai["bash"], `{"type":"function"`) || !strings.HasPrefix(openai["computer"], `{"type":"function"`) {
		t.Errorf("provider-defined tools without an openai declaration should be functions: %s / %s", openai["bash"], openai["computer"])
	}

	anthropic, l := list(t, d.URL+"/v1/tools?format=anthropic")
	if anthropic["web_search"] != `{"max_uses":3,"name":"web_search","type":"web_search_20250305"}` {
		t.Errorf("anthropic web_search: %s", anthropic["web_search"])
	}
	if anthropic["bash"] != `{"name":"bash","type":"bash_20250124"}` || !strings.Contains(anthropic["computer"], `"type":"computer_20250124"`) {
		t.Errorf("anthropic provider-defined: %s / %s", anthropic["bash"], anthropic["computer"])
	}
	if _, ok := anthropic["code_interpreter"]; ok || len(l.Omitted) != 1 || l.Omitted[0].Name != "code_interpreter" || l.Omitted[0].HostedBy[0] != "openai" {
		t.Errorf("an OpenAI-hosted tool must be left out of the anthropic export and named in omitted: %+v", l.Omitted)
	}
	if _, ok := anthropic["read_file"]; !ok {
		t.Errorf("ordinary tools keep their function shape")
	}

	mcp, l := list(t, d.URL+"/v1/tools?format=mcp")
	if _, ok := mcp["web_search"]; ok || len(l.Omitted) != 2 || !strings.Contains(mcp["bash"], `"inputSchema"`) {
		t.Errorf("mcp: hosted tools omitted (%+v), provider-defined as MCP tools (%s)", l.Omitted, mcp["bash"])
	}

	native, _ := list(t, d.URL+"/v1/tools")
	var ws tool.Spec
	if err := json.Unmarshal([]byte(native["web_search"]), &ws); err != nil || !ws.Hosted || len(ws.ProviderSpecs) != 2 {
		t.Errorf("native listing should mark the hosted tool and carry its declarations: %s", native["web_search"])
	}
}

func TestCallsAndWhitelist(t *testing.T) {
	t.Parallel()
	d := daemon(t)
	var sess struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(post(t, d.URL+"/v1/sessions", `{"available_tools":["web_search","bash"]}`, http.StatusCreated), &sess); err != nil {
		t.Fatal(err)
	}
	// The whitelist applies to provider tools like to any other.
	anthropic, l := list(t, d.URL+"/v1/sessions/"+sess.ID+"/tools?format=anthropic")
	if len(anthropic) != 2 || anthropic["web_search"] == "" || anthropic["bash"] == "" || len(l.Omitted) != 0 {
		t.Errorf("session export: %v omitted %+v", anthropic, l.Omitted)
	}

	body := post(t, d.URL+"/v1/sessions/"+sess.ID+"/tool-calls", `{"calls":[
		{"type":"tool_use","id":"t1","name":"web_search","input":{"query":"x"}},
		{"type":"tool_use","id":"t2","name":"bash","input":{"command":"echo provider-defined"}},
		{"type":"tool_use","id":"t3","name":"code_interpreter","input":{}}]}`, http.StatusOK)
	msgs := map[string]struct {
		Content   string `json:"content"`
		IsError   bool   `json:"is_error"`
		ErrorKind string `json:"error_kind"`
	}{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var ev struct {
			Type       string `json:"type"`
			ToolCallID string `json:"tool_call_id"`
			Message    struct {
				Content   string `json:"content"`
				IsError   bool   `json:"is_error"`
				ErrorKind string `json:"error_kind"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "message" {
			msgs[ev.ToolCallID] = ev.Message
		}
	}
	if m := msgs["t1"]; !m.IsError || m.ErrorKind != "failed" || !strings.Contains(m.Content, "executes it") || !strings.Contains(m.Content, "anthropic, openai") {
		t.Errorf("hosted call: %+v", m)
	}
	if m := msgs["t2"]; m.IsError || !strings.Contains(m.Content, "provider-defined") {
		t.Errorf("bash through execute_command (allowed by the rule bash(echo:*)): %+v", m)
	}
	if m := msgs["t3"]; !m.IsError || m.ErrorKind != "not_found" {
		t.Errorf("a tool outside the whitelist: %+v", m)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	specs := func(p string, s map[string]any) map[string]map[string]any { return map[string]map[string]any{p: s} }
	bad := []providertools.Config{
		{Name: "a b", Kind: "hosted", Specs: specs("openai", map[string]any{"type": "web_search"})},
		{Name: "x", Kind: "other", Specs: specs("openai", map[string]any{"type": "web_search"})},
		{Name: "x", Kind: "hosted"},
		{Name: "x", Kind: "hosted", Specs: specs("gemini", map[string]any{"type": "google_search"})},
		{Name: "x", Kind: "hosted", Specs: specs("openai", map[string]any{})},
		{Name: "x", Kind: "hosted", Specs: specs("anthropic", map[string]any{"type": "web_search_20250305", "name": "web_search"})},
		{Name: "x", Kind: "hosted", Handler: "external", Specs: specs("openai", map[string]any{"type": "web_search"})},
		{Name: "x", Kind: "provider_defined", Handler: "text_editor", Specs: specs("anthropic", map[string]any{"type": "text_editor_20250728"})},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("case %d accepted: %+v", i, c)
		}
	}
	_, err := providertools.Build([]providertools.Config{{Name: "bash", Kind: "provider_defined", Handler: "execute_command",
		Specs: specs("anthropic", map[string]any{"type": "bash_20250124"})}}, func(string) (tool.Tool, bool) { return nil, false })
	if err == nil || !strings.Contains(err.Error(), "no execute_command tool") {
		t.Errorf("missing delegate: %v", err)
	}
}

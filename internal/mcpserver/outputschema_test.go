package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// sdkResult is what testdata/npm/sdk-client.mjs prints: the TypeScript SDK client's
// tool list, its call's result, and what it threw.
type sdkResult struct {
	Tools []struct {
		Name         string          `json:"name"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	} `json:"tools"`
	Result struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error    string `json:"error"`
	Progress int    `json:"progress"`
}

// sdkCall runs the official TypeScript SDK's client (testdata/npm/sdk-client.mjs,
// under node) against a session's /mcp endpoint: it lists the tools and calls name
// with args, validating the result against the tool's outputSchema as the SDK does.
func sdkCall(t *testing.T, d *daemon, sessionID, name string, args map[string]any) sdkResult {
	t.Helper()
	return sdkCallAt(t, d.URL+"/v1/sessions/"+sessionID+"/mcp", name, args)
}

// sdkCallAt is sdkCall against an endpoint URL (through a proxy, say); env is added
// to the client's environment (SDK_PROGRESS=1: the call asks for progress).
func sdkCallAt(t *testing.T, url, name string, args map[string]any, env ...string) sdkResult {
	t.Helper()
	script := sdkScript(t, "sdk-client.mjs")
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, url, name, string(b))
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk-client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var r sdkResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("sdk-client output is not JSON: %v: %s", err, out)
	}
	return r
}

// TestOutputSchemaOfProxiedTool: server-everything's get-structured-content, proxied
// over stdio, reaches MCP clients of /mcp with its outputSchema as the server wrote
// it, and a call returns the structured content that schema describes: to an mcp-go
// client and to the TypeScript SDK's, which holds the result to the schema. The mcp
// schema listing has it too; the provider formats do not.
func TestOutputSchemaOfProxiedTool(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	const weather, echo = "mcp__everything__get-structured-content", "mcp__everything__echo"
	d := start(t, func(c *config.Config) {
		c.MCPServers = []config.MCPServerConfig{{Name: "everything", Transport: "stdio", Command: "node", Args: []string{js, "stdio"}}}
		c.Permissions.Allow = append(c.Permissions.Allow, weather, echo)
	})
	waitFor(t, "the MCP server is ready", func() bool {
		return strings.Contains(d.doRaw(http.MethodGet, "/v1/mcp/servers", nil, http.StatusOK), `"state":"ready"`)
	})
	s := d.session(map[string]any{"available_tools": []string{weather, echo}})

	c := d.connect(s.ID)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]mcp.Tool{}
	for _, tl := range list.Tools {
		got[tl.Name] = tl
	}
	o := got[weather].OutputSchema
	if o.Type != "object" || o.Properties["temperature"] == nil || len(o.Required) != 3 || o.AdditionalProperties != false {
		t.Errorf("mcp-go client: %s outputSchema = %+v, want server-everything's weather schema", weather, o)
	}
	if got[echo].OutputSchema.Type != "" {
		t.Errorf("mcp-go client: %s has an outputSchema %+v; it declares none", echo, got[echo].OutputSchema)
	}
	res, err := c.CallTool(ctx, callReq(weather, map[string]any{"location": "Chicago"}))
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Temperature float64 `json:"temperature"`
		Conditions  string  `json:"conditions"`
	}
	if res.IsError || json.Unmarshal(res.RawStructuredContent, &w) != nil || w.Temperature != 36 || w.Conditions != "Light rain / drizzle" {
		t.Errorf("mcp-go client: call = is_error %v structured %s", res.IsError, res.RawStructuredContent)
	}

	// The schema as written: mcp-go's typed reading of it has no $schema.
	post := d.rawMCP(s.ID, mcp.ProtocolVersion20250618)
	code, hdr, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if code != http.StatusOK {
		t.Fatalf("initialize: %d %s", code, body)
	}
	if _, _, body = post(hdr.Get("Mcp-Session-Id"), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(body, `"outputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"`) {
		t.Errorf("tools/list does not carry the outputSchema as the server wrote it: %s", body)
	}

	var mcpList struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	d.do(http.MethodGet, "/v1/sessions/"+s.ID+"/tools?format=mcp", nil, http.StatusOK, &mcpList)
	for _, tl := range mcpList.Tools {
		if string(tl["name"]) == `"`+weather+`"` && !strings.Contains(string(tl["outputSchema"]), `"humidity"`) {
			t.Errorf("mcp listing: %s has outputSchema %s", weather, tl["outputSchema"])
		}
	}
	if raw := d.doRaw(http.MethodGet, "/v1/sessions/"+s.ID+"/tools?format=openai", nil, http.StatusOK); strings.Contains(raw, "outputSchema") || strings.Contains(raw, "humidity") {
		t.Errorf("openai listing carries the output schema: %s", raw)
	}

	r := sdkCall(t, d, s.ID, weather, map[string]any{"location": "Chicago"})
	if r.Error != "" {
		t.Fatalf("TypeScript SDK client: %s", r.Error)
	}
	found := false
	for _, tl := range r.Tools {
		if tl.Name == weather {
			found = strings.Contains(string(tl.OutputSchema), `"humidity"`)
		}
	}
	if !found || r.Result.IsError || json.Unmarshal(r.Result.StructuredContent, &w) != nil || w.Temperature != 36 {
		t.Errorf("TypeScript SDK client: outputSchema seen %v, result %+v", found, r.Result)
	}
}

// report is a local tool that declares an output schema and answers rows of
// structured output with their JSON as text, as MCP servers do: a result the token
// budget cuts.
func report(t *testing.T, d *daemon) {
	t.Helper()
	spec := tool.Spec{Name: "report", Description: "Reports rows.", Risk: tool.RiskSafe, Flags: tool.Flags{ReadOnly: true},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"string"}},"id":{"type":"integer"}},"required":["rows","id"]}`)}
	rt, err := toolmgr.NewFunc(spec, func(_ *tool.Context, a struct {
		Rows int `json:"rows"`
	}) (*tool.Result, error) {
		rows := make([]string, a.Rows)
		for i := range rows {
			rows[i] = fmt.Sprintf("row %d of the quarterly figures", i)
		}
		b, err := json.Marshal(map[string]any{"rows": rows, "id": json.Number("12345678901234567890")})
		if err != nil {
			return nil, err
		}
		return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: string(b)}}, Structured: b}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.App.Tools.Register(rt); err != nil {
		t.Fatal(err)
	}
}

// TestOutputSchemaResultsCutToTheBudget: a tool that declares an output schema keeps
// its structured output whole in /mcp results when the token budget cuts the result,
// whether the text alone is over the budget or only text and structured output
// together are: MCP wants structured content conforming to the schema in every
// result that is not an error, and the TypeScript SDK client throws on one without.
// The text gives way instead. Numbers pass exactly.
func TestOutputSchemaResultsCutToTheBudget(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) {
		c.MaxToolResultTokens = 300
		c.Permissions.Allow = append(c.Permissions.Allow, "report")
	})
	report(t, d)
	s := d.session(map[string]any{"available_tools": []string{"report"}})
	c := d.connect(s.ID)
	for _, rows := range []int{25, 400} { // ~250 tokens each of text and structured output; ~4000
		t.Run(fmt.Sprint(rows, " rows"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			res, err := c.CallTool(ctx, callReq("report", map[string]any{"rows": rows}))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Rows []string `json:"rows"`
			}
			if res.IsError || json.Unmarshal(res.RawStructuredContent, &out) != nil || len(out.Rows) != rows {
				t.Errorf("mcp-go client: is_error %v, %d rows of structured content, want %d (%.200s)", res.IsError, len(out.Rows), rows, res.RawStructuredContent)
			}
			if !strings.Contains(string(res.RawStructuredContent), `"id":12345678901234567890`) {
				t.Errorf("structured content's id changed: %.100s…", res.RawStructuredContent)
			}
			if text := resultText(res); !strings.Contains(text, "bytes removed here") || res.Meta.AdditionalFields["toolserverd/truncated"] != true {
				t.Errorf("the text was not cut to leave the structured content room: %.300s", text)
			}

			r := sdkCall(t, d, s.ID, "report", map[string]any{"rows": rows})
			if r.Error != "" || r.Result.IsError || !strings.Contains(string(r.Result.StructuredContent), fmt.Sprintf("row %d of", rows-1)) {
				t.Fatalf("TypeScript SDK client: error %q, result is_error %v structured %.200s", r.Error, r.Result.IsError, r.Result.StructuredContent)
			}
		})
	}
}

// TestOutputSchemaResultWithoutStructuredOutput: a tool that declares an output schema
// but whose result reaches the endpoint with no structured output (here nested deeper
// than the daemon sends, so left out with its JSON as text) is answered as an error
// result carrying that text: MCP clients refuse a result that is not an error and has
// no structured content for such a tool (the TypeScript SDK client throws), and the
// model's text would be lost with it.
func TestOutputSchemaResultWithoutStructuredOutput(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.Permissions.Allow = append(c.Permissions.Allow, "deep") })
	spec := tool.Spec{Name: "deep", Description: "Answers deep JSON.", Risk: tool.RiskSafe, Flags: tool.Flags{ReadOnly: true},
		OutputSchema: json.RawMessage(`{"type":"object"}`)}
	rt, err := toolmgr.NewFunc(spec, func(_ *tool.Context, _ struct{}) (*tool.Result, error) {
		deep := strings.Repeat(`{"a":`, tool.MaxStructuredDepth+10) + "1" + strings.Repeat("}", tool.MaxStructuredDepth+10)
		return &tool.Result{Content: []tool.Content{}, Structured: json.RawMessage(deep)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.App.Tools.Register(rt); err != nil {
		t.Fatal(err)
	}
	s := d.session(map[string]any{"available_tools": []string{"deep"}})
	r := sdkCall(t, d, s.ID, "deep", map[string]any{})
	if r.Error != "" {
		t.Fatalf("TypeScript SDK client threw: %s", r.Error)
	}
	text := ""
	for _, c := range r.Result.Content {
		text += c.Text
	}
	if !r.Result.IsError || !strings.Contains(text, `{"a":{"a":`) || !strings.Contains(text, "output schema") {
		t.Errorf("result: is_error %v, text %.300s", r.Result.IsError, text)
	}
}

// sdkScript is the path of a Node script of testdata/npm that drives the TypeScript
// SDK client; the test fails under CI=true, else is skipped, without node or the
// installed SDK.
func sdkScript(t *testing.T, name string) string {
	t.Helper()
	script, err := filepath.Abs("../../testdata/npm/" + name)
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat("../../testdata/npm/node_modules/@modelcontextprotocol/sdk/package.json"); err != nil || nodeErr != nil {
		msg := "the TypeScript SDK client needs node and `npm ci` in testdata/npm (scripts/test.sh runs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return script
}

// startWithKeys starts a daemon that requires API keys and returns the admin key's
// Authorization header.
func startWithKeys(t *testing.T) (*daemon, map[string]string) {
	t.Helper()
	d := start(t, func(c *config.Config) { c.Auth.Unauthenticated = false })
	raw, err := os.ReadFile(filepath.Join(d.App.DataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	return d, map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(raw))}
}

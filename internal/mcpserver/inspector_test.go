package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// inspector returns the MCP Inspector CLI installed by npm ci in testdata/npm.
func inspector(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../testdata/npm/node_modules/.bin/mcp-inspector")
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(bin); err != nil || nodeErr != nil {
		msg := "the MCP Inspector CLI needs node and `npm ci` in testdata/npm (scripts/test.sh runs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

func runInspector(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-inspector %v: %v\nstdout: %s\nstderr: %s", args, err, out, stderr.String())
	}
	return out
}

// TestInspectorCLI drives the endpoint with the MCP Inspector's CLI (its version 0.15
// has no header option, so it uses the session-scoped URL).
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	bin := inspector(t)
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command", "read_file"}})
	url := d.URL + "/v1/sessions/" + s.ID + "/mcp"

	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	out := runInspector(t, bin, "--cli", url, "--transport", "http", "--method", "tools/list")
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list output is not JSON: %v: %s", err, out)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if !json.Valid(tl.InputSchema) || !strings.Contains(string(tl.InputSchema), "properties") {
			t.Errorf("%s has no usable input schema: %s", tl.Name, tl.InputSchema)
		}
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(s.Tools)); !slices.Equal(names, want) {
		t.Fatalf("inspector tools/list = %v, want the session's tools %v", names, want)
	}

	var call struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	}
	out = runInspector(t, bin, "--cli", url, "--transport", "http", "--method", "tools/call",
		"--tool-name", "execute_command", "--tool-arg", "command=echo inspector-was-here")
	if err := json.Unmarshal(out, &call); err != nil {
		t.Fatalf("tools/call output is not JSON: %v: %s", err, out)
	}
	if call.IsError || len(call.Content) == 0 || !strings.Contains(call.Content[0].Text, "inspector-was-here") {
		t.Fatalf("inspector tools/call: %s", out)
	}
	id, _ := call.Meta["toolserverd/call_id"].(string)
	var rec callRecord
	d.do("GET", "/v1/tool-calls/"+id, nil, 200, &rec)
	if rec.Status != "succeeded" || rec.Name != "execute_command" {
		t.Fatalf("call record of the inspector's call: %+v", rec)
	}
}

package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sdkParallelResult is what testdata/npm/sdk-parallel-client.mjs prints.
type sdkParallelResult struct {
	Capabilities map[string]json.RawMessage `json:"capabilities"`
	Calls        []struct {
		Progress []string      `json:"progress"`
		Result   sdkResultBody `json:"result"`
		Error    string        `json:"error"`
		Ms       int           `json:"ms"`
	} `json:"calls"`
	Streams []struct {
		ID             json.RawMessage   `json:"id"`
		ProgressTokens []json.RawMessage `json:"progress_tokens"`
		Response       bool              `json:"response"`
	} `json:"streams"`
	Errors []string `json:"errors"`
	Ms     int      `json:"ms"`
	Error  string   `json:"error"`
}

type sdkResultBody struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// sdkParallel runs the TypeScript SDK client of sdk-parallel-client.mjs against url:
// it calls name once for each of argSets, all at once, each asking for progress.
func sdkParallel(t *testing.T, url, name string, env []string, argSets ...map[string]any) sdkParallelResult {
	t.Helper()
	script := sdkScript(t, "sdk-parallel-client.mjs")
	args := []string{script, url, name}
	for _, a := range argSets {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk-parallel-client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var r sdkParallelResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("sdk-parallel-client output is not JSON: %v: %s", err, out)
	}
	if r.Error != "" {
		t.Fatalf("sdk-parallel-client: %s", r.Error)
	}
	return r
}

// TestServerDoesNotClaimElicitation: elicitation is a client capability; the
// initialize result, as a desktop client reads it, must not claim it for the server
// (mcp-go's WithElicitation put "elicitation":{} there). Asking clients still works:
// TestApprovalDecidedByElicitation and the elicitpolicy tests.
func TestServerDoesNotClaimElicitation(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	r := sdkParallel(t, d.URL+"/v1/sessions/"+s.ID+"/mcp", "execute_command", nil, map[string]any{"command": "echo hi"})
	if _, ok := r.Capabilities["tools"]; !ok {
		t.Fatalf("the initialize result as read by the client has no tools capability: %s", r.Capabilities)
	}
	if el, ok := r.Capabilities["elicitation"]; ok {
		t.Fatalf("the server claims the client capability elicitation: %s", el)
	}
}

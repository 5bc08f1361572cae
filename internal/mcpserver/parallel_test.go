package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
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

// TestParallelCallsSayTheyWait: a desktop client sends several tools/call requests of
// one MCP session at once. mcp-go serves them at once, but the session runs its calls
// of tools that are not concurrency-safe (execute_command) one at a time, as on REST:
// each call that waits for another says so in its progress, naming the call it waits
// behind, instead of sitting silent (4 calls of a 1 s command took 4.5 s, the last
// silent for 3 s).
func TestParallelCallsSayTheyWait(t *testing.T) {
	t.Parallel()
	const every = 50 * time.Millisecond
	d := start(t, func(c *config.Config) { c.StreamKeepalive = every })
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	mark := filepath.Join(t.TempDir(), "go")
	const n = 3
	var sets []map[string]any
	for i := range n {
		sets = append(sets, map[string]any{"command": fmt.Sprintf("echo start%d; while [ ! -e %s ]; do sleep 0.05; done; echo end%d", i, mark, i)})
	}
	notes := filepath.Join(t.TempDir(), "progress")
	done := make(chan sdkParallelResult, 1)
	go func() {
		done <- sdkParallel(t, d.URL+"/v1/sessions/"+s.ID+"/mcp", "execute_command", []string{"PROGRESS_FILE=" + notes}, sets...)
	}()
	// One call runs and blocks on the mark; the others wait for it.
	waitFor(t, "the calls to be on record", func() bool { return len(d.calls(s.ID)) == n })
	// Until a waiting call's still-waiting note has reached the client (not a
	// fixed sleep, which a loaded machine may fill with none).
	waitFor(t, "a still-waiting note of a waiting call", func() bool {
		b, _ := os.ReadFile(notes)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"message":"still waiting for execute_command`) && strings.Contains(line, "(it waits for the session's call ") {
				return true
			}
		}
		return false
	})
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	waited, kept := 0, 0
	for i, c := range r.Calls {
		if c.Error != "" || c.Result.IsError {
			t.Fatalf("call %d: error %q, result %+v", i, c.Error, c.Result)
		}
		said := strings.Join(c.Progress, "")
		if strings.Contains(said, "waits for the session's call ") {
			waited++
			if !strings.Contains(said, "(execute_command) to finish") {
				t.Errorf("call %d: the note does not name the call it waits behind: %q", i, said)
			}
		}
		for _, p := range c.Progress {
			if strings.HasPrefix(p, "still waiting for execute_command") && strings.Contains(p, "(it waits for the session's call ") {
				kept++
			}
		}
	}
	// All but the first wait, unless one had not yet tried to start when the first
	// ended: the mark releases it once all are on record, not once they queue, which
	// nothing outside the session can see.
	if waited == 0 {
		for i, c := range r.Calls {
			t.Logf("call %d progress: %q", i, c.Progress)
		}
		t.Fatalf("none of the %d calls said it waited for another call of the session", n)
	}
	if kept == 0 {
		t.Errorf("no still-waiting note of a waiting call says what it waits for: %+v", r.Calls)
	}
}

package openapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

type message struct {
	Name      string `json:"name"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
	ErrorKind string `json:"error_kind"`
}

func do(t *testing.T, method, url, body string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", method, url, resp.StatusCode, want, b)
	}
	return b
}

// callTools runs calls through the daemon's normal REST path and returns each
// call's message by the model's call id.
func callTools(t *testing.T, base, session, calls string) map[string]message {
	t.Helper()
	b := do(t, http.MethodPost, base+"/v1/sessions/"+session+"/tool-calls", `{"strategy":"sequential","calls":`+calls+`}`, http.StatusOK)
	out := map[string]message{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	done := false
	for sc.Scan() {
		var ev struct {
			Type       string  `json:"type"`
			ToolCallID string  `json:"tool_call_id"`
			Message    message `json:"message"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", sc.Text(), err)
		}
		switch ev.Type {
		case "message":
			out[ev.ToolCallID] = ev.Message
		case "done":
			done = true
		}
	}
	if !done {
		t.Fatalf("stream did not end with done: %s", b)
	}
	return out
}

// TestDrivesItself loads toolserverd's own contract, served by a running daemon, as an
// OpenAPI source of a second daemon, and drives the first through the generated tools
// on the second's normal call path: list tools, create a session, read it back.
func TestDrivesItself(t *testing.T) {
	t.Parallel()
	target := testdaemon.Start(t, nil)
	spec := do(t, http.MethodGet, target.URL+"/openapi.yaml", "", http.StatusOK)
	if !bytes.Contains(spec, []byte("operationId: getOpenAPIDocument")) {
		t.Fatalf("/openapi.yaml does not serve the contract")
	}
	driver := testdaemon.Start(t, func(c *config.Config) {
		c.OpenAPI = []config.OpenAPIConfig{{Name: "self", Spec: target.URL + "/openapi.yaml", BaseURL: target.URL}}
		c.Permissions.Allow = []string{"self__*"}
	})
	// The document is read in the background: wait for its tools.
	for i := 0; !bytes.Contains(do(t, http.MethodGet, driver.URL+"/v1/tools", "", http.StatusOK), []byte(`"self__listTools"`)); i++ {
		if i == 1500 {
			t.Fatal("the tools of the self source did not appear")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The generated tools are in the registry with the risk their method implies.
	var listing struct {
		Tools []struct {
			Name     string `json:"name"`
			Risk     string `json:"risk"`
			ReadOnly bool   `json:"read_only"`
			Source   string `json:"source"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(do(t, http.MethodGet, driver.URL+"/v1/tools", "", http.StatusOK), &listing); err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, tl := range listing.Tools {
		if tl.Source == "openapi:self" {
			found[tl.Name] = fmt.Sprintf("%s/%v", tl.Risk, tl.ReadOnly)
		}
	}
	for name, want := range map[string]string{"self__listTools": "low/true", "self__createSession": "medium/false", "self__getSession": "low/true", "self__runToolCalls": "medium/false"} {
		if found[name] != want {
			t.Errorf("%s: risk/read_only %q, want %q (have %d openapi tools)", name, found[name], want, len(found))
		}
	}

	var sess struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(do(t, http.MethodPost, driver.URL+"/v1/sessions", `{"available_tools":["self__*"]}`, http.StatusCreated), &sess); err != nil {
		t.Fatal(err)
	}
	msgs := callTools(t, driver.URL, sess.ID, `[
		{"id":"c1","name":"self__listTools","arguments":{"format":"openai"}},
		{"id":"c2","name":"self__createSession","arguments":{"available_tools":["read_file"],"metadata":{"who":"selfdrive"}}}]`)
	list := msgs["c1"]
	if list.IsError || !strings.Contains(list.Content, `"format":"openai"`) || !strings.Contains(list.Content, `"name":"read_file"`) {
		t.Fatalf("listTools through the tool: %+v", list)
	}
	created := msgs["c2"]
	var remote struct {
		ID             string         `json:"id"`
		AvailableTools []string       `json:"available_tools"`
		Metadata       map[string]any `json:"metadata"`
	}
	if created.IsError || json.Unmarshal([]byte(created.Content), &remote) != nil || !strings.HasPrefix(remote.ID, "ses_") {
		t.Fatalf("createSession through the tool: %+v", created)
	}

	read := callTools(t, driver.URL, sess.ID, fmt.Sprintf(`[{"id":"c3","name":"self__getSession","arguments":{"sessionID":%q}},
		{"id":"c4","name":"self__getSession","arguments":{"sessionID":"ses_nope"}}]`, remote.ID))
	var back struct {
		ID             string         `json:"id"`
		AvailableTools []string       `json:"available_tools"`
		Metadata       map[string]any `json:"metadata"`
	}
	if m := read["c3"]; m.IsError || json.Unmarshal([]byte(m.Content), &back) != nil {
		t.Fatalf("getSession through the tool: %+v", m)
	}
	if back.ID != remote.ID || fmt.Sprint(back.AvailableTools) != "[read_file]" || back.Metadata["who"] != "selfdrive" {
		t.Errorf("read back %+v, created %+v", back, remote)
	}
	if m := read["c4"]; !m.IsError || m.ErrorKind != "failed" || !strings.Contains(m.Content, "HTTP 404") {
		t.Errorf("unknown session should be an is_error result with the status: %+v", m)
	}
	// The session exists in the target daemon itself, not only in a tool's answer.
	direct := do(t, http.MethodGet, target.URL+"/v1/sessions/"+remote.ID, "", http.StatusOK)
	if !bytes.Contains(direct, []byte(`"selfdrive"`)) {
		t.Errorf("target daemon does not have the session: %s", direct)
	}
}

// TestBrokenSourceStopsStart: a source whose document is a file that cannot be
// parsed, or whose auth variable is not set, is a config error naming it, not a
// daemon with a missing API. One whose document is a URL that serves no document
// (an API that is down or in maintenance) does not stop start-up: it is loaded in
// the background, as an MCP server connects.
func TestBrokenSourceStopsStart(t *testing.T) {
	t.Parallel()
	target := testdaemon.Start(t, nil)
	garbage := filepath.Join(t.TempDir(), "garbage.yaml")
	if err := os.WriteFile(garbage, []byte("<html><body>not: [a document</body></html>\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(c config.OpenAPIConfig) error {
		cfg := config.Defaults()
		cfg.DataDir, cfg.ReplicaID = t.TempDir(), "test"
		cfg.OpenAPI = []config.OpenAPIConfig{c}
		a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			a.Close()
		}
		return err
	}
	for what, c := range map[string]config.OpenAPIConfig{
		"a garbage file":         {Name: "self", Spec: garbage, BaseURL: target.URL},
		"an auth variable unset": {Name: "self", Spec: target.URL + "/openapi.yaml", Auth: config.OpenAPIAuthConfig{BearerTokenEnv: "TEST_SELFDRIVE_UNSET"}},
	} {
		if err := start(c); err == nil || !strings.Contains(err.Error(), `openapi[0]`) || !strings.Contains(err.Error(), `"self"`) {
			t.Errorf("%s: want a config error naming the source, got %v", what, err)
		}
	}
	if err := start(config.OpenAPIConfig{Name: "self", Spec: target.URL + "/healthz", BaseURL: target.URL}); err != nil {
		t.Errorf("a URL serving no document stopped start-up: %v", err)
	}
}

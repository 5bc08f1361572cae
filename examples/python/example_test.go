// Package python_test runs the Python client example (toolserverd.py) against the real
// daemon, so that what it shows agent backends stays true.
package python_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// python3 is the interpreter, which the machines the suite runs on have; without it
// the test is skipped, except in CI.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is needed to run the Python client example")
		}
		t.Skip("python3 not found")
	}
	return p
}

// binary is the daemon built once for the package's tests.
var binary struct {
	once sync.Once
	path string
	dir  string
}

// daemon starts the real toolserverd with no configuration (or with args, such as
// --config FILE) and returns its URL and the admin key it created on first start.
func daemon(t *testing.T, args ...string) (string, string) {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, _ = os.MkdirTemp("", "toolserverd-python-example-")
		binary.path = filepath.Join(binary.dir, "toolserverd")
		if out, err := exec.Command("go", "build", "-o", binary.path, "github.com/toolserverd/toolserverd/cmd/toolserverd").CombinedOutput(); err != nil {
			binary.path = ""
			t.Logf("go build: %v\n%s", err, out)
		}
	})
	if binary.path == "" {
		t.Fatal("the daemon could not be built")
	}
	data := t.TempDir()
	u := testdaemon.Exec(t, exec.Command(binary.path, append([]string{"--addr", "127.0.0.1:0", "--data-dir", data}, args...)...))
	key, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	return u, strings.TrimSpace(string(key))
}

// runExample feeds assistant to the example script and returns the tool messages it
// printed, and its stderr.
func runExample(t *testing.T, py, base, key, assistant string) ([]map[string]any, string) {
	t.Helper()
	cmd := exec.Command(py, "toolserverd.py")
	cmd.Env = append(os.Environ(), "TOOLSERVER_URL="+base, "TOOLSERVER_API_KEY="+key)
	cmd.Stdin = strings.NewReader(assistant)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolserverd.py: %v\nstderr: %s", err, stderr.String())
	}
	var msgs []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		msgs = append(msgs, m)
	}
	return msgs, stderr.String()
}

// TestPythonExample: an OpenAI assistant message's tool_calls, forwarded untouched by
// the example, come back as one tool message per call in the calls' order; bad
// arguments are a message the model can act on, and progress reaches the UI side.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	py := python3(t)
	base, key := daemon(t)
	msgs, stderr := runExample(t, py, base, key, `{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"execute_command","arguments":"{\"command\":\"echo hello from the tool\"}"}},
		{"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{\"path\":5}"}}]}`)
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2: %v", len(msgs), msgs)
	}
	for i, want := range []string{"call_1", "call_2"} {
		if msgs[i]["role"] != "tool" || msgs[i]["tool_call_id"] != want {
			t.Errorf("message %d = %v, want the tool message of %s", i, msgs[i], want)
		}
	}
	if c, _ := msgs[0]["content"].(string); !strings.Contains(c, "hello from the tool") {
		t.Errorf("execute_command's message: %v", msgs[0])
	}
	if c, _ := msgs[1]["content"].(string); !strings.Contains(c, "path") {
		t.Errorf("read_file with a number for path: %v; want a message naming the bad argument", msgs[1])
	}
	if !strings.Contains(stderr, "hello from the tool") {
		t.Errorf("the progress shown on stderr: %q", stderr)
	}
}

// TestPythonExampleMergesATurn: an Anthropic assistant message's tool_use blocks, and a
// Gemini Content's functionCall parts, come back as one user message holding every
// result of the turn, in the calls' order, as those APIs want them.
func TestPythonExampleMergesATurn(t *testing.T) {
	t.Parallel()
	py := python3(t)
	base, key := daemon(t)
	t.Run("anthropic", func(t *testing.T) {
		msgs, stderr := runExample(t, py, base, key, `{"role":"assistant","content":[
			{"type":"text","text":"Let me look."},
			{"type":"tool_use","id":"toolu_1","name":"execute_command","input":{"command":"echo one"}},
			{"type":"tool_use","id":"toolu_2","name":"read_file","input":{"path":5}},
			{"type":"tool_use","id":"toolu_3","name":"execute_command","input":{"command":"echo three"}}]}`)
		if len(msgs) != 1 || msgs[0]["role"] != "user" {
			t.Fatalf("got %v, want one user message\nstderr: %s", msgs, stderr)
		}
		blocks, _ := msgs[0]["content"].([]any)
		if len(blocks) != 3 {
			t.Fatalf("content = %v, want three tool_result blocks", msgs[0]["content"])
		}
		for i, want := range []string{"toolu_1", "toolu_2", "toolu_3"} {
			b, _ := blocks[i].(map[string]any)
			if b["type"] != "tool_result" || b["tool_use_id"] != want {
				t.Errorf("block %d = %v, want the tool_result of %s", i, b, want)
			}
		}
		if b, _ := blocks[1].(map[string]any); b["is_error"] != true {
			t.Errorf("read_file with a number for path: %v; want is_error", b)
		}
		if b, _ := json.Marshal(blocks[2]); !strings.Contains(string(b), "three") {
			t.Errorf("the third block: %s", b)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		msgs, stderr := runExample(t, py, base, key, `{"role":"model","parts":[
			{"functionCall":{"name":"execute_command","args":{"command":"echo one"}}},
			{"functionCall":{"id":"g2","name":"execute_command","args":{"command":"echo two"}}}]}`)
		if len(msgs) != 1 || msgs[0]["role"] != "user" {
			t.Fatalf("got %v, want one user Content\nstderr: %s", msgs, stderr)
		}
		parts, _ := msgs[0]["parts"].([]any)
		if len(parts) != 2 {
			t.Fatalf("parts = %v, want two functionResponse parts", msgs[0]["parts"])
		}
		for i, want := range []string{"one", "two"} {
			p, _ := parts[i].(map[string]any)
			fr, _ := p["functionResponse"].(map[string]any)
			b, _ := json.Marshal(fr["response"])
			if fr["name"] != "execute_command" || !strings.Contains(string(b), want) {
				t.Errorf("part %d = %v, want execute_command's response with %q", i, p, want)
			}
		}
		// The first call had no id: the example's own is taken out again.
		if fr := parts[0].(map[string]any)["functionResponse"].(map[string]any); fr["id"] != nil {
			t.Errorf("the id-less call's response has id %v", fr["id"])
		}
		if fr := parts[1].(map[string]any)["functionResponse"].(map[string]any); fr["id"] != "g2" {
			t.Errorf("the second call's response has id %v, want g2", fr["id"])
		}
	})
}

// TestPythonExampleResumes: when the connection breaks mid-stream, the example sends
// the batch again with resume; the call that was running is not run a second time,
// and its result comes back.
func TestPythonExampleResumes(t *testing.T) {
	t.Parallel()
	py := python3(t)
	base, key := daemon(t)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	// A proxy that cuts the first tool-calls stream after its first line.
	var cut atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		if strings.HasSuffix(resp.Request.URL.Path, "/tool-calls") && cut.CompareAndSwap(false, true) {
			resp.Body = &cutAfterLine{r: bufio.NewReader(resp.Body), c: resp.Body}
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	msgs, stderr := runExample(t, py, front.URL, key, `{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_slow","type":"function","function":{"name":"execute_command","arguments":"{\"command\":\"sleep 1; echo ran once\"}"}}]}`)
	if !cut.Load() || !strings.Contains(stderr, "resuming") {
		t.Fatalf("the stream was not cut and resumed; stderr: %s", stderr)
	}
	if len(msgs) != 1 || msgs[0]["tool_call_id"] != "call_slow" || !strings.Contains(msgs[0]["content"].(string), "ran once") {
		t.Fatalf("messages after the resume: %v", msgs)
	}
	// One record: the resumed request followed the first run instead of running it again.
	req, _ := http.NewRequest("GET", base+"/v1/tool-calls?limit=10", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Calls []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Calls) != 1 {
		t.Fatalf("%d call records, want 1: %v", len(list.Calls), list.Calls)
	}
}

// cutAfterLine passes one line of the body, then fails as a broken connection does.
type cutAfterLine struct {
	r    *bufio.Reader
	c    io.Closer
	done bool
}

func (b *cutAfterLine) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("connection cut by the test")
	}
	line, err := b.r.ReadBytes('\n')
	b.done = true
	n := copy(p, line)
	if err != nil {
		return n, err
	}
	return n, nil
}

func (b *cutAfterLine) Close() error { return b.c.Close() }

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// TestPythonExampleWithoutKey: against a daemon serving without keys
// (auth.unauthenticated, the README's way to experiment locally), the example sent
// "Authorization: Bearer " with no key, which the daemon refuses (401, the API key is
// not valid), and run as a script it stopped with a KeyError for the unset
// TOOLSERVER_API_KEY. With no key it now sends no Authorization header, as the Go
// client does.
func TestPythonExampleWithoutKey(t *testing.T) {
	t.Parallel()
	py := python3(t)
	daemon(t) // builds the binary
	cmd := exec.Command(binary.path, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	base := testdaemon.Exec(t, cmd, "TOOLSERVER_AUTH_UNAUTHENTICATED=true")
	script := exec.Command(py, "toolserverd.py")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLSERVER_API_KEY=") {
			env = append(env, kv)
		}
	}
	script.Env = append(env, "TOOLSERVER_URL="+base)
	script.Stdin = strings.NewReader(`{"role":"assistant","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"execute_command","arguments":"{\"command\":\"echo no key needed\"}"}}]}`)
	var stdout, stderr bytes.Buffer
	script.Stdout, script.Stderr = &stdout, &stderr
	if err := script.Run(); err != nil {
		t.Fatalf("toolserverd.py: %v\nstderr: %s", err, stderr.String())
	}
	var msg map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &msg); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if c, _ := msg["content"].(string); msg["tool_call_id"] != "call_1" || !strings.Contains(c, "no key needed") {
		t.Errorf("message: %v", msg)
	}
}

// TestPythonExampleWaitsThroughARedeploy: scenario 4 with the example as the agent
// backend. A command waits for approval, the daemon is redeployed (stopped, started
// again on the same data dir), the approver approves on the new one: the example
// must hand the model the command's result, run once. Before, the stopped daemon's
// stream ended with a cancelled message and done, and the example gave the model
// "cancelled" while the command ran later; the message now carries goes_on, and the
// example follows the batch again until the restarted daemon answers.
func TestPythonExampleWaitsThroughARedeploy(t *testing.T) {
	t.Parallel()
	py := python3(t)
	data := t.TempDir()
	start := func() (*exec.Cmd, string) {
		daemon(t) // builds the binary once
		cmd := exec.Command(binary.path, "--addr", "127.0.0.1:0", "--data-dir", data)
		return cmd, testdaemon.Exec(t, cmd)
	}
	first, base := start()
	key, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	// The example talks to the daemon through a front (as through a load balancer),
	// which answers 502 while no daemon is up.
	var target atomic.Pointer[url.URL]
	setTarget := func(base string) {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		target.Store(u)
	}
	setTarget(base)
	front := httptest.NewServer(&httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }})
	defer front.Close()
	api := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, front.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	pending := func() string {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			_, b := api("GET", "/v1/approvals?status=pending", "")
			var list struct{ Approvals []struct{ ID string } }
			if json.Unmarshal(b, &list) == nil && len(list.Approvals) > 0 {
				return list.Approvals[0].ID
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal("no approval request within 60 s")
		return ""
	}

	cmd := exec.Command(py, "toolserverd.py")
	cmd.Env = append(os.Environ(), "TOOLSERVER_URL="+front.URL, "TOOLSERVER_API_KEY="+strings.TrimSpace(string(key)))
	cmd.Stdin = strings.NewReader(`{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_risky","type":"function","function":{"name":"execute_command","arguments":"{\"command\":\"echo ran >> ran.txt && wc -l < ran.txt\"}"}}]}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	approval := pending()
	// The redeploy: the daemon stops (SIGTERM) and starts again on the same data dir.
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	_, base = start()
	setTarget(base)
	if code, b := api("POST", "/v1/approvals/"+approval+"/decision", `{"decision":"approve"}`); code != http.StatusOK {
		t.Fatalf("approve after the redeploy: %d %s", code, b)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("toolserverd.py: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("the example did not finish within 120 s of the approval; stderr: %s", stderr.String())
	}
	var msg struct {
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &msg); err != nil || msg.ToolCallID != "call_risky" {
		t.Fatalf("the example's output %q (%v); stderr: %s", stdout.String(), err, stderr.String())
	}
	// The command's output, from its one run: ran.txt has one line.
	if strings.Contains(msg.Content, "cancelled") || !strings.HasSuffix(strings.TrimSpace(msg.Content), "stdout:\n1") {
		t.Fatalf("the model got %q, want the command's output (1: it ran once); stderr: %s", msg.Content, stderr.String())
	}
	if !strings.Contains(stderr.String(), "following the batch again") {
		t.Errorf("stderr does not say the batch was followed again: %s", stderr.String())
	}
}

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
	"testing"

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

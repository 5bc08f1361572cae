package telemetry_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/leakcheck"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := leakcheck.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// waitLimit bounds every wait; it only matters when a test fails.
const waitLimit = 60 * time.Second

func request(t *testing.T, method, url, body string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// ndjson decodes a stream's events.
func ndjson(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// createSession returns a new session's id.
func createSession(t *testing.T, base, spec string) string {
	t.Helper()
	code, _, b := request(t, "POST", base+"/v1/sessions", spec, nil)
	if code != 201 {
		t.Fatalf("create session: %d %s", code, b)
	}
	var s struct{ ID string }
	if err := json.Unmarshal(b, &s); err != nil || s.ID == "" {
		t.Fatalf("create session: %s", b)
	}
	return s.ID
}

// message finds the result message of a call in a stream's events.
func message(t *testing.T, evs []map[string]any, toolCallID string) map[string]any {
	t.Helper()
	for _, ev := range evs {
		if m, ok := ev["message"].(map[string]any); ok && ev["type"] == "message" && m["tool_call_id"] == toolCallID {
			return m
		}
	}
	t.Fatalf("no message for %s in %v", toolCallID, evs)
	return nil
}

// eventually polls cond until it holds, failing after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package server_test

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/leakcheck"
)

// fuzzBodyLimit is the fuzzed daemon's max_body_bytes: small, so that the limit is
// within the fuzzer's reach and the bodies under it are quick to run.
const fuzzBodyLimit = 64 << 10

// FuzzMCPEndpoint posts arbitrary bytes as the JSON-RPC message of an initialized MCP
// session to /mcp of a real daemon (app.New, SQLite store, the router with its auth
// and recover middleware, mcp-go), whose toolserverd session offers echo, whoami and
// panics. The second input is the Mcp-Session-Id header; "{sid}" in it stands for the
// live MCP session. Whatever the input:
//   - the status is one the API documents for POST /mcp: 200, 202, 400, 404, 413 (a
//     panic in the chain is a 500 from the recover middleware, or a dropped
//     connection, and fails);
//   - 413 comes exactly for bodies over the limit, with the API's error body;
//   - a 200 is a JSON-RPC response (JSON, or an event stream ending in one) whose
//     result carries the request's id, or an error object with that id or null;
//   - a request (a method and an id) is never answered by a bare 202;
//   - an error status has a body: the API's error, a JSON-RPC error or mcp-go's text;
//   - the request's goroutines end with it, and none outlive the daemon.
func FuzzMCPEndpoint(f *testing.F) {
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	seeds := []string{
		mcpInitializeBody,
		`{"jsonrpc":"2.0","id":23,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"s","method":"tools/list","params":{"cursor":"x"}}`,
		call(`3`, `{"name":"echo","arguments":{"text":"hi"}}`),
		call(`4`, `{"name":"echo","arguments":{"text":1}}`),
		call(`5`, `{"name":"echo","arguments":"{\"text\":\"in a string\"}"}`),
		call(`6`, `{"name":"echo","arguments":[1,2]}`),
		call(`7`, `{"name":"whoami","arguments":{"q":"x"},"_meta":{"progressToken":"p"}}`),
		call(`8`, `{"name":"panics"}`),
		call(`9`, `{"name":"no_such_tool","arguments":{}}`),
		call(`10`, `{}`),
		call(`11`, `"echo"`),
		call(`"str"`, `{"name":"echo","arguments":{"text":"`+strings.Repeat("huge string ", 1500)+`"}}`),
		call(`12`, `{"name":"echo","arguments":{"text":"`+strings.Repeat("y", fuzzBodyLimit)+`"}}`),
		call(`13`, `{"name":"echo","arguments":`+strings.Repeat(`{"a":`, 10001)+`1`+strings.Repeat(`}`, 10001)+`}`),
		call(`14`, "{\"name\":\"echo\",\"arguments\":{\"text\":\"\xff\xfe\"}}"),
		call(`15`, `{"name":"echo","arguments":{"text":"a"}},"result":1`),
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":16,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":17,"result":{}}`,
		`{"jsonrpc":"2.0","id":18,"error":{"code":-1,"message":"no"}}`,
		`[{"jsonrpc":"2.0","id":19,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000),
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":20,"method":"tools/list","params":[]}`,
		`{"jsonrpc":"1.0","id":21,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":22,"method":7}`,
		`{"jsonrpc":"2.0","id":24,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":25,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":26,"method":"resources/list"}`,
		"\xff\xfe\xfd", ``, `null`, `{}`, `[]`, `"x"`, `{`, `{"jsonrpc":"2.0","id":27,"method":"ping"} {}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), "{sid}")
	}
	for _, sid := range []string{"", "{sid}x", "mcp-session-00000000-0000-0000-0000-000000000000", "not a session"} {
		f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), sid)
		f.Add([]byte(mcpInitializeBody), sid)
	}

	before := goleak.IgnoreCurrent()
	var logs syncBuffer
	d := startDaemon(f, daemonOpts{errorLog: &logs, mutate: func(c *config.Config) {
		c.MaxBodyBytes = fuzzBodyLimit
		c.MaxToolResultTokens = 1000 // results are truncated, and quickly
	}})
	// The timeout turns a request that never gets an answer into a failure (the fuzzing
	// engine would wait for it for ever).
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	f.Cleanup(func() {
		d.stop()
		client.CloseIdleConnections()
		if err := leakcheck.Find(before); err != nil {
			f.Errorf("goroutines outlived the daemon: %v", err)
		}
	})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo", "whoami", "panics"}})["id"].(string)
	url := d.url + "/mcp"
	live := mcpInitialize(f, client, url, sess)
	// The goroutines running as the first input starts (it runs on one of its own, and
	// a fuzzing worker runs a few more) are all that may run once any input is done.
	settled := 0

	f.Fuzz(func(t *testing.T, body []byte, mcpSessionID string) {
		mcpSessionID = strings.ReplaceAll(mcpSessionID, "{sid}", live)
		if !validHeaderValue(mcpSessionID) {
			return // the client refuses to send it
		}
		if settled == 0 {
			settled = runtime.NumGoroutine()
		}
		logs.Reset()
		defer func() {
			if t.Failed() {
				t.Logf("daemon error log:\n%s", logs.String())
			}
		}()
		code, hdr, out := send(t, client, http.MethodPost, url, mcpHeaders(sess, mcpSessionID), body)
		if (code == http.StatusRequestEntityTooLarge) != (len(body) > fuzzBodyLimit) {
			t.Fatalf("a body of %d bytes (limit %d): %d %s", len(body), fuzzBodyLimit, code, out)
		}
		switch code {
		case http.StatusOK:
			checkRPCResponse(t, body, hdr, out)
		case http.StatusAccepted:
			if isRPCRequest(body) {
				t.Fatalf("a request was answered 202, with no response: %q", body)
			}
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			checkErrorBody(t, code, hdr, out)
		default:
			t.Fatalf("status %d is not documented for POST /mcp: %s", code, out)
		}
		if opened := hdr.Get("Mcp-Session-Id"); opened != "" && opened != mcpSessionID {
			// An initialize opened an MCP session: end it, as a client would, so
			// that sessions do not pile up over the run.
			if code, _, out := send(t, client, http.MethodDelete, url, mcpHeaders(sess, opened), nil); code != http.StatusOK {
				t.Fatalf("DELETE of the MCP session %s opened by the input: %d %s", opened, code, out)
			}
		}
		waitSettled(t, settled)
	})
}

// rpcMessage is a JSON-RPC message as mcp-go reads it (encoding/json, so the same
// key matching).
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// isRPCRequest: a JSON object with a method name and an id, which is owed a response.
func isRPCRequest(body []byte) bool {
	var m rpcMessage
	var method string
	return json.Unmarshal(body, &m) == nil && json.Unmarshal(m.Method, &method) == nil && method != "" &&
		present(m.ID) && !present(m.Result)
}

// checkRPCResponse checks a 200: a JSON-RPC response, directly or as the last event
// of a stream; a result answers the request's id, an error that id or null.
func checkRPCResponse(t *testing.T, req []byte, hdr http.Header, out []byte) {
	t.Helper()
	msg := out
	switch mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type")); mt {
	case "application/json":
	case "text/event-stream":
		msg = lastEvent(t, out)
	default:
		t.Fatalf("200 with Content-Type %q: %s", hdr.Get("Content-Type"), out)
	}
	var resp rpcMessage
	if err := json.Unmarshal(msg, &resp); err != nil {
		t.Fatalf("200 is not a JSON-RPC message: %v: %s", err, msg)
	}
	if resp.JSONRPC != "2.0" || present(resp.Result) == (resp.Error != nil) {
		t.Fatalf("200 is not a JSON-RPC response (jsonrpc 2.0, a result or an error): %s", msg)
	}
	var request rpcMessage
	_ = json.Unmarshal(req, &request)
	if resp.Error != nil {
		if resp.Error.Code == nil || resp.Error.Message == "" {
			t.Fatalf("JSON-RPC error without a code or a message: %s", msg)
		}
		if present(resp.ID) && !sameID(request.ID, resp.ID) {
			t.Fatalf("error response id %s for request id %s", resp.ID, request.ID)
		}
		return
	}
	if !present(request.ID) || !sameID(request.ID, resp.ID) {
		t.Fatalf("result with id %s for request id %q: %s", resp.ID, request.ID, msg)
	}
}

// sameID compares ids as JSON values (1 and 1.0 are the same number).
func sameID(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// lastEvent returns the data of an event stream's last event; every event must be
// JSON.
func lastEvent(t *testing.T, stream []byte) []byte {
	t.Helper()
	var last []byte
	for _, line := range bytes.Split(stream, []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if !json.Valid(data) {
				t.Fatalf("event data is not JSON: %q", data)
			}
			last = data
		}
	}
	if last == nil {
		t.Fatalf("event stream without events: %q", stream)
	}
	return last
}

// checkErrorBody: an error status says why, as the API's error object (the only form
// of a 413), a JSON-RPC error, or plain text from mcp-go.
func checkErrorBody(t *testing.T, code int, hdr http.Header, out []byte) {
	t.Helper()
	if len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("%d with an empty body", code)
	}
	mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type"))
	if mt != "application/json" {
		if code == http.StatusRequestEntityTooLarge {
			t.Fatalf("413 with Content-Type %q: %s", hdr.Get("Content-Type"), out)
		}
		return
	}
	var m rpcMessage
	if json.Unmarshal(out, &m) == nil && m.JSONRPC == "2.0" && code != http.StatusRequestEntityTooLarge {
		if m.Error == nil || m.Error.Code == nil || m.Error.Message == "" {
			t.Fatalf("%d with a JSON-RPC message that is not an error: %s", code, out)
		}
		return
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(out, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("%d with neither the API's error nor a JSON-RPC error: %s", code, out)
	}
	if code == http.StatusRequestEntityTooLarge && e.Error.Code != "body_too_large" {
		t.Fatalf("413 with code %q", e.Error.Code)
	}
}

// validHeaderValue is what net/http's client accepts as a header value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// waitSettled waits, boundedly, until no more than want goroutines run: what a request
// started has ended with it.
func waitSettled(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines run after the request, %d before it:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

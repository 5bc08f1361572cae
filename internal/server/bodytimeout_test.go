package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// stallBody opens a connection of its own, sends a request's head and the start of
// its body, then nothing more, and reads the answer (failing the test if none comes
// within 30 s: the daemon never gave up).
func stallBody(t *testing.T, d *daemon, method, path, head, partial string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := method + " " + path + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(d.url, "http://") + "\r\n" +
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + head + "\r\n" + partial
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s with a stalled body: no answer: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp, b
}

// TestStalledBodyTimesOut: a client that sends a request's head and then trickles (or
// stops sending) its body held the handler, and its key's request slot, for ever;
// past read_body_timeout the request is answered 408 and the slot is free again.
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.ReadBodyTimeout = 300 * time.Millisecond
		c.Auth.MaxConcurrentRequests = 1
	}})
	sess := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	for _, tc := range []struct{ name, method, path, head, partial string }{
		{"session", "POST", "/v1/sessions", "Content-Length: 100\r\n", `{"available_tools":`},
		{"chunked batch", "POST", "/v1/sessions/" + sess + "/tool-calls", "Transfer-Encoding: chunked\r\n", "8\r\n{\"calls\"\r\n"},
		{"key", "POST", "/v1/keys", "Content-Length: 40\r\n", `{"roles"`},
		{"mcp", "POST", "/v1/sessions/" + sess + "/mcp", "Content-Length: 80\r\n", `{"jsonrpc":"2.0",`},
		{"nothing of the body", "POST", "/v1/tool-calls", "Content-Length: 10\r\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := stallBody(t, d, tc.method, tc.path, tc.head, tc.partial)
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("HTTP %d %s, want 408", resp.StatusCode, body)
			}
			validate(t, "Error", body)
			var e struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(body, &e)
			if e.Error.Code != "request_timeout" || !strings.Contains(e.Error.Message, "read_body_timeout") {
				t.Errorf("error %+v", e.Error)
			}
			if !resp.Close {
				t.Error("the connection is kept open after a body that was not read to its end")
			}
			// The one request slot of the key is free again.
			if st, _, b := d.do("GET", "/v1/tools", nil); st != http.StatusOK {
				t.Errorf("after the 408: HTTP %d %s", st, b)
			}
		})
	}
}

// TestBodyTimeoutSparesStreams: read_body_timeout bounds receiving the request only;
// calls whose streams outlast it (their bodies sent whole) complete, the connection
// then serves the next request, and a GET event stream open all the while is not cut.
func TestBodyTimeoutSparesStreams(t *testing.T) {
	t.Parallel()
	const deadline = 200 * time.Millisecond
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.ReadBodyTimeout = deadline }})
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one connection, reused
	defer c.CloseIdleConnections()
	st, _, b := send(t, c, "POST", d.url+"/v1/sessions", nil, map[string]any{"available_tools": []string{"sleep_safe", "block"}})
	if st != http.StatusCreated {
		t.Fatalf("session: %d %s", st, b)
	}
	var sess struct{ ID string }
	_ = json.Unmarshal(b, &sess)

	// A call that waits for the test, followed by GET /v1/tool-calls/{id}/events.
	callID := d.startBlocked(t.Context(), sess.ID)
	evReq, _ := http.NewRequestWithContext(t.Context(), "GET", d.url+"/v1/tool-calls/"+callID+"/events", nil)
	evResp, err := http.DefaultClient.Do(evReq)
	if err != nil {
		t.Fatal(err)
	}
	defer evResp.Body.Close()

	for i := range 2 {
		id := fmt.Sprint("s", i)
		body := map[string]any{"calls": []map[string]any{{"id": id, "name": "sleep_safe", "arguments": map[string]any{"ms": 5 * deadline.Milliseconds()}}}}
		st, hdr, out := send(t, c, "POST", d.url+"/v1/sessions/"+sess.ID+"/tool-calls", nil, body)
		if st != http.StatusOK || hdr.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("call %d: %d %s", i, st, out)
		}
		msg := messages(t, parseNDJSON(t, out))[id]
		if m, _ := msg.m["message"].(map[string]any); m == nil || m["content"] != "slept" {
			t.Fatalf("call %d: %s", i, msg.raw)
		}
	}
	// The event stream, open for ten deadlines by now, still brings the call's result.
	close(d.tools.release)
	out, err := io.ReadAll(evResp.Body)
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	msg := messages(t, parseNDJSON(t, out))["b"]
	if m, _ := msg.m["message"].(map[string]any); m == nil || m["content"] != "released" {
		t.Fatalf("event stream: %s", out)
	}
}

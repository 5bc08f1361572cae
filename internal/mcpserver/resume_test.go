package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
)

// sseEvent is one event of an MCP event stream.
type sseEvent struct {
	ID   string
	Data string
}

// sseReader reads an MCP event stream one event at a time.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	return &sseReader{sc}
}

// next returns the next event with data, or false at the end of the stream.
func (r *sseReader) next() (sseEvent, bool) {
	var ev sseEvent
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if ev.Data != "" {
				return ev, true
			}
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			ev.Data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		}
	}
	return ev, false
}

// rawStream sends an MCP request of the session mcpSID (a POST with body, or a GET
// with the headers given) and returns the open response; the caller closes it.
func (d *daemon) rawStream(method, sessionID, mcpSID, body string, headers map[string]string) *http.Response {
	d.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.URL+"/mcp", rd)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Toolserver-Session", sessionID)
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20250618)
	req.Header.Set("Mcp-Session-Id", mcpSID)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s /mcp: %v", method, err)
	}
	return resp
}

// TestResumeBrokenCallStream: a client whose POST stream of a tools/call breaks while
// the call waits for approval (a proxy's idle timeout) loses nothing: the call goes
// on without it, and a GET with the Last-Event-ID it had replays the events it missed,
// the call's result included.
func TestResumeBrokenCallStream(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
	mcpSID := d.rawSession(s.ID, mcp.ProtocolVersion20250618)

	resp := d.rawStream(http.MethodPost, s.ID, mcpSID, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"`+riskyCommand+`"},"_meta":{"progressToken":"p7"}}}`, nil)
	first, ok := newSSEReader(resp.Body).next()
	if resp.StatusCode != http.StatusOK || !ok || !strings.Contains(first.Data, "waiting for approval") {
		t.Fatalf("first event of the call's stream: %d %+v", resp.StatusCode, first)
	}
	if first.ID == "" {
		t.Fatalf("the event has no id to resume from: %+v", first)
	}
	resp.Body.Close() // the stream breaks

	apr := d.pendingApproval(s.ID)
	d.do(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision", map[string]any{"decision": "approve"}, http.StatusOK, nil)
	var rec callRecord
	waitFor(t, "the call to end without its client", func() bool {
		d.do(http.MethodGet, "/v1/tool-calls/"+apr.CallID, nil, http.StatusOK, &rec)
		return rec.Status != "running" && rec.Status != "pending" && rec.Status != "waiting_approval"
	})
	if rec.ErrorKind != "" {
		t.Fatalf("the call whose client went away: %+v", rec)
	}

	resumed := d.rawStream(http.MethodGet, s.ID, mcpSID, "", map[string]string{"Last-Event-ID": first.ID})
	defer resumed.Body.Close()
	if resumed.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resumed.Body)
		t.Fatalf("resuming: %d %s", resumed.StatusCode, b)
	}
	var events []sseEvent
	rd := newSSEReader(resumed.Body)
	for ev, ok := rd.next(); ok && len(events) < 100; ev, ok = rd.next() {
		events = append(events, ev)
	}
	if len(events) == 0 {
		t.Fatal("the resumed stream replayed nothing")
	}
	last := events[len(events)-1]
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(last.Data), &msg); err != nil || msg.ID != 7 || msg.Result.IsError ||
		len(msg.Result.Content) == 0 || !strings.Contains(msg.Result.Content[0].Text, "removed") {
		t.Fatalf("the resumed stream's last event is not the call's result: %+v (%v)", last, err)
	}
	for _, ev := range events {
		if ev.ID == "" || ev.ID == first.ID {
			t.Fatalf("replayed event without a new id: %+v", ev)
		}
	}
}

// TestResumeUnknownEventID: a Last-Event-ID the endpoint does not keep (never sent,
// another MCP session's, not a number) gets a 400 that says the events are gone and
// what to do, not an event stream that never delivers anything.
func TestResumeUnknownEventID(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	mine := d.rawSession(s.ID, mcp.ProtocolVersion20250618)
	other := d.rawSession(s.ID, mcp.ProtocolVersion20250618)
	resp := d.rawStream(http.MethodPost, s.ID, other, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"echo hi"},"_meta":{"progressToken":"p2"}}}`, nil)
	ev, _ := newSSEReader(resp.Body).next()
	resp.Body.Close()
	if ev.ID == "" {
		t.Fatalf("the other session's call sent no event with an id: %+v", ev)
	}
	for _, id := range []string{"999999999", "nope", ev.ID} {
		resp := d.rawStream(http.MethodGet, s.ID, mine, "", map[string]string{"Last-Event-ID": id})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "cannot resume the event stream after Last-Event-ID") ||
			!strings.Contains(string(b), "send the request again") {
			t.Errorf("Last-Event-ID %q: %d %s", id, resp.StatusCode, b)
		}
	}
}

// streamCutter is a TCP proxy on 127.0.0.1 in front of the daemon that breaks the
// connection carrying the first tools/call once its response has carried one event,
// as a proxy's idle timeout would.
type streamCutter struct {
	ln      net.Listener
	target  string
	cut     atomic.Bool // the stream was broken
	resumed atomic.Bool // a request with Last-Event-ID came through
	wg      sync.WaitGroup
}

func startStreamCutter(t *testing.T, target string) *streamCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &streamCutter{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *streamCutter) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	var armed atomic.Bool // this connection carries the tools/call
	go func() {
		// Closing both ends below ends this copy too.
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				lower := bytes.ToLower(buf[:n])
				if bytes.Contains(lower, []byte("tools/call")) {
					armed.Store(true)
				}
				if bytes.Contains(lower, []byte("\nlast-event-id:")) {
					p.resumed.Store(true)
				}
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	var seen []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			out := buf[:n]
			cut := false
			if armed.Load() && !p.cut.Load() {
				// The stream breaks after its first event, also when one read holds
				// more (a loaded machine may deliver the call's later events with it).
				before := len(seen)
				seen = append(seen, out...)
				if i := bytes.Index(seen, []byte("data: ")); i >= 0 {
					if j := bytes.Index(seen[i:], []byte("\n\n")); j >= 0 && p.cut.CompareAndSwap(false, true) {
						out, cut = out[:max(0, i+j+2-before)], true
					}
				}
			}
			if _, werr := client.Write(out); werr != nil || cut {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestSDKClientResumesBrokenCallStream: the official TypeScript SDK client, whose
// tools/call stream a proxy breaks after its first event, resumes it by itself (a GET
// with Last-Event-ID) and gets the call's result.
func TestSDKClientResumesBrokenCallStream(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	p := startStreamCutter(t, strings.TrimPrefix(d.URL, "http://"))
	r := sdkCallAt(t, "http://"+p.ln.Addr().String()+"/v1/sessions/"+s.ID+"/mcp", "execute_command",
		map[string]any{"command": "echo started && sleep 2 && echo finished"}, "SDK_PROGRESS=1")
	if !p.cut.Load() {
		t.Fatal("the proxy did not break the call's stream")
	}
	if r.Error != "" || len(r.Result.Content) == 0 || !strings.Contains(r.Result.Content[0].Text, "finished") {
		t.Fatalf("the SDK client's call through a broken stream: %+v", r)
	}
	if !p.resumed.Load() {
		t.Fatal("the SDK client got the result without resuming the stream")
	}
}

// TestResumedStreamKeepsTheCall: a client that resumed its broken stream keeps the
// call running past mcp_endpoint.resume_window, for as long as it stays attached.
func TestResumedStreamKeepsTheCall(t *testing.T) {
	t.Parallel()
	d := start(t, func(c *config.Config) { c.MCPEndpoint.ResumeWindow = 500 * time.Millisecond })
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	mcpSID := d.rawSession(s.ID, mcp.ProtocolVersion20250618)
	resp := d.rawStream(http.MethodPost, s.ID, mcpSID, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"echo started && sleep 3 && echo finished"},"_meta":{"progressToken":"p3"}}}`, nil)
	first, ok := newSSEReader(resp.Body).next()
	resp.Body.Close()
	if !ok || first.ID == "" {
		t.Fatalf("first event: %+v", first)
	}
	resumed := d.rawStream(http.MethodGet, s.ID, mcpSID, "", map[string]string{"Last-Event-ID": first.ID})
	defer resumed.Body.Close()
	var last sseEvent
	rd := newSSEReader(resumed.Body)
	for ev, ok := rd.next(); ok; ev, ok = rd.next() {
		last = ev
	}
	if !strings.Contains(last.Data, `"id":3`) || !strings.Contains(last.Data, "finished") || strings.Contains(last.Data, "cancelled") {
		t.Fatalf("the resumed stream's last event: %+v", last)
	}
}

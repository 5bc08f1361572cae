package server_test

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

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// cuttableProxy is a TCP proxy to a target set later, whose connections can all be
// cut at once: the link between two replicas breaking mid-stream.
type cuttableProxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	mu     sync.Mutex
	conns  []net.Conn
	// cutAfter, when set, cuts a connection once a line of the target's answer
	// holding it has been passed on, before anything after that line.
	cutAfter []byte
}

func newCuttableProxy(t *testing.T) *cuttableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			target := p.target.Load()
			if target == nil {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", *target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { p.relay(c, u); c.Close(); u.Close() }()
		}
	}()
	return p
}

// relay copies the target's answer to the client, cutting it after the line
// holding cutAfter.
func (p *cuttableProxy) relay(c, u net.Conn) {
	if p.cutAfter == nil {
		io.Copy(c, u)
		return
	}
	var seen []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		chunk := buf[:n]
		seen = append(seen, chunk...)
		if i := bytes.Index(seen, p.cutAfter); i >= 0 {
			if j := bytes.IndexByte(seen[i:], '\n'); j >= 0 {
				end := len(chunk) - (len(seen) - (i + j + 1))
				c.Write(chunk[:end])
				return
			}
		}
		if _, werr := c.Write(chunk); werr != nil || err != nil {
			return
		}
	}
}

func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestCallEventsOwnerLostMidStream: GET /v1/tool-calls/{id}/events on replica B,
// forwarded to replica A that runs the call, whose link to A breaks mid-stream (A
// killed, a network cut). B's client used to see its stream cut short (curl: "transfer
// closed with outstanding read data remaining"), with neither the call's result nor
// done, though B itself was fine: B now follows the record to the result, as it does
// when A cannot be reached at all.
func TestCallEventsOwnerLostMidStream(t *testing.T) {
	t.Parallel()
	proxy := newCuttableProxy(t)
	b, callID, rest, stop := callBehindProxy(t, proxy, "echo before; sleep 2; echo after")
	defer stop()

	resp, err := http.Get(b.url + "/v1/tool-calls/" + callID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events on B: %d", resp.StatusCode)
	}
	var got bytes.Buffer
	r := bufio.NewReader(resp.Body)
	cut := false
	for {
		line, err := r.ReadBytes('\n')
		got.Write(line)
		if !cut && bytes.Contains(line, []byte(`"tool_progress"`)) {
			proxy.cut() // B's link to A breaks while the call runs there
			cut = true
		}
		if err != nil {
			if err != io.EOF {
				t.Errorf("B's stream broke after the link to A was cut: %v; read so far:\n%s", err, got.String())
			}
			break
		}
	}
	if !cut {
		t.Fatalf("no output came through B before the cut:\n%s", got.String())
	}
	evs := parseNDJSON(t, got.Bytes())
	m := messages(t, evs)["x"]
	if m.m["is_error"] != false || !strings.Contains(string(m.raw), "after") {
		t.Errorf("the result followed through B after the cut: %s", m.raw)
	}
	starts := 0
	for _, e := range evs {
		if e.str("type") == "tool_start" {
			starts++
		}
	}
	if starts != 1 {
		var lines []string
		for _, e := range evs {
			lines = append(lines, string(e.raw))
		}
		t.Errorf("%d tool_start events through B, want 1:\n%s", starts, strings.Join(lines, "\n"))
	}
	<-rest
}

// callBehindProxy starts replica A, which replica B reaches only through proxy, and
// replica B on one PostgreSQL; it starts execute_command running command (call id
// "x") in a session on A and returns once the call's first tool_progress came. It
// returns B, the call's id, and the rest and stop of A's stream.
func callBehindProxy(t *testing.T, proxy *cuttableProxy, command string) (b *daemon, callID string, rest <-chan []event, stop func()) {
	t.Helper()
	url := pgtest.URL(t)
	a := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) {
		c.ReplicaID = "replica-a"
		c.Cluster.AdvertiseURL = "http://" + proxy.ln.Addr().String()
		c.Permissions.Allow = []string{"execute_command"}
	}})
	proxy.target.Store(ptr(strings.TrimPrefix(a.url, "http://")))
	b = startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) { c.ReplicaID = "replica-b" }})

	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	calls, err := json.Marshal(map[string]any{"calls": []map[string]any{
		{"id": "x", "name": "execute_command", "arguments": map[string]string{"command": command}}}})
	if err != nil {
		t.Fatal(err)
	}
	ev, rest, stop := streamUntilEvent(t, a, "/v1/sessions/"+id+"/tool-calls", string(calls), "tool_progress")
	return b, ev["call_id"].(string), rest, stop
}

func ptr[T any](v T) *T { return &v }

// TestCallEventsOwnerLostBeforeDone: the link to the call's replica breaks right
// after the call's message, before done. B finishes the stream with done alone: the
// client gets the call's message once.
func TestCallEventsOwnerLostBeforeDone(t *testing.T) {
	t.Parallel()
	proxy := newCuttableProxy(t)
	proxy.cutAfter = []byte(`"type":"message"`)
	b, callID, rest, stop := callBehindProxy(t, proxy, "echo before; sleep 1; echo after")
	defer stop()

	code, _, body := b.do("GET", "/v1/tool-calls/"+callID+"/events", nil)
	if code != 200 {
		t.Fatalf("events on B: %d %s", code, body)
	}
	evs := parseNDJSON(t, body)
	messages(t, evs) // ends with done
	n := 0
	for _, e := range evs {
		if e.str("type") == "message" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d message events through B, want 1:\n%s", n, body)
	}
	<-rest
}

// TestCallEventsOwnerLinkCutNoRepeat: the link to the call's replica breaks
// mid-stream and comes back. B follows the call itself from there, relaying the
// owner's output again: the output the client already had came a second time
// ("before" twice), as if the command had printed it twice.
func TestCallEventsOwnerLinkCutNoRepeat(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	proxy := newCuttableProxy(t)
	a := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) {
		c.ReplicaID = "replica-a"
		c.Cluster.AdvertiseURL = "http://" + proxy.ln.Addr().String()
		c.Permissions.Allow = []string{"execute_command"}
	}})
	proxy.target.Store(ptr(strings.TrimPrefix(a.url, "http://")))
	b := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) { c.ReplicaID = "replica-b" }})

	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	ev, rest, stop := streamUntilEvent(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo before; sleep 2; echo after"}}]}`, "tool_progress")
	defer stop()
	callID := ev["call_id"].(string)

	resp, err := http.Get(b.url + "/v1/tool-calls/" + callID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	r := bufio.NewReader(resp.Body)
	cut := false
	for {
		line, err := r.ReadBytes('\n')
		got.Write(line)
		if !cut && bytes.Contains(line, []byte(`before`)) {
			proxy.cut()
			cut = true
		}
		if err != nil {
			break
		}
	}
	var out strings.Builder
	for _, e := range parseNDJSON(t, got.Bytes()) {
		if e.str("type") == "tool_progress" {
			out.WriteString(e.str("text"))
		}
	}
	if n := strings.Count(out.String(), "before"); n != 1 || !strings.Contains(out.String(), "after") {
		t.Errorf("the output through B: %q, want before once, then after:\n%s", out.String(), got.String())
	}
	<-rest
}

// TestCallEventsOwnerGoneCloses: the call's replica becomes unreachable mid-stream
// for good (killed, cut off). B follows the call's record to its message, but it
// has none of the output: the client saw output and never its tool_progress with
// closed true, which it takes for the end of the output, as a stream of the owner's
// own ends it. B now closes the output before the call's message, once.
func TestCallEventsOwnerGoneCloses(t *testing.T) {
	t.Parallel()
	proxy := newCuttableProxy(t)
	b, callID, rest, stop := callBehindProxy(t, proxy, "echo before; sleep 2; echo after")
	defer stop()

	resp, err := http.Get(b.url + "/v1/tool-calls/" + callID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	r := bufio.NewReader(resp.Body)
	cut := false
	for {
		line, err := r.ReadBytes('\n')
		got.Write(line)
		if !cut && bytes.Contains(line, []byte(`"tool_progress"`)) {
			proxy.target.Store(nil) // A can no longer be reached from B
			proxy.cut()
			cut = true
		}
		if err != nil {
			break
		}
	}
	evs := parseNDJSON(t, got.Bytes())
	messages(t, evs) // ends with done
	closedAt, messageAt, closes := -1, -1, 0
	for i, e := range evs {
		switch {
		case e.str("type") == "tool_progress" && e.m["closed"] == true:
			closes++
			closedAt = i
			if e.str("call_id") != callID || e.str("tool_call_id") != "x" {
				t.Errorf("closed event %s; want call %s, tool call x", e.raw, callID)
			}
		case e.str("type") == "message":
			messageAt = i
		}
	}
	if closes != 1 || closedAt > messageAt {
		t.Errorf("%d closed tool_progress events through B (at %d, the message at %d); want one, before the message:\n%s",
			closes, closedAt, messageAt, got.String())
	}
	<-rest
}

// TestCallEventsOwnerLostWhileWaiting: the link to the call's replica breaks while
// the call waits for approval, before any of its output (A killed during a redeploy,
// the approver still deciding). B follows on from the record; the approval is decided
// on B, which runs the call, and B's stream carries its output, closed, and its
// message. Writing the closed event crashed B: the note of what the client had from
// A was only made once A had relayed some output.
func TestCallEventsOwnerLostWhileWaiting(t *testing.T) {
	t.Parallel()
	proxy := newCuttableProxy(t)
	proxy.cutAfter = []byte(`"type":"approval_required"`)
	url := pgtest.URL(t)
	a := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) {
		c.ReplicaID = "replica-a"
		c.Cluster.AdvertiseURL = "http://" + proxy.ln.Addr().String()
		c.Permissions.Allow = nil
	}})
	proxy.target.Store(ptr(strings.TrimPrefix(a.url, "http://")))
	b := startDaemon(t, daemonOpts{store: url, mutate: func(c *config.Config) {
		c.ReplicaID = "replica-b"
		c.Permissions.Allow = nil
	}})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	apr, _, leave := streamUntilApproval(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo ran-on-b | tee out.txt"}}]}`)
	leave()
	_, _, body := b.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
	var rec struct {
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(body, &rec); err != nil || rec.CallID == "" {
		t.Fatalf("approval: %s", body)
	}
	_, rest := getUntilEvent(t, b, "/v1/tool-calls/"+rec.CallID+"/events", "approval_required")
	if code, _, body := b.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"approve"}`); code != 200 {
		t.Fatalf("decide on B: %d %s", code, body)
	}
	evs := <-rest
	m, ok := restMessages(t, evs)["x"]
	if !ok || m.m["is_error"] != false || !strings.Contains(string(m.raw), "ran-on-b") {
		t.Fatalf("the message through B: %s", m.raw)
	}
}

package server_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// bigOutput is a command whose output no socket buffer holds (the daemon's send
// buffer and the stalled client's receive buffer together are a few MiB at most).
const bigOutput = "head -c 16000000 /dev/zero | tr '\\0' a"

// stallReading posts body to path on a connection of its own whose receive buffer is
// small, reads the response's head and first line, then reads nothing more while the
// connection stays open: a client that stops reading (TCP backpressure).
func stallReading(t *testing.T, d *daemon, path string, body any) net.Conn {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b := mustJSON(body)
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, strings.TrimPrefix(d.url, "http://"), len(b), b)
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(conn, 16)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stalled stream: %v %v", resp, err)
	}
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("stalled stream's first line: %v", err)
	}
	return conn
}

// callStatus polls the record of the session's call toolCallID until done says it is
// what the test waits for (a generous deadline: it fails only if that never comes).
func callStatus(t *testing.T, d *daemon, sess, toolCallID string, done func(status, kind string) bool) (string, string) {
	t.Helper()
	var rec struct {
		Status    string `json:"status"`
		ErrorKind string `json:"error_kind"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, _, b := d.do("GET", "/v1/sessions/"+sess+"/tool-calls/"+toolCallID, nil)
		if code == http.StatusOK {
			_ = json.Unmarshal(b, &rec)
			if done(rec.Status, rec.ErrorKind) {
				return rec.Status, rec.ErrorKind
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("call %s: HTTP %d, status %q (%s) after 30 s", toolCallID, code, rec.Status, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminal(status, _ string) bool {
	return status != "" && status != "pending" && status != "running" && status != "waiting"
}

// TestStalledReaderDoesNotHoldCalls: the executor's events went to the stream's writer
// through a channel of at most 64; once a client that stopped reading had blocked the
// writer, the call that emitted the 65th event waited for ever before it ran, and so
// did every call after it: their records said pending until the daemon restarted.
// A stream's events now queue without blocking the calls (what they hold is bounded
// by the batch), so every call runs and is recorded whatever its client does.
func TestStalledReaderDoesNotHoldCalls(t *testing.T) {
	t.Parallel()
	// No write timeout: the calls must finish while the client still holds the stream.
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.WriteTimeout = 0 }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "echo"}})["id"].(string)
	calls := []map[string]any{{"id": "big", "name": "execute_command", "arguments": map[string]any{"command": bigOutput}}}
	const echoes = 40 // 80 events beyond the writer's reach
	for i := range echoes {
		calls = append(calls, map[string]any{"id": fmt.Sprintf("e%d", i), "name": "echo", "arguments": map[string]any{"text": "hi"}})
	}
	stallReading(t, d, "/v1/sessions/"+sess+"/tool-calls", map[string]any{"strategy": "sequential", "calls": calls})
	for _, id := range []string{"big", fmt.Sprintf("e%d", echoes-1)} {
		if st, kind := callStatus(t, d, sess, id, terminal); st != "succeeded" {
			t.Errorf("call %s: %s (%s), want succeeded", id, st, kind)
		}
	}
}

// TestStalledReaderIsCut: a client that stopped reading held its stream, its handler
// and its connection for ever, and a call still running under it ran on as if someone
// read its result. Past write_timeout without taking a byte, the client is treated as
// gone: the connection is closed and the calls still running are cancelled (and
// recorded so), as for a client that disconnects.
func TestStalledReaderIsCut(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.WriteTimeout = 300 * time.Millisecond }})
	sess := d.createSession(map[string]any{"available_tools": []string{"execute_command", "block"}})["id"].(string)
	conn := stallReading(t, d, "/v1/sessions/"+sess+"/tool-calls", map[string]any{"strategy": "sequential", "calls": []map[string]any{
		{"id": "big", "name": "execute_command", "arguments": map[string]any{"command": bigOutput}},
		{"id": "b", "name": "block", "arguments": map[string]any{}},
	}})
	if st, kind := callStatus(t, d, sess, "b", terminal); kind != "cancelled" {
		t.Errorf("the call under the stalled stream: %s (%s), want cancelled", st, kind)
	}
	// The daemon closed the connection: reading what it sent ends (EOF or a reset),
	// rather than waiting for more.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the stalled stream's connection is still open")
	}
}

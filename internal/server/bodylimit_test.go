package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestTooLargeBodyAnsweredToSendThenReadClients: most HTTP clients (Python's
// http.client, requests, urllib) send the whole body before they read the answer. A
// body well past max_body_bytes (a model's write_file content, JSON-escaped twice)
// used to be cut off unread: the daemon closed the connection with the rest of the
// body unread, the kernel reset it, and the client got "broken pipe" or "connection
// reset" instead of the 413 that says what to do. The rest of such a body is now read
// and dropped (within a bound) before the 413 is sent.
func TestTooLargeBodyAnsweredToSendThenReadClients(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.MaxBodyBytes = 4096 }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	// Far more than loopback socket buffers hold, so that an unread rest cannot hide
	// in them.
	body := `{"calls":[{"id":"a","name":"echo","arguments":{"text":"` + strings.Repeat("x", 32<<20) + `"}}]}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	head := fmt.Sprintf("POST /v1/sessions/%s/tool-calls HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", id, len(body))
	if _, err := io.Copy(conn, io.MultiReader(strings.NewReader(head), strings.NewReader(body))); err != nil {
		t.Fatalf("sending the body: %v (the daemon stopped reading it)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || !bytes.Contains(b, []byte(`"body_too_large"`)) {
		t.Fatalf("answer %d %s, want 413 body_too_large", resp.StatusCode, b)
	}
}

// TestEarlyAnswersReachSendThenReadClients: an answer given before the body is read
// (401 for a wrong key, 404 for an unknown session, 405) reached a client that sends
// its whole body first as "connection reset": the daemon closed the connection with
// the body unread. The rest of the body is now read and dropped after the answer.
func TestEarlyAnswersReachSendThenReadClients(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Auth.Unauthenticated = false }})
	raw, err := os.ReadFile(filepath.Join(d.dataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	body := `{"calls":[{"id":"a","name":"echo","arguments":{"text":"` + strings.Repeat("x", 6<<20) + `"}}]}`
	for _, c := range []struct {
		path, key string
		code      int
	}{
		{"/v1/sessions/ses_x/tool-calls", "wrong", 401},
		{"/v1/sessions/ses_nope/tool-calls", key, 404},
		{"/v1/tools", key, 405},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", c.path, c.key, len(body))
		if _, err := io.Copy(conn, io.MultiReader(strings.NewReader(head), strings.NewReader(body))); err != nil {
			t.Errorf("%s: sending the body: %v (the daemon stopped reading it)", c.path, err)
			conn.Close()
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s: reading the answer: %v", c.path, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != c.code || !bytes.Contains(b, []byte(`"error"`)) {
			t.Errorf("%s: answer %d %s, want %d", c.path, resp.StatusCode, b, c.code)
		}
	}
}

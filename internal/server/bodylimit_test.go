package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
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

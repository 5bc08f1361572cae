package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
)

// TestMCPCallDrainedOnShutdown: a stop drains the calls in flight, and those of MCP
// clients are no exception: a tools/call running when SIGTERM comes ends on its POST's
// event stream with its result, as a REST stream does. The stop ends only the
// clients' listening streams (GET), which would otherwise hold the drain. It ended
// every MCP session at once: the POST's stream went on until the call ended and then
// closed without the result (nor the progress in between) of a call the daemon ran
// to its end.
func TestMCPCallDrainedOnShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary and signals it")
	}
	bin := buildBinary(t)
	// A listening stream that held the drain would hold it 10 minutes: past the hang
	// guard of exit.
	p := startWaitingIn(t, bin, t.TempDir(), "", "TOOLSERVER_SHUTDOWN_TIMEOUT=10m")
	url := "http://" + p.next(t, 60*time.Second, "toolserverd listening")["addr"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := client.New(url).CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := url + "/v1/sessions/" + sess.ID + "/mcp"
	headers := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	post := func(body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %s", body, resp.Status)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"drain-test","version":"0"}}}`)
	resp.Body.Close()
	headers["Mcp-Session-Id"] = resp.Header.Get("Mcp-Session-Id")
	headers["MCP-Protocol-Version"] = "2025-06-18"
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	// The client listens too, as clients do: the stop must not wait for this stream.
	listen, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		listen.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(listen); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	} else {
		defer resp.Body.Close()
	}

	// The command runs until the test lets it end, after the stop began.
	stream := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_command",` +
		`"arguments":{"command":"touch started; while [ ! -e release ]; do sleep 0.05; done; echo finished"},"_meta":{"progressToken":"drain"}}}`)
	defer stream.Body.Close()
	events := bufio.NewScanner(stream.Body)
	events.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() (string, bool) {
		for events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				return data, true
			}
		}
		return "", false
	}
	// Polled: the command's progress may go out on either stream (mcp-go hands a
	// session's notifications to whichever of its streams takes them first).
	waitFile := func(name string) {
		for {
			if _, err := os.Stat(filepath.Join(sess.Workdir, name)); err == nil {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no %s", name)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitFile("started")

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.next(t, 30*time.Second, "shutting down: draining in-flight calls")
	// The drain has begun once the daemon no longer takes connections (the HTTP
	// server's shutdown closes its listener, then runs its shutdown hooks, which
	// ended the MCP sessions).
	addr := strings.TrimPrefix(url, "http://")
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		select {
		case <-ctx.Done():
			t.Fatal("the daemon still takes connections")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(sess.Workdir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var result string
	for data, ok := next(); ok; data, ok = next() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(data), &msg) == nil && string(msg.ID) == "2" {
			result = string(msg.Result)
		}
	}
	if !strings.Contains(result, "finished") || strings.Contains(result, `"isError":true`) {
		t.Errorf("the MCP call's result during the drain: %q; want the command's whole output", result)
	}
	if code := p.exit(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.log())
	}
}

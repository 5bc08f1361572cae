package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestLostReadOnlyCallNotFoundSaysWhy: a read-only call (web_fetch of a server that
// does not answer) is killed with the daemon (kill -9) while its record still waits in
// calls.record_fold_window, after its client saw tool_start. After the restart the
// call has no record: GET /v1/tool-calls/{id} answers 404, and the message must say
// what a client can do (the call is lost; run it again), not read like a bug.
func TestLostReadOnlyCallNotFoundSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	// A server that accepts and never answers: the fetch runs until the kill.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	bin := buildBinary(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("calls:\n  record_fold_window: 10s\nweb:\n  fetch:\n    allow_cidrs: [127.0.0.1/32]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	run := func() *exec.Cmd {
		return exec.Command(bin, "--config", cfgFile, "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json")
	}
	cmd := run()
	url := testdaemon.Exec(t, cmd, "TOOLSERVER_REPLICA_ID=lost-test")
	ctx := context.Background()
	c := adminClient(t, url, dataDir)
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"web_fetch"}})
	if err != nil {
		t.Fatal(err)
	}
	callID, _ := startCall(t, c, sess.ID, client.Call{ID: "fetch", Name: "web_fetch",
		Arguments: json.RawMessage(`{"url":"http://` + ln.Addr().String() + `/slow"}`)})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	url = testdaemon.Exec(t, run(), "TOOLSERVER_REPLICA_ID=lost-test")
	c = adminClient(t, url, dataDir)
	_, err = c.GetCall(ctx, callID)
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("GET the lost call after the restart: %v, want a 404", err)
	}
	for _, want := range []string{callID, "calls.record_fold_window", "is lost", "run it again"} {
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("the 404 of a lost call says %q; want it to say %q", apiErr.Message, want)
		}
	}
}

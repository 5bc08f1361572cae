package server_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDeleteSession: DELETE /v1/sessions/{id} deletes an idle session with its records,
// its workspace and its sandbox (a background job is killed), and refuses one with a
// call running (409) until that call ends.
func TestDeleteSession(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command", "write_file", "block"}})["id"].(string)
	workspace := filepath.Join(d.dataDir, "workspaces", id)

	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{
		map[string]any{"id": "w", "name": "write_file", "arguments": map[string]any{"path": "a.txt", "content": "x"}},
		map[string]any{"id": "j", "name": "execute_command", "arguments": map[string]any{"command": "echo $$ > pid; exec sleep 60", "background": true}},
	}})
	if code != http.StatusOK || len(evs) == 0 {
		t.Fatalf("batch: %d %v", code, evs)
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(workspace, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if pid == 0 {
		t.Fatal("the background job never wrote its pid")
	}

	// A call running: 409, and nothing is deleted.
	ctx, cancel := context.WithCancel(context.Background())
	callID := d.startBlocked(ctx, id)
	if code, _, body := d.do("DELETE", "/v1/sessions/"+id, nil); code != http.StatusConflict || !strings.Contains(string(body), "running or waiting") {
		t.Fatalf("delete with a call running: %d %s", code, body)
	}
	if code, _, _ := d.do("GET", "/v1/sessions/"+id, nil); code != http.StatusOK {
		t.Fatalf("the session went with a call running: %d", code)
	}
	if code, _, body := d.do("POST", "/v1/tool-calls/"+callID+"/cancel", nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	cancel()

	// Once it has ended, the session goes, with all it had.
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _, body = d.do("DELETE", "/v1/sessions/"+id, nil); code == http.StatusNoContent || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, _, _ := d.do("GET", "/v1/sessions/"+id, nil); code != http.StatusNotFound {
		t.Errorf("GET after delete: %d", code)
	}
	if code, _, _ := d.do("GET", "/v1/sessions/"+id+"/tool-calls/w", nil); code != http.StatusNotFound {
		t.Errorf("a call record of the deleted session: %d", code)
	}
	if code, _, _ := d.do("DELETE", "/v1/sessions/"+id, nil); code != http.StatusNotFound {
		t.Errorf("second delete: %d", code)
	}
	if _, err := os.Stat(workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace left: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session's background job (pid %d) still runs", pid)
		}
	}
	// A call naming it now finds nothing.
	if code, _ := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{
		map[string]any{"id": "x", "name": "write_file", "arguments": map[string]any{"path": "b.txt", "content": "x"}}}}); code != http.StatusNotFound {
		t.Errorf("a call in the deleted session: %d", code)
	}
	if _, err := os.Stat(workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace made again: %v", err)
	}
}

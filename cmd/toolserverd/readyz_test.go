package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
)

// readyz returns /readyz's status code and checks.
func readyz(t *testing.T, url string) (int, map[string]string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Checks map[string]string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.Checks
}

// TestReadyzSaysDataDirRemoved: with SQLite, a data directory deleted under the
// running daemon (a cleanup job, an operator's mistake) leaves it writing to files no
// path reaches, lost at the next start; /readyz says the store is not ready.
func TestReadyzSaysDataDirRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	p := startWaitingIn(t, bin, dataDir, "")
	url := "http://" + p.next(t, 60*time.Second, "toolserverd listening")["addr"].(string)
	if code, checks := readyz(t, url); code != http.StatusOK {
		t.Fatalf("/readyz before: %d %v", code, checks)
	}
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	code, checks := readyz(t, url)
	if code != http.StatusServiceUnavailable || !strings.Contains(checks["store"], "no longer") {
		t.Errorf("/readyz after the data directory was removed: %d %v; want 503 with check store failing", code, checks)
	}
}

// TestReadyzSaysWritesFail: with SQLite, a WAL the daemon can no longer write (here
// made immutable; in production a permission or file system fault) makes every call
// unavailable; /readyz says so (check store_writes) instead of staying 200, and is
// ready again once a record is written after the fault is mended.
func TestReadyzSaysWritesFail(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	p := startWaitingIn(t, bin, dataDir, "")
	url := "http://" + p.next(t, 60*time.Second, "toolserverd listening")["addr"].(string)
	c := client.New(url)
	ctx := context.Background()
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(id string) client.Event {
		t.Helper()
		var msg client.Event
		if err := c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: id, Name: "execute_command",
			Arguments: json.RawMessage(`{"command":"echo hi"}`)}}}, func(ev client.Event) error {
			if ev.Type == "message" {
				msg = ev
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if m := run("before"); m.IsError {
		t.Fatalf("call before the fault: %s %s", m.ErrorKind, m.Content())
	}
	wal := filepath.Join(dataDir, "toolserverd.db-wal")
	if out, err := exec.Command("chattr", "+i", wal).CombinedOutput(); err != nil {
		t.Skipf("cannot make the WAL immutable here (needs root and a file system with attributes): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", wal).Run() })
	if m := run("during"); m.ErrorKind != "unavailable" {
		t.Fatalf("call with an unwritable WAL: %s %s; want unavailable", m.ErrorKind, m.Content())
	}
	if code, checks := readyz(t, url); code != http.StatusServiceUnavailable || !strings.Contains(checks["store_writes"], "cannot be written") {
		t.Errorf("/readyz with an unwritable WAL: %d %v; want 503 with check store_writes failing", code, checks)
	}
	if out, err := exec.Command("chattr", "-i", wal).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	if m := run("after"); m.IsError {
		t.Fatalf("call after the fault was mended: %s %s", m.ErrorKind, m.Content())
	}
	if code, checks := readyz(t, url); code != http.StatusOK {
		t.Errorf("/readyz after a record was written again: %d %v", code, checks)
	}
}

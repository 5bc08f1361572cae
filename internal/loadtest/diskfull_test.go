package loadtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// mountTmpfs mounts a small tmpfs on a new directory and unmounts it when the test
// ends (after the daemon, whose cleanup is registered later and so runs first).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount tmpfs (needs root or CAP_SYS_ADMIN): %v\n%s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	fatalIf(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	// Small writes take what whole blocks could not.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
}

// TestDiskFullSQLite runs the daemon with its data directory (SQLite store, session
// workdirs, progress logs) on a 2 MiB tmpfs, fills the filesystem, and checks that
// requests fail with clear errors (HTTP 5xx with a JSON error, or an is_error
// result) and that nothing crashes; then frees the space and checks the database is
// intact (PRAGMA integrity_check = ok) and the daemon serves again without a restart.
func TestDiskFullSQLite(t *testing.T) {
	dir := mountTmpfs(t, "2m")
	d := testdaemon.Start(t, func(c *config.Config) { c.DataDir = dir })
	c, tr := newClient(d.URL, 8)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, PermissionMode: "bypass"})
	fatalIf(t, err)
	fatalIf(t, runChecked(ctx, c, sess.ID, "before"))

	filler := filepath.Join(dir, "filler")
	fill(t, filler)

	// Every request gets an answer, and every failure says what it is.
	failures := 0
	for i := range 20 {
		_, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, Metadata: map[string]any{"pad": strings.Repeat("x", 8<<10)}})
		if err != nil {
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != "unavailable" || !strings.Contains(ae.Message, "out of disk space") {
				t.Fatalf("create session %d on a full disk: want a 503 saying the store is out of disk space, got %v", i, err)
			}
			failures++
			if failures == 1 {
				t.Logf("create session on a full disk: %v", err)
			}
		}
		tag := fmt.Sprintf("full%02d", i)
		var msgs, errs int
		err = c.Run(ctx, sess.ID, "", client.Batch{Calls: mixedCalls(tag), Strategy: "sequential"}, func(ev client.Event) error {
			if ev.Type != "message" {
				return nil
			}
			msgs++
			var m struct {
				IsError bool   `json:"is_error"`
				Content string `json:"content"`
			}
			if err := json.Unmarshal(ev.Message, &m); err != nil {
				return err
			}
			if m.IsError {
				errs++
				if m.Content == "" {
					return fmt.Errorf("an error result without a message")
				}
				if failures+errs == 1 {
					t.Logf("tool call on a full disk: %q", m.Content)
				}
			}
			return nil
		})
		if err != nil {
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Status < 500 || ae.Code == "http" {
				t.Fatalf("batch %d on a full disk: want a complete stream or a 5xx JSON error, got %v", i, err)
			}
			failures++
			continue
		}
		if msgs != len(mixedTools) {
			t.Fatalf("batch %d on a full disk: %d messages for %d calls", i, msgs, len(mixedTools))
		}
		failures += errs
	}
	if failures == 0 {
		t.Fatal("nothing failed on a full disk: the filesystem was not full for the daemon")
	}
	// A call whose record the store refused for lack of space: /readyz says so (it
	// said "store: ok" while every call was refused).
	refused := ""
	for i := 0; i < 5 && refused == ""; i++ {
		fatalIf(t, c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: fmt.Sprintf("probe%d", i), Name: "execute_command",
			Arguments: json.RawMessage(`{"command":"echo probe"}`)}}}, func(ev client.Event) error {
			if ev.Type == "message" && ev.ErrorKind == "unavailable" {
				var m struct {
					Content string `json:"content"`
				}
				if err := json.Unmarshal(ev.Message, &m); err != nil {
					return err
				}
				refused = m.Content
			}
			return nil
		}))
	}
	if refused == "" {
		t.Fatal("5 calls on a full disk were recorded: the filesystem was not full for the daemon")
	}
	// The model is told why, and that retrying soon will not help.
	if !strings.Contains(refused, "disk is full") || strings.Contains(refused, "shortly") {
		t.Errorf("a call refused on a full disk says %q; want it to say the disk is full, not to try again shortly", refused)
	}
	if code, checks := readiness(ctx, t, d.URL); code != http.StatusServiceUnavailable || !strings.Contains(checks["store_writes"], "out of space") {
		t.Errorf("/readyz after a call record was refused for lack of space: %d %v; want 503 with store_writes failing", code, checks)
	}
	if n := metric(ctx, t, d.URL, "toolserverd_store_call_record_write_failures_total"); n < 1 {
		t.Errorf("toolserverd_store_call_record_write_failures_total = %v after records were refused, want at least 1", n)
	}

	fatalIf(t, os.Remove(filler))
	t0 := time.Now()
	// The daemon serves again without a restart.
	fatalIf(t, waitFor(30*time.Second, 100*time.Millisecond, func() error {
		s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: mixedTools, PermissionMode: "bypass"})
		if err != nil {
			return err
		}
		return runChecked(ctx, c, s.ID, "after")
	}))
	t.Logf("%d failures while full; serving again %s after space was freed", failures, time.Since(t0).Round(time.Millisecond))
	fatalIf(t, runChecked(ctx, c, sess.ID, "after2"))
	if code, checks := readiness(ctx, t, d.URL); code != http.StatusOK {
		t.Errorf("/readyz once calls are recorded again: %d %v; want 200", code, checks)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.SQLiteFileName)+"?mode=ro")
	fatalIf(t, err)
	defer db.Close()
	var res string
	fatalIf(t, db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res))
	if res != "ok" {
		t.Fatalf("PRAGMA integrity_check = %q", res)
	}
}

// readiness asks /readyz and returns its status and checks.
func readiness(ctx context.Context, t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	fatalIf(t, err)
	resp, err := http.DefaultClient.Do(req)
	fatalIf(t, err)
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	fatalIf(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body.Checks
}

// metric reads one unlabelled series from /metrics; -1 when it is not there.
func metric(ctx context.Context, t *testing.T, base, name string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	fatalIf(t, err)
	resp, err := http.DefaultClient.Do(req)
	fatalIf(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	fatalIf(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			fatalIf(t, err)
			return f
		}
	}
	return -1
}

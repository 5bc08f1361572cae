package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// proc is the real toolserverd binary running as a child process.
type proc struct {
	cmd *exec.Cmd
	url string
}

func startProc(t *testing.T, bin, dataDir string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json")
	return &proc{cmd: cmd, url: testdaemon.Exec(t, cmd, "TOOLSERVER_REPLICA_ID=kill-test")}
}

// TestKillMidBatch runs a sequential batch whose every call appends its number to a
// file, SIGKILLs the real binary while one call is in flight, restarts it on the same
// data directory, and compares the records with the file: the calls that finished are
// succeeded, the one in flight is failed with the "daemon stopped" reason, the ones not
// started never ran (no record, or failed without having run), and nothing runs again
// after the restart.
func TestKillMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	const calls, killAt = 8, 3
	bin := testdaemon.Build(t)
	dataDir := t.TempDir()
	d := startProc(t, bin, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keyB, err := os.ReadFile(filepath.Join(dataDir, "admin.key"))
	fatalIf(t, err)
	key := strings.TrimSpace(string(keyB))
	c := client.New(d.url, client.WithAPIKey(key))
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, PermissionMode: "bypass"})
	fatalIf(t, err)
	ranPath := filepath.Join(sess.Workdir, "ran.txt")

	batch := client.Batch{Strategy: "sequential"}
	for i := range calls {
		// The sleep keeps each call in flight long enough to be caught there.
		batch.Calls = append(batch.Calls, client.Call{ID: fmt.Sprint("k", i), Name: "execute_command",
			Arguments: json.RawMessage(fmt.Sprintf(`{"command":"echo %d >> ran.txt && sleep 2"}`, i))})
	}
	inFlight := make(chan struct{})
	streamErr := make(chan error, 1)
	messages := map[string]bool{}
	go func() {
		started := 0
		streamErr <- c.Run(ctx, sess.ID, "", batch, func(ev client.Event) error {
			switch ev.Type {
			case "message":
				var m struct {
					ToolCallID string `json:"tool_call_id"`
					IsError    bool   `json:"is_error"`
				}
				_ = json.Unmarshal(ev.Message, &m)
				if m.IsError {
					return fmt.Errorf("call %s failed before the kill: %s", m.ToolCallID, ev.Content())
				}
				messages[m.ToolCallID] = true
			case "tool_start":
				started++
				if started == killAt+1 {
					close(inFlight)
				}
			}
			return nil
		})
	}()
	select {
	case <-inFlight:
	case err := <-streamErr:
		t.Fatalf("the stream ended before call %d started: %v", killAt, err)
	case <-ctx.Done():
		t.Fatal("call did not start")
	}
	// Kill once the in-flight call has written its line: it is then sleeping.
	fatalIf(t, waitFor(30*time.Second, 10*time.Millisecond, func() error {
		if b, _ := os.ReadFile(ranPath); strings.Count(string(b), "\n") < killAt+1 {
			return fmt.Errorf("ran.txt = %q", b)
		}
		return nil
	}))
	fatalIf(t, d.cmd.Process.Signal(syscall.SIGKILL))
	_ = d.cmd.Wait()
	if err := <-streamErr; err == nil {
		t.Fatal("the stream ended with done although the daemon was killed")
	}
	if len(messages) != killAt {
		t.Fatalf("%d messages before the kill, want %d", len(messages), killAt)
	}

	t0 := time.Now()
	d = startProc(t, bin, dataDir)
	t.Logf("restart after SIGKILL: listening in %s", time.Since(t0).Round(time.Millisecond))
	c = client.New(d.url, client.WithAPIKey(key))
	for i := range calls {
		id := fmt.Sprint("k", i)
		rec, err := getByToolCallID(ctx, d.url, key, sess.ID, id)
		switch {
		case i < killAt:
			if err != nil || rec.Status != "succeeded" {
				t.Errorf("call %s finished before the kill: record %+v, %v", id, rec, err)
			}
		case i == killAt:
			if err != nil || rec.Status != "failed" || !strings.Contains(recordText(rec), "daemon stopped") {
				t.Errorf("call %s was in flight: want failed with the daemon-stopped reason, got %+v %q, %v", id, rec, recordText(rec), err)
			}
		default:
			if err == nil && rec.Status != "failed" {
				t.Errorf("call %s never started: record %s", id, rec.Status)
			} else if err != nil && !client.IsNotFound(err) {
				t.Errorf("call %s: %v", id, err)
			}
		}
	}
	// A later call in the same session runs once; nothing of the old batch runs again.
	fatalIf(t, c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: "after", Name: "execute_command",
		Arguments: json.RawMessage(`{"command":"echo after >> ran.txt"}`)}}}, func(client.Event) error { return nil }))
	b, err := os.ReadFile(ranPath)
	fatalIf(t, err)
	want := "0\n1\n2\n3\nafter\n"
	if string(b) != want {
		t.Fatalf("ran.txt = %q, want %q: the calls that ran are exactly those recorded as succeeded plus the one in flight", b, want)
	}
}

func getByToolCallID(ctx context.Context, base, key, sessionID, toolCallID string) (*client.CallRecord, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+sessionID+"/tool-calls/"+toolCallID, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, &client.Error{Status: resp.StatusCode, Code: "http", Message: string(b)}
	}
	var rec client.CallRecord
	return &rec, json.NewDecoder(resp.Body).Decode(&rec)
}

func recordText(r *client.CallRecord) string {
	if r == nil || r.Result == nil {
		return ""
	}
	var s []string
	for _, c := range r.Result.Content {
		s = append(s, c.Text)
	}
	return strings.Join(s, "\n")
}

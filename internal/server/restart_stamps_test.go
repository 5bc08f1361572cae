package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestApprovedEditAfterRestart: a session reads a file, its edit_file waits for
// approval, the daemon restarts, a person approves. The edit runs as it would have
// without the restart: applied when the file is as the session read it, refused as
// changed since read when someone changed it meanwhile. On both stores: the read
// before the restart is not forgotten with the process.
func TestApprovedEditAfterRestart(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(c *config.Config) { c.Permissions.Allow = nil }, func(t *testing.T, opts daemonOpts) {
		d := startDaemon(t, opts)
		// One session per case: a waiting edit holds its session's other edits.
		type edit struct {
			session, wd, file, call string
			approval                string
		}
		edits := map[string]*edit{"unchanged": {file: "kept.txt"}, "changed": {file: "moved.txt"}}
		for name, e := range edits {
			sess := d.createSession(map[string]any{"available_tools": []string{"read_file", "edit_file"}})
			e.session, e.wd = sess["id"].(string), sess["workdir"].(string)
			if err := os.WriteFile(filepath.Join(e.wd, e.file), []byte("one\ntwo\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, evs := d.stream("/v1/sessions/"+e.session+"/tool-calls",
				`{"calls":[{"id":"r","name":"read_file","arguments":{"path":"`+e.file+`"}}]}`)
			if m := messages(t, evs)["r"]; m.m["is_error"] != false {
				t.Fatalf("%s: read_file: %s", name, m.raw)
			}
			apr, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+e.session+"/tool-calls",
				`{"calls":[{"id":"e","name":"edit_file","arguments":{"path":"`+e.file+`","old_string":"one","new_string":"uno"}}]}`)
			defer stop()
			e.approval = apr["id"].(string)
			code, _, body := d.do("GET", "/v1/approvals/"+e.approval, nil)
			var rec struct {
				CallID string `json:"call_id"`
			}
			if code != 200 || json.Unmarshal(body, &rec) != nil || rec.CallID == "" {
				t.Fatalf("%s: approval: %d %s", name, code, body)
			}
			e.call = rec.CallID
		}
		d.stop()
		changed := edits["changed"]
		if err := os.WriteFile(filepath.Join(changed.wd, changed.file), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
			t.Fatal(err)
		}

		d2 := startDaemon(t, opts)
		results := map[string]string{}
		for name, e := range edits {
			if code, _, body := d2.do("POST", "/v1/approvals/"+e.approval+"/decision", `{"decision":"approve"}`); code != 200 {
				t.Fatalf("%s: decide after restart: %d %s", name, code, body)
			}
			waitFor(t, 30*time.Second, name+" edit to finish", func() bool {
				code, _, body := d2.do("GET", "/v1/tool-calls/"+e.call, nil)
				var rec struct {
					Status string          `json:"status"`
					Result json.RawMessage `json:"result"`
				}
				if code != 200 || json.Unmarshal(body, &rec) != nil {
					t.Fatalf("%s: call record: %d %s", name, code, body)
				}
				results[name] = string(rec.Result)
				return rec.Status == "succeeded" || rec.Status == "failed"
			})
		}
		if got, _ := os.ReadFile(filepath.Join(edits["unchanged"].wd, "kept.txt")); string(got) != "uno\ntwo\n" {
			t.Errorf("the approved edit of the unchanged file: file is %q, result %s", got, results["unchanged"])
		}
		if r := results["changed"]; !strings.Contains(r, "has changed on disk") {
			t.Errorf("the approved edit of the changed file: result %s, want it refused as changed since read", r)
		}
		if got, _ := os.ReadFile(filepath.Join(changed.wd, changed.file)); string(got) != "one\ntwo\nthree\n" {
			t.Errorf("the changed file after its refused edit: %q", got)
		}
	})
}

// TestUnreadAfterRestartSaysWhy: with SQLite the file tools' read records do not
// outlive the process (docs/config.md, sessions.idle_timeout). A write of a file the
// session read before a restart is refused saying it must be read again since the
// session was loaded anew, not that it "has not been read in this session", which
// the model knows to be false. A session this process made keeps the plain words.
func TestUnreadAfterRestartSaysWhy(t *testing.T) {
	t.Parallel()
	opts := daemonOpts{dataDir: t.TempDir(), mutate: func(c *config.Config) {
		c.Permissions.Allow = append(c.Permissions.Allow, "write_file", "edit_file")
	}}
	d := startDaemon(t, opts)
	tools := map[string]any{"available_tools": []string{"read_file", "write_file", "edit_file"}}
	sess := d.createSession(tools)
	id, wd := sess["id"].(string), sess["workdir"].(string)
	if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(d *daemon, session, cid, name string, args map[string]any) (bool, string) {
		t.Helper()
		code, evs := d.stream("/v1/sessions/"+session+"/tool-calls", map[string]any{"calls": []any{map[string]any{"id": cid, "name": name, "arguments": args}}})
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, evs[0].raw)
		}
		m := messages(t, evs)[cid]
		msg, _ := m.m["message"].(map[string]any)
		content, _ := msg["content"].(string)
		return m.m["is_error"] == true, content
	}
	if isErr, content := call(d, id, "r", "read_file", map[string]any{"path": "a.txt"}); isErr {
		t.Fatalf("read_file: %s", content)
	}
	d.stop()

	d2 := startDaemon(t, opts)
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "a.txt", "content": "x\n"}},
		{"edit_file", map[string]any{"path": "a.txt", "old_string": "one", "new_string": "x"}},
	} {
		isErr, content := call(d2, id, c.name, c.name, c.args)
		if !isErr || !strings.Contains(content, "must be read again") || !strings.Contains(content, "restarted") ||
			strings.Contains(content, "has not been read in this session") {
			t.Errorf("%s after a restart: is_error=%v %q, want it refused saying the file must be read again since the daemon restarted or the session was reloaded", c.name, isErr, content)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(wd, "a.txt")); string(got) != "one\n" {
		t.Fatalf("a.txt = %q after refused writes", got)
	}
	if isErr, content := call(d2, id, "r2", "read_file", map[string]any{"path": "a.txt"}); isErr {
		t.Fatalf("read_file after restart: %s", content)
	}
	if isErr, content := call(d2, id, "w2", "write_file", map[string]any{"path": "a.txt", "content": "two\n"}); isErr {
		t.Fatalf("write_file after reading again: %s", content)
	}

	fresh := d2.createSession(tools)
	fid, fwd := fresh["id"].(string), fresh["workdir"].(string)
	if err := os.WriteFile(filepath.Join(fwd, "b.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if isErr, content := call(d2, fid, "w", "write_file", map[string]any{"path": "b.txt", "content": "x\n"}); !isErr || !strings.Contains(content, "has not been read in this session") {
		t.Errorf("write_file of an unread file in a new session: is_error=%v %q, want the plain refusal", isErr, content)
	}
}

package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestFileGuardAcrossReplicas: a session's calls land on either of two replicas (a
// round-robin Service), its workdir on a volume both share. A file read through one
// may be written and edited through the other, and a file the session wrote through
// one may be edited through the other, as on one replica. What the guard is for still
// holds across them: a file the session never read, or one changed on disk since it
// read it, is refused on either.
func TestFileGuardAcrossReplicas(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Sessions.WorkdirRoots = []string{shared}
		c.Permissions.Allow = append(c.Permissions.Allow, "edit_file")
	})
	id := a.createSession(map[string]any{"available_tools": []string{"read_file", "write_file", "edit_file"}, "workdir": shared})["id"].(string)
	for name, content := range map[string]string{"read.txt": "one\n", "unread.txt": "two\n", "changed.txt": "three\n"} {
		if err := os.WriteFile(filepath.Join(shared, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	call := func(d *daemon, name string, args map[string]any) (bool, string) {
		t.Helper()
		n++
		cid := fmt.Sprint("c", n)
		code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{map[string]any{"id": cid, "name": name, "arguments": args}}})
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, evs[0].raw)
		}
		m := messages(t, evs)[cid]
		msg, _ := m.m["message"].(map[string]any)
		content, _ := msg["content"].(string)
		return m.m["is_error"] == true, content
	}
	mustOK := func(d *daemon, name string, args map[string]any) {
		t.Helper()
		if isErr, content := call(d, name, args); isErr {
			t.Fatalf("%s %v: %s", name, args, content)
		}
	}
	mustRefuse := func(d *daemon, name string, args map[string]any, why string) {
		t.Helper()
		if isErr, content := call(d, name, args); !isErr || !strings.Contains(content, why) {
			t.Fatalf("%s %v: want a refusal saying %q, got is_error=%v %q", name, args, why, isErr, content)
		}
	}

	// Read through A, overwrite through B, edit through A (which read the file before
	// B changed it), edit through B again.
	mustOK(a, "read_file", map[string]any{"path": "read.txt"})
	mustOK(b, "write_file", map[string]any{"path": "read.txt", "content": "one\nmore\n"})
	mustOK(a, "edit_file", map[string]any{"path": "read.txt", "old_string": "more", "new_string": "most"})
	mustOK(b, "edit_file", map[string]any{"path": "read.txt", "old_string": "one", "new_string": "first"})
	if got, _ := os.ReadFile(filepath.Join(shared, "read.txt")); string(got) != "first\nmost\n" {
		t.Fatalf("read.txt = %q", got)
	}
	// Created through B, edited through A.
	mustOK(b, "write_file", map[string]any{"path": "new.txt", "content": "fresh\n"})
	mustOK(a, "edit_file", map[string]any{"path": "new.txt", "old_string": "fresh", "new_string": "edited"})

	// Still refused: never read by the session, on either replica.
	mustRefuse(b, "write_file", map[string]any{"path": "unread.txt", "content": "x\n"}, "has not been read in this session")
	mustRefuse(a, "edit_file", map[string]any{"path": "unread.txt", "old_string": "two", "new_string": "x"}, "has not been read in this session")
	// Still refused: read through A, then changed on disk by someone else.
	mustOK(a, "read_file", map[string]any{"path": "changed.txt"})
	if err := os.WriteFile(filepath.Join(shared, "changed.txt"), []byte("changed by a person\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRefuse(b, "edit_file", map[string]any{"path": "changed.txt", "old_string": "three", "new_string": "x"}, "has changed on disk")
	mustRefuse(a, "write_file", map[string]any{"path": "changed.txt", "content": "x\n"}, "has changed on disk")
}

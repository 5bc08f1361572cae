package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestFileGuardKeptStamps: with a store that keeps only some stamps (SQLite, one
// process), a read writes nothing to it; an edit about to wait for approval (its
// Precheck) keeps the stamp it was checked against, so that after a restart (a fresh
// session memory, same session id) the edit runs; and once kept, the file's later
// stamps go to the store too, so a restart never checks against one older than what
// the session saw last: here the file is put back as first read, after the session's
// own edit, and the next edit after a restart is refused as changed; a file kept by
// an earlier process counts as kept in this one.
func TestFileGuardKeptStamps(t *testing.T) {
	t.Parallel()
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "toolserverd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newFileEnv(t)
	for _, tl := range FileTools(e.m, Stamps{Store: st}) {
		e.tools[tl.Spec().Name] = tl
	}
	abs, err := filepath.EvalSymlinks(e.put(t, "a.txt", "one\n"))
	if err != nil {
		t.Fatal(err)
	}
	restart := func() { e.sess = e.newSession(e.sess.ID) }
	edit := map[string]any{"path": "a.txt", "old_string": "one", "new_string": "uno"}

	e.ok(t, "read_file", map[string]any{"path": "a.txt"})
	if s, err := st.GetFileStamp(t.Context(), e.sess.ID, abs); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after read_file the store holds %+v, %v: a read must not write", s, err)
	}
	raw, _ := json.Marshal(edit)
	tctx := &tool.Context{Context: t.Context(), CallID: "tc_p", ToolName: "edit_file", Session: e.sess, Progress: tool.NoProgress}
	if err := e.tools["edit_file"].(tool.Prechecker).Precheck(tctx, raw); err != nil {
		t.Fatalf("Precheck: %v", err)
	}
	restart()
	e.ok(t, "edit_file", edit)
	if got := e.disk(t, "a.txt"); got != "uno\n" {
		t.Fatalf("a.txt = %q after the edit", got)
	}

	e.put(t, "a.txt", "one\n") // as the session first read it, not as it last saw it
	restart()
	e.fail(t, "edit_file", map[string]any{"path": "a.txt", "old_string": "one", "new_string": "eins"}, tool.KindDenied, "has changed on disk")

	// A read in a process that has not kept the file itself still goes to the store,
	// as an earlier process kept it (loadKept): put back as it was before that read
	// (the session's edit two processes ago), the file is refused, here and after a
	// restart.
	e.ok(t, "read_file", map[string]any{"path": "a.txt"})
	e.put(t, "a.txt", "uno\n")
	e.fail(t, "edit_file", map[string]any{"path": "a.txt", "old_string": "uno", "new_string": "eins"}, tool.KindDenied, "has changed on disk")
	restart()
	e.fail(t, "edit_file", map[string]any{"path": "a.txt", "old_string": "uno", "new_string": "eins"}, tool.KindDenied, "has changed on disk")
}

// TestFileGuardKeptStampWriteFails: the stamp an edit about to wait for approval was
// checked against cannot be written (the store is closed): the edit still parks, and
// the daemon's log says so, naming the session, the call and the file, since the
// call, approved after a restart, would be refused as unread.
func TestFileGuardKeptStampWriteFails(t *testing.T) {
	t.Parallel()
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "toolserverd.db"))
	if err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuffer
	e := newFileEnv(t)
	for _, tl := range FileTools(e.m, Stamps{Store: st, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}) {
		e.tools[tl.Spec().Name] = tl
	}
	abs, err := filepath.EvalSymlinks(e.put(t, "a.txt", "one\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.ok(t, "read_file", map[string]any{"path": "a.txt"})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"path": "a.txt", "old_string": "one", "new_string": "uno"})
	tctx := &tool.Context{Context: t.Context(), CallID: "tc_p", ToolName: "edit_file", Session: e.sess, Progress: tool.NoProgress}
	if err := e.tools["edit_file"].(tool.Prechecker).Precheck(tctx, raw); err != nil {
		t.Fatalf("Precheck: %v", err)
	}
	got := logBuf.String()
	for _, want := range []string{"level=ERROR", "waiting for approval", "session_id=" + e.sess.ID, "call_id=tc_p", "path=" + abs, "err="} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

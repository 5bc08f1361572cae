package builtin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestBackgroundAwait: a background job outlives its call's context; await_job
// returns only the output that is new since the previous await.
func TestBackgroundAwait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	dir := t.TempDir()
	sess := newSession("s1", dir)
	ctx, cancel := context.WithCancel(context.Background())
	res, _ := e.call(t, ctx, sess, "execute_command", map[string]any{
		"command":    `echo one; while [ ! -e go ]; do sleep 0.02; done; echo two; echo warn >&2`,
		"background": true,
	})
	cancel() // the call is over and its context gone, as when the client disconnects
	if res.IsError {
		t.Fatal(res.Text())
	}
	started := decode[execOut](t, res)
	if started.Status != "running" || !strings.HasPrefix(started.JobID, "job_") || !strings.Contains(res.Text(), "await_job") {
		t.Fatalf("background result %s / %q", res.Structured, res.Text())
	}
	id := started.JobID

	// The job's first line, over as many awaits as it takes the job to print it
	// (under load it may not have within one await's 500ms); it keeps running.
	var out string
	for deadline := time.Now().Add(30 * time.Second); out != "one\n"; {
		first := decode[execOut](t, e.mustCall(t, sess, "await_job", map[string]any{"job_id": id, "timeout_ms": 500}))
		out += first.Stdout
		if first.Status != "running" || first.Done || !strings.HasPrefix("one\n", out) || first.Stderr != "" {
			t.Fatalf("first awaits (job should still be running, having printed one line): %+v, stdout so far %q", first, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job printed nothing in 30s")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, rec := e.call(t, context.Background(), sess, "await_job", map[string]any{"job_id": id, "timeout_ms": 10000})
	second := decode[execOut](t, res)
	if second.Status != "exited" || !second.Done || second.ExitCode == nil || *second.ExitCode != 0 ||
		second.Stdout != "two\n" || second.Stderr != "warn\n" {
		t.Errorf("second await: %+v", second)
	}
	if got := rec.text("stdout"); got != "two\n" {
		t.Errorf("second await streamed %q", got)
	}
	third := decode[execOut](t, e.mustCall(t, sess, "await_job", map[string]any{"job_id": id, "timeout_ms": 0}))
	if third.Stdout != "" || third.Stderr != "" || !third.Done {
		t.Errorf("third await repeated output: %+v", third)
	}
}

// TestConcurrentAwaits: awaits of one job running side by side never hand out the
// same bytes twice, and together hand out all of them.
func TestConcurrentAwaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	res := e.mustCall(t, sess, "execute_command", map[string]any{
		"command": `for i in $(seq 1 300); do echo "line $i"; if [ $((i % 10)) = 0 ]; then sleep 0.01; fi; done`, "background": true,
	})
	id := decode[execOut](t, res).JobID
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				out := decode[execOut](t, e.mustCall(t, sess, "await_job", map[string]any{"job_id": id, "timeout_ms": 50}))
				mu.Lock()
				got = append(got, out.Stdout)
				mu.Unlock()
				if out.Done {
					return
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Count(strings.Join(got, ""), "\n")
	if lines != 300 {
		t.Errorf("the awaits returned %d lines in all; want each of the 300 once", lines)
	}
}

// TestReadJobOutput: offsets concatenate to the exact output (sha256 over a few MB
// of random bytes), text reads never split a character, tails and ends behave.
func TestReadJobOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	dir := t.TempDir()
	sess := newSession("s1", dir)
	blob := make([]byte, 3<<20+777)
	rand.Read(blob)
	if err := os.WriteFile(filepath.Join(dir, "blob"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": "cat blob; printf 'αβγ€😀 end\\nline2\\nline3\\n' >&2"})
	id := decode[execOut](t, res).JobID

	h := sha256.New()
	var off int64
	for {
		n, _ := rand.Int(rand.Reader, big.NewInt(maxReadBytes))
		out := decode[readOut](t, e.mustCall(t, sess, "read_job_output", map[string]any{
			"job_id": id, "offset": off, "max_bytes": n.Int64() + 1, "encoding": "base64",
		}))
		data, err := base64.StdEncoding.DecodeString(out.Data)
		if err != nil || out.Offset != off || out.NextOffset != off+int64(len(data)) {
			t.Fatalf("read at %d: %d bytes, next %d, %v", off, len(data), out.NextOffset, err)
		}
		h.Write(data)
		off = out.NextOffset
		if out.EOF {
			break
		}
	}
	if sum := sha256.Sum256(blob); !bytes.Equal(h.Sum(nil), sum[:]) || off != int64(len(blob)) {
		t.Errorf("read %d bytes; sha256 differs from the %d-byte blob", off, len(blob))
	}

	wantErr := "αβγ€😀 end\nline2\nline3\n"
	var text strings.Builder
	off = 0
	for range 100 {
		out := decode[readOut](t, e.mustCall(t, sess, "read_job_output", map[string]any{
			"job_id": id, "stream": "stderr", "offset": off, "max_bytes": 5,
		}))
		if out.Replaced {
			t.Fatalf("a character was split at offset %d: %q", off, out.Data)
		}
		text.WriteString(out.Data)
		off = out.NextOffset
		if out.EOF {
			break
		}
	}
	if text.String() != wantErr {
		t.Errorf("text reads joined: %q; want %q", text.String(), wantErr)
	}

	tail := decode[readOut](t, e.mustCall(t, sess, "read_job_output", map[string]any{"job_id": id, "stream": "stderr", "tail_lines": 2}))
	if tail.Data != "line2\nline3\n" || tail.Offset != int64(len(wantErr)-len("line2\nline3\n")) || !tail.EOF {
		t.Errorf("tail: %+v", tail)
	}
	for _, past := range []int64{int64(len(blob)), int64(len(blob)) + 1000} {
		out := decode[readOut](t, e.mustCall(t, sess, "read_job_output", map[string]any{"job_id": id, "offset": past}))
		if out.Data != "" || out.NextOffset != past || !out.EOF {
			t.Errorf("read past the end (%d): %+v", past, out)
		}
	}
	res, _ = e.call(t, context.Background(), sess, "read_job_output", map[string]any{"job_id": id, "offset": 0, "tail_lines": 1})
	if res.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("offset with tail_lines: %q %s", res.ErrorKind, res.Text())
	}
}

// TestJobsOfOtherSessions: another session cannot wait for, read or kill a job.
func TestJobsOfOtherSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	dir := t.TempDir()
	s1, s2 := newSession("s1", dir), newSession("s2", dir)
	res := e.mustCall(t, s1, "execute_command", map[string]any{"command": "sleep 30", "background": true})
	id := decode[execOut](t, res).JobID
	for _, name := range []string{"await_job", "read_job_output", "kill_job"} {
		res, _ := e.call(t, context.Background(), s2, name, map[string]any{"job_id": id})
		if res.ErrorKind != tool.KindNotFound || !strings.Contains(res.Text(), id) || strings.Contains(res.Text(), "its jobs are") {
			t.Errorf("%s from another session: %q %s", name, res.ErrorKind, res.Text())
		}
	}
	res, _ = e.call(t, context.Background(), s1, "await_job", map[string]any{"job_id": "job_unknown", "timeout_ms": 0})
	if res.ErrorKind != tool.KindNotFound || !strings.Contains(res.Text(), id+" (running)") {
		t.Errorf("unknown job in s1: %q %s", res.ErrorKind, res.Text())
	}
	out := decode[execOut](t, e.mustCall(t, s1, "await_job", map[string]any{"job_id": id, "timeout_ms": 0}))
	if out.Status != "running" {
		t.Errorf("the job was disturbed: %+v", out)
	}
}

func TestKillJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	res := e.mustCall(t, sess, "execute_command", map[string]any{"command": "echo up; sleep 30", "background": true})
	id := decode[execOut](t, res).JobID
	if up := decode[execOut](t, e.mustCall(t, sess, "await_job", map[string]any{"job_id": id, "timeout_ms": 300})); up.Stdout != "up\n" || up.Done {
		t.Fatalf("before the kill: %+v", up)
	}
	start := time.Now()
	type killOut struct {
		Status       string `json:"status"`
		AlreadyEnded bool   `json:"already_ended"`
	}
	k := decode[killOut](t, e.mustCall(t, sess, "kill_job", map[string]any{"job_id": id}))
	// "killed", not already ended: the kill ended the 30s job; the bound is a hang
	// guard below the job's 30s.
	if k.Status != "killed" || k.AlreadyEnded || time.Since(start) > 20*time.Second {
		t.Errorf("kill: %+v after %s", k, time.Since(start))
	}
	k = decode[killOut](t, e.mustCall(t, sess, "kill_job", map[string]any{"job_id": id}))
	if k.Status != "killed" || !k.AlreadyEnded {
		t.Errorf("second kill: %+v", k)
	}
	out := decode[execOut](t, e.mustCall(t, sess, "await_job", map[string]any{"job_id": id}))
	if out.Status != "killed" || out.Stdout != "" || !out.Done {
		t.Errorf("await after kill: %+v", out)
	}
	if r := decode[readOut](t, e.mustCall(t, sess, "read_job_output", map[string]any{"job_id": id})); r.Data != "up\n" || !r.EOF {
		t.Errorf("output after kill: %+v", r)
	}
}

// TestBackgroundResultNamesOnlyTheSessionsJobTools: the result of a background start
// told the model to use await_job and kill_job in a session that has only
// read_job_output (the README's first session), so its next call was refused as
// not available. It names the job tools the session has, and says when it has none.
func TestBackgroundResultNamesOnlyTheSessionsJobTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	for _, tc := range []struct {
		tools        catalogOf
		want, absent []string
	}{
		{catalogOf{"execute_command", "read_job_output"}, []string{"read_job_output"}, []string{"await_job", "kill_job"}},
		{catalogOf{"execute_command", "await_job", "kill_job"}, []string{"await_job", "kill_job"}, []string{"read_job_output"}},
		{catalogOf{"execute_command"}, []string{"no tool to follow it"}, []string{"await_job", "read_job_output", "kill_job"}},
	} {
		sess := newSession("s1", t.TempDir())
		sess.Tools = tc.tools
		res := e.mustCall(t, sess, "execute_command", map[string]any{"command": "true", "background": true})
		text := res.Text()
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("session with %v: %q, want %q in it", tc.tools, text, w)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(text, a) {
				t.Errorf("session with %v: %q names %s, which the session cannot call", tc.tools, text, a)
			}
		}
	}
}

// TestCutOutputNamesReadJobOutputOnlyWhenTheSessionHasIt: a foreground command
// whose output was cut to the result budget said "read them with read_job_output
// {…}" in a session without read_job_output (the Python example's first session,
// execute_command and read_file), so the model's next call was refused as not
// available. The note names it only when the session may call it.
func TestCutOutputNamesReadJobOutputOnlyWhenTheSessionHasIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	cmd := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", 4*resultBudget)
	for _, tc := range []struct {
		tools catalogOf
		named bool
	}{
		{catalogOf{"execute_command", "read_job_output"}, true},
		{catalogOf{"execute_command", "read_file"}, false},
	} {
		sess := newSession("s1", t.TempDir())
		sess.Tools = tc.tools
		text := e.mustCall(t, sess, "execute_command", map[string]any{"command": cmd}).Text()
		if !strings.Contains(text, "earlier bytes are not shown") {
			t.Fatalf("session with %v: the output was not cut: %q", tc.tools, text[len(text)-300:])
		}
		if got := strings.Contains(text, "read_job_output"); got != tc.named {
			t.Errorf("session with %v: names read_job_output %v, want %v: %q", tc.tools, got, tc.named, text[len(text)-300:])
		}
	}
}

// TestDroppedJobSaysWhy: a session keeps its last JobRetention finished jobs, every
// foreground command among them. A job asked about after it was dropped answered
// only `no job "job_…" in this session` followed by every id the session still had
// (a hundred by default), which the model, holding the id it was given, could not
// act on. It now says the job ended and was dropped, and what to do; the list names
// the latest jobs only.
func TestDroppedJobSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{JobRetention: 25})
	sess := newSession("s1", t.TempDir())
	first := decode[execOut](t, e.mustCall(t, sess, "execute_command", map[string]any{"command": "echo one"})).JobID
	for range 30 {
		e.mustCall(t, sess, "execute_command", map[string]any{"command": "true"})
	}
	for _, name := range []string{"await_job", "read_job_output", "kill_job"} {
		res, _ := e.call(t, context.Background(), sess, name, map[string]any{"job_id": first})
		if !res.IsError || res.ErrorKind != tool.KindNotFound || !strings.Contains(res.Text(), first) ||
			!strings.Contains(res.Text(), "no longer kept") || !strings.Contains(res.Text(), "last 25 finished jobs") ||
			!strings.Contains(res.Text(), "run its command again") {
			t.Errorf("%s of a dropped job: %s %q, want not_found saying it was dropped and to run it again", name, res.ErrorKind, res.Text())
		}
	}
	res, _ := e.call(t, context.Background(), sess, "await_job", map[string]any{"job_id": "job_0123456789abcdef"})
	if !res.IsError || res.ErrorKind != tool.KindNotFound || strings.Contains(res.Text(), "no longer kept") {
		t.Errorf("await_job of an id the session never had: %s %q, want not_found without a word of dropped jobs", res.ErrorKind, res.Text())
	}
	if n := strings.Count(res.Text(), "job_") - 1; n > 20 {
		t.Errorf("the not-found answer names %d jobs, want at most the 20 latest: %q", n, res.Text())
	}
}

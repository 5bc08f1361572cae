package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestSpecs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	tests := []struct {
		name       string
		concurrent bool
		readOnly   bool
		risk       tool.Risk
		good, bad  []string
	}{
		{"execute_command", false, false, tool.RiskHigh,
			[]string{`{"command":"ls"}`, `{"command":"ls","cwd":"a","timeout_ms":1000,"background":true}`},
			[]string{`{}`, `{"command":""}`, `{"command":"ls","timeout_ms":0}`, `{"command":"ls","timeout_ms":999999999999}`, `{"command":"ls","x":1}`}},
		{"await_job", true, true, tool.RiskSafe,
			[]string{`{"job_id":"job_1"}`, `{"job_id":"job_1","timeout_ms":0}`},
			[]string{`{}`, `{"job_id":"job_1","timeout_ms":600001}`, `{"job_id":"job_` + strings.Repeat("x", 61) + `"}`}},
		{"read_job_output", true, true, tool.RiskSafe,
			[]string{`{"job_id":"j"}`, `{"job_id":"j","stream":"stderr","offset":5,"max_bytes":10,"encoding":"base64"}`},
			[]string{`{"job_id":"j","stream":"stdin"}`, `{"job_id":"j","offset":-1}`, `{"job_id":"j","encoding":"hex"}`, `{"job_id":"` + strings.Repeat("x", 100000) + `"}`}},
		{"kill_job", true, false, tool.RiskLow,
			[]string{`{"job_id":"j"}`},
			[]string{`{"job_id":""}`, `{"id":"j"}`, `{"job_id":"` + strings.Repeat("x", 65) + `"}`}},
	}
	if len(e.tools) != len(tests) {
		t.Fatalf("CommandTools returned %d tools", len(e.tools))
	}
	for _, tt := range tests {
		spec := e.tools[tt.name].Spec()
		if spec.Name != tt.name || spec.Description == "" || spec.Documentation == "" || spec.Risk != tt.risk ||
			spec.ConcurrencySafe != tt.concurrent || spec.ReadOnly != tt.readOnly || spec.Timeout <= 0 {
			t.Errorf("%s: spec %+v", tt.name, spec)
		}
		checkArguments(t, tt.name, spec.Parameters, tt.good, tt.bad)
	}
}

func TestExecuteCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	dir := t.TempDir()
	for _, d := range []string{"sub"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	sess := newSession("s1", dir)
	tests := []struct {
		name           string
		args           map[string]any
		kind           tool.ErrorKind
		code           int // -1: none
		stdout, stderr string
		text           []string
	}{
		{"success", map[string]any{"command": "echo hello"}, "", 0, "hello\n", "", []string{"Exit code 0", "stdout:\nhello"}},
		{"failure keeps output", map[string]any{"command": "echo out; echo err >&2; exit 3"}, tool.KindFailed, 3, "out\n", "err\n",
			[]string{"Exit code 3", "stdout:\nout", "stderr:\nerr"}},
		{"no output", map[string]any{"command": "true"}, "", 0, "", "", []string{"(no output)"}},
		{"cwd", map[string]any{"command": "pwd", "cwd": "sub"}, "", 0, filepath.Join(dir, "sub") + "\n", "", nil},
		{"timeout", map[string]any{"command": "echo partial; sleep 30", "timeout_ms": 400}, tool.KindTimeout, -1, "partial\n", "",
			[]string{"Timed out", "partial"}},
		{"cwd above the root", map[string]any{"command": "pwd", "cwd": ".."}, tool.KindInvalidArgs, -1, "", "", []string{"outside the working directory"}},
		{"cwd absolute outside", map[string]any{"command": "pwd", "cwd": "/etc"}, tool.KindInvalidArgs, -1, "", "", []string{"outside"}},
		{"cwd symlink escape", map[string]any{"command": "pwd", "cwd": "escape"}, tool.KindInvalidArgs, -1, "", "", []string{`symlink "escape"`}},
		{"cwd missing", map[string]any{"command": "pwd", "cwd": "nope"}, tool.KindInvalidArgs, -1, "", "", []string{"does not exist"}},
		{"timeout too long", map[string]any{"command": "true", "timeout_ms": int64(time.Hour / time.Millisecond)}, tool.KindInvalidArgs, -1, "", "", nil},
		{"empty command", map[string]any{"command": " "}, tool.KindInvalidArgs, -1, "", "", nil},
		{"unknown argument", map[string]any{"command": "true", "shell": "zsh"}, tool.KindInvalidArgs, -1, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, _ := e.call(t, context.Background(), sess, "execute_command", tt.args)
			if res.IsError != (tt.kind != "") || res.ErrorKind != tt.kind {
				t.Fatalf("is_error %v kind %q; want %q: %s", res.IsError, res.ErrorKind, tt.kind, res.Text())
			}
			for _, s := range tt.text {
				if !strings.Contains(res.Text(), s) {
					t.Errorf("text %q lacks %q", res.Text(), s)
				}
			}
			if res.Structured == nil {
				return
			}
			out := decode[execOut](t, res)
			code := -1
			if out.ExitCode != nil {
				code = *out.ExitCode
			}
			if code != tt.code || out.Stdout != tt.stdout || out.Stderr != tt.stderr || !strings.HasPrefix(out.JobID, "job_") {
				t.Errorf("structured %+v; want code %d stdout %q stderr %q", out, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestExecuteProgress: progress carries every byte of both streams exactly once,
// multi-byte characters whole, across many reads.
func TestExecuteProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		for j := 1; j <= 800; j++ {
			fmt.Fprintf(&want, "%d-%d é€😀\n", i, j)
		}
	}
	cmd := `for i in $(seq 1 40); do for j in $(seq 1 800); do echo "$i-$j é€😀"; done; echo "e$i" >&2; sleep 0.005; done`
	res, rec := e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": cmd})
	if res.IsError {
		t.Fatalf("%s", res.Text())
	}
	if got := rec.text("stdout"); got != want.String() {
		t.Errorf("progress stdout: %d bytes, want %d (valid UTF-8: %v)", len(got), want.Len(), utf8.ValidString(got))
	}
	var wantErr strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&wantErr, "e%d\n", i)
	}
	if got := rec.text("stderr"); got != wantErr.String() {
		t.Errorf("progress stderr %q", got)
	}
	if rec.events < 3 {
		t.Errorf("only %d progress events: not streamed", rec.events)
	}
	out := decode[execOut](t, res)
	if !out.Truncated || !strings.HasSuffix(want.String(), out.Stdout) || len(out.Stdout) > resultBudget {
		t.Errorf("result stdout is not a tail of the output: %d bytes, truncated %v", len(out.Stdout), out.Truncated)
	}
	if !strings.Contains(res.Text(), "earlier bytes are not shown; read them with read_job_output") {
		t.Errorf("the text does not say what was cut: %q", res.Text()[:200])
	}
}

func TestExecuteCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancelled once the command has printed: at a fixed 300ms, under load, the
	// command could still be starting and the result had no "started" to show.
	rec := newRecorder()
	rec.onEmit = func() {
		if strings.Contains(rec.text("stdout"), "started") {
			cancel()
		}
	}
	start := time.Now()
	res, _ := e.callWith(t, ctx, sess, "execute_command", map[string]any{"command": "echo started; sleep 30"}, rec)
	if res.ErrorKind != tool.KindCancelled || !strings.Contains(res.Text(), "started") {
		t.Errorf("kind %q text %q", res.ErrorKind, res.Text())
	}
	// Cancelled with the job killed (below) is what ended it; the bound is a hang
	// guard, below the command's 30s.
	t.Logf("cancelled call returned after %s", time.Since(start))
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("cancel took %s", d)
	}
	out := decode[execOut](t, res)
	sb, _ := e.m.For(sess)
	if job, err := sb.Job(out.JobID); err != nil || job.Status() != sandbox.StatusKilled {
		t.Errorf("job after cancel: %v %v", job, err)
	}
}

// TestExecuteOutputLimits: beyond the output cap bytes are discarded and the result
// says so; binary output arrives as valid UTF-8 with a note.
func TestExecuteOutputLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{OutputCap: 64 << 10})
	sess := newSession("s1", t.TempDir())
	res, _ := e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": "head -c 10000000 /dev/zero | tr '\\0' 'a'; echo; echo tail"})
	if res.IsError || !strings.Contains(res.Text(), "the output cap was reached; 9934470 later bytes were discarded") {
		t.Errorf("capped output: %v %q", res.IsError, res.Text()[max(0, len(res.Text())-300):])
	}
	if out := decode[execOut](t, res); !out.Truncated {
		t.Error("structured truncated is false")
	}

	res, _ = e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": `head -c 3000 /dev/urandom; printf 'ok\0\377\n'`})
	text := res.Text()
	if res.IsError || !utf8.ValidString(text) || strings.ContainsRune(text, 0) || !strings.Contains(text, "U+FFFD") {
		t.Errorf("binary output: error %v, valid %v, note %v", res.IsError, utf8.ValidString(text), strings.Contains(text, "U+FFFD"))
	}
	if !json.Valid(res.Structured) || !strings.Contains(decode[execOut](t, res).Stdout, "ok\uFFFD\uFFFD\n") {
		t.Errorf("binary structured output broken")
	}
}

// TestExecuteOutOfMemory: a command past its memory limit gets a failed result that
// says it ran out of memory and names the limit, whichever process the kernel killed.
func TestExecuteOutOfMemory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{MemoryLimit: 64 << 20})
	if e.m.MemoryLimit() == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no memory cgroup here: %s", e.m.Capabilities().MemoryCgroupError)
		}
		t.Skipf("no memory cgroup here: %s", e.m.Capabilities().MemoryCgroupError)
	}
	sess := newSession("s1", t.TempDir())
	fill := `s=$(head -c 200000000 /dev/zero | tr "\0" x)`
	for _, c := range []struct{ name, command, want string }{
		{"shell", fill + "; echo done", "out of memory: the command's processes may use 64 MiB together"},
		{"child", "bash -c '" + fill + "'; exit 3", "Exit code 3 after"},
	} {
		res, _ := e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": c.command})
		text := res.Text()
		if !res.IsError || res.ErrorKind != tool.KindFailed || !strings.Contains(text, c.want) || !strings.Contains(strings.ToLower(text), "out of memory") || !strings.Contains(text, "64 MiB") {
			t.Errorf("%s: %v %s: %q", c.name, res.IsError, res.ErrorKind, text)
		}
		var out struct {
			OOMKills int `json:"oom_kills"`
		}
		if err := json.Unmarshal(res.Structured, &out); err != nil || out.OOMKills != 1 {
			t.Errorf("%s: structured %s: want oom_kills 1", c.name, res.Structured)
		}
	}
}

// TestExecuteIsolated: through the tool, an isolated sandbox writes its root and
// nothing else, and reaches no host listener.
func TestExecuteIsolated(t *testing.T) {
	t.Parallel()
	if sandbox.Detect().Isolation == "" {
		t.Skip("this host cannot isolate")
	}
	e := newEnv(t, sandbox.Config{Mode: sandbox.ModeIsolated})
	dir, outside := t.TempDir(), t.TempDir()
	sess := newSession("s1", dir)
	res, _ := e.call(t, context.Background(), sess, "execute_command", map[string]any{
		"command": fmt.Sprintf(`echo inside > in.txt && cat in.txt; echo outside > %s/out.txt`, outside),
	})
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "inside") || !strings.Contains(res.Text(), "Read-only file system") {
		t.Errorf("isolated write: %q %s", res.ErrorKind, res.Text())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "in.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("inside file: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "out.txt")); err == nil {
		t.Error("the isolated command wrote outside its root")
	}
}

// TestOutputLostIsNotTheCap: output the daemon could not save is reported as lost,
// with the cause, never as the output cap being reached.
func TestOutputLostIsNotTheCap(t *testing.T) {
	t.Parallel()
	var w strings.Builder
	writeOutput(&w, "job_1", [2]shown{}, sandbox.JobInfo{StdoutLost: 3, StdoutError: "no space left on device", StderrDropped: 7}, true)
	got := w.String()
	for _, want := range []string{
		"[stdout: 3 bytes of output were lost: the daemon could not save them (no space left on device)]",
		"[stderr: the output cap was reached; 7 later bytes were discarded]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output notes:\n%s\nwant the line %q", got, want)
		}
	}
	if strings.Contains(got, "stdout: the output cap") {
		t.Errorf("lost output reported as the cap:\n%s", got)
	}
}

// TestLostOutputShown: output the daemon could not save but kept in memory is shown,
// saying which part it is.
func TestLostOutputShown(t *testing.T) {
	t.Parallel()
	var w strings.Builder
	writeOutput(&w, "job_1", [2]shown{}, sandbox.JobInfo{
		StdoutLost: 40, StdoutError: "no space left on device", StdoutLostTail: "/dev/sda1 100%",
		StderrLost: 9, StderrError: "no space left on device", StderrLostTail: "disk full"}, true)
	want := "(no output)\n" +
		"[stdout: 40 bytes of output were lost: the daemon could not save them (no space left on device); their last 14 bytes, kept in memory:]\n/dev/sda1 100%\n" +
		"[stderr: 9 bytes of output were lost: the daemon could not save them (no space left on device); kept in memory, they were:]\ndisk full\n"
	if got := w.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestDescribeStalledAtMemoryLimit: a command that reached its memory limit and was
// stopped for another reason (its timeout: held at the limit, it stalled reclaiming
// memory rather than being killed) says it reached the limit, so that the model asks
// for less memory rather than more time; one that stayed below it says nothing of it.
func TestDescribeStalledAtMemoryLimit(t *testing.T) {
	t.Parallel()
	const limit = 256 << 20
	for _, c := range []struct {
		name string
		info sandbox.JobInfo
		want bool
	}{
		{"timeout at limit", sandbox.JobInfo{Status: sandbox.StatusTimeout, Reason: "its timeout of 3m0s passed", MemoryLimit: limit, MemoryPeak: limit + 4096}, true},
		{"killed at limit", sandbox.JobInfo{Status: sandbox.StatusKilled, Reason: "killed on request", MemoryLimit: limit, MemoryPeak: limit}, true},
		{"timeout below limit", sandbox.JobInfo{Status: sandbox.StatusTimeout, Reason: "its timeout of 3m0s passed", MemoryLimit: limit, MemoryPeak: limit / 2}, false},
		{"exited at limit", sandbox.JobInfo{Status: sandbox.StatusExited, ExitCode: new(int), MemoryLimit: limit, MemoryPeak: limit}, false},
		{"no cgroup", sandbox.JobInfo{Status: sandbox.StatusTimeout, Reason: "its timeout of 3m0s passed"}, false},
	} {
		text := describe(c.info)
		if got := strings.Contains(text, "reached their memory limit of 256 MiB"); got != c.want {
			t.Errorf("%s: mentions the limit %v, want %v: %q", c.name, got, c.want, text)
		}
	}
}

// TestCommandInRemovedWorkdir: a session whose working directory was removed (a
// checkout deleted and cloned again) answered execute_command with
// `path "": not a directory (it does not exist)`, invalid_args, naming no path the
// model gave. It now says the working directory is gone, as the file tools do.
func TestCommandInRemovedWorkdir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	dir := filepath.Join(t.TempDir(), "checkout")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sess := newSession("s1", dir)
	e.mustCall(t, sess, "execute_command", map[string]any{"command": "true"})
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	for _, args := range []map[string]any{{"command": "ls"}, {"command": "ls", "cwd": "sub"}, {"command": "ls", "background": true}} {
		res, _ := e.call(t, context.Background(), sess, "execute_command", args)
		if !res.IsError || res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "working directory does not exist any more: "+dir) {
			t.Errorf("execute_command %v in a removed working directory: %s %q, want unavailable saying the working directory is gone", args, res.ErrorKind, res.Text())
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.mustCall(t, sess, "execute_command", map[string]any{"command": "true"})
}

// TestExecuteOutputAsATerminalShowsIt: colours and a progress bar rewritten with CR
// reach the model as a terminal would leave them, in the text; the structured output
// (what tool_chain scripts and MCP clients' code read) and read_job_output keep the
// bytes as written.
func TestExecuteOutputAsATerminalShowsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	res := e.mustCall(t, sess, "execute_command", map[string]any{"command": `printf '\033[1;32mPASS\033[0m ok\n'; for p in 10 50 100; do printf '\rfetching %3d%%' $p; done; printf '\n'; printf '\033[31mwarn\033[0m\n' >&2`})
	text := res.Text()
	if strings.ContainsAny(text, "\x1b\r") || !strings.Contains(text, "PASS ok\nfetching 100%\n") || !strings.HasSuffix(text, "stderr:\nwarn") || strings.Contains(text, "fetching  50%") {
		t.Errorf("text %q: want the output as a terminal shows it", text)
	}
	out := decode[execOut](t, res)
	if out.Stdout != "\x1b[1;32mPASS\x1b[0m ok\n\rfetching  10%\rfetching  50%\rfetching 100%\n" || out.Stderr != "\x1b[31mwarn\x1b[0m\n" {
		t.Errorf("structured stdout %q, stderr %q: want the bytes as written", out.Stdout, out.Stderr)
	}
	raw := decode[readOut](t, e.mustCall(t, sess, "read_job_output", map[string]any{"job_id": out.JobID, "offset": 0}))
	if !strings.HasPrefix(raw.Data, "\x1b[1;32mPASS\x1b[0m ok\n\rfetching  10%\rfetching  50%") {
		t.Errorf("read_job_output %q: want the raw bytes", raw.Data)
	}
}

// TestStructuredOutputKeepsData: a script reads a command's structured stdout as data:
// CRLF rows, a file with CR line ends, a lone CR inside a field. The terminal view
// (the text) shows the last rewrite of each line; the structured stdout loses nothing,
// in execute_command and in await_job.
func TestStructuredOutputKeepsData(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	const data = "id,name\r\n1,ada\r\nmac\rline2\rline3\n"
	cmd := `printf 'id,name\r\n1,ada\r\nmac\rline2\rline3\n'`
	res := e.mustCall(t, sess, "execute_command", map[string]any{"command": cmd})
	if out := decode[execOut](t, res); out.Stdout != data || out.Truncated {
		t.Errorf("execute_command structured stdout %q (truncated %v), want %q", out.Stdout, out.Truncated, data)
	}
	if !strings.HasSuffix(res.Text(), "1,ada\nline3") {
		t.Errorf("text %q: want the terminal's view", res.Text())
	}
	bg := decode[execOut](t, e.mustCall(t, sess, "execute_command", map[string]any{"command": cmd, "background": true}))
	aw := decode[execOut](t, e.mustCall(t, sess, "await_job", map[string]any{"job_id": bg.JobID, "timeout_ms": 10000}))
	if aw.Stdout != data {
		t.Errorf("await_job structured stdout %q, want %q", aw.Stdout, data)
	}
}

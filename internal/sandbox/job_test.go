package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestExitCodesAndStreams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command          string
		status           Status
		code             int // -1: no exit code
		stdout, stderr   string
		reasonSubstrings string
	}{
		{"echo out; echo err >&2", StatusExited, 0, "out\n", "err\n", ""},
		{"printf a; printf b >&2; printf c; exit 3", StatusExited, 3, "ac", "b", ""},
		{"exit 255", StatusExited, 255, "", "", ""},
		{"false", StatusExited, 1, "", "", ""},
		{"no-such-command-xyz", StatusExited, 127, "", "no-such-command-xyz: command not found\n", ""},
		{"echo before; kill -KILL $$", StatusKilled, -1, "before\n", "", "signal killed"},
		{"echo 'unterminated", StatusExited, 2, "", "unexpected EOF", ""},
	}
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			for _, tt := range tests {
				j, info := run(t, sb, Cmd{Command: tt.command})
				if tt.status == StatusKilled && bc.cfg.Mode == ModeIsolated {
					// The shell is not the job's first process there: its death by
					// signal n arrives as exit code 128+n.
					tt.status, tt.code, tt.reasonSubstrings = StatusExited, 137, ""
				}
				if info.Status != tt.status || j.ExitCode() != tt.code || !strings.Contains(info.Reason, tt.reasonSubstrings) {
					t.Errorf("%q: status %s code %d reason %q; want %s %d %q", tt.command, info.Status, j.ExitCode(), info.Reason, tt.status, tt.code, tt.reasonSubstrings)
				}
				if got := output(t, j, Stdout); got != tt.stdout {
					t.Errorf("%q: stdout %q; want %q", tt.command, got, tt.stdout)
				}
				if got := output(t, j, Stderr); !strings.Contains(got, tt.stderr) || (tt.stderr == "" && got != "") {
					t.Errorf("%q: stderr %q; want it to contain %q", tt.command, got, tt.stderr)
				}
				if info.Backend != m.Backend() || info.EndedAt.IsZero() || info.PID == 0 {
					t.Errorf("%q: info %+v lacks backend, end or pid", tt.command, info)
				}
			}
		})
	}
}

// TestTimeoutKillsGroup: a timeout ends the shell and the sleep it started in the
// background; the sleep's pid is gone afterwards.
func TestTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			start := time.Now()
			// Long enough for the sleeps to be found before it passes on a loaded
			// machine (the namespaces backend took more than 700ms to start them).
			const timeout = 3 * time.Second
			j, err := sb.Start(context.Background(), Cmd{Command: "echo started; sleep 300 & sleep 301; echo never", Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			sleeps := sleepsOf(t, j, 2)
			info := wait(t, j)
			if info.Status != StatusTimeout || !strings.Contains(info.Reason, "timeout of 3s passed") {
				t.Errorf("status %s reason %q; want timeout", info.Status, info.Reason)
			}
			// The timeout ended it (status and reason above); the bound is a hang
			// guard, far below the sleeps' 300s.
			t.Logf("ended after %s (timeout %s, kill grace %s)", time.Since(start), timeout, m.cfg.KillGrace)
			if elapsed := time.Since(start); elapsed > timeout+m.cfg.KillGrace+30*time.Second {
				t.Errorf("took %s to end", elapsed)
			}
			if got := output(t, j, Stdout); got != "started\n" {
				t.Errorf("stdout %q", got)
			}
			for _, pid := range sleeps {
				if !eventually(20*time.Second, func() bool { return !alive(pid) }) {
					t.Errorf("sleep %d survived the timeout", pid)
				}
			}
			groupGone(t, info.PID)
		})
	}
}

// sleepsOf waits until the job's process group holds n sleep processes.
func sleepsOf(t *testing.T, j *Job, n int) []int {
	t.Helper()
	var pids []int
	ok := eventually(20*time.Second, func() bool {
		pids = pids[:0]
		for pid, comm := range groupMembers(j.Info().PID) {
			if comm == "sleep" {
				pids = append(pids, pid)
			}
		}
		return len(pids) >= n
	})
	if !ok {
		t.Fatalf("found sleeps %v in group %d, want %d", pids, j.Info().PID, n)
	}
	return pids
}

func TestCancelAndKill(t *testing.T) {
	t.Parallel()
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})

			ctx, cancel := context.WithCancel(context.Background())
			j, err := sb.Start(ctx, Cmd{Command: "sleep 300 & wait"})
			if err != nil {
				t.Fatal(err)
			}
			sleeps := sleepsOf(t, j, 1)
			cancel()
			info := wait(t, j)
			if info.Status != StatusKilled || !strings.Contains(info.Reason, "cancelled") {
				t.Errorf("after cancel: status %s reason %q", info.Status, info.Reason)
			}
			if !eventually(20*time.Second, func() bool { return !alive(sleeps[0]) }) {
				t.Errorf("sleep %d survived the cancel", sleeps[0])
			}

			j, err = sb.Start(context.Background(), Cmd{Command: "trap '' TERM; sleep 300 & wait", Timeout: NoTimeout})
			if err != nil {
				t.Fatal(err)
			}
			sleepsOf(t, j, 1)
			j.Kill()
			j.Kill() // a second request is harmless
			info = wait(t, j)
			if info.Status != StatusKilled || info.Reason != "killed on request" {
				t.Errorf("after Kill: status %s reason %q", info.Status, info.Reason)
			}
			if _, err := sb.Start(ctx, Cmd{Command: "true"}); !errors.Is(err, context.Canceled) {
				t.Errorf("Start with a cancelled context: %v", err)
			}
		})
	}
}

// TestLeftoversKilled: what the shell leaves in its group dies when it exits.
func TestLeftoversKilled(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{})
	sb, _ := newSandbox(t, m, Options{})
	j, info := run(t, sb, Cmd{Command: "sleep 300 & echo $!"})
	pid := strings.TrimSpace(output(t, j, Stdout))
	if info.Status != StatusExited || j.ExitCode() != 0 || pid == "" {
		t.Fatalf("status %s code %d pid %q", info.Status, j.ExitCode(), pid)
	}
	groupGone(t, info.PID)
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			cfg := bc.cfg
			cfg.EnvAllow = []string{allowedEnv}
			m := newManager(t, cfg)
			sb, root := newSandbox(t, m, Options{})
			j, info := run(t, sb, Cmd{Command: "env", Env: []string{"EXTRA=1", "HOME=/overridden-later-wins"}})
			if info.Status != StatusExited || j.ExitCode() != 0 {
				t.Fatalf("env: %+v", info)
			}
			env := map[string]string{}
			for line := range strings.Lines(output(t, j, Stdout)) {
				k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
				env[k] = v
			}
			if _, ok := env[secretEnv]; ok {
				t.Errorf("%s leaked into the command", secretEnv)
			}
			want := map[string]string{allowedEnv: "passed-through", "EXTRA": "1", "HOME": "/overridden-later-wins", "SHELL": m.caps.Bash, "PWD": root,
				"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.bareRepository", "GIT_CONFIG_VALUE_0": "explicit"}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("%s=%q; want %q", k, env[k], v)
				}
			}
			if env["PATH"] == "" || !strings.HasPrefix(env["TMPDIR"], m.dir) {
				t.Errorf("PATH %q TMPDIR %q", env["PATH"], env["TMPDIR"])
			}
			for k := range env {
				switch {
				case k == "" || k == "_" || k == "SHLVL" || k == "PWD" || strings.HasPrefix(k, "LC_"):
				case strings.Contains("PATH LANG LANGUAGE TERM TZ USER LOGNAME HOME TMPDIR SHELL EXTRA GIT_CONFIG_COUNT GIT_CONFIG_KEY_0 GIT_CONFIG_VALUE_0 "+allowedEnv, k):
				default:
					t.Errorf("unexpected variable %s=%q", k, env[k])
				}
			}
			j, _ = run(t, sb, Cmd{Command: "echo x > \"$TMPDIR/t\" && cat \"$TMPDIR/t\""})
			if got := output(t, j, Stdout); got != "x\n" {
				t.Errorf("TMPDIR is not writable: %q %q", got, output(t, j, Stderr))
			}
			// HOME is the sandbox's own writable directory outside the workspace: tool
			// caches and dotfiles (go build, pip, npm, git config --global) do not land
			// in the project the model works on.
			j, _ = run(t, sb, Cmd{Command: `mkdir -p ~/.cache/go-build && git config --global user.name agent && echo "$HOME"`})
			home := strings.TrimSpace(output(t, j, Stdout))
			if j.ExitCode() != 0 || !strings.HasPrefix(home, m.dir) || within(root, home) {
				t.Errorf("HOME %q (exit %d, %q): want a writable directory under %s, outside %s", home, j.ExitCode(), output(t, j, Stderr), m.dir, root)
			}
			if ents, _ := os.ReadDir(root); len(ents) != 0 {
				t.Errorf("the workspace got %v", ents)
			}
			if _, err := sb.Start(context.Background(), Cmd{Command: "true", Env: []string{"1BAD=x"}}); !errors.Is(err, ErrInvalidCommand) {
				t.Errorf("bad env entry: %v", err)
			}
		})
	}
}

// A directory laid out as a bare repository whose config names programs
// (core.fsmonitor here) must not run them when a command that reads as harmless
// (`cd evil && git status`) lands in it: the file tools may write such a directory
// without asking in accept_edits mode, and only .git directories are immune.
// Commands run with safe.bareRepository=explicit; ordinary repositories still work.
func TestGitIgnoresImplicitBareRepositories(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, root := newSandbox(t, m, Options{})
			for name, content := range map[string]string{
				"evil/HEAD":   "ref: refs/heads/main\n",
				"evil/config": "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch " + root + "/pwned; false\"\n",
			} {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range []string{"evil/objects", "evil/refs"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			j, _ := run(t, sb, Cmd{Command: "cd evil && git status"})
			if _, err := os.Stat(filepath.Join(root, "pwned")); err == nil {
				t.Errorf("git status ran the fsmonitor of an implicit bare repository (exit %d: %s)", j.ExitCode(), output(t, j, Stderr))
			}
			j, _ = run(t, sb, Cmd{Command: "mkdir repo && cd repo && git init -q && echo x > f && git status --short"})
			if got := output(t, j, Stdout); j.ExitCode() != 0 || got != "?? f\n" {
				t.Errorf("an ordinary repository: exit %d, %q, %q", j.ExitCode(), got, output(t, j, Stderr))
			}
		})
	}
}

func TestStartRejects(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{MaxTimeout: time.Minute, DefaultTimeout: time.Second})
	sb, root := newSandbox(t, m, Options{})
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cmd Cmd
		err error
	}{
		{Cmd{Command: "true", Dir: ".."}, ErrOutsideRoot},
		{Cmd{Command: "true", Dir: outside}, ErrOutsideRoot},
		{Cmd{Command: "true", Dir: "escape"}, ErrOutsideRoot},
		{Cmd{Command: "true", Dir: "missing"}, ErrNotDir},
		{Cmd{Command: "true", Dir: "file"}, ErrNotDir},
		{Cmd{Command: "  "}, ErrInvalidCommand},
		{Cmd{Command: "echo \x00"}, ErrInvalidCommand},
		{Cmd{Command: strings.Repeat("x", 200<<10)}, ErrInvalidCommand},
		{Cmd{Command: "true", Timeout: time.Hour}, ErrInvalidCommand},
	}
	for _, tt := range tests {
		if _, err := sb.Start(context.Background(), tt.cmd); !errors.Is(err, tt.err) {
			t.Errorf("Start(%.40q, dir %q): %v; want %v", tt.cmd.Command, tt.cmd.Dir, err, tt.err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	j, _ := run(t, sb, Cmd{Command: "pwd", Dir: "sub"})
	if got := output(t, j, Stdout); got != filepath.Join(root, "sub")+"\n" {
		t.Errorf("pwd in sub: %q", got)
	}
	_, info := run(t, sb, Cmd{Command: "sleep 5"}) // the default timeout, 1 s
	// The default 1s timeout, not the 5s sleep, ended it: the reason names it
	// (a lower bound on the duration cannot flake from load).
	if info.Status != StatusTimeout || !strings.Contains(info.Reason, "timeout of 1s passed") || info.Duration < time.Second {
		t.Errorf("default timeout: %s (%q) after %s", info.Status, info.Reason, info.Duration)
	}
}

// TestOutputCap: 200 MB through a 1 MiB cap keeps the first MiB, counts the rest and
// lets the command finish.
func TestOutputCap(t *testing.T) {
	t.Parallel()
	const total = 200_000_000
	m := newManager(t, Config{OutputCap: 1 << 20})
	sb, _ := newSandbox(t, m, Options{})
	j, info := run(t, sb, Cmd{Command: "head -c 200000000 /dev/zero; echo done >&2", Timeout: time.Minute})
	if info.Status != StatusExited || j.ExitCode() != 0 {
		t.Fatalf("status %s code %d", info.Status, j.ExitCode())
	}
	if info.StdoutBytes != 1<<20 || info.StdoutDropped != total-1<<20 || !info.Truncated {
		t.Errorf("stdout kept %d dropped %d truncated %v", info.StdoutBytes, info.StdoutDropped, info.Truncated)
	}
	if got := output(t, j, Stderr); got != "done\n" || info.StderrDropped != 0 {
		t.Errorf("stderr %q dropped %d", got, info.StderrDropped)
	}
	fi, err := os.Stat(j.logs[0].path)
	if err != nil || fi.Size() != 1<<20 {
		t.Errorf("log file: %v, size %d", err, fi.Size())
	}
}

// TestReadOutputRange: random binary output read back in random-sized pieces
// concatenates to the original, byte for byte.
func TestReadOutputRange(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{})
	sb, root := newSandbox(t, m, Options{})
	want := make([]byte, 3<<20+12345)
	rand.Read(want)
	if err := os.WriteFile(filepath.Join(root, "blob"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	j, _ := run(t, sb, Cmd{Command: "cat blob; cat blob >&2"})
	for _, stream := range []string{Stdout, Stderr} {
		h := sha256.New()
		var off int64
		for {
			n, _ := rand.Int(rand.Reader, big.NewInt(200_000))
			data, next, err := j.ReadOutputRange(stream, off, int(n.Int64())+1)
			if err != nil {
				t.Fatal(err)
			}
			if next != off+int64(len(data)) {
				t.Fatalf("next %d after %d bytes from %d", next, len(data), off)
			}
			if len(data) == 0 {
				break
			}
			h.Write(data)
			off = next
		}
		if sum := sha256.Sum256(want); !bytes.Equal(h.Sum(nil), sum[:]) || off != int64(len(want)) {
			t.Errorf("%s: read %d bytes, sha256 mismatch or short", stream, off)
		}
	}
	size := j.Size(Stdout)
	for _, off := range []int64{size, size + 1, size + 1<<30} {
		data, next, err := j.ReadOutputRange(Stdout, off, 10)
		if err != nil || len(data) != 0 || next != off {
			t.Errorf("ReadOutputRange past end (%d): %d bytes, next %d, %v", off, len(data), next, err)
		}
	}
	if _, _, err := j.ReadOutputRange(Stdout, -1, 10); err == nil {
		t.Error("negative offset accepted")
	}
	if _, _, err := j.ReadOutputRange("stdin", 0, 10); !errors.Is(err, ErrInvalidStream) {
		t.Errorf("bad stream: %v", err)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{})
	sb, _ := newSandbox(t, m, Options{})
	j, _ := run(t, sb, Cmd{Command: "seq 1 100000; printf 'no newline' >&2"})
	tests := []struct {
		stream string
		n      int
		want   string
	}{
		{Stdout, 3, "99998\n99999\n100000\n"},
		{Stdout, 1, "100000\n"},
		{Stderr, 1, "no newline"},
		{Stderr, 5, "no newline"},
		{Stdout, 0, ""},
	}
	for _, tt := range tests {
		data, start, err := j.Tail(tt.stream, tt.n)
		if err != nil || string(data) != tt.want || start != j.Size(tt.stream)-int64(len(tt.want)) {
			t.Errorf("Tail(%s, %d) = %q at %d, %v; want %q", tt.stream, tt.n, data, start, err, tt.want)
		}
	}
}

// TestSessionsAreSeparate: a job started through one session's sandbox cannot be
// found through another's, and Release deletes the session's jobs.
func TestSessionsAreSeparate(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{})
	dir := t.TempDir()
	s1 := &tool.Session{ID: "s1", Workdir: dir, State: tool.NewState()}
	s2 := &tool.Session{ID: "s2", Workdir: dir, State: tool.NewState()}
	sb1, err := m.For(s1)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := m.For(s1); again != sb1 {
		t.Error("For made a second sandbox for the same session")
	}
	sb2, err := m.For(s2)
	if err != nil || sb2 == sb1 {
		t.Fatalf("For(s2) = %v, %v", sb2, err)
	}
	j, _ := run(t, sb1, Cmd{Command: "echo mine"})
	if got, err := sb1.Job(j.ID()); err != nil || got != j {
		t.Errorf("own job: %v, %v", got, err)
	}
	if _, err := sb2.Job(j.ID()); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("other session's job: %v", err)
	}
	if err := m.Release(context.Background(), s1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.ReadOutputRange(Stdout, 0, 10); !errors.Is(err, ErrOutputDiscarded) {
		t.Errorf("output after Release: %v", err)
	}
	if _, err := m.For(&tool.Session{ID: "s3", Workdir: "relative"}); err == nil {
		t.Error("For accepted a session without state")
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{MaxRunningJobs: 2, JobRetention: 3})
	sb, _ := newSandbox(t, m, Options{})
	var running []*Job
	for range 2 {
		j, err := sb.Start(context.Background(), Cmd{Command: "sleep 300", Timeout: NoTimeout})
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, j)
	}
	if _, err := sb.Start(context.Background(), Cmd{Command: "true"}); !errors.Is(err, ErrTooManyJobs) {
		t.Errorf("third running job: %v", err)
	}
	for _, j := range running {
		j.Kill()
		wait(t, j)
	}
	var ids []string
	for range 5 {
		j, _ := run(t, sb, Cmd{Command: "true"})
		ids = append(ids, j.ID())
	}
	// Eviction runs at each start: three finished jobs are kept, plus the newest.
	if n := len(sb.Jobs()); n != 4 {
		t.Errorf("%d jobs kept; want 4", n)
	}
	if _, err := sb.Job(ids[0]); !errors.Is(err, ErrJobNotFound) {
		t.Errorf("the oldest job was not evicted: %v", err)
	}
	if _, err := sb.Job(ids[4]); err != nil {
		t.Errorf("the newest job was evicted: %v", err)
	}
}

// fullDiskLog is an output log of limit bytes on /dev/full, which answers ENOSPC as a
// full disk does, copying what is written to w; done closes when w is closed and the
// copy is over.
func fullDiskLog(t *testing.T, limit int64) (o *outputLog, w *os.File, done chan struct{}) {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	o = &outputLog{path: "/dev/full", limit: limit}
	done = make(chan struct{})
	go func() { defer close(done); o.copyFrom(r, full, func() {}) }()
	return o, w, done
}

// TestOutputLostWhenTheDiskIsFull: a log that cannot be written (/dev/full answers
// ENOSPC, as a full disk does) counts the bytes as lost, not as beyond the cap, and
// says why without the log's path; the bytes past the cap are still dropped.
func TestOutputLostWhenTheDiskIsFull(t *testing.T) {
	t.Parallel()
	o, w, done := fullDiskLog(t, 1000)
	if _, err := w.Write(make([]byte, 1500)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	<-done
	if o.size.Load() != 0 || o.lost.Load() != 1000 || o.dropped.Load() != 500 {
		t.Errorf("kept %d, lost %d, dropped %d; want 0, 1000, 500", o.size.Load(), o.lost.Load(), o.dropped.Load())
	}
	if got := o.writeErr(); got != "no space left on device" {
		t.Errorf("writeErr = %q, want the cause alone", got)
	}
	// What was lost (not what was beyond the cap) is kept in memory: 1000 zero bytes.
	if got := o.lostText(); got != string(make([]byte, 1000)) {
		t.Errorf("lost tail: %d bytes, want the 1000 lost", len(got))
	}
}

// TestLostOutputTailKept: on a full disk the last lostTailBytes of a stream's lost
// output stay in memory for the result: the end of what a command said (df, the
// error of the write that filled the disk) is what the model needs.
func TestLostOutputTailKept(t *testing.T) {
	t.Parallel()
	o, w, done := fullDiskLog(t, 1<<30)
	var all strings.Builder
	for i := range 3000 {
		line := fmt.Sprintf("line %d of the output\n", i)
		all.WriteString(line)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	<-done
	want := all.String()[all.Len()-lostTailBytes:]
	if got := o.lostText(); got != want {
		t.Errorf("lost tail: %d bytes ending %q; want the last %d bytes", len(got), got[max(0, len(got)-40):], lostTailBytes)
	}
	if o.lost.Load() != int64(all.Len()) {
		t.Errorf("lost %d of %d", o.lost.Load(), all.Len())
	}
}

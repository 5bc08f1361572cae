package testdaemon

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Build compiles cmd/toolserverd into a temporary directory and returns the binary's
// path, for tests that run (and kill) the real process.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toolserverd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/toolserverd/toolserverd/cmd/toolserverd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Exec starts cmd (a toolserverd process logging JSON to stderr) with env added to the
// test's environment, waits for its "toolserverd listening" line and returns its base
// URL. The process is killed when the test ends, if it is still running.
func Exec(t testing.TB, cmd *exec.Cmd, env ...string) string {
	t.Helper()
	url, _ := ExecStartLog(t, cmd, env...)
	return url
}

// ExecStartLog is Exec, also returning the log lines the process wrote before it
// listened (its start-up: recovery of what a previous run left, among others).
func ExecStartLog(t testing.TB, cmd *exec.Cmd, env ...string) (url string, startLog []string) {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type started struct {
		addr  string
		lines []string
	}
	addr := make(chan started, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		var lines []string
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "toolserverd listening" {
				addr <- started{l.Addr, lines}
				break
			}
			lines = append(lines, sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		return "http://" + a.addr, a.lines
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon did not start listening")
	}
	return "", nil
}

package deploy_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repo is the repository root, relative to this package.
const repo = ".."

func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// documentedKeys are the configuration keys listed in docs/config.md's table (the
// config package's own test keeps that table complete). Only these may be set as
// TOOLSERVER_ + KEY.
func documentedKeys(t *testing.T) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	row := regexp.MustCompile("^\\| `([a-z0-9_.]+)` \\|")
	for line := range strings.Lines(string(readRepoFile(t, "docs/config.md"))) {
		if m := row.FindStringSubmatch(line); m != nil {
			keys[m[1]] = true
		}
	}
	for _, k := range config.Keys() {
		if !keys[k] {
			t.Fatalf("config key %s is not in docs/config.md", k)
		}
	}
	return keys
}

// checkEnvName fails unless name is a variable the daemon (or, with client, the
// toolserverctl in the same image) reads.
func checkEnvName(t *testing.T, keys map[string]bool, where, name string, client bool) {
	t.Helper()
	switch {
	case name == "TOOLSERVER_CONFIG":
		// The config file, documented in docs/config.md's introduction.
	case client && (name == "TOOLSERVER_URL" || name == "TOOLSERVER_API_KEY"):
		// toolserverctl's variables.
	case strings.HasPrefix(name, "TOOLSERVER_"):
		key := strings.ToLower(strings.TrimPrefix(name, "TOOLSERVER_"))
		found := false
		for k := range keys {
			if strings.ReplaceAll(k, ".", "_") == key {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %s is no configuration key (docs/config.md); the daemon would ignore it", where, name)
		}
	case name == "GOMEMLIMIT":
	case name == "POD_IP":
		// The downward API's pod IP, for TOOLSERVER_CLUSTER_ADVERTISE_URL.
	default:
		t.Errorf("%s: unexpected environment variable %s", where, name)
	}
}

// binDir holds the binaries built by the Dockerfile's build command, once per test
// process.
var (
	binOnce sync.Once
	binDir  string
	binErr  string
)

// imageBinaries builds toolserverd and toolserverctl with the Dockerfile's own go
// build command line (see dockerfile_test.go) and returns the directory holding them.
func imageBinaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolserverd-image-")
		if err != nil {
			binErr = err.Error()
			return
		}
		binDir = dir
		df := parseDockerfile(t, readRepoFile(t, "Dockerfile"))
		argv, env, err := df.goBuild(runtime.GOOS, runtime.GOARCH, dir+"/")
		if err != nil {
			binErr = err.Error()
			return
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = "the Dockerfile's build command failed: " + err.Error() + "\n" + string(out)
		}
	})
	if binErr != "" {
		t.Fatal(binErr)
	}
	return binDir
}

// proc is a toolserverd binary running as a child process.
type proc struct {
	cmd     *exec.Cmd
	url     string
	logs    *logBuffer
	exited  chan struct{} // closed when the process has exited; then waitErr is set
	waitErr error
}

type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startDaemon runs bin with args and exactly env (plus PATH and HOME), waits for its
// "toolserverd listening" log line and returns its URL.
func startDaemon(t *testing.T, bin string, args, env []string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: &logBuffer{}, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.logs.add(sc.Text())
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "toolserverd listening" {
				addr <- l.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // an error when it has exited already
		<-p.exited
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.exited:
		t.Fatalf("toolserverd exited before listening: %v\n%s", p.waitErr, p.logs)
	case <-time.After(90 * time.Second):
		t.Fatalf("toolserverd did not start listening\n%s", p.logs)
	}
	return p
}

// stop sends SIGTERM (what docker stop, Kubernetes and systemd send) and returns how
// long the daemon took to exit; it must exit with status 0.
func (p *proc) stop(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Fatalf("toolserverd exited with %v after SIGTERM\n%s", p.waitErr, p.logs)
		}
	case <-time.After(within):
		t.Fatalf("toolserverd still running %s after SIGTERM", within)
	}
	return time.Since(start)
}

// get returns the status of GET url with an optional bearer key.
func get(t *testing.T, url, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

// waitingProc is the real binary started against a store that may not be there, its
// JSON log lines readable as they come.
type waitingProc struct {
	cmd   *exec.Cmd
	lines chan map[string]any
	done  chan struct{} // closed when the process has exited (exitErr is then set)

	mu      sync.Mutex
	all     []string
	exitErr error
}

func startWaiting(t *testing.T, bin, store string, env ...string) *waitingProc {
	t.Helper()
	return startWaitingIn(t, bin, t.TempDir(), store, env...)
}

// startWaitingIn is startWaiting with the data directory dataDir.
func startWaitingIn(t *testing.T, bin, dataDir, store string, env ...string) *waitingProc {
	t.Helper()
	p := &waitingProc{lines: make(chan map[string]any, 1024), done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--store", store, "--log-format", "json")
	p.cmd.Env = append(append(os.Environ(), "TOOLSERVER_REPLICA_ID=storewait", "TOOLSERVER_AUTH_UNAUTHENTICATED=true",
		"TOOLSERVER_PERMISSIONS_ALLOW=execute_command"), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.all = append(p.all, sc.Text())
			p.mu.Unlock()
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				select {
				case p.lines <- l:
				default:
				}
			}
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// next returns the next JSON log line whose msg is one of msgs; it fails the test if
// the process exits first or nothing comes within limit (a hang guard, not a timing
// assertion).
func (p *waitingProc) next(t *testing.T, limit time.Duration, msgs ...string) map[string]any {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case l := <-p.lines:
			for _, m := range msgs {
				if l["msg"] == m {
					return l
				}
			}
		case <-p.done:
			t.Fatalf("the daemon exited (%v) before logging %q:\n%s", p.err(), msgs, p.log())
		case <-timer.C:
			t.Fatalf("no %q logged within %s:\n%s", msgs, limit, p.log())
		}
	}
}

// exit waits for the process to end and returns its exit code.
func (p *waitingProc) exit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("the daemon did not exit within %s:\n%s", limit, p.log())
	}
	var ee *exec.ExitError
	if err := p.err(); errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return 0
}

func (p *waitingProc) err() error { p.mu.Lock(); defer p.mu.Unlock(); return p.exitErr }

func (p *waitingProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.all, "\n")
}

func (p *waitingProc) count(msg string) int {
	n := 0
	for _, l := range strings.Split(p.log(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			n++
		}
	}
	return n
}

// closedPort is a loopback address where connections are refused, held until the
// test ends so that no other listener of the test run can take it.
func closedPort(t *testing.T) string {
	t.Helper()
	return testnet.RefusedAddr(t)
}

const retryMsg = "store unreachable; trying again"

// TestStartWaitsForPostgres: a daemon started before its PostgreSQL (a node restart,
// a compose up) waits for it, logging each attempt, instead of exiting at once; once
// the cluster is up on that port it migrates, listens and runs a tool call.
func TestStartWaitsForPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary and starts a PostgreSQL cluster")
	}
	cl := pgtest.NewCluster(t) // made, not started: nothing listens at its URL
	bin := buildBinary(t)
	start := time.Now()
	p := startWaiting(t, bin, cl.URL(), "TOOLSERVER_STORE_CONNECT_TIMEOUT=2m")
	// Four attempts refused (about 2 s): the daemon is waiting, not exiting.
	first := p.next(t, time.Minute, retryMsg)
	for range 3 {
		p.next(t, time.Minute, retryMsg)
	}
	if first["err"] == nil || !strings.Contains(fmt.Sprint(first["err"]), "refused") || first["retry_in"] == nil || first["attempt"] != float64(1) {
		t.Errorf("first attempt's log line: %v; want attempt 1, the error and the next delay", first)
	}
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	reachable := p.next(t, time.Minute, "store reachable")
	l := p.next(t, time.Minute, "toolserverd listening")
	listening := time.Now()
	c := client.New("http://" + fmt.Sprint(l["addr"]))
	ctx := context.Background()
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	err = c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: "x", Name: "execute_command",
		Arguments: json.RawMessage(`{"command":"echo served after the wait"}`)}}}, func(ev client.Event) error {
		if ev.Type == "message" {
			got = ev.Content()
		}
		return nil
	})
	if err != nil || !strings.Contains(got, "served after the wait") {
		t.Fatalf("tool call after the wait: %q, %v", got, err)
	}
	t.Logf("waited %s (%d refused attempts, %v) before PostgreSQL was up; listening %s after pg_ctl start returned; first call served %s after",
		up.Sub(start).Round(time.Millisecond), p.count(retryMsg), reachable["waited"], listening.Sub(up).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}

// TestStartStoreRefusalFailsAtOnce: a PostgreSQL that answers and refuses (here: the
// database does not exist) is not waited for: the daemon exits with status 1 at the
// first attempt, saying why, though store_connect_timeout would allow minutes.
func TestStartStoreRefusalFailsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database_storewait"
	bin := buildBinary(t)
	p := startWaiting(t, bin, u.String(), "TOOLSERVER_STORE_CONNECT_TIMEOUT=10m")
	if code := p.exit(t, 5*time.Minute); code != 1 {
		t.Fatalf("exit status %d, want 1:\n%s", code, p.log())
	}
	if n := p.count(retryMsg); n != 0 {
		t.Errorf("%d retries of a database that does not exist:\n%s", n, p.log())
	}
	if !strings.Contains(p.log(), `database "no_such_database_storewait" does not exist`) {
		t.Errorf("the message does not say what is wrong:\n%s", p.log())
	}
}

// TestStartStoreWaitStops: SIGTERM while the daemon waits for its store ends the wait
// and the process, with status 0 (it was asked to stop), and a wait that runs out
// exits with status 1 and a message naming store_connect_timeout.
func TestStartStoreWaitStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	bin := buildBinary(t)
	nowhere := "postgres://postgres@" + closedPort(t) + "/postgres?sslmode=disable"

	t.Run("sigterm", func(t *testing.T) {
		p := startWaiting(t, bin, nowhere, "TOOLSERVER_STORE_CONNECT_TIMEOUT=10m")
		p.next(t, time.Minute, retryMsg)
		sent := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.exit(t, time.Minute); code != 0 {
			t.Errorf("exit status %d after SIGTERM during the wait, want 0:\n%s", code, p.log())
		}
		if !strings.Contains(p.log(), "stopped before starting") {
			t.Errorf("no log line says it stopped while waiting:\n%s", p.log())
		}
		t.Logf("exited %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
	})
	t.Run("timeout", func(t *testing.T) {
		p := startWaiting(t, bin, nowhere, "TOOLSERVER_STORE_CONNECT_TIMEOUT=2s")
		if code := p.exit(t, time.Minute); code != 1 {
			t.Fatalf("exit status %d when the wait ran out, want 1:\n%s", code, p.log())
		}
		if n := p.count(retryMsg); n < 2 {
			t.Errorf("%d logged retries in a 2s wait, want several:\n%s", n, p.log())
		}
		if !strings.Contains(p.log(), "store_connect_timeout 2s") || !strings.Contains(p.log(), "refused") {
			t.Errorf("the final message does not name the key and the error:\n%s", p.log())
		}
	})
}

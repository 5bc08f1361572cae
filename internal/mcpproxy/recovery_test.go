package mcpproxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// restartableServer is an mcp-go streamable-HTTP server on a fixed loopback port
// that a test takes down and brings back. Each start is a new server that knows
// none of the old sessions, as after an upstream process restarted.
type restartableServer struct {
	t    *testing.T
	addr string

	mu   sync.Mutex
	http *http.Server
	mcp  *mcpserver.StreamableHTTPServer
	done chan struct{}
}

func newRestartableServer(t *testing.T) *restartableServer {
	t.Helper()
	r := &restartableServer{t: t, addr: net.JoinHostPort("127.0.0.1", "0")}
	r.up()
	t.Cleanup(r.down)
	return r
}

func (r *restartableServer) url() string { return "http://" + r.addr + "/mcp" }

// up serves a fresh server on the port.
func (r *restartableServer) up() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.http != nil {
		r.t.Fatal("restartableServer: up while up")
	}
	var l net.Listener
	var err error
	// The port was ours a moment ago, but another listener of the test run may hold
	// it for a moment: try again, and say so.
	tries := 0
	if !eventually(5*time.Second, func() bool {
		if l, err = net.Listen("tcp", r.addr); err != nil && tries == 0 {
			r.t.Logf("restartableServer: listen on %s: %v; trying again for up to 5s", r.addr, err)
		}
		tries++
		return err == nil
	}) {
		r.t.Fatalf("listen on %s: %v", r.addr, err)
	}
	r.addr = l.Addr().String()
	s := mcpserver.NewMCPServer("restartable", "1.0.0")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("message")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("echo: " + req.GetString("message", "")), nil
		})
	// Stateful: it refuses session ids it did not issue (404), as a restarted
	// upstream does. mcp-go's default accepts any id without looking.
	r.mcp = mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true))
	r.http = &http.Server{Handler: r.mcp, ReadHeaderTimeout: 5 * time.Second}
	r.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			r.t.Errorf("serve: %v", err)
		}
	}(r.http, r.done)
}

// down stops the server abruptly, like kill -9: the listener and every connection
// close at once.
func (r *restartableServer) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.http == nil {
		return
	}
	_ = r.http.Close()
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.mcp.Shutdown(ctx)
	r.http, r.mcp = nil, nil
}

// failWith has server name health-checked and waits until it is failed with a
// retry scheduled (the supervisor's state, not only a dead connection) and
// returns its status.
func (h *harness) failWith(t *testing.T, name string) ServerStatus {
	t.Helper()
	h.m.server(name).checkNow()
	var st ServerStatus
	if !eventually(10*time.Second, func() bool {
		st = h.status(t, name)
		return st.State == StateFailed && !st.NextAttempt.IsZero()
	}) {
		t.Fatalf("server %s: state %s, next attempt %v; want failed with a retry scheduled", name, st.State, st.NextAttempt)
	}
	return st
}

// TestUpstreamRestartSkipsBackoff: a streamable-HTTP upstream that restarted
// refuses the old session, which shows it is up: the proxy reconnects at once,
// whether a call or a health check finds out, instead of waiting its backoff.
// A call while the server is in backoff is unavailable at once and says when the
// next attempt is. Backoff is set to 20-40s so that waiting through it cannot
// pass for promptness.
func TestUpstreamRestartSkipsBackoff(t *testing.T) {
	t.Parallel()
	const longBackoff = 40 * time.Second
	const prompt = 15 * time.Second // a hang guard, below the 20s floor of the backoff
	for _, tt := range []struct {
		name   string
		notice func(t *testing.T, h *harness) // how the proxy learns of the restart
	}{
		{"a call", func(t *testing.T, h *harness) {
			start := time.Now()
			res := h.call(t.Context(), t, "mcp__web__echo", `{"message":"after the restart"}`, nil)
			wantText(t, res, "echo: after the restart")
			if took := time.Since(start); took > prompt {
				t.Errorf("the call after the upstream restarted took %s", took)
			}
			t.Logf("call after the upstream restarted: %s", time.Since(start))
		}},
		{"a health check", func(t *testing.T, h *harness) {
			old := h.m.server("web").liveConn()
			start := time.Now()
			h.m.server("web").checkNow()
			if !eventually(prompt, func() bool { c := h.m.server("web").liveConn(); return c != nil && c != old }) {
				st := h.status(t, "web")
				t.Fatalf("no new connection %s after a health check met the restarted upstream: state %s, last error %q",
					prompt, st.State, st.LastError)
			}
			t.Logf("reconnected %s after the health check", time.Since(start))
			wantText(t, h.call(t.Context(), t, "mcp__web__echo", `{"message":"x"}`, nil), "echo: x")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newRestartableServer(t)
			// No periodic health checks: the test says when the proxy looks.
			h := newHarness(t, Config{HealthInterval: time.Hour, MinBackoff: longBackoff, MaxBackoff: longBackoff,
				Servers: []ServerConfig{{Name: "web", Transport: TransportStreamableHTTP, URL: up.url(), Enabled: true}}})
			h.start(t)
			h.waitState(t, "web", StateReady, 10*time.Second)

			// An outage: the server fails and waits its backoff.
			up.down()
			st := h.failWith(t, "web")
			if wait := time.Until(st.NextAttempt); wait < 15*time.Second {
				t.Fatalf("next attempt in %s, want the configured backoff of at least 20s", wait)
			}
			// Calls during the backoff answer at once, upstream down or up again.
			for _, upstream := range []string{"down", "up"} {
				if upstream == "up" {
					up.up()
				}
				start := time.Now()
				res := h.call(t.Context(), t, "mcp__web__echo", `{"message":"x"}`, nil)
				wantKind(t, res, tool.KindUnavailable)
				t.Logf("upstream %s: a call to a server in backoff answered in %s", upstream, time.Since(start))
				// At once: answered from the failed state (the error says when the
				// next attempt is), with no attempt made meanwhile (same restarts, same
				// next attempt). Waiting the 20-40s backoff would trip the hang guard.
				if took := time.Since(start); took > prompt {
					t.Errorf("upstream %s: a call to a server in backoff took %s, want at once", upstream, took)
				}
				if !strings.Contains(res.Text(), "(failed, down since") || !strings.Contains(res.Text(), "next attempt in") {
					t.Errorf("upstream %s: unavailable error %q does not say the server is failed and when the next attempt is", upstream, res.Text())
				}
				if now := h.status(t, "web"); now.State != StateFailed || now.Restarts != st.Restarts || !now.NextAttempt.Equal(st.NextAttempt) {
					t.Errorf("upstream %s: after the call: state %s, restarts %d, next attempt %v; want still failed, %d restarts, next attempt %v",
						upstream, now.State, now.Restarts, now.NextAttempt, st.Restarts, st.NextAttempt)
				}
			}
			// The operator restarts it rather than waiting.
			if err := h.m.Restart("web"); err != nil {
				t.Fatal(err)
			}
			rec := h.waitState(t, "web", StateReady, prompt)
			// The outage's error stays, dated before the recovery.
			if rec.LastError == "" || rec.LastErrorAt.IsZero() || !rec.LastErrorAt.Before(rec.Since) {
				t.Errorf("after recovering: last error %q at %v, ready since %v; want the outage's error, dated before",
					rec.LastError, rec.LastErrorAt, rec.Since)
			}
			before := rec.Restarts

			// The upstream restarts, as after kill -9 and a supervisor starting it again
			// 50ms later (by then the proxy's HTTP client has seen its sockets close).
			up.down()
			time.Sleep(50 * time.Millisecond)
			up.up()
			tt.notice(t, h)
			st = h.status(t, "web")
			if st.State != StateReady || st.Restarts <= before || !st.NextAttempt.IsZero() {
				t.Errorf("after reconnecting: state %s, restarts %d (before %d), next attempt %v; want ready, one more restart, none scheduled",
					st.State, st.Restarts, before, st.NextAttempt)
			}
		})
	}
}

// TestBackoffResetsOnConnect: the backoff counts the failed attempts of the current
// outage only. After an outage long enough to grow it, a connection lost at once
// continues it (a server crashing right after each connect is not restarted every
// first delay), while one that stayed up longer than the longest delay resets it:
// the first retry after that loss comes after the first delay.
func TestBackoffResetsOnConnect(t *testing.T) {
	t.Parallel()
	const first, longest = 100 * time.Millisecond, 3 * time.Second
	up := newRestartableServer(t)
	h := newHarness(t, Config{HealthInterval: time.Hour, MinBackoff: first, MaxBackoff: longest,
		Servers: []ServerConfig{{Name: "web", Transport: TransportStreamableHTTP, URL: up.url(), Enabled: true}}})
	h.start(t)
	h.waitState(t, "web", StateReady, 10*time.Second)

	up.down()
	h.failWith(t, "web")
	// Five failed attempts: the delay is up to 16× the first by now.
	var st ServerStatus
	if !eventually(20*time.Second, func() bool { st = h.status(t, "web"); return st.Restarts >= 5 && st.State == StateFailed }) {
		t.Fatalf("restarts %d, state %s; want 5 failed attempts", st.Restarts, st.State)
	}
	if grown := st.NextAttempt.Sub(st.Since); grown < 4*first {
		t.Fatalf("after %d failed attempts the next is %s after the failure; want a grown backoff", st.Restarts, grown)
	}
	up.up()
	h.waitState(t, "web", StateReady, 20*time.Second)

	// Lost at once: the outage goes on, its backoff keeps growing.
	up.down()
	st = h.failWith(t, "web")
	crash := st.NextAttempt.Sub(st.Since)
	if crash < 4*first {
		t.Errorf("a connection lost right after it was made: next attempt %s after, want the grown backoff (>= %s)", crash, 4*first)
	}
	up.up()
	h.waitState(t, "web", StateReady, 30*time.Second)

	// Up for longer than the longest delay: a new outage starts from the first.
	time.Sleep(longest + 200*time.Millisecond)
	up.down()
	st = h.failWith(t, "web")
	if delay := st.NextAttempt.Sub(st.Since); delay > first {
		t.Errorf("first retry of a new outage %s after the failure, want at most the first delay %s", delay, first)
	}
}

// TestCrashLoopBacksOff: a server that connects and dies a moment later, every
// time, is a crash loop: its backoff grows over the restarts as for a server that
// cannot connect at all, although each connection outlives the first delays. (It
// was respawned every first delay or so for ever, as each connection, up longer
// than the delay its outage had reached, started the outage over.)
func TestCrashLoopBacksOff(t *testing.T) {
	t.Parallel()
	const first = 50 * time.Millisecond // the child lives 300ms: 6× the first delay
	h := newHarness(t, Config{HealthInterval: time.Hour, MinBackoff: first, MaxBackoff: 5 * time.Second,
		Servers: []ServerConfig{hostileServer(t, "loop", "crashsoon")}})
	h.start(t)
	var st ServerStatus
	if !eventually(20*time.Second, func() bool {
		st = h.status(t, "loop")
		return st.Restarts >= 5 && st.State == StateFailed && !st.NextAttempt.IsZero()
	}) {
		t.Fatalf("restarts %d, state %s; want 5 restarts and a retry scheduled", st.Restarts, st.State)
	}
	if delay := st.NextAttempt.Sub(st.Since); delay < 4*first {
		t.Errorf("after %d connections that died soon after they were made, the next attempt is %s after the loss; want a grown backoff (>= %s)",
			st.Restarts, delay.Round(time.Millisecond), 4*first)
	}
}

// TestRestartAbandonsHungAttempt: a restart while a connection attempt hangs (a
// child that never answers initialize, with a long connect timeout) kills that
// child and starts a new attempt at once, rather than after the connect timeout.
func TestRestartAbandonsHungAttempt(t *testing.T) {
	t.Parallel()
	prefix, pids := pidRecorder(t)
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "silent", Transport: TransportStdio, Command: "sh",
		Args: []string{"-c", prefix + "sleep 600"}, ConnectTimeout: 10 * time.Minute, Enabled: true}}})
	h.start(t)
	if !eventually(10*time.Second, func() bool { return len(pids()) == 1 }) {
		t.Fatalf("children started: %v, want the first attempt's", pids())
	}
	first := pids()[0]
	for range 2 { // the second restart finds the second attempt hung in turn
		before := len(pids())
		if err := h.m.Restart("silent"); err != nil {
			t.Fatal(err)
		}
		if !eventually(20*time.Second, func() bool { return len(pids()) > before }) {
			st := h.status(t, "silent")
			t.Fatalf("no new child 20s after a restart (children %v, state %s, restarts %d)", pids(), st.State, st.Restarts)
		}
	}
	all := pids()
	for _, pid := range all[:len(all)-1] {
		if !eventually(20*time.Second, func() bool { return !processAlive(pid) }) {
			t.Errorf("child %d of an abandoned attempt is still alive", pid)
		}
	}
	if st := h.status(t, "silent"); st.State != StateConnecting || st.Restarts != 2 || len(all) != 3 || all[0] != first {
		t.Errorf("state %s, restarts %d, children %v; want a third attempt under way after two restarts", st.State, st.Restarts, all)
	}
	h.m.Stop()
	if pid := all[len(all)-1]; processAlive(pid) {
		t.Errorf("child %d alive after Stop", pid)
	}
}

// TestStopAbandonsOpeningSessions: removing or restarting a per_session server
// while a daemon session's upstream session is still opening (its child takes 30s
// to start) kills that child and ends the call waiting on it at once, unavailable.
func TestStopAbandonsOpeningSessions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		stop func(h *harness) error
	}{
		{"remove", func(h *harness) error { return h.m.Remove("slow") }},
		{"restart", func(h *harness) error { return h.m.Restart("slow") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := statefulServer(t, "slow")
			file := filepath.Join(t.TempDir(), "pids")
			// The second child, the daemon session's, is slow to start; the shared
			// connection's (first, and third after a restart) is not.
			cfg.Args = []string{"-c", `echo $$ >> "$1"; if [ "$(wc -l < "$1")" -eq 2 ]; then sleep 30; fi; exec "$0"`, cfg.Command, file}
			cfg.Command = "sh"
			cfg.ConnectTimeout = time.Minute
			pids := func() []string { b, _ := os.ReadFile(file); return strings.Fields(string(b)) }
			h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
			h.start(t)
			h.waitState(t, "slow", StateReady, 30*time.Second)

			type ended struct {
				res *tool.Result
				at  time.Time
			}
			res := make(chan ended, 1)
			go func() {
				r := h.sessionCall(context.Background(), t, "ses_a", "mcp__slow__count")
				res <- ended{r, time.Now()}
			}()
			if !eventually(10*time.Second, func() bool { return len(pids()) == 2 }) {
				t.Fatalf("the session's child did not start: children %v", pids())
			}
			opening, _ := strconv.Atoi(pids()[1])
			time.Sleep(200 * time.Millisecond) // well into its 30s start
			start := time.Now()
			if err := tt.stop(h); err != nil {
				t.Fatal(err)
			}
			// Remove returns when the server's shared connection is closed too; the
			// call is timed on its own.
			select {
			case e := <-res:
				wantKind(t, e.res, tool.KindUnavailable)
				if !strings.Contains(e.res.Text(), "while the session was opening") {
					t.Errorf("error %q does not say the session was opening", e.res.Text())
				}
				t.Logf("the call ended %s after the %s", e.at.Sub(start), tt.name)
			// Hang guard, below the session's 30s start: a call that waited for the
			// session to open would still be running.
			case <-time.After(20 * time.Second):
				t.Fatalf("the call waiting for its session still runs 20s after the %s", tt.name)
			}
			if !eventually(20*time.Second, func() bool { return len(groupMembers(opening)) == 0 }) {
				t.Errorf("the opening session's process group %d still has %v", opening, groupMembers(opening))
			}
			if tt.name == "restart" {
				h.waitState(t, "slow", StateReady, 30*time.Second)
				if n := h.sessionInt(t, "ses_b", "mcp__slow__count"); n != 1 {
					t.Errorf("a new session after the restart counted %d, want 1", n)
				}
			}
		})
	}
}

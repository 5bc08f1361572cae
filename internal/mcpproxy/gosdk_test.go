package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// goSDKServer is the test binary serving MCP with the official Go SDK (see
// goSDKServerEnv) as a process of its own.
type goSDKServer struct {
	mode, notes, port string
	url               string
	cmd               *exec.Cmd
	done              chan struct{}
}

// startGoSDKServer starts an HTTP go-sdk server in mode (http, http-stateless,
// http-json, sse) on port ("0": a free one it binds itself) and waits for its URL.
// A restart on a given port that finds it in use (another listener of the test run
// took it meanwhile) is tried again, and logged.
func startGoSDKServer(t *testing.T, mode, port, notes string, env ...string) *goSDKServer {
	t.Helper()
	const attempts = 10
	for attempt := 1; ; attempt++ {
		s, stderr := tryGoSDKServer(t, mode, port, notes, env...)
		if s != nil {
			return s
		}
		if port == "0" || attempt == attempts || !strings.Contains(stderr, "address already in use") {
			t.Fatalf("the go-sdk %s server did not say its URL (port %s, attempt %d): %s", mode, port, attempt, stderr)
		}
		t.Logf("the go-sdk %s server: port %s is in use (attempt %d of %d); trying again", mode, port, attempt, attempts)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// tryGoSDKServer starts the server once: the server, or nil and its stderr if it
// exited without saying its URL.
func tryGoSDKServer(t *testing.T, mode, port, notes string, env ...string) (*goSDKServer, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), goSDKServerEnv+"="+mode, "TOOLSERVERD_GOSDK_PORT="+port, "TOOLSERVERD_GOSDK_NOTES="+notes)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer // read once the process is gone
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &goSDKServer{mode: mode, notes: notes, cmd: cmd, done: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		urlc <- strings.TrimSpace(line)
		_ = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.kill)
	select {
	case s.url = <-urlc:
	case <-time.After(15 * time.Second):
		t.Fatalf("the go-sdk %s server did not say its URL", mode)
	}
	if s.url == "" {
		<-s.done
		return nil, stderr.String()
	}
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
		t.Fatalf("the go-sdk %s server said %q, want its URL", mode, s.url)
	}
	s.port = strings.TrimSuffix(strings.TrimPrefix(s.url, "http://127.0.0.1:"), "/mcp")
	return s, ""
}

func (s *goSDKServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// sawNote waits up to within for the server to have noted line.
func sawNote(path, line string, within time.Duration) bool {
	return eventually(within, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), line+"\n")
	})
}

// TestGoSDKServer proxies servers written with the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk), over stdio, streamable HTTP (stateful, its
// JSON-response mode, stateless) and SSE: typed tools with the schemas go-sdk derives
// from Go structs and their structured output, argument validation, isError, every
// kind of content, progress, cancellation, list_changed, and a server killed during a
// call. A stateless go-sdk server has no stream for list_changed, and on the 2025
// protocol the toolserverd speaks it cancels nothing (notifications/cancelled reaches
// a new session of its own; the POST ending does not end the handler), so those two
// are not asked of it.
func TestGoSDKServer(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	notes := func(name string) string { return filepath.Join(dir, name+".notes") }
	servers := map[string]*goSDKServer{}
	cfg := Config{HealthInterval: time.Hour, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	cfg.Servers = append(cfg.Servers, ServerConfig{Name: "stdio", Transport: TransportStdio, Command: exe, Enabled: true,
		Env: map[string]string{goSDKServerEnv: "stdio", "TOOLSERVERD_GOSDK_NOTES": notes("stdio")}})
	for _, m := range []struct{ name, mode, transport string }{
		{"http", "http", TransportStreamableHTTP},
		{"json", "http-json", TransportStreamableHTTP},
		{"stateless", "http-stateless", TransportStreamableHTTP},
		{"sse", "sse", TransportSSE},
	} {
		s := startGoSDKServer(t, m.mode, "0", notes(m.name))
		servers[m.name] = s
		cfg.Servers = append(cfg.Servers, ServerConfig{Name: m.name, Transport: m.transport, URL: s.url, Enabled: true})
	}
	h := newHarness(t, cfg)
	h.start(t)
	for _, name := range []string{"stdio", "http", "json", "stateless", "sse"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h.waitState(t, name, StateReady, 15*time.Second)
			p := "mcp__" + name + "__"
			// The proxy speaks the last revision with initialize; go-sdk takes it.
			if name != "stateless" && !sawNote(notes(name), "protocol 2025-11-25", 20*time.Second) {
				t.Error("the server was not initialized at protocol 2025-11-25")
			}

			e, ok := h.tools.Lookup(p + "add")
			if !ok {
				t.Fatalf("%sadd is not registered; have %v", p, h.tools.Names())
			}
			var params struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(e.Spec.Parameters, &params); err != nil || strings.Join(params.Required, ",") != "a,b" ||
				!strings.Contains(string(params.Properties["a"]), `"integer"`) || !strings.Contains(string(params.Properties["unit"]), "what is added") {
				t.Errorf("add's parameters = %s, want go-sdk's struct schema (a and b required integers)", e.Spec.Parameters)
			}
			if !strings.Contains(string(e.Spec.OutputSchema), `"sum"`) {
				t.Errorf("add's output schema = %s, want go-sdk's from its output struct", e.Spec.OutputSchema)
			}
			res := h.call(t.Context(), t, p+"add", `{"a":2,"b":3}`, nil)
			if res.IsError || string(res.Structured) != `{"sum":5}` {
				t.Errorf("add: is_error=%v structured=%s text=%q", res.IsError, res.Structured, res.Text())
			}
			wantKind(t, h.call(t.Context(), t, p+"add", `{"a":"two"}`, nil), tool.KindInvalidArgs)
			res = h.call(t.Context(), t, p+"broken", `{}`, nil)
			wantKind(t, res, tool.KindFailed)
			if !strings.Contains(res.Text(), "the widget is broken") {
				t.Errorf("broken: %q", res.Text())
			}

			res = h.call(t.Context(), t, p+"media", `{}`, nil)
			var kinds []string
			for _, c := range res.Content {
				kinds = append(kinds, c.Type+":"+c.MimeType+":"+c.URI)
			}
			if want := "text::,image:image/png:,audio:audio/wav:,resource:text/plain:file:///srv/report.txt,resource:text/plain:mem://note"; strings.Join(kinds, ",") != want {
				t.Errorf("media blocks = %v, want %s", kinds, want)
			}

			// Spaced out: in JSON-response mode go-sdk sends a call's notifications on
			// the session's GET stream, which may trail the answer to the POST.
			prog := &progressLog{}
			wantText(t, h.call(t.Context(), t, p+"steps", `{"steps":3,"delay_ms":50}`, prog), "3 steps")
			got := strings.Join(prog.all(), "")
			if !strings.Contains(got, "step 1 (1/3)\n") || !strings.Contains(got, "step 2 (2/3)\n") {
				t.Errorf("progress = %q, want a line per notification", got)
			}

			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				if sawNote(notes(name), "waiting", 10*time.Second) {
					cancel()
				}
			}()
			wantKind(t, h.call(ctx, t, p+"wait", `{}`, nil), tool.KindCancelled)
			cancel()
			if name != "stateless" && !sawNote(notes(name), "cancelled wait", 20*time.Second) {
				t.Error("the server's handler was not cancelled")
			}

			if name != "stateless" {
				wantText(t, h.call(t.Context(), t, p+"grow", `{}`, nil), "grown")
				if !eventually(20*time.Second, func() bool { _, ok := h.tools.Lookup(p + "extra"); return ok }) {
					t.Fatalf("a tool the server added (list_changed) was not registered; have %v", h.tools.Names())
				}
				wantText(t, h.call(t.Context(), t, p+"extra", `{}`, nil), "extra here")
			}

			if name != "stdio" && name != "http" {
				return
			}
			// Killed during a call: the call ends at once, and the proxy connects
			// again (an HTTP server restarted on its port: the old session is gone).
			errc := make(chan *tool.Result, 1)
			go func() { errc <- h.call(t.Context(), t, p+"wait", `{}`, nil) }()
			if !sawNote(notes(name), "cancelled wait\nwaiting", 10*time.Second) {
				t.Fatal("the second wait never started")
			}
			killed := time.Now()
			if name == "stdio" {
				_ = syscall.Kill(h.stdioPid(t, name), syscall.SIGKILL)
			} else {
				servers[name].kill()
				servers[name] = startGoSDKServer(t, "http", servers[name].port, notes(name))
			}
			// Hang guard, below the 60s call timeout; the error below says the
			// server's death ended the call.
			select {
			case res = <-errc:
				t.Logf("the call ended %s after the server was killed", time.Since(killed))
			case <-time.After(30 * time.Second):
				t.Fatal("the call still runs 30s after the server was killed")
			}
			// The request had reached the server, which ran it: a model told only that
			// the server is not available could run it again.
			wantKind(t, res, tool.KindUnavailable)
			if !strings.Contains(res.Text(), "whether it ran is unknown") {
				t.Errorf("the call cut off by the server's death says %q, not that it may have run", res.Text())
			}
			if !eventually(10*time.Second, func() bool {
				r := h.call(t.Context(), t, p+"add", `{"a":1,"b":1}`, nil)
				return !r.IsError && string(r.Structured) == `{"sum":2}`
			}) {
				t.Fatalf("no call worked after the server came back; status %+v", h.status(t, name))
			}
		})
	}
}

// TestGoSDKServerRequestsOverSSE: a server on the HTTP+SSE transport sends its own
// requests (ping, roots/list, sampling/createMessage) on its event stream and the
// client answers them with POSTs, as over the other transports. go-sdk's keep-alive
// pings its client and ends the session when a ping goes unanswered: unanswered, the
// connection to such a server was cut every keep-alive interval, and every call
// running then failed.
func TestGoSDKServerRequestsOverSSE(t *testing.T) {
	t.Parallel()
	notes := filepath.Join(t.TempDir(), "sse.notes")
	// go-sdk gives each ping half the interval to be answered: 50 ms of a 100 ms
	// interval was missed once on a loaded CI machine.
	s := startGoSDKServer(t, "sse", "0", notes, "TOOLSERVERD_GOSDK_KEEPALIVE=1s")
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{
		{Name: "sse", Transport: TransportSSE, URL: s.url, Enabled: true}}})
	h.start(t)
	h.waitState(t, "sse", StateReady, 15*time.Second)

	// A call that spans several keep-alive intervals.
	wantText(t, h.call(t.Context(), t, "mcp__sse__steps", `{"steps":5,"delay_ms":700}`, nil), "5 steps")
	res := h.call(t.Context(), t, "mcp__sse__ask", `{}`, nil)
	wantText(t, res, "ping: <nil>")
	for _, want := range []string{"roots: calling \"roots/list\": no roots handler configured", "no sampling handler configured"} {
		if !strings.Contains(res.Text(), want) {
			t.Errorf("the server was answered %q, want %q", res.Text(), want)
		}
	}
	if st := h.status(t, "sse"); st.Restarts != 0 {
		t.Errorf("the connection was cut %d times (last error %q)", st.Restarts, st.LastError)
	}
}

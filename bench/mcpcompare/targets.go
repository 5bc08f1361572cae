package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/auth"
)

// upstream is an MCP server over stdio that every target fronts.
type upstream struct {
	Name    string // "go" or "everything"
	Command string
	Args    []string
}

func (u upstream) commandLine() string {
	q := []string{shellQuote(u.Command)}
	for _, a := range u.Args {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '@' || r == ':' || r == '+' || r == '=' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// target is one way of reaching the upstream's echo tool, ready to be loaded.
type target struct {
	call      caller
	proxyPID  int    // the proxy process; 0 for the direct client
	proto     string // MCP protocol version the benchmark's client negotiated
	upstreams func() []int
	close     func()
	// profile start/stop, toolserverd only
	startProfile, stopProfile func() error
}

// Target names.
const (
	targetDirect       = "direct"
	targetToolserverd  = "toolserverd"
	targetMCPProxy     = "mcp-proxy"
	targetSupergateway = "supergateway"
)

var allTargets = []string{targetDirect, targetToolserverd, targetMCPProxy, targetSupergateway}

// callMCP makes the echo call through an mcp-go client and checks the answer.
func callMCP(ctx context.Context, c *client.Client, msg string) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": msg}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("unexpected result: %+v", res)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "Echo: "+msg {
		return fmt.Errorf("unexpected content: %+v", res.Content[0])
	}
	return nil
}

func initialize(ctx context.Context, c *client.Client) (string, error) {
	if err := c.Start(ctx); err != nil {
		return "", err
	}
	r, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "mcpcompare", Version: "1"}}})
	if err != nil {
		return "", err
	}
	return r.ProtocolVersion, nil
}

// startDirect is an mcp-go stdio client of its own upstream child: no proxy at all.
func startDirect(ctx context.Context, up upstream) (*target, error) {
	var cmd *exec.Cmd
	tr := transport.NewStdioWithOptions(up.Command, nil, up.Args,
		transport.WithCommandFunc(func(_ context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			// Not CommandContext: ctx is the initialize timeout, the child outlives it.
			cmd = exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			return cmd, nil
		}))
	c := client.NewClient(tr)
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	proto, err := initialize(ictx, c)
	if err != nil {
		_ = c.Close()
		if cmd != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil, fmt.Errorf("direct: %w", err)
	}
	pid := cmd.Process.Pid
	return &target{
		call:      func(ctx context.Context, _ int, msg string) error { return callMCP(ctx, c, msg) },
		proto:     proto,
		upstreams: func() []int { return []int{pid} },
		close: func() {
			_ = c.Close()
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		},
	}, nil
}

// proc is a proxy started as a child process in its own process group.
type proc struct {
	cmd    *exec.Cmd
	name   string
	tail   *tailBuffer
	exited chan struct{}
	lines  chan string // stderr lines, for the few a target waits for
	// grace is how long stop lets it end by itself: toolserverd drains and stops its
	// upstream in well under a second; supergateway takes seconds to close its
	// session, and nothing of the npm proxies' needs to survive.
	grace time.Duration
}

func startProc(name string, env []string, command string, args ...string) (*proc, error) {
	cmd := exec.Command(command, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{cmd: cmd, name: name, tail: &tailBuffer{}, exited: make(chan struct{}), lines: make(chan string, 64), grace: 500 * time.Millisecond}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.tail.Write(append(sc.Bytes(), '\n'))
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(p.tail, stderr)
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop ends the process group: SIGTERM, then SIGKILL after p.grace.
func (p *proc) stop() {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(p.grace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-p.exited
}

func (p *proc) fail(err error) error {
	select {
	case <-p.exited:
		err = fmt.Errorf("%w (exited: %v)", err, p.cmd.ProcessState)
	default:
	}
	if t := strings.TrimSpace(p.tail.String()); t != "" {
		err = fmt.Errorf("%w; stderr: %s", err, t)
	}
	return fmt.Errorf("%s: %w", p.name, err)
}

// tailBuffer keeps the last few KB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 4096 {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-4096:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// httpClient is the benchmark's client side of every HTTP target: one keep-alive
// connection per concurrent caller.
func httpClient(clients int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2, DisableCompression: true,
		IdleConnTimeout: time.Minute,
	}}
}

// startMCPHTTPProxy connects one mcp-go streamable-HTTP client, shared by every
// caller, to an npm proxy once it answers. legacy pins the session-based protocol
// (initialize, Mcp-Session-Id); otherwise mcp-go negotiates as it does by default
// (2026-07-28, sessionless, when the proxy offers it).
func startMCPHTTPProxy(ctx context.Context, name string, clients int, url string, p *proc, legacy bool) (*target, error) {
	hc := httpClient(clients)
	deadline := time.Now().Add(60 * time.Second)
	var (
		c     *client.Client
		proto string
		err   error
	)
	for {
		var tr *transport.StreamableHTTP
		tr, err = transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(hc))
		if err == nil {
			var opts []client.ClientOption
			if legacy {
				opts = append(opts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
			}
			c = client.NewClient(tr, opts...)
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			proto, err = initialize(ictx, c)
			cancel()
			if err == nil {
				break
			}
			_ = c.Close()
		}
		select {
		case <-p.exited:
			return nil, p.fail(err)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, p.fail(fmt.Errorf("no MCP session at %s: %w", url, err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := p.cmd.Process.Pid
	return &target{
		call:      func(ctx context.Context, _ int, msg string) error { return callMCP(ctx, c, msg) },
		proxyPID:  pid,
		proto:     proto,
		upstreams: func() []int { return descendants(pid) },
		close: func() {
			_ = c.Close()
			p.stop()
			hc.CloseIdleConnections()
		},
	}, nil
}

// startMCPProxy: punkpeye's mcp-proxy serving the stdio upstream over streamable HTTP.
func startMCPProxy(ctx context.Context, o Options, up upstream) (*target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(o.NodeModules, "mcp-proxy", "dist", "bin", "mcp-proxy.mjs")
	args := []string{bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--server", "stream", "--endpoint", "/mcp"}
	args = append(append(args, "--", up.Command), up.Args...)
	p, err := startProc(targetMCPProxy, nil, "node", args...)
	if err != nil {
		return nil, err
	}
	return startMCPHTTPProxy(ctx, targetMCPProxy, o.Clients, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), p, !o.NPMSessionless)
}

// startSupergateway: supergateway --stateful, stdio → streamable HTTP. A stateful
// supergateway starts one upstream per session; the benchmark uses one session.
func startSupergateway(ctx context.Context, o Options, up upstream) (*target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(o.NodeModules, "supergateway", "dist", "index.js")
	p, err := startProc(targetSupergateway, nil, "node", bin, "--stdio", up.commandLine(), "--outputTransport", "streamableHttp",
		"--stateful", "--port", strconv.Itoa(port), "--logLevel", "none")
	if err != nil {
		return nil, err
	}
	return startMCPHTTPProxy(ctx, targetSupergateway, o.Clients, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), p, true)
}

// serverName is the upstream's name in toolserverd: its echo is mcp__up__echo.
const serverName = "up"

// startToolserverd runs the daemon binary on loopback with a fresh data dir and the
// upstream declared in mcp_servers, waits until the server is ready, and creates one
// session per caller (as separate agents would have) allowed to call its echo.
func startToolserverd(ctx context.Context, o Options, up upstream, bin string) (*target, error) {
	dir, err := os.MkdirTemp("", "mcpcompare-toolserverd-")
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"addr": "127.0.0.1:0", "data_dir": filepath.Join(dir, "data"), "replica_id": "mcpcompare",
		"log":         map[string]any{"level": "info", "format": "json"},
		"permissions": map[string]any{"allow": []string{"mcp__" + serverName + "__*"}},
		// Calls carry an API key, as in production: its check is part of the cost.
		"auth":        map[string]any{"keys": []map[string]any{{"name": "bench", "roles": []string{"admin"}, "sha256": auth.Hash(benchKey)}}},
		"mcp_servers": []map[string]any{{"name": serverName, "transport": "stdio", "command": up.Command, "args": up.Args}},
	}
	cb, _ := json.Marshal(cfg) // JSON is YAML
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cb, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	env := []string{}
	if o.DaemonCPUProfile != "" {
		env = append(env, "MCPCOMPARE_CPUPROFILE="+o.DaemonCPUProfile+"-"+up.Name+".prof")
	}
	p, err := startProc(targetToolserverd, env, bin, "--config", cfgPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.grace = 10 * time.Second
	cleanup := func() { p.stop(); os.RemoveAll(dir) }
	fail := func(err error) (*target, error) {
		e := p.fail(err)
		cleanup()
		return nil, e
	}
	var base string
	timeout := time.After(60 * time.Second)
	for base == "" {
		select {
		case l := <-p.lines:
			var m struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "toolserverd listening" {
				base = "http://" + m.Addr
			}
		case <-p.exited:
			return fail(errors.New("exited before listening"))
		case <-timeout:
			return fail(errors.New("not listening after 60s"))
		}
	}
	hc := httpClient(o.Clients)
	// The upstream connects in the background: wait for it.
	for deadline := time.Now().Add(60 * time.Second); ; {
		var list struct {
			Servers []struct {
				Name, State string
				LastError   string `json:"last_error"`
			}
		}
		if err := getJSON(ctx, hc, base+"/v1/mcp/servers", &list); err != nil {
			return fail(err)
		}
		if len(list.Servers) == 1 && list.Servers[0].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("mcp server not ready after 60s: %+v", list.Servers))
		}
		time.Sleep(50 * time.Millisecond)
	}
	tool := "mcp__" + serverName + "__echo"
	urls := make([]string, o.Clients)
	for i := range urls {
		var s struct {
			ID    string
			Tools []string
		}
		if err := postJSON(ctx, hc, base+"/v1/sessions", `{"available_tools":["`+tool+`"]}`, &s); err != nil {
			return fail(err)
		}
		if s.ID == "" || len(s.Tools) != 1 || s.Tools[0] != tool {
			return fail(fmt.Errorf("session %q has tools %v, want [%s]", s.ID, s.Tools, tool))
		}
		urls[i] = base + "/v1/sessions/" + s.ID + "/tool-calls"
	}
	pid := p.cmd.Process.Pid
	t := &target{
		call: func(ctx context.Context, c int, msg string) error {
			return callToolserverd(ctx, hc, urls[c], tool, msg)
		},
		proxyPID:  pid,
		proto:     "http api",
		upstreams: func() []int { return descendants(pid) },
		close:     func() { cleanup(); hc.CloseIdleConnections() },
	}
	if o.DaemonCPUProfile != "" {
		t.startProfile = func() error { return syscall.Kill(pid, syscall.SIGUSR1) }
		t.stopProfile = func() error {
			if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
				return err
			}
			for {
				select {
				case l := <-p.lines:
					if l == "cpuprofile written" {
						return nil
					}
				case <-time.After(10 * time.Second):
					return errors.New("the daemon did not write its CPU profile")
				}
			}
		}
	}
	return t, nil
}

func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	return doJSON(hc, req, v)
}

func postJSON(ctx context.Context, hc *http.Client, url, body string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return doJSON(hc, req, v)
}

// benchKey is the API key the benchmark's daemon accepts (declared by hash).
const benchKey = "tsk_mcpcompare-benchmark-key"

func doJSON(hc *http.Client, req *http.Request, v any) error {
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// callToolserverd makes one call through the session's tool-calls endpoint and reads
// the NDJSON answer to its "done" line; the call's message must be a success carrying
// the upstream's echo.
func callToolserverd(ctx context.Context, hc *http.Client, url, tool, msg string) error {
	body := `{"calls":[{"id":"c1","name":"` + tool + `","arguments":{"message":"` + msg + `"}}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var gotMessage, gotDone bool
	for line := range bytes.Lines(b) {
		switch {
		case bytes.HasPrefix(line, []byte(`{"type":"message"`)):
			var ev struct {
				IsError bool `json:"is_error"`
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				return err
			}
			if ev.IsError || !bytes.Contains(ev.Message.Content, []byte(`"Echo: `+msg+`"`)) {
				return fmt.Errorf("unexpected message: %s", line)
			}
			gotMessage = true
		case bytes.HasPrefix(line, []byte(`{"type":"done"`)):
			gotDone = true
		}
	}
	if !gotMessage || !gotDone {
		return fmt.Errorf("incomplete answer: %s", b)
	}
	return nil
}

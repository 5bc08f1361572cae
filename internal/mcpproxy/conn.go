package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/fds"
)

const (
	// closeGrace is how long a closing connection may take to end politely (stdin
	// closed, DELETE sent) before it is cut (process group killed, sockets closed).
	closeGrace = time.Second
	// cancelNoticeTimeout bounds sending one notifications/cancelled.
	cancelNoticeTimeout = 2 * time.Second
	// stderrTailBytes is how much of a dead stdio server's last stderr is kept for
	// its status.
	stderrTailBytes = 1024
)

// clientInfo is what toolserverd calls itself in initialize.
var clientInfo = mcp.Implementation{Name: "toolserverd", Version: "1"}

// conn is one live connection to a server: an mcp-go client and everything it owns.
type conn struct {
	client *client.Client
	log    *slog.Logger
	// ctx is the connection's lifetime: cancelling it kills a stdio server's process
	// group and closes every socket, which ends whatever is in flight.
	ctx    context.Context
	cancel context.CancelFunc

	deadOnce sync.Once
	dead     chan struct{}
	deadErr  error // written before dead is closed
	// retired is why the supervisor closes the connection while it still works (a
	// restart, the server stopped), set before it does: the calls the closing cuts
	// off say so rather than what the transport makes of it.
	retired atomic.Pointer[error]

	cmd     *exec.Cmd              // stdio
	pid     int                    // stdio child, leader of its process group
	exitHow atomic.Pointer[string] // how the stdio child ended, once it has (noteExit)
	stderr  io.Reader              // stdio child's
	exited  chan struct{}
	tailMu  sync.Mutex
	tail    []byte // last bytes of stderr, read by the exit watcher
	sockets *socketSet
	// progress admits notifications/progress for the calls of this connection only.
	progress progressGate
	// tasks routes notifications/tasks/status to the calls following the tasks.
	tasks   taskWatchers
	listing toolListing
	// opened is set once the connection is up; stray is the first line a stdio
	// server wrote on stdout before that which cannot be JSON-RPC (boundedLines).
	opened atomic.Bool
	stray  atomic.Pointer[string]
	// strays are the lines of a stdio server's stdout after that which cannot be
	// JSON-RPC.
	strays strayLines
	// sdkSaid is the last error mcp-go logged about the connection.
	sdkSaid atomic.Pointer[string]
	// refused is the last 4xx answer to a POST of an HTTP server, for initialize's
	// error (see httpRefusal).
	refused atomic.Pointer[httpRefusal]

	goMu    sync.Mutex
	closing bool
	wg      sync.WaitGroup
	// The goroutines of spawn that wait for more work (see worker), and what
	// ends their wait at close; made by the first spawn.
	work   chan func()
	closed chan struct{}
}

// dial connects to a server, initializes the session and lists its tools, all within
// cfg.ConnectTimeout. notify receives every notification; hint is called when
// something suggests the connection died (a stdio child closed its stderr).
func dial(parent context.Context, cfg *ServerConfig, log *slog.Logger, notify func(mcp.JSONRPCNotification), hint func()) (*conn, []mcp.Tool, error) {
	// The connection outlives parent's cancellation, so that the supervisor can close
	// it politely; while dialling, parent's end aborts it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	c := &conn{log: log, ctx: ctx, cancel: cancel, dead: make(chan struct{})}
	stop := context.AfterFunc(parent, cancel)
	defer stop()
	var timedOut atomic.Bool
	timer := time.AfterFunc(cfg.ConnectTimeout, func() {
		timedOut.Store(true)
		cancel()
	})
	tools, err := c.open(cfg, notify, hint)
	if !timer.Stop() && err == nil {
		err = errors.New("connection cancelled")
	}
	if err != nil {
		if timedOut.Load() {
			advice := " (the server's connect_timeout; raise it for a server slow to start)"
			if c.stray.Load() != nil {
				advice = "" // it started, and wrote what is quoted below
			}
			err = fmt.Errorf("not connected within %s%s: %w", cfg.ConnectTimeout, advice, err)
		}
		if said := c.sdkSaid.Load(); said != nil && cfg.Transport == TransportSSE {
			// mcp-go only logs what it refuses on the event stream (an endpoint on
			// another origin) and then waits for an endpoint until the timeout.
			err = fmt.Errorf("%w (the SSE client said: %s)", err, *said)
		}
		if stray := c.stray.Load(); stray != nil {
			err = fmt.Errorf("%w (the server wrote on stdout a line that is not JSON-RPC, which was skipped: %q; a stdio MCP server may write only JSON-RPC messages there, its logs go to stderr)", err, *stray)
		}
		if c.exited != nil && errors.Is(err, transport.ErrTransportClosed) {
			// The child died: wait briefly for its last words.
			select {
			case <-c.exited:
			case <-time.After(500 * time.Millisecond):
			}
		}
		err = c.describe(err)
		c.close()
		return nil, nil, err
	}
	c.opened.Store(true)
	return c, tools, nil
}

func (c *conn) open(cfg *ServerConfig, notify func(mcp.JSONRPCNotification), hint func()) ([]mcp.Tool, error) {
	quiet := sdkLogger(c.log, newRedactor(cfg), &c.sdkSaid)
	var tr transport.Interface
	switch cfg.Transport {
	case TransportStdio:
		// mcp-go's own stdio transport would pass the whole of os.Environ on.
		env := childEnv(os.Environ(), cfg.privateEnv, cfg.Env)
		// The daemon starts the child itself, so that what mcp-go reads from it
		// passes through a bound (see boundedLines).
		cmd := exec.CommandContext(c.ctx, cfg.Command, cfg.Args...)
		cmd.Env = env
		if cfg.Dir != "" {
			if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
				return nil, fmt.Errorf("working directory: %w", err)
			}
			// A command given as a relative path ("./bin/server") is the daemon's
			// working directory's, as before; exec would look for it in Dir.
			if !filepath.IsAbs(cmd.Path) && strings.ContainsRune(cmd.Path, filepath.Separator) {
				if abs, err := filepath.Abs(cmd.Path); err == nil {
					cmd.Path = abs
				}
			}
			cmd.Dir = cfg.Dir
		}
		cmd.WaitDelay = 2 * time.Second
		ownProcessGroup(cmd)
		// The daemon killing a child that still runs (one that stopped answering, a
		// connection given up) says so: "killed by SIGKILL" alone would send an
		// operator looking for who did (the OOM killer?).
		kill := cmd.Cancel
		cmd.Cancel = func() error {
			if stillRunning(cmd.Process.Pid) {
				how := "was killed by toolserverd (SIGKILL)"
				c.exitHow.CompareAndSwap(nil, &how)
			}
			return kill()
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		c.cmd = cmd
		c.stderr = stderr
		st := transport.NewIO(&boundedLines{r: stdout, conn: c}, stdin, stderr)
		transport.WithCommandLogger(quiet)(st)
		tr = &stdioTransport{Stdio: st, conn: c}
	case TransportSSE:
		hc := c.httpClient()
		var cn *cancelNotifier
		hc.Transport = sseServerRequests{next: hc.Transport, take: func(msg []byte) { cn.answer(msg) }}
		sse, err := transport.NewSSE(cfg.URL,
			transport.WithHTTPClient(hc),
			transport.WithHeaders(cfg.Headers),
			transport.WithSSELogger(quiet),
			transport.WithEndpointTimeout(cfg.ConnectTimeout),
			transport.WithResponseTimeout(max(cfg.CallTimeout, cfg.ConnectTimeout)))
		if err != nil {
			return nil, err
		}
		// mcp-go does not fail in-flight calls when the stream ends; the
		// connection is over, so end them here.
		sse.SetConnectionLostHandler(func(err error) { c.markDead(fmt.Errorf("SSE stream lost: %w", err)) })
		cn = &cancelNotifier{HTTPConnection: sse, conn: c, client: hc, headers: cfg.Headers}
		tr = cn
	case TransportStreamableHTTP:
		h, err := transport.NewStreamableHTTP(cfg.URL,
			transport.WithHTTPBasicClient(c.httpClient()),
			transport.WithHTTPHeaders(cfg.Headers),
			transport.WithHTTPLogger(quiet),
			// The standalone GET stream carries tools/list_changed. It keeps the
			// connection on the 2025 protocol, which every server speaks.
			transport.WithContinuousListening()) //nolint:staticcheck // needed for list_changed on HTTP
		if err != nil {
			return nil, err
		}
		tr = &cancelNotifier{HTTPConnection: h, conn: c}
	default:
		return nil, fmt.Errorf("unknown transport %q", cfg.Transport)
	}
	// The 2025-11-25 handshake, not mcp-go's default 2026-07-28 (sessionless): every
	// server speaks it, and 2026 requests cost about twice the CPU per call on both
	// ends (per-request metadata and headers that mean nothing on a pipe), measured
	// with bench/mcpcompare.
	c.client = client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	c.client.OnNotification(notify)
	start := c.client.Start
	if c.cmd != nil {
		start = func(ctx context.Context) error {
			// Descriptors the daemon inherited stay with it (see fds).
			fds.CloseInheritedOnExec()
			if err := c.cmd.Start(); err != nil {
				return fmt.Errorf("failed to start command: %w", err)
			}
			c.pid = c.cmd.Process.Pid
			c.watchExit(hint)
			return c.client.Start(ctx)
		}
		if pinStartThread {
			start = c.startPinned(start)
		}
	}
	if err := start(c.ctx); err != nil {
		if r := c.refused.Load(); r != nil && r.method == http.MethodGet && cfg.Transport == TransportSSE {
			err = r // mcp-go says only "unexpected status code"
		}
		return nil, fmt.Errorf("start: %w", err)
	}
	if _, err := c.client.Initialize(c.ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: clientInfo}}); err != nil {
		if r := c.refused.Load(); r != nil && r.method == http.MethodPost && errors.Is(err, transport.ErrLegacySSEServer) {
			err = r
		}
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return c.listTools(c.ctx)
}

// startPinned runs start (which forks the stdio child) on a goroutine locked to its
// OS thread, and keeps the thread locked until the connection ends: the child's
// parent-death signal follows that thread (see pinStartThread), which must
// therefore not exit while the child runs. It costs one idle thread per stdio child.
func (c *conn) startPinned(start func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		started := make(chan error, 1)
		ok := c.spawn(func() {
			runtime.LockOSThread()
			// Unlocked, never left locked: a goroutine that returns locked ends its thread.
			defer runtime.UnlockOSThread()
			err := start(ctx)
			started <- err
			if c.pid != 0 {
				// The connection's end kills the child's process group.
				<-c.ctx.Done()
			}
		})
		if !ok {
			return errors.New("connection closed")
		}
		return <-started
	}
}

func (c *conn) listTools(ctx context.Context) ([]mcp.Tool, error) {
	res, err := c.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	c.listing.withSchemas(res.Tools)
	return res.Tools, nil
}

// ping checks the server answers. Protocol 2026-07-28 dropped ping (mcp-go then
// answers nil without asking), so a modern server is asked server/discover instead.
func (c *conn) ping(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	if mcp.IsModernProtocol(c.client.ProtocolVersion()) {
		_, err := c.client.Discover(ctx, mcp.DiscoverRequest{})
		return err
	}
	return c.client.Ping(ctx) //nolint:staticcheck // the legacy protocol's liveness check
}

// watchExit drains the stdio child's stderr into the log until it ends, which is
// when the child exits, keeping the last bytes for describe.
func (c *conn) watchExit(hint func()) {
	r, logw := c.stderr, newStderrLog(c.log)
	c.exited = make(chan struct{})
	c.spawn(func() {
		defer close(c.exited)
		buf := make([]byte, 32*1024)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = logw.Write(buf[:n])
				c.tailMu.Lock()
				c.tail = append(c.tail, buf[:n]...)
				if len(c.tail) > stderrTailBytes {
					c.tail = append([]byte(nil), c.tail[len(c.tail)-stderrTailBytes:]...)
				}
				c.tailMu.Unlock()
			}
			if err != nil {
				break
			}
		}
		c.noteExit()
		if c.ctx.Err() == nil {
			hint()
		}
	})
}

// noteExit records how the stdio child ended, for describe: its stderr has closed,
// so it has exited or is about to. It looks for up to 200 ms: at the zombie (see
// childExit) or, once close has reaped it, at what close's Wait read (noteWaited). A
// child still running then, having closed its stderr, leaves nothing.
func (c *conn) noteExit() {
	for range 20 {
		if c.exitHow.Load() != nil {
			return
		}
		if how := childExit(c.pid); how != "" {
			c.exitHow.CompareAndSwap(nil, &how)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noteWaited records how the stdio child ended from what Wait read, unless its zombie
// already said: reaping it takes the zombie away from noteExit.
func (c *conn) noteWaited() {
	if ps := c.cmd.ProcessState; ps != nil {
		if how := processEnd(ps); how != "" {
			c.exitHow.CompareAndSwap(nil, &how)
		}
	}
}

// lastWords is describe once a stdio child whose connection ended has exited (up to
// lastWordsWait): a call cut off by its server's death answers at once, before the
// child's end has been read.
func (c *conn) lastWords(err error) error {
	if c.exited != nil {
		select {
		case <-c.exited:
		case <-time.After(lastWordsWait):
		}
	}
	return c.describe(err)
}

// lastWordsWait bounds how long a call cut off by its stdio server's death waits to
// say how the server ended.
const lastWordsWait = 300 * time.Millisecond

// describe adds how a dead stdio child ended and its last stderr to err.
func (c *conn) describe(err error) error {
	if c.exited == nil {
		return err
	}
	select {
	case <-c.exited:
	default:
		return err
	}
	c.tailMu.Lock()
	tail := string(c.tail)
	c.tailMu.Unlock()
	var said []string
	if how := c.exitHow.Load(); how != nil {
		said = append(said, "the process "+*how)
	}
	if tail != "" {
		said = append(said, "stderr: "+oneLine(tail))
	}
	if len(said) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(said, "; "))
}

// markDead records why the connection is unusable and cuts it: in-flight calls end,
// a stdio child is killed.
func (c *conn) markDead(err error) {
	c.deadOnce.Do(func() {
		c.deadErr = err
		close(c.dead)
		c.cancel()
	})
}

// err is why the connection died, or nil while it lives.
func (c *conn) err() error {
	select {
	case <-c.dead:
		return c.deadErr
	default:
		return nil
	}
}

// retire records why the connection is about to be closed; see retired.
func (c *conn) retire(why error) {
	if c.err() == nil { // one that died is not retired: how it died is why
		c.retired.Store(&why)
	}
}

// retiredBy is why the supervisor closed the connection (see retired), nil when it
// did not or the connection had died before: the closing kills a stdio child, which
// says nothing then of why the calls it cut off ended.
func (c *conn) retiredBy() error {
	if why := c.retired.Load(); why != nil {
		return *why
	}
	return nil
}

// ended is why the connection died or was retired, or nil while neither.
func (c *conn) ended() error {
	if err := c.err(); err != nil {
		return err
	}
	if why := c.retired.Load(); why != nil {
		return *why
	}
	return nil
}

// spawn runs f on a goroutine that close waits for; after close it does nothing.
// The goroutine is one that ran an earlier f and waits for more if there is one
// (see worker), else a new one.
func (c *conn) spawn(f func()) bool {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.closing {
		return false
	}
	if c.work == nil {
		c.work, c.closed = make(chan func()), make(chan struct{})
	}
	select {
	case c.work <- f:
		return true
	default:
	}
	c.wg.Add(1)
	go c.worker(f)
	return true
}

// workerIdle is how long a goroutine of spawn waits for more work before it ends.
const workerIdle = 30 * time.Second

// worker runs f, then what spawn hands it, until it has waited workerIdle for
// work or the connection closes. A request's goroutine (stdioTransport) grows its
// stack for mcp-go's JSON encoding; a new goroutine per request paid for that
// growth, a copy of the stack, every time. An f must not leave the goroutine locked
// to its thread (startPinned unlocks it).
func (c *conn) worker(f func()) {
	defer c.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil
		idle.Reset(workerIdle)
		select {
		case f = <-c.work:
		case <-idle.C:
			return
		case <-c.closed:
			return
		}
	}
}

// close ends the connection, politely first (a stdio child gets closeGrace to exit
// once its stdin is closed), and waits for its goroutines and its child.
func (c *conn) close() {
	if c.client != nil {
		done := make(chan struct{})
		go func() {
			_ = c.client.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(closeGrace):
			c.cancel()
			if c.sockets != nil {
				c.sockets.closeAll() // the closing DELETE, when the server does not answer it
			}
			<-done
		}
	}
	if c.pid != 0 {
		waited := make(chan struct{})
		go func() {
			_ = c.cmd.Wait()
			c.noteWaited()
			close(waited)
		}()
		select {
		case <-waited:
		case <-time.After(closeGrace):
			c.cancel() // kills the process group (see ownProcessGroup)
			<-waited
		}
	}
	c.cancel()
	killGroup(c.pid)
	c.goMu.Lock()
	c.closing = true
	if c.closed != nil {
		close(c.closed)
	}
	c.goMu.Unlock()
	c.wg.Wait()
	if c.sockets != nil {
		c.sockets.closeAll()
	}
}

// httpClient is a client of the connection's own: its sockets close with it (no
// stray keep-alive goroutines, no request outliving the connection).
func (c *conn) httpClient() *http.Client {
	c.sockets = &socketSet{conns: map[net.Conn]struct{}{}}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return c.sockets.add(nc), nil
		},
	}
	c.sockets.tr = tr
	context.AfterFunc(c.ctx, c.sockets.cut)
	return &http.Client{Transport: refusalRecorder{next: boundedBodies{tr}, last: &c.refused}, CheckRedirect: sameOrigin}
}

// httpRefusal is a 4xx answer to a POST or GET: its status and the start of its body.
// mcp-go reports any 4xx answer to initialize as "likely a legacy SSE server", which
// sends the operator the wrong way when the server refused the request for a reason
// of its own (a host check, a missing key, a wrong path) and said which; and a 4xx
// answer to the SSE transport's GET only as "unexpected status code".
type httpRefusal struct {
	method string
	status int
	said   string
}

func (r *httpRefusal) Error() string {
	msg := fmt.Sprintf("the server refused it: HTTP %d %s", r.status, http.StatusText(r.status))
	if r.said != "" {
		msg += fmt.Sprintf(": %q", r.said)
	}
	if r.method == http.MethodGet {
		// What a streamable HTTP server answers a GET without a session (400), or
		// without offering a stream (405); 404 is a wrong path either way.
		msg += " (check the URL; a server that speaks streamable HTTP needs transport: streamable_http)"
		return msg
	}
	if r.status == http.StatusNotFound || r.status == http.StatusMethodNotAllowed {
		// What a server speaking only the 2024 HTTP+SSE transport answers a POST with.
		msg += " (check the URL; a server that speaks only the older HTTP+SSE transport needs transport: sse)"
	}
	return msg
}

// refusalSample is how much of a refusal's body is kept: enough for a sentence.
const refusalSample = 512

// refusalRecorder records in last the 4xx answers to POST and GET requests, putting
// back the body it reads from.
type refusalRecorder struct {
	next http.RoundTripper
	last *atomic.Pointer[httpRefusal]
}

func (rr refusalRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rr.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost && req.Method != http.MethodGet || resp.StatusCode < 400 || resp.StatusCode >= 500 {
		return resp, err
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, refusalSample))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	rr.last.Store(&httpRefusal{method: req.Method, status: resp.StatusCode, said: plainText(head)})
	return resp, nil
}

// plainText is the text of a short answer on one line: HTML tags dropped, runs of
// white space and control characters made one space, cut at 200 characters.
func plainText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = htmlTag.ReplaceAllString(s, " ")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// sameOrigin follows a redirect only within the server's origin (scheme, host and
// port): the request carries the server's configured headers, credentials often,
// which Go forwards to any host but Authorization and cookies.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if from := via[0].URL; req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
		return fmt.Errorf("redirect to another origin (%s://%s) refused", req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// socketSet tracks a connection's sockets so that cancelling it closes them all.
type socketSet struct {
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	tr     *http.Transport
}

func (s *socketSet) add(nc net.Conn) net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nc
	}
	s.conns[nc] = struct{}{}
	return &trackedConn{Conn: nc, set: s}
}

// cut closes the sockets open now: requests on them end. It refuses no new one, so
// that the polite close that follows a cut (markDead, then close) still reaches the
// server: mcp-go's Close ends an HTTP session with a DELETE of its own, not bound to
// the connection's context, and one refused left the session open in the server.
func (s *socketSet) cut() {
	s.mu.Lock()
	conns := s.conns
	s.conns = map[net.Conn]struct{}{}
	s.mu.Unlock()
	for nc := range conns {
		nc.Close()
	}
	s.tr.CloseIdleConnections()
}

// closeAll closes the sockets and refuses new ones.
func (s *socketSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cut()
}

type trackedConn struct {
	net.Conn
	set *socketSet
}

func (t *trackedConn) Close() error {
	t.set.mu.Lock()
	delete(t.set.conns, t.Conn)
	t.set.mu.Unlock()
	return t.Conn.Close()
}

// stdioTransport is mcp-go's stdio transport with the connection's progress gate
// (see progressGate), whose requests end with their context. It embeds
// *transport.Stdio so that everything else the client looks for (Stderr,
// SetRequestHandler) is still there.
type stdioTransport struct {
	*transport.Stdio
	conn *conn
}

// SendRequest returns when ctx ends even if the request is still being written:
// mcp-go's write to the child's stdin ignores ctx and blocks for as long as a
// server that stopped reading leaves its pipe full, and with it every later
// request (health checks included, which would never find the server dead). The
// abandoned write ends when the connection closes.
func (t *stdioTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	defer t.conn.progress.track(req)()
	type answer struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	done := make(chan answer, 1)
	if !t.conn.spawn(func() {
		resp, err := t.Stdio.SendRequest(ctx, req)
		done <- answer{resp, err}
	}) {
		return nil, transport.ErrTransportClosed
	}
	select {
	case a := <-done:
		if a.err == nil {
			if err := t.conn.listing.screen(req, a.resp); err != nil {
				return nil, err
			}
			keepResult(ctx, req, a.resp)
		}
		return a.resp, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *stdioTransport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.Stdio.SetNotificationHandler(t.conn.notifications(h))
}

// notifications wraps the connection's notification handler: progress passes the
// gate (progressGate), a task's status goes to the call following the task.
func (c *conn) notifications(h func(mcp.JSONRPCNotification)) func(mcp.JSONRPCNotification) {
	h = c.progress.filter(h)
	return func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationTasksStatus {
			c.tasks.deliver(n)
			return
		}
		h(n)
	}
}

// SetRequestHandler answers the server's requests to the client at a bounded rate.
func (t *stdioTransport) SetRequestHandler(h transport.RequestHandler) {
	t.Stdio.SetRequestHandler(t.conn.limitRequests(h))
}

// cancelNotifier sends notifications/cancelled for a tools/call whose context ended,
// over HTTP transports: mcp-go sends it over stdio only (on the 2025 protocol an
// HTTP request that is abandoned is not a cancellation).
type cancelNotifier struct {
	transport.HTTPConnection
	conn    *conn
	version atomic.Value // string

	// Over SSE, where mcp-go does not answer the server's requests (see answer):
	// the handler the client set, and what answers are posted with.
	handler atomic.Pointer[transport.RequestHandler]
	client  *http.Client
	headers map[string]string
}

func (t *cancelNotifier) SetProtocolVersion(v string) {
	t.version.Store(v)
	t.HTTPConnection.SetProtocolVersion(v)
}

// SetRequestHandler keeps server-to-client requests (ping) working through the
// wrapper, at a bounded rate; over SSE the wrapper answers them itself (answer).
func (t *cancelNotifier) SetRequestHandler(h transport.RequestHandler) {
	limited := t.conn.limitRequests(h)
	if b, ok := t.HTTPConnection.(transport.BidirectionalInterface); ok {
		b.SetRequestHandler(limited)
		return
	}
	t.handler.Store(&limited)
}

// RequiresLegacyProtocol forwards the continuous-listening constraint to the client.
func (t *cancelNotifier) RequiresLegacyProtocol() bool {
	l, ok := t.HTTPConnection.(interface{ RequiresLegacyProtocol() bool })
	return ok && l.RequiresLegacyProtocol()
}

// SetNotificationHandler admits progress for this connection's calls only.
func (t *cancelNotifier) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.HTTPConnection.SetNotificationHandler(t.conn.notifications(h))
}

func (t *cancelNotifier) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	forget := t.conn.progress.track(req)
	resp, err := t.HTTPConnection.SendRequest(ctx, req)
	forget()
	if err == nil {
		if err := t.conn.listing.screen(req, resp); err != nil {
			return nil, err
		}
		keepResult(ctx, req, resp)
	}
	if err == nil || ctx.Err() == nil || req.Method != string(mcp.MethodToolsCall) || t.conn.err() != nil {
		return resp, err
	}
	if v, _ := t.version.Load().(string); mcp.IsModernProtocol(v) {
		return resp, err // on 2026-07-28 ending the request is the cancellation
	}
	// The cause: a call's request ends cancelled when its deadline passed (see
	// requestContext).
	reason := context.Cause(ctx).Error()
	t.conn.spawn(func() {
		nctx, cancel := context.WithTimeout(t.conn.ctx, cancelNoticeTimeout)
		defer cancel()
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": req.ID, "reason": reason}},
		}}
		if err := t.HTTPConnection.SendNotification(nctx, n); err != nil {
			t.conn.log.Debug("mcp: could not send notifications/cancelled", "err", err)
		}
	})
	return resp, err
}

// stillRunning reports whether the child pid still runs a little after the daemon
// decided to cut it: a child killed by someone else (the OOM killer, an operator's
// kill -9), whose closed stdout is often why the connection ends, may not have
// become a zombie yet when the cut comes, and must not be reported as killed by
// toolserverd. A child that is hung or stopped still runs after the wait (at most
// 100 ms, added to cutting a connection that is being given up anyway).
func stillRunning(pid int) bool {
	for range 50 {
		if !childRunning(pid) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

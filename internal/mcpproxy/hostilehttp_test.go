package mcpproxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// TestHTTPRedirectToAnotherOrigin: an upstream that redirects its MCP endpoint to
// another origin is refused, and the server configured headers (credentials) never
// reach that origin.
func TestHTTPRedirectToAnotherOrigin(t *testing.T) {
	t.Parallel()
	var leaked atomic.Int32
	real := mcpserver.NewStreamableHTTPServer(mcpserver.NewMCPServer("elsewhere", "1"))
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			leaked.Add(1)
		}
		real.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		other.CloseClientConnections()
		other.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = real.Shutdown(ctx)
	})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(func() {
		redirector.CloseClientConnections()
		redirector.Close()
	})

	for _, transport := range []string{TransportStreamableHTTP, TransportSSE} {
		name := strings.ReplaceAll(transport, "_", "-")
		h := newHarness(t, Config{MaxBackoff: time.Hour, MinBackoff: time.Hour, Servers: []ServerConfig{{
			Name: name, Transport: transport, URL: redirector.URL + "/mcp", Enabled: true,
			Headers: map[string]string{"X-Api-Key": "secret"}, ConnectTimeout: 3 * time.Second}}})
		h.start(t)
		st := h.waitState(t, name, StateFailed, 10*time.Second)
		if !strings.Contains(st.LastError, "redirect") {
			t.Errorf("%s: last error %q does not name the redirect", transport, st.LastError)
		}
		h.m.Stop()
	}
	if n := leaked.Load(); n > 0 {
		t.Errorf("the configured headers reached another origin %d times", n)
	}
}

// hostileHTTP is a streamable-HTTP MCP server written by hand: it answers the
// handshake and tools/list properly and tools/call as the tool's name says.
func hostileHTTP(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Mcp-Session-Id", "s1")
		head := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":`
		switch req.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, head+`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}}`)
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			var tools []string
			for _, n := range []string{"big_json", "big_sse", "many_data_lines", "big_error", "html", "endless_sse", "many_events"} {
				tools = append(tools, `{"name":"`+n+`","inputSchema":{"type":"object"}}`)
			}
			io.WriteString(w, head+`{"tools":[`+strings.Join(tools, ",")+`]}}`)
		case "ping":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, head+`{}}`)
		case "tools/call":
			chunk := strings.Repeat("x", 1<<20)
			switch req.Params.Name {
			case "big_json":
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, head+`{"content":[{"type":"text","text":"`)
				for range 200 {
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
				io.WriteString(w, `"}]}}`)
			case "big_sse":
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: message\ndata: "+head+`{"content":[{"type":"text","text":"`)
				for range 200 {
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
				io.WriteString(w, `"}]}}`+"\n\n")
			case "many_data_lines":
				w.Header().Set("Content-Type", "text/event-stream")
				lines := strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 1000)
				for range 200 {
					if _, err := io.WriteString(w, lines); err != nil {
						return
					}
				}
				io.WriteString(w, "\n")
			case "big_error":
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusInternalServerError)
				for range 200 {
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
			case "many_events":
				w.Header().Set("Content-Type", "text/event-stream")
				note := "event: message\r\ndata: " + `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("z", 1000) + `"}}` + "\r\n\r\n"
				for range 20000 {
					if _, err := io.WriteString(w, note); err != nil {
						return
					}
				}
				io.WriteString(w, "event: message\ndata: "+head+`{"content":[{"type":"text","text":"after 20 MB of events"}]}}`+"\n\n")
			case "html":
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html>hello</html>")
			case "endless_sse":
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				for {
					if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
						return
					}
					select {
					case <-r.Context().Done():
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/mcp"
}

// TestHTTPHostileAnswers: over streamable HTTP, answers of 200 MiB (a JSON body, one
// SSE event, an SSE event of many data lines, an error body) are cut off at the
// message limit and fail the call with an error saying so (each would cost GBs), while a stream of many
// small events passes; a body that is not JSON
// fails with its content type; an event stream that never answers ends at the call
// timeout. The server stays usable.
func TestHTTPHostileAnswers(t *testing.T) {
	// Not parallel: it measures what the process allocates.
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{{
		Name: "hostile", Transport: TransportStreamableHTTP, URL: hostileHTTP(t), Enabled: true, CallTimeout: 20 * time.Second}}})
	h.start(t)
	h.waitState(t, "hostile", StateReady, 10*time.Second)

	for _, name := range []string{"big_json", "big_sse", "many_data_lines", "big_error"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		res := h.call(t.Context(), t, "mcp__hostile__"+name, `{}`, nil)
		runtime.ReadMemStats(&after)
		if alloc := (after.TotalAlloc - before.TotalAlloc) >> 20; alloc > 300 {
			t.Errorf("%s: the call allocated %d MiB", name, alloc)
		}
		if !res.IsError || !strings.Contains(res.Text(), "MiB") {
			t.Errorf("%s: is_error=%v kind=%q text %.300q; want an error naming the limit", name, res.IsError, res.ErrorKind, res.Text())
		}
		t.Logf("%s: %s: %.300s after %s", name, res.ErrorKind, res.Text(), time.Since(start).Round(time.Millisecond))
	}
	// Many events of a stream are many messages, not one.
	wantText(t, h.call(t.Context(), t, "mcp__hostile__many_events", `{}`, nil), "after 20 MB of events")
	res := h.call(t.Context(), t, "mcp__hostile__html", `{}`, nil)
	if !res.IsError || !strings.Contains(res.Text(), "text/html") {
		t.Errorf("html: is_error=%v %q", res.IsError, res.Text())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	res = h.call(ctx, t, "mcp__hostile__endless_sse", `{}`, nil)
	wantKind(t, res, tool.KindTimeout)
	t.Logf("endless stream: %s after %s", res.Text(), time.Since(start))
	// Ended by the call's own 2s deadline, not the server's 20s call timeout nor
	// the stream; the bound is a hang guard only.
	if !strings.Contains(res.Text(), "did not finish before the deadline") {
		t.Errorf("endless stream: %q, want the call's deadline to have ended it", res.Text())
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("endless stream held the call %s", took)
	}
	if st := h.status(t, "hostile"); st.State != StateReady {
		t.Errorf("server state %s (%s) after hostile answers", st.State, st.LastError)
	}
}

// hostileSSE is a legacy HTTP+SSE MCP server written by hand: answers go out on the
// event stream; tools/call "big" answers with one event of 200 MiB.
func hostileSSE(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	var stream chan string // the open stream's events
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/sse":
			ch := make(chan string, 16)
			mu.Lock()
			stream = ch
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			io.WriteString(w, "event: endpoint\ndata: /msg\n\n")
			rc.Flush()
			for {
				select {
				case <-r.Context().Done():
					return
				case ev := <-ch:
					if _, err := io.WriteString(w, ev); err != nil {
						return
					}
					rc.Flush()
				}
			}
		case r.Method == http.MethodPost && r.URL.Path == "/msg":
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.WriteHeader(http.StatusAccepted)
			if len(req.ID) == 0 {
				return
			}
			head := "event: message\ndata: " + `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":`
			var ev string
			switch req.Method {
			case "initialize":
				ev = head + `{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"hostile-sse","version":"1"}}}` + "\n\n"
			case "tools/list":
				ev = head + `{"tools":[{"name":"big","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}}]}}` + "\n\n"
			case "tools/call":
				text := "echoed"
				if req.Params.Name == "big" {
					text = strings.Repeat("x", 200<<20)
				}
				ev = head + `{"content":[{"type":"text","text":"` + text + `"}]}}` + "\n\n"
			default:
				ev = head + "{}}\n\n"
			}
			mu.Lock()
			ch := stream
			mu.Unlock()
			if ch != nil {
				select {
				case ch <- ev:
				case <-time.After(5 * time.Second):
				}
			}
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/sse"
}

// TestSSEHugeEvent: over the legacy SSE transport an event of 200 MiB is cut off at
// the message limit: the call fails saying so, and the server is connected again.
func TestSSEHugeEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{HealthInterval: time.Hour, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Servers: []ServerConfig{{
		Name: "ssebig", Transport: TransportSSE, URL: hostileSSE(t), Enabled: true, CallTimeout: 20 * time.Second}}})
	h.start(t)
	h.waitState(t, "ssebig", StateReady, 10*time.Second)
	res := h.call(t.Context(), t, "mcp__ssebig__big", `{}`, nil)
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "16 MiB") {
		t.Errorf("is_error=%v kind=%q text %.300q; want failed, naming the limit", res.IsError, res.ErrorKind, res.Text())
	}
	h.waitState(t, "ssebig", StateReady, 10*time.Second)
	wantText(t, h.call(t.Context(), t, "mcp__ssebig__echo", `{}`, nil), "echoed")
}

// logCounter is a slog handler that counts records and keeps the size of the
// largest.
type logCounter struct {
	mu      sync.Mutex
	records int
	largest int
	sample  string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	size := len(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		size += len(a.Key) + len(a.Value.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records++
	if size > l.largest {
		l.largest, l.sample = size, r.Message
	}
	return nil
}

func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) counts() (records, largest int, sample string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.records, l.largest, l.sample
}

// TestHTTPLogFlood: what mcp-go logs about a server's stream (a listening stream
// that fails with a body of 1 MiB, then 50,000 events it cannot read) reaches the
// daemon's log bounded in rate and size: the server decides how often mcp-go logs,
// and each failure's text quotes what the server sent.
func TestHTTPLogFlood(t *testing.T) {
	t.Parallel()
	const badEvents = 50000
	var gets atomic.Int32
	flooded := make(chan struct{})
	var once sync.Once
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			if gets.Add(1) == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, strings.Repeat("e", 1<<20))
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			bad := "event: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/message","params":"not an object"}` + "\n\n"
			if _, err := io.WriteString(w, strings.Repeat(bad, badEvents)); err != nil {
				return
			}
			// A list_changed after them: the tools/list it brings says the client
			// has read them all.
			io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n\n")
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Mcp-Session-Id", "s1")
		w.Header().Set("Content-Type", "application/json")
		head := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":`
		switch req.Method {
		case "initialize":
			io.WriteString(w, head+`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"noisy","version":"1"}}}`)
		case "tools/list":
			if gets.Load() > 1 {
				once.Do(func() { close(flooded) })
			}
			io.WriteString(w, head+`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`)
		default:
			io.WriteString(w, head+`{}}`)
		}
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	logs := &logCounter{}
	tools := toolmgr.New()
	m, err := New(Config{HealthInterval: time.Hour, Servers: []ServerConfig{{
		Name: "noisy", Transport: TransportStreamableHTTP, URL: ts.URL + "/mcp", Enabled: true}}},
		tools, nil, slog.New(logs), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-flooded:
	case <-time.After(2 * time.Minute):
		t.Fatal("the client did not read the flood within 2 minutes")
	}
	records, largest, sample := logs.counts()
	t.Logf("%d log records for %d unreadable events; the largest %d bytes (%q)", records, badEvents, largest, sample)
	if records > badEvents/50 {
		t.Errorf("%d log records for %d unreadable events", records, badEvents)
	}
	if largest > 4<<10 {
		t.Errorf("a log record of %d bytes (%q)", largest, sample)
	}
}

// TestSSEEndpointElsewhere: an SSE server whose endpoint event names another origin
// (a server behind a proxy announcing its own address, "localhost" where the
// configuration says 127.0.0.1) is refused by mcp-go, which then waits for an endpoint
// until the connect timeout. The server's last error says why, not only that the
// wait for the endpoint ended.
func TestSSEEndpointElsewhere(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: endpoint\ndata: http://mcp.internal.example:3001/message?session=1\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	h := newHarness(t, Config{HealthInterval: time.Hour, MinBackoff: time.Hour, MaxBackoff: time.Hour, Servers: []ServerConfig{{
		Name: "elsewhere", Transport: TransportSSE, URL: ts.URL + "/sse", Enabled: true, ConnectTimeout: time.Second}}})
	h.start(t)
	st := h.waitState(t, "elsewhere", StateFailed, 10*time.Second)
	if !strings.Contains(st.LastError, "origin") {
		t.Errorf("last error %q does not say the endpoint's origin was refused", st.LastError)
	}
	t.Logf("last error: %s", st.LastError)
}

// TestHTTPInitializeRefused: a streamable-HTTP server that refuses initialize with a
// 4xx (a host check, a missing key, a wrong path) is reported with the status and the
// server's own words, not as mcp-go's guess that it is a legacy SSE server; the SSE
// transport is suggested only for the statuses an SSE-only server answers with.
func TestHTTPInitializeRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status  int
		body    string
		want    []string
		wantNot string
		wantSSE bool
	}{
		{http.StatusForbidden, "Access is only allowed at localhost:18102", []string{"HTTP 403 Forbidden", `"Access is only allowed at localhost:18102"`}, "legacy SSE", false},
		{http.StatusBadRequest, "<html><body>\n  <h1>Bad   Host</h1>\n</body></html>", []string{"HTTP 400 Bad Request", "Bad Host"}, "legacy SSE", false},
		{http.StatusNotFound, "404 page not found", []string{"HTTP 404 Not Found", "404 page not found"}, "", true},
		{http.StatusMethodNotAllowed, "", []string{"HTTP 405 Method Not Allowed"}, "", true},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		}))
		t.Cleanup(ts.Close)
		h := newHarness(t, Config{MaxBackoff: time.Hour, MinBackoff: time.Hour, Servers: []ServerConfig{{
			Name: "refusing", Transport: TransportStreamableHTTP, URL: ts.URL + "/mcp", Enabled: true, ConnectTimeout: 5 * time.Second}}})
		h.start(t)
		st := h.waitState(t, "refusing", StateFailed, 10*time.Second)
		for _, w := range tc.want {
			if !strings.Contains(st.LastError, w) {
				t.Errorf("%d: last error %q does not say %q", tc.status, st.LastError, w)
			}
		}
		if tc.wantNot != "" && strings.Contains(st.LastError, tc.wantNot) {
			t.Errorf("%d: last error %q says %q", tc.status, st.LastError, tc.wantNot)
		}
		if got := strings.Contains(st.LastError, "transport: sse"); got != tc.wantSSE {
			t.Errorf("%d: last error %q suggests transport: sse = %v, want %v", tc.status, st.LastError, got, tc.wantSSE)
		}
		h.m.Stop()
	}
}

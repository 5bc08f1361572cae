package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/time/rate"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// maxMessageBytes bounds one message from a server: a line of a stdio server, an
// HTTP response body, one event of an SSE stream. mcp-go reads each whole into memory, several copies of it,
// with no bound of its own, so a server could otherwise take the daemon's memory
// with one answer. A result this large is far beyond what a model reads anyway (the
// token budget keeps some 50 KB of text).
const maxMessageBytes = 16 << 20

var errMessageTooLarge = fmt.Errorf("message larger than %d MiB", maxMessageBytes>>20)

// callTrace is what the transport saw of one tools/call, for the call to use when
// mcp-go fails it: whether a body reader cut off a message of the call (mcp-go
// replaces the read error of an SSE stream with its own words), and the result as
// received.
type callTrace struct {
	tooLarge atomic.Bool
	result   json.RawMessage // set on the calling goroutine
	strayAt  int64           // the connection's strays when the call began
	// plain: a tools/call whose result is the call's (not a task's creation); its
	// result is read here once, into read (see keepResult), set on the calling
	// goroutine.
	plain bool
	read  *tool.Result
}

type callTraceKey struct{}

func withCallTrace(ctx context.Context) (context.Context, *callTrace) {
	tr := new(callTrace)
	return context.WithValue(ctx, callTraceKey{}, tr), tr
}

// traceOf is ctx's call trace, or nil.
func traceOf(ctx context.Context) *callTrace {
	tr, _ := ctx.Value(callTraceKey{}).(*callTrace)
	return tr
}

// keepResult records the result of a tools/call (or of its task, tasks/result) in
// its trace.
func keepResult(ctx context.Context, req transport.JSONRPCRequest, resp *transport.JSONRPCResponse) {
	if (req.Method != string(mcp.MethodToolsCall) && req.Method != string(mcp.MethodTasksResult)) || resp == nil {
		return
	}
	if tr := traceOf(ctx); tr != nil {
		tr.result = resp.Result
		if tr.plain && req.Method == string(mcp.MethodToolsCall) {
			// mcp-go decodes a result twice over and every content block twice
			// more; the proxy converts it here, once, and hands mcp-go an empty
			// result to parse. One it cannot read so, or that asks for input
			// (which mcp-go answers), mcp-go parses as it came.
			if r, ok := readResult(resp.Result); ok {
				tr.read = r
				resp.Result = emptyResult
			}
		}
	}
}

// emptyResult is what mcp-go parses in place of a result the proxy has read.
var emptyResult = json.RawMessage(`{"content":[]}`)

// boundedBodies cuts off HTTP response bodies at maxMessageBytes per message.
type boundedBodies struct{ http.RoundTripper }

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.RoundTripper.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &boundedBody{ReadCloser: resp.Body, events: mt == "text/event-stream", trace: traceOf(req.Context())}
	return resp, nil
}

// boundedBody fails a read once the current message passes maxMessageBytes: the
// whole body, or, in an event stream, the bytes since the last blank line. mcp-go
// joins an event's data lines by copying what it has at each line, so an event of
// many lines also fails once those copies pass maxEventCopyBytes.
type boundedBody struct {
	io.ReadCloser
	events  bool
	trace   *callTrace // the call's, or nil
	n       int        // bytes of the current message
	copies  int        // bytes mcp-go copies for the current event's lines
	line    int        // bytes of the current line but '\r'
	tripped bool
}

// maxEventCopyBytes bounds the copying an event of many lines costs: an event of
// 1,000 lines may have 128 KiB, one of 100 lines about 1.3 MiB.
const maxEventCopyBytes = 4 * maxMessageBytes

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.tripped {
		if b.trace != nil {
			b.trace.tooLarge.Store(true)
		}
		return 0, errMessageTooLarge
	}
	// A read reaches at most one byte past the bound: one that took the rest of a
	// larger message at once (json.Decoder's buffer doubles; a 16 MiB read may
	// bring all of a 30 MB body) would let it through, as no read would follow.
	if room := maxMessageBytes + 1 - b.n; len(p) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	if !b.events {
		b.n += n
		b.tripped = b.n > maxMessageBytes
		return n, err
	}
	data := p[:n]
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			b.n += len(data)
			b.line += len(data) - bytes.Count(data, []byte{'\r'})
			break
		}
		b.line += i - bytes.Count(data[:i], []byte{'\r'})
		if b.line == 0 {
			b.n, b.copies = 0, 0 // a blank line ends an event
		} else {
			b.n += i + 1
			b.copies += b.n
		}
		b.line = 0
		data = data[i+1:]
	}
	b.tripped = b.n > maxMessageBytes || b.copies > maxEventCopyBytes
	return n, err
}

// boundedLines is a stdio child's stdout, failing once a line passes
// maxMessageBytes. The line cannot be skipped (the call it answers would wait for
// ever), so the connection ends, saying why.
//
// It also keeps the lines that cannot be JSON-RPC (those not beginning with '{'):
// mcp-go skips them without a word. Until the connection is up the first one is
// kept, else a server that writes its logs on stdout would fail with "context
// canceled" alone; after, they go to the connection's strays, for a call that
// times out to quote. Every one is logged, within a bound (strayLines).
type boundedLines struct {
	r    io.Reader
	conn *conn
	n    int // bytes of the current line

	begun bool   // the current line has a byte other than white space
	stray []byte // the stray line being kept, until its end
	kept  bool   // stray is whole (or long enough)
	rest  bool   // the current line is a stray one already kept: skip to its end
}

// maxStrayLine is how much of a stray stdout line a failed connection quotes.
const maxStrayLine = 200

func (b *boundedLines) Read(p []byte) (int, error) {
	if b.n > maxMessageBytes {
		b.conn.markDead(fmt.Errorf("the server wrote a %w", errMessageTooLarge))
		return 0, errMessageTooLarge
	}
	n, err := b.r.Read(p)
	b.screen(p[:n])
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		b.n = n - i - 1
	} else {
		b.n += n
	}
	return n, err
}

// screen looks for the lines of data that cannot be JSON-RPC.
func (b *boundedLines) screen(data []byte) {
	for _, c := range data {
		switch {
		case b.rest:
			b.rest = c != '\n'
		case b.stray != nil:
			if c == '\n' || len(b.stray) >= maxStrayLine {
				b.keep()
				b.rest = c != '\n'
				continue
			}
			b.stray = append(b.stray, c)
		case c == '\n':
			b.begun = false
		case b.begun || c == ' ' || c == '\t' || c == '\r':
		case c == '{':
			b.begun = true
		default:
			b.stray = append(make([]byte, 0, maxStrayLine), c)
		}
	}
	if len(b.stray) > 0 && !b.kept && !b.conn.opened.Load() {
		// Keep what there is so far: the rest may never come.
		s := string(b.stray)
		b.conn.stray.Store(&s)
	}
}

// keep takes a whole stray line (or its first maxStrayLine bytes).
func (b *boundedLines) keep() {
	s := string(b.stray)
	b.stray = nil
	switch {
	case b.conn.opened.Load():
		b.conn.strays.add(b.conn.log, s)
		return
	case !b.kept:
		b.conn.stray.Store(&s)
		b.kept = true
	}
	b.conn.strays.logStray(b.conn.log, s)
}

// isTooLarge reports a message cut off by maxMessageBytes.
func isTooLarge(err error) bool { return errors.Is(err, errMessageTooLarge) }

// Bounds of one tools/list, all its pages: mcp-go follows a server's cursors for as
// long as they are new.
const (
	maxListedTools = 10000
	maxListPages   = 1000
	maxListBytes   = 4 * maxMessageBytes
)

// toolListing screens the pages of a connection's tools/list as they arrive (a
// connection lists its tools one listing at a time): entries mcp-go cannot decode are
// dropped with a note, and a listing past the bounds fails.
type toolListing struct {
	mu    sync.Mutex
	tools int
	pages int
	bytes int
	notes []string
	// schemas are the listed tools' inputSchema and outputSchema as written, by
	// name (see inputSchema, outputSchema).
	schemas map[string]listedSchema
}

// screen checks the answer to a tools/list request and may rewrite its result.
func (l *toolListing) screen(req transport.JSONRPCRequest, resp *transport.JSONRPCResponse) error {
	if req.Method != string(mcp.MethodToolsList) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if listCursor(req) == "" {
		l.tools, l.pages, l.bytes, l.notes, l.schemas = 0, 0, 0, nil, nil
	}
	if resp == nil || resp.Error != nil {
		return nil
	}
	result, n, notes := readableTools(resp.Result)
	resp.Result = result
	if l.schemas == nil {
		l.schemas = map[string]listedSchema{}
	}
	for name, schema := range listedSchemas(result) {
		if _, dup := l.schemas[name]; !dup {
			l.schemas[name] = schema
		}
	}
	l.tools += n
	l.pages++
	l.bytes += len(result)
	l.notes = append(l.notes, notes...)
	if l.tools > maxListedTools || l.pages > maxListPages || l.bytes > maxListBytes {
		return fmt.Errorf("the server's tool list is too long: more than %d tools, %d pages or %d MiB",
			maxListedTools, maxListPages, maxListBytes>>20)
	}
	return nil
}

// takeNotes returns the notes of the last listing.
func (l *toolListing) takeNotes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.notes
}

// withSchemas gives the tools of the last listing their inputSchema and
// outputSchema as the server wrote them, in place of mcp-go's typed reading of them
// (mcp-go refuses to write a tool with both).
func (l *toolListing) withSchemas(tools []mcp.Tool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range tools {
		s := l.schemas[tools[i].Name]
		if len(s.input) > 0 && string(s.input) != "null" {
			tools[i].RawInputSchema = s.input
			tools[i].InputSchema = mcp.ToolInputSchema{}
		}
		if len(s.output) > 0 {
			tools[i].RawOutputSchema = s.output
			tools[i].OutputSchema = mcp.ToolOutputSchema{}
		}
	}
}

func listCursor(req transport.JSONRPCRequest) mcp.Cursor {
	switch p := req.Params.(type) {
	case mcp.PaginatedParams:
		return p.Cursor
	case *mcp.PaginatedParams:
		if p != nil {
			return p.Cursor
		}
		return ""
	}
	b, err := json.Marshal(req.Params)
	if err != nil {
		return ""
	}
	var p struct {
		Cursor mcp.Cursor `json:"cursor"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Cursor
}

// Server-to-client requests (ping, and sampling, elicitation and roots, which the
// proxy refuses) a connection answers per second; more are left unanswered.
const (
	serverRequestsPerSec = 50
	serverRequestBurst   = 50
)

// limitRequests bounds the answers to the server's requests: mcp-go answers each on
// a goroutine of its own, which waits for as long as the server does not read, so a
// server that sends requests without reading the answers would make goroutines
// without end (140,000 a second over stdio) until its health checks failed. A
// request left unanswered costs nothing past its reading.
func (c *conn) limitRequests(h transport.RequestHandler) transport.RequestHandler {
	lim := rate.NewLimiter(serverRequestsPerSec, serverRequestBurst)
	var dropped atomic.Int64
	return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if !lim.Allow() {
			if dropped.Add(1) == 1 {
				c.log.Warn("mcp server: it sends the client more requests than it may; the excess is not answered",
					"per_second", serverRequestsPerSec)
			}
			return nil, nil
		}
		return h(ctx, req)
	}
}

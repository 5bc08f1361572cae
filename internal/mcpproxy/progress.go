package mcpproxy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// progressRouter hands notifications/progress to the call that asked for them. Every
// call gets its own token; mcp-go delivers all notifications of a connection to one
// callback, so the token is the only way back to the call. Tokens are the manager's,
// and guessable: each connection's progressGate lets through only the tokens of its
// own calls, so that no server can write into calls made on other connections.
type progressRouter struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]*progressCall
}

// Bounds of the progress a server may send for one call: it is written to the call's
// logs and streams, and a status line needs no more.
const (
	maxProgressText  = 4 << 10 // one notification's message, cut beyond
	maxProgressBytes = 1 << 20 // one call's, dropped beyond
)

// progressCall is a call that may receive progress, with what it received so far.
type progressCall struct {
	tc    *tool.Context
	bytes int
	// last is the highest progress passed on as a number (valid once numbered).
	last     float64
	numbered bool
}

func newProgressRouter() *progressRouter {
	return &progressRouter{calls: map[string]*progressCall{}}
}

// add registers a call and returns its token; remove must follow when the call ends.
func (p *progressRouter) add(tc *tool.Context) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	token := "tsd-" + strconv.FormatUint(p.next, 10)
	p.calls[token] = &progressCall{tc: tc}
	return token
}

// remove forgets a token: later notifications for it are dropped.
func (p *progressRouter) remove(token string) {
	p.mu.Lock()
	delete(p.calls, token)
	p.mu.Unlock()
}

// handle routes one notifications/progress. It runs on the transport's reading
// goroutine, so it must not block; tool.Progress implementations never do.
//
// Each notification is one line of the call's info stream: the stream's
// notifications are coalesced into one event when they come fast and read back from
// its log as one text, where "1/3" and "2/3" without a line end read "1/32/3".
//
// Its numbers also become the call's numeric progress (tool.Context.Report) when they
// are usable: progress and total finite and not negative (total 0 counts as unknown),
// and progress above the last one passed on, since the MCP specification says that
// it increases with each notification. A notification that breaks this keeps its
// line (text consumers see what the server sent) but its numbers are dropped rather
// than clamped: a clamped value would report progress the server never claimed.
func (p *progressRouter) handle(n mcp.JSONRPCNotification) {
	f := n.Params.AdditionalFields
	token := tokenString(f["progressToken"])
	if token == "" {
		return
	}
	text := progressText(f)
	if text == "" {
		return
	}
	text = cutLine(text)
	msg, _ := f["message"].(string)
	if len(msg) > maxProgressText {
		// Cut like the line: the report's own line (an emitter without numbers
		// writes it whole) stays within the call's budget.
		msg = strings.ToValidUTF8(msg[:maxProgressText], "") + "…"
	}
	progress, numeric := number(f["progress"])
	total := 0.0
	if raw, ok := f["total"]; ok && raw != nil {
		t, isNumber := number(raw)
		total, numeric = t, numeric && isNumber
	}
	numeric = numeric && tool.ValidProgress(progress, total)
	p.mu.Lock()
	pc, text, within := p.charge(token, text)
	if pc == nil {
		p.mu.Unlock()
		return
	}
	numeric = numeric && within && (!pc.numbered || progress > pc.last)
	if numeric {
		pc.last, pc.numbered = progress, true
	}
	p.mu.Unlock()
	if numeric {
		// The report writes its own line on info (the same text for a message up to
		// progress.MaxMessage bytes).
		pc.tc.Report(progress, total, msg)
		return
	}
	pc.tc.Emit("info", text)
}

// line writes one line of text (a task's status, see followTask) to the info stream
// of the call holding token, within the call's progress budget like a notification.
func (p *progressRouter) line(token, text string) {
	p.mu.Lock()
	pc, text, _ := p.charge(token, cutLine(text))
	p.mu.Unlock()
	if pc != nil {
		pc.tc.Emit("info", text)
	}
}

// charge counts text against the progress budget of the call holding token, with
// p.mu held. It returns the call (nil: no such call, or its budget is spent), the text
// to write (the note that the rest is dropped, when this text spends the budget) and
// whether the text is within the budget.
func (p *progressRouter) charge(token, text string) (*progressCall, string, bool) {
	pc := p.calls[token]
	if pc == nil || pc.bytes > maxProgressBytes {
		return nil, "", false
	}
	pc.bytes += len(text)
	if pc.bytes > maxProgressBytes {
		return pc, fmt.Sprintf("[more than %d MiB of progress from the mcp server; the rest is dropped]\n", maxProgressBytes>>20), false
	}
	return pc, text, true
}

// cutLine is text cut at maxProgressText bytes, ended with a line end.
func cutLine(text string) string {
	if len(text) > maxProgressText {
		text = strings.ToValidUTF8(text[:maxProgressText], "") + "…"
	}
	return text + "\n"
}

// progressGate binds progress tokens to one connection: a notifications/progress
// arriving on the connection passes only when its token belongs to a request in flight
// over that same connection. The connection's transport calls track for each request
// it sends and filters the notifications it receives.
type progressGate struct {
	mu     sync.Mutex
	tokens map[string]int // progress token → requests in flight carrying it
}

// track records the progress token of an outgoing request, if it has one, until the
// returned function is called (when the request is answered or abandoned).
func (g *progressGate) track(req transport.JSONRPCRequest) func() {
	return g.hold(requestProgressToken(req))
}

// hold admits progress for token until the returned function is called: a task's
// progress goes on with its request's token after the request is answered (the
// CreateTaskResult), for as long as the proxy follows the task.
func (g *progressGate) hold(token string) func() {
	if token == "" {
		return func() {}
	}
	g.mu.Lock()
	if g.tokens == nil {
		g.tokens = map[string]int{}
	}
	g.tokens[token]++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		if g.tokens[token]--; g.tokens[token] <= 0 {
			delete(g.tokens, token)
		}
		g.mu.Unlock()
	}
}

// filter wraps a connection's notification handler: progress for a token not in
// flight on this connection is dropped.
func (g *progressGate) filter(h func(mcp.JSONRPCNotification)) func(mcp.JSONRPCNotification) {
	return func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) && !g.admits(tokenString(n.Params.AdditionalFields["progressToken"])) {
			return
		}
		h(n)
	}
}

func (g *progressGate) admits(token string) bool {
	if token == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tokens[token] > 0
}

// requestProgressToken is the _meta.progressToken of a tools/call, the only request
// the proxy gives one; "" for the others.
func requestProgressToken(req transport.JSONRPCRequest) string {
	if req.Method != string(mcp.MethodToolsCall) {
		return ""
	}
	switch p := req.Params.(type) {
	case mcp.CallToolParams:
		if p.Meta != nil {
			return tokenString(p.Meta.ProgressToken)
		}
		return ""
	case *mcp.CallToolParams:
		if p != nil && p.Meta != nil {
			return tokenString(p.Meta.ProgressToken)
		}
		return ""
	}
	// Other shapes (mcp-go rewrites params as a field map on the 2026 protocol).
	b, err := json.Marshal(req.Params)
	if err != nil {
		return ""
	}
	var meta struct {
		Meta struct {
			ProgressToken any `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(b, &meta) != nil {
		return ""
	}
	return tokenString(meta.Meta.ProgressToken)
}

func tokenString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	default:
		return fmt.Sprint(t)
	}
}

// progressText is the notification as a line for a person: "progress/total" (or
// "progress" without a total), or the message, followed by "(progress/total)" when
// the total is known (the message alone dropped how far the call is).
func progressText(f map[string]any) string {
	msg, _ := f["message"].(string)
	progress, ok := number(f["progress"])
	count := ""
	if ok {
		count = formatNumber(progress)
		if total, ok := number(f["total"]); ok {
			count += "/" + formatNumber(total)
		} else if msg != "" {
			count = "" // a bare count says little beside a message
		}
	}
	switch {
	case msg == "":
		return count
	case count == "":
		return msg
	}
	return msg + " (" + count + ")"
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	default:
		return 0, false
	}
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

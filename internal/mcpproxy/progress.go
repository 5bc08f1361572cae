package mcpproxy

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// progressRouter hands notifications/progress to the call that asked for them. Every
// call gets its own token; mcp-go delivers all notifications of a connection to one
// callback, so the token is the only way back to the call.
type progressRouter struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]*tool.Context
}

func newProgressRouter() *progressRouter {
	return &progressRouter{calls: map[string]*tool.Context{}}
}

// add registers a call and returns its token; remove must follow when the call ends.
func (p *progressRouter) add(tc *tool.Context) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	token := "tsd-" + strconv.FormatUint(p.next, 10)
	p.calls[token] = tc
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
func (p *progressRouter) handle(n mcp.JSONRPCNotification) {
	f := n.Params.AdditionalFields
	token := tokenString(f["progressToken"])
	if token == "" {
		return
	}
	p.mu.Lock()
	tc := p.calls[token]
	p.mu.Unlock()
	if tc == nil {
		return
	}
	if text := progressText(f); text != "" {
		tc.Emit("info", text)
	}
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

// progressText is the notification's message, or "progress/total" without one.
func progressText(f map[string]any) string {
	if m, ok := f["message"].(string); ok && m != "" {
		return m
	}
	progress, ok := number(f["progress"])
	if !ok {
		return ""
	}
	if total, ok := number(f["total"]); ok {
		return formatNumber(progress) + "/" + formatNumber(total)
	}
	return formatNumber(progress)
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

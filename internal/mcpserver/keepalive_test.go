package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestQuietCallKeepsProgressGoing: a call with a progress token that waits for a
// person says so again every stream_keepalive, with rising progress. Clients that
// time requests out (the TypeScript SDK: 60 s) restart the clock on progress
// (resetTimeoutOnProgress) — without these the call was cancelled, and its approval
// request withdrawn, before most people could decide it; and a proxy cut the quiet
// stream as idle.
func TestQuietCallKeepsProgressGoing(t *testing.T) {
	t.Parallel()
	const every = 100 * time.Millisecond
	d := start(t, func(c *config.Config) { c.StreamKeepalive = every })
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}, "permission_mode": "default"})
	c := d.connect(s.ID)
	var mu sync.Mutex
	var values []float64
	var msgs []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) || fmt.Sprint(n.Params.AdditionalFields["progressToken"]) != "tok-ka" {
			return
		}
		v, _ := n.Params.AdditionalFields["progress"].(float64)
		m, _ := n.Params.AdditionalFields["message"].(string)
		mu.Lock()
		values, msgs = append(values, v), append(msgs, m)
		mu.Unlock()
	})
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		req := callReq("execute_command", map[string]any{"command": riskyCommand})
		req.Params.Meta = &mcp.Meta{ProgressToken: "tok-ka"}
		res, err := c.CallTool(ctx, req)
		done <- outcome{res, err}
	}()
	apr := d.pendingApproval(s.ID)
	// Wait for four notes rather than sleeping a fixed time and counting: a loaded
	// machine may send fewer in any given span. The call waits for approval for as
	// long as the test does (its context allows waitLimit), so only keepalives can
	// bring them; the guard is far above 4×stream_keepalive.
	waiting := time.Now()
	snapshot := func() ([]float64, []string) {
		mu.Lock()
		defer mu.Unlock()
		return append([]float64(nil), values...), append([]string(nil), msgs...)
	}
	var gotValues []float64
	var gotMsgs []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(every / 2) {
		if gotValues, gotMsgs = snapshot(); len(gotValues) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d progress notifications in %v of waiting for approval with stream_keepalive %v, want 4: %q",
				len(gotValues), time.Since(waiting).Round(time.Millisecond), every, gotMsgs)
		}
	}
	t.Logf("4 progress notifications %s after the approval was pending (stream_keepalive %s)", time.Since(waiting).Round(time.Millisecond), every)
	// Each note carries a new, higher value. They are sent in that order, but mcp-go's
	// streamable HTTP server hands a session's notifications to whichever of its open
	// streams (the GET stream, the call's POST) reads first, so they may arrive out of
	// order (CI saw [1 2 4 3 5 …]): the values are checked as a set.
	sorted := slices.Clone(gotValues)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] <= sorted[i-1] {
			t.Fatalf("progress value sent twice: %v", gotValues)
		}
	}
	for _, m := range gotMsgs {
		if !strings.Contains(m, "execute_command") || !strings.Contains(m, "waiting") {
			t.Fatalf("keepalive progress says %q", m)
		}
	}
	d.do(http.MethodPost, "/v1/approvals/"+apr.ID+"/decision", map[string]any{"decision": "approve"}, http.StatusOK, nil)
	out := <-done
	if out.err != nil || out.res.IsError || !strings.Contains(resultText(out.res), "removed") {
		t.Fatalf("approved call: err=%v res=%+v", out.err, out.res)
	}
}

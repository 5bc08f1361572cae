package mcpserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// lockedBuffer is a log destination the daemon's goroutines write to concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClientGoneIsNoError: an MCP client that gives up on a call drops its stream
// (mcp-go's client does so on cancellation), and the call runs on for the resume
// window, its progress notifications finding the stream closed. That is a client
// going away, not a fault of the daemon: each one was logged at ERROR ("Failed to
// write SSE event … broken pipe"), with nothing saying which session, which pages
// operators who alert on errors whenever a user presses stop.
func TestClientGoneIsNoError(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d := &daemon{Daemon: testdaemon.StartWithLog(t, func(c *config.Config) {
		c.MCPEndpoint.ResumeWindow = time.Minute
	}, log), t: t}
	s := d.session(map[string]any{"available_tools": []string{"execute_command"}})
	c := d.connect(s.ID)
	first := make(chan struct{})
	var once sync.Once
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			once.Do(func() { close(first) })
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := callReq("execute_command", map[string]any{"command": "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo line$i; sleep 0.2; done"})
	req.Params.Meta = &mcp.Meta{ProgressToken: "gone"}
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, req)
		errc <- err
	}()
	select {
	case <-first:
	case <-time.After(waitLimit):
		t.Fatal("no progress notification")
	}
	cancel() // the client drops the call's stream
	if err := <-errc; err == nil {
		t.Fatal("a dropped tools/call returned no error")
	}
	// The call runs on without its client (resume window) to its end, sending its
	// progress to the closed stream.
	var rec callRecord
	waitFor(t, "the call to end", func() bool {
		for _, r := range d.calls(s.ID) {
			rec = r
		}
		return rec.Status != "" && rec.Status != "running" && rec.Status != "pending" && rec.Status != "waiting"
	})
	if rec.Status != "succeeded" {
		t.Fatalf("the call ended %+v; want it run to its end within the resume window", rec)
	}
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("a client that went away was logged as an error: %s", line)
		}
	}
}

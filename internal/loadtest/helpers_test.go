package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// newClient returns an API client whose transport keeps as many connections to the
// daemon as there are concurrent streams, instead of two idle ones.
func newClient(base string, conns int, opts ...client.Option) (*client.Client, *http.Transport) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = 0
	return client.New(base, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: tr})}, opts...)...), tr
}

// mixedCalls is one stream's batch: a file written and read back, a command, a JSON
// document written and read, a memory saved. Names are unique per tag so that
// concurrent streams in one tenant do not collide.
func mixedCalls(tag string) []client.Call {
	arg := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	return []client.Call{
		{ID: "w", Name: "write_file", Arguments: arg(map[string]any{"path": tag + ".txt", "content": "hello " + tag + "\n"})},
		{ID: "r", Name: "read_file", Arguments: arg(map[string]any{"path": tag + ".txt"})},
		{ID: "e", Name: "execute_command", Arguments: arg(map[string]any{"command": "echo " + tag})},
		{ID: "jw", Name: "json_write", Arguments: arg(map[string]any{"path": tag + ".json", "pointer": "/k", "value": tag, "create_missing": true})},
		{ID: "jr", Name: "json_read", Arguments: arg(map[string]any{"path": tag + ".json", "pointer": "/k"})},
		{ID: "m", Name: "memory_save", Arguments: arg(map[string]any{"key": "mem-" + tag, "content": "remember " + tag})},
	}
}

var mixedTools = []string{"write_file", "read_file", "execute_command", "json_write", "json_read", "memory_save"}

// runChecked runs a batch and checks the stream: it ends with done, every call has
// exactly one message, none is an error, and the command and the read saw the tag.
func runChecked(ctx context.Context, c *client.Client, sessionID, tag string) error {
	calls := mixedCalls(tag)
	msgs := map[string]client.Event{}
	done := false
	err := c.Run(ctx, sessionID, "", client.Batch{Calls: calls, Strategy: "sequential"}, func(ev client.Event) error {
		switch ev.Type {
		case "message":
			var m struct {
				ToolCallID string `json:"tool_call_id"`
				IsError    bool   `json:"is_error"`
			}
			if err := json.Unmarshal(ev.Message, &m); err != nil {
				return fmt.Errorf("bad message: %w", err)
			}
			if _, dup := msgs[m.ToolCallID]; dup {
				return fmt.Errorf("two messages for %s", m.ToolCallID)
			}
			if m.IsError {
				return fmt.Errorf("call %s failed: %s", m.ToolCallID, ev.Content())
			}
			msgs[m.ToolCallID] = ev
		case "done":
			done = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("no done event")
	}
	if len(msgs) != len(calls) {
		return fmt.Errorf("%d messages for %d calls", len(msgs), len(calls))
	}
	for _, id := range []string{"r", "e", "jr"} {
		if !strings.Contains(msgs[id].Content(), tag) {
			return fmt.Errorf("call %s: %q does not contain %q", id, msgs[id].Content(), tag)
		}
	}
	return nil
}

// waitFor polls cond until it holds or the deadline passes; it returns the last error.
func waitFor(timeout, every time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

func fatalIf(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startOnStoppablePostgres starts a daemon on the throwaway PostgreSQL cluster, which
// the test may stop and start (pgtest.StopServer, StartServer); it skips when the
// tests use a server of their own (TOOLSERVER_TEST_POSTGRES_URL), which they must not
// stop. Such tests must not run in parallel.
func startOnStoppablePostgres(t *testing.T) *testdaemon.Daemon {
	t.Helper()
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("needs the throwaway cluster to stop and start it; " + pgtest.EnvURL + " is set")
	}
	url := pgtest.URL(t)
	return testdaemon.Start(t, func(c *config.Config) { c.Store = url })
}

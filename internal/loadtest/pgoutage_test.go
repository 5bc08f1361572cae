package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestResultRecordedAfterPostgresOutage: a command is running when PostgreSQL goes
// away and ends while it is away. Its client gets the result at once; once PostgreSQL
// is back, the call's record holds that result instead of saying running for as long
// as the daemon lives (a client that lost its stream polls that record).
func TestResultRecordedAfterPostgresOutage(t *testing.T) {
	d := startOnStoppablePostgres(t)
	c, tr := newClient(d.URL, 2)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, PermissionMode: "bypass"})
	fatalIf(t, err)

	started := make(chan string, 1)
	type answer struct {
		content string
		isError bool
		err     error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		a.err = c.Run(ctx, s.ID, "", client.Batch{Calls: []client.Call{{ID: "slow", Name: "execute_command",
			Arguments: json.RawMessage(`{"command":"sleep 3; echo finished while the database was away"}`)}}}, func(ev client.Event) error {
			switch ev.Type {
			case "tool_start":
				started <- ev.CallID
			case "message":
				var m struct {
					Content string `json:"content"`
				}
				if err := json.Unmarshal(ev.Message, &m); err != nil {
					return err
				}
				a.content, a.isError = m.Content, ev.IsError
			}
			return nil
		})
		answered <- a
	}()
	var callID string
	select {
	case callID = <-started:
	case a := <-answered:
		t.Fatalf("the call ended before it started: %+v", a)
	}
	// tool_start comes before the call is marked running (after the session's lock);
	// a call that cannot be marked running is not run. Stop the database only once
	// the command runs.
	fatalIf(t, waitFor(30*time.Second, 20*time.Millisecond, func() error {
		r, err := c.GetCall(ctx, callID)
		if err != nil {
			return err
		}
		if r.Status != "running" {
			return fmt.Errorf("call %s is %s", callID, r.Status)
		}
		return nil
	}))
	fatalIf(t, pgtest.StopServer())
	// The other tests share the cluster: it runs again whatever happens here.
	t.Cleanup(func() { _ = pgtest.StartServer() })
	a := <-answered
	if a.err != nil || a.isError || !strings.Contains(a.content, "finished while the database was away") {
		t.Fatalf("the client did not get the result while PostgreSQL was away: %+v", a)
	}
	fatalIf(t, pgtest.StartServer())
	t0 := time.Now()
	fatalIf(t, waitFor(90*time.Second, 250*time.Millisecond, func() error {
		r, err := c.GetCall(ctx, callID)
		if err != nil {
			return err
		}
		if r.Status != "succeeded" || !strings.Contains(recordText(r), "finished while the database was away") {
			return fmt.Errorf("call %s is recorded %s: %q", callID, r.Status, recordText(r))
		}
		return nil
	}))
	t.Logf("the record holds the result %s after PostgreSQL came back", time.Since(t0).Round(time.Millisecond))
}

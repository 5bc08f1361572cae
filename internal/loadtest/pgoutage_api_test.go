package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestPostgresOutageAnswers: while PostgreSQL is away, API requests that need it are
// answered 503 unavailable with Retry-After, which clients retry, not 500 internal
// error; an approval can be decided once it is back and its call runs; and a
// background job whose output ended during the outage has its call's record say so
// (output_open false) once it is back, without a restart of the daemon.
func TestPostgresOutageAnswers(t *testing.T) {
	d := startOnStoppablePostgres(t)
	c, tr := newClient(d.URL, 4)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	jobs, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, PermissionMode: "bypass"})
	fatalIf(t, err)
	var jobCall string
	fatalIf(t, c.Run(ctx, jobs.ID, "", client.Batch{Calls: []client.Call{{ID: "bg", Name: "execute_command",
		Arguments: json.RawMessage(`{"command":"sleep 2","background":true}`)}}}, func(ev client.Event) error {
		if ev.Type == "message" {
			jobCall = ev.CallID
		}
		return nil
	}))
	if r, err := c.GetCall(ctx, jobCall); err != nil || !r.OutputOpen {
		t.Fatalf("the background job's call: %+v, %v; want its output open", r, err)
	}
	jobEnds := time.Now().Add(2 * time.Second)

	asks, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	fatalIf(t, err)
	type answer struct {
		ev  client.Event
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		a.err = c.Run(ctx, asks.ID, "", client.Batch{Calls: []client.Call{{ID: "risky", Name: "execute_command",
			Arguments: json.RawMessage(`{"command":"touch approved.txt && echo approved"}`)}}}, func(ev client.Event) error {
			if ev.Type == "message" {
				a.ev = ev
			}
			return nil
		})
		answered <- a
	}()
	var approval string
	fatalIf(t, waitFor(30*time.Second, 20*time.Millisecond, func() error {
		l, err := c.ListApprovals(ctx, client.ApprovalFilter{Status: "pending", SessionID: asks.ID})
		if err != nil {
			return err
		}
		if len(l.Approvals) != 1 {
			return fmt.Errorf("%d pending approvals", len(l.Approvals))
		}
		approval = l.Approvals[0].ID
		return nil
	}))

	fatalIf(t, pgtest.StopServer())
	// The other tests share the cluster: it runs again whatever happens here.
	t.Cleanup(func() { _ = pgtest.StartServer() })
	unavailable := func(what string, err error) {
		t.Helper()
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.Code != "unavailable" || e.RetryAfter <= 0 {
			t.Errorf("%s with PostgreSQL away: %v (%+v); want 503 unavailable with Retry-After", what, err, e)
		}
	}
	_, err = c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	unavailable("creating a session", err)
	_, err = c.GetCall(ctx, jobCall)
	unavailable("reading a call", err)
	_, err = c.Decide(ctx, approval, client.Decision{Decision: "approve"})
	unavailable("deciding an approval", err)
	_, err = c.ListCalls(ctx, client.CallFilter{Live: true})
	unavailable("listing live calls", err)
	var refused client.Event
	fatalIf(t, c.Run(ctx, jobs.ID, "", client.Batch{Calls: []client.Call{{ID: "away", Name: "execute_command",
		Arguments: json.RawMessage(`{"command":"echo away"}`)}}}, func(ev client.Event) error {
		if ev.Type == "message" {
			refused = ev
		}
		return nil
	}))
	var m struct{ Content string }
	if refused.ErrorKind != "unavailable" || json.Unmarshal(refused.Message, &m) != nil || !strings.Contains(m.Content, "database cannot be reached") {
		t.Errorf("a call with PostgreSQL away: %+v (%s); want unavailable saying the database cannot be reached", refused, refused.Message)
	}

	time.Sleep(time.Until(jobEnds) + 500*time.Millisecond) // the job ends while PostgreSQL is away
	fatalIf(t, pgtest.StartServer())
	back := time.Now()

	fatalIf(t, waitFor(60*time.Second, 100*time.Millisecond, func() error {
		_, err := c.Decide(ctx, approval, client.Decision{Decision: "approve"})
		return err
	}))
	select {
	case a := <-answered:
		if a.err != nil || a.ev.IsError {
			t.Errorf("the approved call: %+v; want its result", a)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call approved after the outage did not answer within 60s")
	}
	fatalIf(t, waitFor(60*time.Second, 100*time.Millisecond, func() error {
		r, err := c.GetCall(ctx, jobCall)
		if err != nil {
			return err
		}
		if r.OutputOpen {
			return fmt.Errorf("the call of a job that ended during the outage still says its output is open")
		}
		return nil
	}))
	t.Logf("recovered %s after PostgreSQL came back", time.Since(back).Round(time.Millisecond))
}

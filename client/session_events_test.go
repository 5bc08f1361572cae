package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// slowReport is a background tool (its call answers with a handle at once) whose
// result comes when the test releases it.
type slowReport struct{ release chan struct{} }

func (slowReport) Spec() tool.Spec {
	return tool.Spec{Name: "slow_report", Description: "Builds a report in the background.", Mode: tool.ModeBackground,
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func (s slowReport) Run(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
	select {
	case <-s.release:
		return tool.TextResult("the report is ready"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestSessionEvents: a backend follows its session's background results (GET
// /v1/sessions/{id}/events): a background call's stream gives a handle at once; the
// call's approval request comes as approval_required, and once approved its result
// as a tool_result event; ending the context ends the follow.
func TestSessionEvents(t *testing.T) {
	t.Parallel()
	// Keepalives come soon, so that the test knows when its stream is open: events
	// before that are not the stream's (a CI run lost the approval request so).
	d := testdaemon.Start(t, func(c *config.Config) { c.StreamKeepalive = 200 * time.Millisecond })
	bg := slowReport{release: make(chan struct{})}
	if err := d.App.Tools.Register(bg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := client.New(d.URL)
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"slow_report"}})
	if err != nil {
		t.Fatal(err)
	}
	followCtx, stop := context.WithCancel(ctx)
	events := make(chan client.Event, 1024)
	followed := make(chan error, 1)
	go func() {
		followed <- c.SessionEvents(followCtx, s.ID, "", func(ev client.Event) error { events <- ev; return nil })
	}()
	select {
	case <-events: // a keepalive: the stream is open
	case err := <-followed:
		t.Fatalf("SessionEvents: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the session's events stream did not open in 30 s")
	}
	var handle string
	err = c.Run(ctx, s.ID, "", client.Batch{Calls: []client.Call{{ID: "r1", Name: "slow_report", Arguments: json.RawMessage(`{}`)}}},
		func(ev client.Event) error {
			if ev.Type == "message" {
				handle = ev.Content()
				close(bg.release) // the report is done once the call has answered with its handle
			}
			return nil
		})
	if err != nil || handle == "" {
		t.Fatalf("run: %v, handle %q", err, handle)
	}
	approved, deadline := false, time.After(60*time.Second) // one deadline: keepalives come meanwhile
	for done := false; !done; {
		select {
		case ev := <-events:
			if ev.Type == "approval_required" { // an approver follows the session too
				var a struct{ ID string }
				_ = json.Unmarshal(ev.Approval, &a)
				if _, err := c.Decide(ctx, a.ID, client.Decision{Decision: "approve", Actor: "test"}); err != nil {
					t.Fatal(err)
				}
				approved = true
			}
			if ev.Type == "tool_result" {
				if ev.ToolCallID != "r1" || !strings.Contains(ev.Content(), "the report is ready") {
					t.Fatalf("tool_result %+v, want r1's report", ev)
				}
				done = true
			}
		case err := <-followed:
			t.Fatalf("SessionEvents ended before the result: %v", err)
		case <-deadline:
			t.Fatal("no tool_result in 60 s")
		}
	}
	if !approved {
		t.Error("the background call's approval request did not reach the session's events")
	}
	stop()
	select {
	case err := <-followed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("SessionEvents after its context ended: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SessionEvents did not return after its context ended")
	}
	if err := c.SessionEvents(ctx, "ses_nope", "", func(client.Event) error { return nil }); !client.IsNotFound(err) {
		t.Errorf("events of an unknown session: %v, want a 404", err)
	}
}

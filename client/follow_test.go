package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestFollowCall: a backend's stream drops while its call waits for a person
// (on_disconnect continue); it follows the call again (GET
// /v1/tool-calls/{id}/events): the replay shows the approval request, and once an
// approver decides, the call's message and done come.
func TestFollowCall(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, nil)
	ctx := context.Background()
	c := client.New(d.URL)
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, drop := context.WithCancel(ctx)
	var callID string
	err = c.Run(runCtx, s.ID, "", client.Batch{OnDisconnect: "continue", Calls: []client.Call{
		{ID: "a", Name: "execute_command", Arguments: json.RawMessage(`{"command":"mkdir -p built && echo approved-and-ran"}`)},
	}}, func(ev client.Event) error {
		if ev.Type == "approval_required" {
			callID = ev.CallID
			drop() // the backend's connection goes away
		}
		return nil
	})
	if callID == "" || !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v; want it to wait for approval (call %q)", err, callID)
	}

	events := make(chan client.Event, 64)
	followed := make(chan error, 1)
	go func() {
		followed <- c.FollowCall(ctx, callID, "", func(ev client.Event) error { events <- ev; return nil })
	}()
	var approval struct {
		ID string `json:"id"`
	}
	for approval.ID == "" {
		select {
		case ev := <-events:
			if ev.Type == "approval_required" {
				_ = json.Unmarshal(ev.Approval, &approval)
			}
		case err := <-followed:
			t.Fatalf("FollowCall ended before the approval request was replayed: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no approval_required replayed in 30 s")
		}
	}
	if _, err := c.Decide(ctx, approval.ID, client.Decision{Decision: "approve", Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-followed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("FollowCall did not end in 60 s after the approval")
	}
	close(events)
	var msg *client.Event
	var types []string
	for ev := range events {
		types = append(types, ev.Type)
		if ev.Type == "message" {
			msg = &ev
		}
	}
	if msg == nil || msg.IsError || !strings.Contains(msg.Content(), "approved-and-ran") || types[len(types)-1] != "done" {
		t.Fatalf("events after the approval: %v, message %+v; want the call's result, then done", types, msg)
	}
	if _, err := c.GetCall(ctx, callID); err != nil {
		t.Fatal(err)
	}
	if err := c.FollowCall(ctx, "tc_nosuchcall", "", func(client.Event) error { return nil }); !client.IsNotFound(err) {
		t.Errorf("following an unknown call: %v, want a 404", err)
	}
}

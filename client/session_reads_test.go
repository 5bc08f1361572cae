package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestSessionCallAndPrompt: a backend that lost a stream finds a call's record by the
// model's id (GET /v1/sessions/{id}/tool-calls/{toolCallID}), and builds its system
// prompt from the session's fragment (GET /v1/sessions/{id}/prompt); both decoded
// without dropping a field the daemon sends.
func TestSessionCallAndPrompt(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	ctx := context.Background()
	c := client.New(d.URL)
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command", "read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(ctx, s.ID, "", client.Batch{Calls: []client.Call{
		{ID: "call_model_1", Name: "execute_command", Arguments: json.RawMessage(`{"command":"echo found"}`)},
	}}, func(client.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.GetSessionCall(ctx, s.ID, "call_model_1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.ToolCallID != "call_model_1" || rec.Status != "succeeded" || rec.Result == nil || len(rec.Result.Content) == 0 || !strings.Contains(rec.Result.Content[0].Text, "found") {
		t.Errorf("the record by the model's id = %+v", rec)
	}
	if _, err := c.GetSessionCall(ctx, s.ID, "call_never"); !client.IsNotFound(err) {
		t.Errorf("an id the session never had: %v, want a 404", err)
	}

	p, err := c.Prompt(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Prompt, "execute_command") || p.SkillsBudgetTokens < 1 {
		t.Errorf("prompt = %+v, want the tools' hints and the skills budget", p)
	}
	raw := getJSON(t, "GET", d.URL+"/v1/sessions/"+s.ID+"/prompt", "")
	if l := lost(t, raw, p); len(l) > 0 {
		t.Errorf("Prompt drops %v of %s", l, raw)
	}
	if _, err := c.Prompt(ctx, "sess_nope"); !client.IsNotFound(err) {
		t.Errorf("prompt of an unknown session: %v, want a 404", err)
	}
}

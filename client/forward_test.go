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

// TestRunForwardsTheModelsOutput: a Go backend forwards the model's output as it came
// (Batch.ModelCalls): an Anthropic content list with text and thinking blocks around
// its tool_use blocks, a Responses output list with reasoning and message items. The
// calls run, answered in the provider's shape under the model's ids, and the other
// entries get no event. Batch.Calls took the daemon's own shape only.
func TestRunForwardsTheModelsOutput(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	ctx := context.Background()
	c := client.New(d.URL)
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command", "read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		format, output string
		ids            []string
	}{
		{"anthropic", `[
			{"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
			{"type": "text", "text": "Running two."},
			{"type": "tool_use", "id": "toolu_1", "name": "execute_command", "input": {"command": "echo first"}},
			{"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": 5}}]`,
			[]string{"toolu_1", "toolu_2"}},
		{"openai_responses", `[
			{"type": "reasoning", "id": "rs_1", "summary": []},
			{"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "execute_command", "arguments": "{\"command\":\"echo first\"}"},
			{"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Running."}]},
			{"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "read_file", "arguments": "{\"path\":5}"}]`,
			[]string{"call_a", "call_b"}},
	} {
		var output []json.RawMessage
		if err := json.Unmarshal([]byte(tc.output), &output); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		var starts int
		err := c.Run(ctx, s.ID, tc.format, client.Batch{Strategy: "sequential", ModelCalls: output}, func(ev client.Event) error {
			switch ev.Type {
			case "tool_start":
				starts++
			case "message":
				got[ev.ToolCallID] = string(ev.Message)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if starts != 2 || len(got) != 2 || !strings.Contains(got[tc.ids[0]], "first") || !strings.Contains(got[tc.ids[1]], "path") {
			t.Errorf("%s: %d starts, messages %v; want the two calls' results under %v", tc.format, starts, got, tc.ids)
		}
	}
	// Both given is the caller's mistake, said before anything is sent.
	err = c.Run(ctx, s.ID, "", client.Batch{Calls: []client.Call{{ID: "x", Name: "read_file"}}, ModelCalls: []json.RawMessage{json.RawMessage(`{}`)}}, func(client.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "ModelCalls") {
		t.Errorf("Calls and ModelCalls both: %v, want an error naming them", err)
	}
}

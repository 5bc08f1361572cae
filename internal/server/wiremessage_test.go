package server_test

import (
	"strings"
	"testing"
)

// TestWholeAssistantMessageAsACall: a backend that forwards the model's whole
// assistant message (OpenAI's choices[0].message, an Anthropic {role, content}, a
// Gemini {role, parts}) as one entry of calls was told "calls[0]: id is required",
// which says nothing of what to send. It is told that the entry is a message and
// which of its fields hold the calls; nothing runs.
func TestWholeAssistantMessageAsACall(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{})["id"].(string)
	for body, want := range map[string]string{
		`{"calls":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"info","arguments":"{}"}}]}]}`: `send its \"tool_calls\"`,
		`{"calls":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"info","input":{}}]}]}`:                                      `send its \"content\"`,
		`{"calls":[{"role":"model","parts":[{"functionCall":{"name":"info","args":{}}}]}]}`:                                                        `send its \"parts\"`,
	} {
		code, _, resp := d.do("POST", "/v1/sessions/"+id+"/tool-calls", body)
		if code != 400 || !strings.Contains(string(resp), "calls[0] is a whole assistant message") || !strings.Contains(string(resp), want) {
			t.Errorf("%s: %d %s", body, code, resp)
		}
	}
}

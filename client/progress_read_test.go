package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestProgressRead: a poller reads a call's output by offset with the client (GET
// /v1/tool-calls/{id}/progress), the chunk keeping every field the daemon sends, and
// asks again from NextOffset for the rest; a call's stderr is read by naming it.
func TestProgressRead(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	ctx := context.Background()
	c := client.New(d.URL)
	s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}})
	if err != nil {
		t.Fatal(err)
	}
	var callID string
	err = c.Run(ctx, s.ID, "", client.Batch{Calls: []client.Call{
		{ID: "a", Name: "execute_command", Arguments: json.RawMessage(`{"command":"printf 'hello world'; printf oops >&2"}`)},
	}}, func(ev client.Event) error {
		if ev.Type == "message" {
			callID = ev.CallID
		}
		return nil
	})
	if err != nil || callID == "" {
		t.Fatalf("run: %v, call id %q", err, callID)
	}

	p, err := c.Progress(ctx, callID, client.ProgressQuery{MaxBytes: 5})
	if err != nil {
		t.Fatal(err)
	}
	if p.CallID != callID || p.Stream != "stdout" || p.Data != "hello" || p.Offset != 0 || p.NextOffset != 5 || p.Finished || p.OutputLost {
		t.Errorf("first read = %+v, want hello from 0 to 5, not finished", p)
	}
	raw := getJSON(t, "GET", d.URL+"/v1/tool-calls/"+callID+"/progress?max_bytes=5", "")
	if l := lost(t, raw, p); len(l) > 0 {
		t.Errorf("ProgressChunk drops %v of %s", l, raw)
	}
	p, err = c.Progress(ctx, callID, client.ProgressQuery{Offset: p.NextOffset})
	if err != nil {
		t.Fatal(err)
	}
	if p.Data != " world" || p.NextOffset != 11 || !p.Finished {
		t.Errorf("second read = %+v, want \" world\" to 11, finished", p)
	}
	p, err = c.Progress(ctx, callID, client.ProgressQuery{Stream: "stderr", Encoding: "base64"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Stream != "stderr" || p.Encoding != "base64" || p.Data != "b29wcw==" {
		t.Errorf("stderr read = %+v, want oops in base64", p)
	}
	if _, err := c.Progress(ctx, "tc_nosuchcall", client.ProgressQuery{}); !client.IsNotFound(err) {
		t.Errorf("progress of an unknown call: %v, want a 404", err)
	}
}

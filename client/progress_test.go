package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestEventKeepsNumericProgress: a call that reports numeric progress (web_fetch of a
// slow download) reaches the client's Event.Progress with its total, and the event
// type keeps every field of such a line.
func TestEventKeepsNumericProgress(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for range 8 {
			_, _ = w.Write(bytes.Repeat([]byte("p"), size/8))
			_ = http.NewResponseController(w).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	t.Cleanup(slow.Close)
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Permissions.Allow = []string{"web_fetch"}
		c.Web.Fetch.AllowCIDRs = []string{"127.0.0.1/32"}
	})
	c := client.New(d.URL)
	var values []client.ProgressValue
	var callID string
	err := c.Run(context.Background(), "", "", client.Batch{
		Session: &client.SessionSpec{AvailableTools: []string{"web_fetch"}},
		Calls:   []client.Call{{ID: "dl", Name: "web_fetch", Arguments: json.RawMessage(`{"url":"` + slow.URL + `","format":"raw"}`)}},
	}, func(ev client.Event) error {
		if ev.Progress != nil {
			values = append(values, *ev.Progress)
		}
		if ev.Type == "message" {
			callID = ev.CallID
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(values) < 2 || values[len(values)-1] != (client.ProgressValue{Progress: size, Total: size, Message: "bytes received"}) {
		t.Fatalf("progress values %+v, want several ending at %d of %d", values, size, size)
	}
	replay := getJSON(t, "GET", d.URL+"/v1/tool-calls/"+callID+"/events", "")
	seen := false
	for _, line := range bytes.Split(bytes.TrimSpace(replay), []byte("\n")) {
		var ev client.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Progress == nil {
			continue
		}
		seen = true
		if l := lost(t, line, ev); len(l) > 0 {
			t.Errorf("Event drops %v of %s", l, line)
		}
	}
	if !seen {
		t.Fatalf("the replay has no line with progress: %s", replay)
	}
}

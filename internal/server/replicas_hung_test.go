package server_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// TestProgressReadOwnerHung: a progress read of a call whose replica hangs (a stopped
// or wedged process: its kernel still accepts the connection, nothing answers) was
// forwarded there and waited as long as its client did, holding a handler and two
// connections. The forward now gives up on an answer that does not begin and
// answers here, as it does for an owner that cannot be reached: 503 with Retry-After
// while the owner's lease holds (the output is there, out of reach).
func TestProgressReadOwnerHung(t *testing.T) {
	t.Parallel()
	// The forward gives up after cluster.answer_timeout (10 s by default).
	a, b := twoReplicas(t, func(c *config.Config) { c.Cluster.AnswerTimeout = time.Second })
	id := a.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	_, evs := a.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"e","name":"echo","arguments":{"text":"hi"}}]}`)
	cid := messages(t, evs)["e"].str("call_id")
	a.stop()

	hung, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: connections wait in its backlog
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	if err := b.app.Store.(store.ReplicaStore).Heartbeat(t.Context(), "replica-a", "http://"+hung.Addr().String(), time.Now()); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Get(b.url + "/v1/tool-calls/" + cid + "/progress")
	if err != nil {
		t.Fatalf("progress read through B of a call whose replica hangs: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("progress read through B: HTTP %d %s; want 503 unavailable with Retry-After", resp.StatusCode, body)
	}
}

package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

// closedAddr is a loopback address where connections are refused, held until the
// test ends so that no other listener of the test run can take it.
func closedAddr(t *testing.T) string {
	t.Helper()
	return testnet.RefusedAddr(t)
}

// TestProgressReadOwnerUnreachable: a progress read (poll or SSE) that lands on B for
// a call running on A, whose advertised address cannot be reached while A is alive
// (its lease holds), was answered by B as if B ran it: no output, and a UI could not
// tell "no output yet" from "the output is out of reach". It is now 503 unavailable
// with Retry-After, naming the replica. Once the owner's lease has run out (it is
// dead; the sweep fails its calls) the read is answered from the store.
func TestProgressReadOwnerUnreachable(t *testing.T) {
	t.Parallel()
	closed := "http://" + closedAddr(t)
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Cluster.Lease = 2 * time.Second
		if c.ReplicaID == "replica-a" {
			c.Cluster.AdvertiseURL = closed
		}
	})
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	ev, rest, stop := streamUntilEvent(t, a, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"x","name":"execute_command","arguments":{"command":"echo started; sleep 60"}}]}`, "tool_progress")
	defer stop()
	cid := ev["call_id"].(string)
	waitFor(t, 30*time.Second, "the call is recorded running", func() bool {
		code, _, body := b.do("GET", "/v1/tool-calls/"+cid, nil)
		return code == 200 && strings.Contains(string(body), `"status":"running"`)
	})

	wantProgressUnavailable(t, b, cid, "the owner unreachable", "replica-a", closed)
	// So is its events stream, which B followed from the record with none of the
	// output (only the head is read: B's stream would last as long as the call).
	resp, err := http.Get(b.url + "/v1/tool-calls/" + cid + "/events")
	if err != nil {
		t.Fatal(err)
	}
	var events []byte
	if resp.StatusCode != http.StatusOK {
		events, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(events), "replica-a") {
		t.Errorf("GET events on B, the owner unreachable: HTTP %d Retry-After %q %s; want 503 with Retry-After naming replica-a",
			resp.StatusCode, resp.Header.Get("Retry-After"), events)
	}
	// The owner itself still serves it.
	if code, _, body := a.do("GET", "/v1/tool-calls/"+cid+"/progress", nil); code != 200 || !strings.Contains(string(body), "started") {
		t.Errorf("progress on A: %d %s", code, body)
	}
	if code, _, body := a.do("POST", "/v1/tool-calls/"+cid+"/cancel", nil); code != http.StatusAccepted {
		t.Fatalf("cancel on A: %d %s", code, body)
	}
	<-rest

	// A replica that stopped heartbeating long ago, with a call the store says is
	// running: its lease is over, so B answers from the record (the sweep fails the
	// call; until then it reads as not finished).
	rs := b.app.Store.(store.ReplicaStore)
	if err := rs.Heartbeat(t.Context(), "replica-dead", closed, time.Now()); err != nil {
		t.Fatal(err)
	}
	dead := "tc_deadowner" + strings.ReplaceAll(id, "ses_", "")
	if err := b.app.Store.WriteCalls(t.Context(), []*store.Call{{ID: dead, SessionID: id, Tenant: "default", ToolCallID: "d",
		Name: "execute_command", Arguments: json.RawMessage(`{}`), Status: store.CallRunning, Owner: "replica-dead"}}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "replica-dead's lease to run out", func() bool {
		r, err := rs.GetReplica(t.Context(), "replica-dead")
		return err == nil && r.Silent > 2*time.Second
	})
	code, _, body := b.do("GET", "/v1/tool-calls/"+dead+"/progress", nil)
	var p progressRead
	if code != 200 || json.Unmarshal(body, &p) != nil || p.Data != "" {
		t.Fatalf("progress on B of a call whose owner's lease ran out: %d %s; want the store's answer", code, body)
	}
	if p.Finished {
		if _, _, rec := b.do("GET", "/v1/tool-calls/"+dead, nil); !strings.Contains(string(rec), `"status":"failed"`) {
			t.Errorf("reads as finished, but the record is %s", rec)
		}
	}
}

// wantProgressUnavailable checks that both progress reads of call cid through d
// (GET …/progress and …/progress/stream) answer 503 unavailable with Retry-After,
// their message naming each of names; when says the case in a failure.
func wantProgressUnavailable(t *testing.T, d *daemon, cid, when string, names ...string) {
	t.Helper()
	for _, path := range []string{"/v1/tool-calls/" + cid + "/progress", "/v1/tool-calls/" + cid + "/progress/stream"} {
		code, h, body := d.do("GET", path, nil)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		named := true
		for _, n := range names {
			named = named && strings.Contains(e.Error.Message, n)
		}
		if code != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || h.Get("Retry-After") == "" || !named {
			t.Errorf("GET %s, %s: HTTP %d Retry-After %q %s; want 503 unavailable with Retry-After naming %q",
				path, when, code, h.Get("Retry-After"), body, names)
		}
	}
}

package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// TestNeverRunCallOutputNotLost: a call that waited on a replica that then died
// (a sequential batch's next call, one waiting for its approval) is failed by the
// others' sweep once that replica's lease runs out, without ever having started. It
// wrote no output anywhere, so none was lost: its progress (poll and stream) read
// through another replica must say finished without output_lost, as the contract
// says ("never for a call that has not started, whatever became of the replica it
// waits on"). It said output_lost: true.
func TestNeverRunCallOutputNotLost(t *testing.T) {
	t.Parallel()
	closed := "http://" + closedAddr(t)
	_, b := twoReplicas(t, func(c *config.Config) { c.Cluster.Lease = 2 * time.Second })
	id := b.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)

	rs := b.app.Store.(store.ReplicaStore)
	if err := rs.Heartbeat(t.Context(), "replica-dead", closed, time.Now()); err != nil {
		t.Fatal(err)
	}
	cid := "tc_neverran" + strings.ReplaceAll(id, "ses_", "")
	if err := b.app.Store.WriteCalls(t.Context(), []*store.Call{{ID: cid, SessionID: id, Tenant: "default", ToolCallID: "n",
		Name: "execute_command", Arguments: json.RawMessage(`{}`), Status: store.CallPending, Owner: "replica-dead",
		CreatedAt: time.Now()}}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the sweep fails the dead replica's call that never started", func() bool {
		code, _, body := b.do("GET", "/v1/tool-calls/"+cid, nil)
		return code == 200 && strings.Contains(string(body), `"status":"failed"`) && strings.Contains(string(body), `"started_at":null`)
	})

	code, _, body := b.do("GET", "/v1/tool-calls/"+cid+"/progress", nil)
	var p struct {
		Finished   bool `json:"finished"`
		OutputLost bool `json:"output_lost"`
	}
	if code != 200 || json.Unmarshal(body, &p) != nil || !p.Finished || p.OutputLost {
		t.Errorf("progress through B of a call that never started, its replica dead: %d %s; want finished, no output_lost", code, body)
	}

	resp, err := http.Get(b.url + "/v1/tool-calls/" + cid + "/progress/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && event == "closed" {
				got <- d
				return
			}
		}
		got <- ""
	}()
	select {
	case d := <-got:
		var e map[string]any
		if resp.StatusCode != 200 || json.Unmarshal([]byte(d), &e) != nil || e["output_lost"] == true {
			t.Errorf("progress stream through B of a call that never started: HTTP %d, closed event %q; want it without output_lost", resp.StatusCode, d)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the progress stream did not end within 60 s")
	}
}

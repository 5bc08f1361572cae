package server_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// listBytes is the listings' byte budget (max_list_bytes) of the daemons of the
// tests below, its least: records of a fifth of it or so stand for records of
// megabytes under the default 32 MiB, at a thirty-second of the bytes to write and
// read (the race detector made the default's 90 MB of records take minutes).
const listBytes = 1 << 20

// A listing of calls whose arguments and results are megabytes each stops at
// max_list_bytes and says so (truncated), instead of loading every record whole: a
// thousand such records would have taken about 20 GB for one request.
func TestCallListsStopAtTheirByteBudget(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.MaxListBytes = listBytes }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string)
	big := strings.Repeat("x", listBytes*3/32) // 96 KiB of arguments, and as much of result
	n := listBytes/(listBytes*6/32) + 3
	for i := range n {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"c`+strconv.Itoa(i)+`","name":"echo","arguments":{"text":"`+big+`"}}]}`)
		if m := messages(t, evs)["c"+strconv.Itoa(i)]; m.m["is_error"] != false {
			t.Fatalf("call %d: %.300s", i, m.raw)
		}
	}
	for _, path := range []string{"/v1/sessions/" + id + "/tool-calls?limit=1000", "/v1/tool-calls?limit=1000"} {
		code, _, body := d.do("GET", path, nil)
		var list struct {
			Calls     []json.RawMessage `json:"calls"`
			Truncated bool              `json:"truncated"`
		}
		if err := json.Unmarshal(body, &list); code != 200 || err != nil {
			t.Fatalf("%s: %d %v", path, code, err)
		}
		if !list.Truncated || len(list.Calls) >= n || len(list.Calls) == 0 {
			t.Errorf("%s: %d of %d calls, truncated %v; want fewer, and truncated", path, len(list.Calls), n, list.Truncated)
		}
		if len(body) > 2*listBytes {
			t.Errorf("%s: %d MiB answered", path, len(body)>>20)
		}
	}
	// A small listing is whole and says nothing.
	code, _, body := d.do("GET", "/v1/sessions/"+id+"/tool-calls?limit=1", nil)
	if code != 200 || strings.Contains(string(body), `"truncated"`) {
		t.Errorf("limit=1: %d %.200s", code, body)
	}
}

// The same holds for approval listings: every call that waits for a person holds
// its arguments in its approval request.
func TestApprovalListsStopAtTheirByteBudget(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow, c.MaxListBytes = nil, listBytes }})
	id := d.createSession(map[string]any{"available_tools": []string{"write_file"}})["id"].(string)
	big := strings.Repeat("x", listBytes*6/32)
	n := listBytes/(listBytes*6/32) + 2
	for i := range n {
		_, _, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls",
			`{"calls":[{"id":"w`+strconv.Itoa(i)+`","name":"write_file","arguments":{"path":"f`+strconv.Itoa(i)+`","content":"`+big+`"}}]}`)
		stop() // the request stays pending
	}
	code, _, body := d.do("GET", "/v1/approvals?status=pending&limit=1000", nil)
	var list struct {
		Approvals []json.RawMessage `json:"approvals"`
		Truncated bool              `json:"truncated"`
	}
	if err := json.Unmarshal(body, &list); code != 200 || err != nil {
		t.Fatalf("list: %d %v", code, err)
	}
	if !list.Truncated || len(list.Approvals) >= n || len(list.Approvals) == 0 {
		t.Errorf("%d of %d approvals, truncated %v; want fewer, and truncated", len(list.Approvals), n, list.Truncated)
	}
	validate(t, "#/paths/~1v1~1approvals/get/responses/200/content/application~1json/schema", body)
}

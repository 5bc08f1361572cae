package server_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// pageIDs walks a listing route in pages of two, each asking for what comes after the
// last item of the one before (?before=), and returns the ids in the order listed.
func pageIDs(t *testing.T, d *daemon, path, field string) []string {
	t.Helper()
	var all []string
	before := ""
	for range 20 {
		p := path + "&limit=2"
		if before != "" {
			p += "&before=" + before
		}
		code, _, body := d.do("GET", p, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		var page map[string][]struct{ ID string }
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page[field]) == 0 {
			return all
		}
		for _, x := range page[field] {
			all = append(all, x.ID)
		}
		before = page[field][len(page[field])-1].ID
	}
	t.Fatalf("GET %s: still listing after 20 pages: %v", path, all)
	return nil
}

// TestListingPages: GET /v1/tool-calls and GET /v1/approvals page back with before
// (the last id of the previous page) through every record once, newest first, and a
// before that names nothing listed is a 400.
func TestListingPages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"echo", "execute_command"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"
	var want []string // newest first
	for i := range 5 {
		_, evs := d.stream(calls, fmt.Sprintf(`{"calls":[{"id":"e%d","name":"echo","arguments":{"text":"x"}}]}`, i))
		m := messages(t, evs)[fmt.Sprintf("e%d", i)]
		if m.m["is_error"] != false {
			t.Fatalf("echo: %s", m.raw)
		}
		want = append([]string{m.m["call_id"].(string)}, want...)
	}
	if got := pageIDs(t, d, "/v1/tool-calls?status=succeeded", "calls"); !reflect.DeepEqual(got, want) {
		t.Errorf("calls in pages = %v, want %v", got, want)
	}

	// Three requests that wait for a person; their clients leave, the requests stay.
	var wantApr []string
	for i := range 3 {
		apr, _, stop := streamUntilApproval(t, d, calls, fmt.Sprintf(`{"calls":[{"id":"w%d","name":"execute_command","arguments":{"command":"echo %d >> f.txt"}}]}`, i, i))
		stop()
		wantApr = append([]string{apr["id"].(string)}, wantApr...)
	}
	if got := pageIDs(t, d, "/v1/approvals?status=pending", "approvals"); !reflect.DeepEqual(got, wantApr) {
		t.Errorf("approvals in pages = %v, want %v", got, wantApr)
	}
	// One call's approvals.
	code, _, body := d.do("GET", "/v1/approvals/"+wantApr[0], nil)
	var apr struct {
		CallID string `json:"call_id"`
	}
	if code != 200 || json.Unmarshal(body, &apr) != nil || apr.CallID == "" {
		t.Fatalf("GET approval: %d %s", code, body)
	}
	if got := pageIDs(t, d, "/v1/approvals?call_id="+apr.CallID, "approvals"); !reflect.DeepEqual(got, wantApr[:1]) {
		t.Errorf("approvals of call %s = %v, want %v", apr.CallID, got, wantApr[:1])
	}

	for _, p := range []string{"/v1/tool-calls?before=tc_nope", "/v1/approvals?before=apr_nope", "/v1/tool-calls?before=" + wantApr[0], "/v1/approvals?before=" + want[0]} {
		code, _, body := d.do("GET", p, nil)
		if code != 400 {
			t.Errorf("GET %s: %d %s, want 400", p, code, body)
		}
		validate(t, "Error", body)
	}
}

package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// pageIDs walks a listing route in pages of two, each asking for what comes after the
// last item of the one before, and returns the ids in the order listed. With byID,
// before is that item's id; else the page's next_before, which must be there while a
// page is full. Every answer must match the route's documented schema.
func pageIDs(t *testing.T, d *daemon, path, field string, byID bool) []string {
	t.Helper()
	var all []string
	before := ""
	for range 20 {
		p := path + "&limit=2"
		if before != "" {
			p += "&before=" + url.QueryEscape(before)
		}
		code, _, body := d.do("GET", p, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		route, _, _ := strings.Cut(path, "?")
		if strings.HasPrefix(route, "/v1/sessions/") {
			route = "/v1/sessions/{sessionID}/tool-calls"
		}
		validateResponse(t, "GET", route, "200", "application/json", body)
		var page struct {
			Calls, Approvals []struct{ ID string }
			NextBefore       string `json:"next_before"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		items := page.Calls
		if field == "approvals" {
			items = page.Approvals
		}
		if len(items) == 2 && page.NextBefore == "" {
			t.Fatalf("GET %s: a full page without next_before: %s", p, body)
		}
		if len(items) < 2 && page.NextBefore != "" {
			t.Errorf("GET %s: the last page has next_before %q", p, page.NextBefore)
		}
		for _, x := range items {
			all = append(all, x.ID)
		}
		if len(items) == 0 || (!byID && page.NextBefore == "") {
			return all
		}
		before = page.NextBefore
		if byID {
			before = items[len(items)-1].ID
		}
	}
	t.Fatalf("GET %s: still listing after 20 pages: %v", path, all)
	return nil
}

// TestListingPages: GET /v1/tool-calls, GET /v1/sessions/{id}/tool-calls and
// GET /v1/approvals page back with before (the last id of the previous page, or the
// page's next_before) through every record once, newest first; a next_before goes on
// after retention deletes the record it follows, while that record's id is then a 404
// that says how to go on, and a before of the wrong kind is a 400.
func TestListingPages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	spec := map[string]any{"available_tools": []string{"echo", "execute_command"}}
	sa, sb := d.createSession(spec)["id"].(string), d.createSession(spec)["id"].(string)
	// Five calls, a0 b1 a2 b3 a4, in the two sessions by turns.
	var want, wantA []string // newest first
	for i := range 5 {
		sess := []string{sa, sb}[i%2]
		_, evs := d.stream("/v1/sessions/"+sess+"/tool-calls", fmt.Sprintf(`{"calls":[{"id":"e%d","name":"echo","arguments":{"text":"x"}}]}`, i))
		m := messages(t, evs)[fmt.Sprintf("e%d", i)]
		if m.m["is_error"] != false {
			t.Fatalf("echo: %s", m.raw)
		}
		id := m.m["call_id"].(string)
		want = append([]string{id}, want...)
		if sess == sa {
			wantA = append([]string{id}, wantA...)
		}
	}
	for _, byID := range []bool{true, false} {
		if got := pageIDs(t, d, "/v1/tool-calls?status=succeeded", "calls", byID); !reflect.DeepEqual(got, want) {
			t.Errorf("calls in pages (by id %v) = %v, want %v", byID, got, want)
		}
		if got := pageIDs(t, d, "/v1/sessions/"+sa+"/tool-calls?", "calls", byID); !reflect.DeepEqual(got, wantA) {
			t.Errorf("session's calls in pages (by id %v) = %v, want %v", byID, got, wantA)
		}
	}

	// Three requests that wait for a person; their clients leave, the requests stay.
	calls := "/v1/sessions/" + sa + "/tool-calls"
	var wantApr []string
	for i := range 3 {
		apr, _, stop := streamUntilApproval(t, d, calls, fmt.Sprintf(`{"calls":[{"id":"w%d","name":"execute_command","arguments":{"command":"echo %d >> f.txt"}}]}`, i, i))
		stop()
		wantApr = append([]string{apr["id"].(string)}, wantApr...)
	}
	for _, byID := range []bool{true, false} {
		if got := pageIDs(t, d, "/v1/approvals?status=pending", "approvals", byID); !reflect.DeepEqual(got, wantApr) {
			t.Errorf("approvals in pages (by id %v) = %v, want %v", byID, got, wantApr)
		}
	}
	// One call's approvals.
	code, _, body := d.do("GET", "/v1/approvals/"+wantApr[0], nil)
	var apr struct {
		CallID string `json:"call_id"`
	}
	if code != 200 || json.Unmarshal(body, &apr) != nil || apr.CallID == "" {
		t.Fatalf("GET approval: %d %s", code, body)
	}
	if got := pageIDs(t, d, "/v1/approvals?call_id="+apr.CallID, "approvals", true); !reflect.DeepEqual(got, wantApr[:1]) {
		t.Errorf("approvals of call %s = %v, want %v", apr.CallID, got, wantApr[:1])
	}

	// The first page of the echo calls ends with b3; then retention deletes session b.
	code, _, body = d.do("GET", "/v1/tool-calls?status=succeeded&limit=2", nil)
	var page struct {
		Calls      []struct{ ID string }
		NextBefore string `json:"next_before"`
	}
	if code != 200 || json.Unmarshal(body, &page) != nil || len(page.Calls) != 2 || page.Calls[1].ID != want[1] {
		t.Fatalf("first page: %d %s", code, body)
	}
	if n, gone, err := d.app.Store.DeleteUnusedSession(t.Context(), sb, time.Now().Add(time.Minute), 0); err != nil || !gone || n != 2 {
		t.Fatalf("DeleteUnusedSession(b) = %d calls, gone %v, %v; want its 2 calls and the session", n, gone, err)
	}
	code, _, body = d.do("GET", "/v1/tool-calls?status=succeeded&limit=2&before="+url.QueryEscape(page.NextBefore), nil)
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Calls) != 2 || page.Calls[0].ID != want[2] || page.Calls[1].ID != want[4] {
		t.Errorf("page after a deleted call's next_before: %d %s, want %s and %s", code, body, want[2], want[4])
	}

	for _, tc := range []struct {
		path string
		code int
	}{
		{"/v1/tool-calls?before=" + want[1], 404}, // deleted
		{"/v1/tool-calls?before=tc_nope", 404},
		{"/v1/sessions/" + sa + "/tool-calls?before=" + want[1], 404},
		{"/v1/approvals?before=apr_nope", 404},
		{"/v1/tool-calls?before=" + wantApr[0], 400},
		{"/v1/approvals?before=" + want[0], 400},
		{"/v1/tool-calls?before=nope", 400},
		{"/v1/tool-calls?before=tc_x~%21", 400},
		{"/v1/approvals?before=apr_", 400},
	} {
		code, _, body := d.do("GET", tc.path, nil)
		if code != tc.code {
			t.Errorf("GET %s: %d %s, want %d", tc.path, code, body, tc.code)
		}
		validate(t, "Error", body)
		if tc.code == 404 && !strings.Contains(string(body), "next_before") {
			t.Errorf("GET %s: %s, want it to say how to go on (next_before)", tc.path, body)
		}
	}
	// A call of another session of the tenant is no place in this session's listing.
	sc := d.createSession(spec)["id"].(string)
	if code, _, body := d.do("GET", "/v1/sessions/"+sc+"/tool-calls?before="+want[0], nil); code != 400 {
		t.Errorf("session c paging from a's call: %d %s, want 400", code, body)
	}
}

package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// getJSON reads a route with plain HTTP, as the raw reference for the client's types.
func getJSON(t *testing.T, method, url, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s %v", method, url, resp.StatusCode, b, err)
	}
	return b
}

// lost lists the fields of raw (JSON) that are not in the JSON of mine: what a value
// of a client type drops of the answer it was decoded from.
func lost(t *testing.T, raw []byte, mine any) []string {
	t.Helper()
	b, err := json.Marshal(mine)
	if err != nil {
		t.Fatal(err)
	}
	var r, m any
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(r, m any, path string)
	walk = func(r, m any, path string) {
		switch rv := r.(type) {
		case map[string]any:
			mv, _ := m.(map[string]any)
			for k, v := range rv {
				if _, ok := mv[k]; !ok {
					out = append(out, path+"."+k)
					continue
				}
				walk(v, mv[k], path+"."+k)
			}
		case []any:
			mv, _ := m.([]any)
			for i, v := range rv {
				if i < len(mv) {
					walk(v, mv[i], path+"[]")
				}
			}
		}
	}
	walk(r, m, "")
	sort.Strings(out)
	return slicesCompact(out)
}

func slicesCompact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// TestTypesKeepEveryField checks the client's types decode every field the daemon
// sends for sessions, call records and stream events.
func TestTypesKeepEveryField(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	ctx := context.Background()
	c := client.New(d.URL)

	raw := getJSON(t, "POST", d.URL+"/v1/sessions", `{"available_tools":["execute_command"],"metadata":{"user":"u1"},"rules":{"allow":["execute_command(ls:*)"]}}`)
	var s struct{ ID string }
	_ = json.Unmarshal(raw, &s)
	raw = getJSON(t, "GET", d.URL+"/v1/sessions/"+s.ID, "")
	sess, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l := lost(t, raw, sess); len(l) > 0 {
		t.Errorf("Session drops %v of %s", l, raw)
	}

	// A call with output that is not UTF-8 (progress carries its bytes in data) and
	// one refused for its arguments (the record has an error_kind).
	var events []client.Event
	err = c.Run(ctx, s.ID, "", client.Batch{Strategy: "sequential", Calls: []client.Call{
		{ID: "a", Name: "execute_command", Arguments: json.RawMessage(`{"command":"printf 'x\\377y'"}`)},
		{ID: "b", Name: "execute_command", Arguments: json.RawMessage(`{}`)},
	}}, func(ev client.Event) error { events = append(events, ev); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.CallID == "" {
			continue
		}
		replay := getJSON(t, "GET", d.URL+"/v1/tool-calls/"+ev.CallID+"/events", "")
		for _, line := range bytes.Split(bytes.TrimSpace(replay), []byte("\n")) {
			var typ struct{ Type string }
			_ = json.Unmarshal(line, &typ)
			if typ.Type != ev.Type {
				continue
			}
			if l := lost(t, line, ev); len(l) > 0 {
				t.Errorf("Event drops %v of %s", l, line)
			}
		}
		if ev.Type != "message" {
			continue
		}
		raw := getJSON(t, "GET", d.URL+"/v1/tool-calls/"+ev.CallID, "")
		rec, err := c.GetCall(ctx, ev.CallID)
		if err != nil {
			t.Fatal(err)
		}
		if l := lost(t, raw, rec); len(l) > 0 {
			t.Errorf("CallRecord drops %v of %s", l, raw)
		}
	}
}

// TestErrorCarriesRetryAfter checks a 429 tells the caller when to try again, from the
// Retry-After header the API sends with it.
func TestErrorCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	var dataDir string
	d := testdaemon.Start(t, func(c *config.Config) {
		c.Auth.Unauthenticated = false
		c.Auth.RateLimit = config.RateLimitConfig{RequestsPerSecond: 0.2, Burst: 1}
		dataDir = c.DataDir
	})
	key, err := os.ReadFile(filepath.Join(dataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(d.URL, client.WithAPIKey(strings.TrimSpace(string(key))))
	ctx := context.Background()
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.Whoami(ctx)
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code != "rate_limited" {
		t.Fatalf("second request: %v", err)
	}
	if e.RetryAfter < time.Second || e.RetryAfter > 5*time.Second {
		t.Fatalf("RetryAfter = %s, want the 5 s the bucket needs (at most)", e.RetryAfter)
	}
}

// TestSessionToolsRanked: the ranked listing of scenario 5 through the client, its
// answer kept whole (no_match included).
func TestSessionToolsRanked(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, nil)
	ctx := context.Background()
	c := client.New(d.URL)
	var s struct{ ID string }
	_ = json.Unmarshal(getJSON(t, "POST", d.URL+"/v1/sessions", `{}`), &s)

	names := func(l client.ToolList) []string {
		var out []string
		for _, raw := range l.Tools {
			var f struct {
				Function struct{ Name string } `json:"function"`
			}
			_ = json.Unmarshal(raw, &f)
			out = append(out, f.Function.Name)
		}
		return out
	}
	l, err := c.SessionTools(ctx, s.ID, client.ToolsQuery{Format: "openai", Query: "read the contents of a file", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(l); len(got) != 4 || !slices.Contains(got, "read_file") || !slices.Contains(got, "tool_expand_tools") || l.NoMatch {
		t.Fatalf("ranked listing: %v (no_match %v), want 3 tools with read_file, and tool_expand_tools", got, l.NoMatch)
	}
	raw := getJSON(t, "GET", d.URL+"/v1/sessions/"+s.ID+"/tools?format=openai&query=zzzz+qqqq&limit=3", "")
	if l, err = c.SessionTools(ctx, s.ID, client.ToolsQuery{Format: "openai", Query: "zzzz qqqq", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	if !l.NoMatch || len(l.Tools) > 4 {
		t.Fatalf("a query matching nothing: no_match %v, %d tools", l.NoMatch, len(l.Tools))
	}
	if miss := lost(t, raw, l); len(miss) > 0 {
		t.Errorf("ToolList drops %v of %s", miss, raw)
	}
}

// TestSessionToolsAll: after a ranked listing, ToolsQuery{AllTools: true} lifts the
// narrowing (?query=) and lists every tool the session allows. The Query field's
// doc said "" did that, but "" sent no query and got the narrowed list back, with no
// way through the client to widen it again.
func TestSessionToolsAll(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, nil)
	ctx := context.Background()
	c := client.New(d.URL)
	var s struct{ ID string }
	_ = json.Unmarshal(getJSON(t, "POST", d.URL+"/v1/sessions", `{}`), &s)
	all, err := c.SessionTools(ctx, s.ID, client.ToolsQuery{Format: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SessionTools(ctx, s.ID, client.ToolsQuery{Format: "openai", Query: "read the contents of a file", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	now, err := c.SessionTools(ctx, s.ID, client.ToolsQuery{Format: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Tools) != 4 {
		t.Fatalf("without a query after a ranked listing: %d tools, want the 3 ranked and tool_expand_tools", len(now.Tools))
	}
	again, err := c.SessionTools(ctx, s.ID, client.ToolsQuery{Format: "openai", AllTools: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Tools) < len(all.Tools) || len(all.Tools) <= 4 {
		t.Fatalf("AllTools: %d tools, want every one of the %d allowed", len(again.Tools), len(all.Tools))
	}
}

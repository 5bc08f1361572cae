package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// walk lists every page, each after the previous one's NextBefore (or, with byID, the
// id of its last item), and returns the ids listed; at most 10 pages.
func walk[T any](t *testing.T, byID bool, list func(client.Page) ([]T, string, error), id func(T) string) []string {
	t.Helper()
	var all []string
	p := client.Page{Limit: 2}
	for range 10 {
		items, next, err := list(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			all = append(all, id(it))
		}
		if len(items) == 2 && next == "" {
			t.Fatalf("a full page without NextBefore after %v", all)
		}
		if next == "" {
			return all
		}
		p.Before = next
		if byID {
			p.Before = id(items[len(items)-1])
		}
	}
	t.Fatalf("still listing after 10 pages: %v", all)
	return nil
}

var errLeave = errors.New("leave the stream")

// TestListingsPage: ListCalls, ListSessionCalls and ListApprovals page through every
// record once, newest first, with NextBefore or the last id, against a real daemon.
func TestListingsPage(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command(echo:*)"} })
	ctx := context.Background()
	c := client.New(d.URL)
	spec := client.SessionSpec{AvailableTools: []string{"execute_command"}}
	sa, err := c.CreateSession(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSession(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// run runs command in session s and returns the call's id; with ask, it leaves
	// once the call waits for approval (the request stays pending).
	run := func(s, command string, ask bool) string {
		var id string
		args, _ := json.Marshal(map[string]string{"command": command})
		err := c.Run(ctx, s, "", client.Batch{Calls: []client.Call{{ID: "c", Name: "execute_command", Arguments: args}}}, func(ev client.Event) error {
			if ev.CallID != "" {
				id = ev.CallID
			}
			if ask && ev.Type == "approval_required" {
				return errLeave
			}
			if ev.Type == "message" && ev.IsError {
				t.Errorf("%s: %s", command, ev.Message)
			}
			return nil
		})
		if (ask && !errors.Is(err, errLeave)) || (!ask && err != nil) {
			t.Fatalf("run %q: %v", command, err)
		}
		return id
	}
	var want, wantA []string // newest first
	for i := range 5 {
		s := []string{sa.ID, sb.ID}[i%2]
		id := run(s, fmt.Sprintf("echo %d", i), false)
		want = append([]string{id}, want...)
		if s == sa.ID {
			wantA = append([]string{id}, wantA...)
		}
	}
	callID := func(r client.CallRecord) string { return r.ID }
	for _, byID := range []bool{false, true} {
		got := walk(t, byID, func(p client.Page) ([]client.CallRecord, string, error) {
			l, err := c.ListCalls(ctx, client.CallFilter{Statuses: []string{"succeeded"}, Page: p})
			if err != nil {
				return nil, "", err
			}
			for _, r := range l.Calls {
				if r.Name != "execute_command" || r.Status != "succeeded" || r.Result == nil || len(r.Result.Content) == 0 {
					t.Errorf("listed record %+v", r)
				}
			}
			return l.Calls, l.NextBefore, nil
		}, callID)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListCalls pages (by id %v) = %v, want %v", byID, got, want)
		}
		got = walk(t, byID, func(p client.Page) ([]client.CallRecord, string, error) {
			l, err := c.ListSessionCalls(ctx, sa.ID, p)
			if err != nil {
				return nil, "", err
			}
			return l.Calls, l.NextBefore, nil
		}, callID)
		if !reflect.DeepEqual(got, wantA) {
			t.Errorf("ListSessionCalls pages (by id %v) = %v, want %v", byID, got, wantA)
		}
	}
	// The types keep every field of the answers.
	for _, path := range []string{"/v1/tool-calls?limit=2", "/v1/sessions/" + sa.ID + "/tool-calls?limit=1"} {
		mine := &client.CallList{}
		raw := getJSON(t, "GET", d.URL+path, "")
		if err := json.Unmarshal(raw, mine); err != nil {
			t.Fatal(err)
		}
		if l := lost(t, raw, mine); len(l) > 0 || !strings.Contains(string(raw), "next_before") {
			t.Errorf("%T drops %v of %s (or the page has no next_before)", mine, l, raw)
		}
	}
	// Only the succeeded calls: a filter of no match is an empty page.
	if l, err := c.ListCalls(ctx, client.CallFilter{Statuses: []string{"running"}}); err != nil || len(l.Calls) != 0 || l.NextBefore != "" {
		t.Errorf("running calls = %+v, %v; want none", l, err)
	}

	// Two requests waiting for a person, in session b.
	asked := []string{run(sb.ID, "touch one.txt", true)}
	asked = append([]string{run(sb.ID, "touch two.txt", true)}, asked...)
	// They are the live calls (no background job runs).
	if l, err := c.ListCalls(ctx, client.CallFilter{Live: true}); err != nil || len(l.Calls) != 2 ||
		l.Calls[0].ID != asked[0] || l.Calls[1].ID != asked[1] || l.Calls[0].OutputOpen {
		t.Errorf("live calls = %+v, %v; want %v", l, err, asked)
	}
	aprID := func(a client.Approval) string { return a.ID }
	var wantApr []string
	for _, byID := range []bool{false, true} {
		got := walk(t, byID, func(p client.Page) ([]client.Approval, string, error) {
			p.Limit = 1
			l, err := c.ListApprovals(ctx, client.ApprovalFilter{Status: "pending", SessionID: sb.ID, Page: p})
			if err != nil {
				return nil, "", err
			}
			return l.Approvals, l.NextBefore, nil
		}, aprID)
		if len(got) != 2 {
			t.Fatalf("ListApprovals pages = %v, want 2 requests", got)
		}
		if wantApr == nil {
			wantApr = got
		} else if !reflect.DeepEqual(got, wantApr) {
			t.Errorf("ListApprovals pages by id = %v, by NextBefore %v", got, wantApr)
		}
	}
	raw := getJSON(t, "GET", d.URL+"/v1/approvals?limit=1", "")
	var al client.ApprovalList
	if err := json.Unmarshal(raw, &al); err != nil {
		t.Fatal(err)
	}
	if al.NextBefore == "" || len(al.Approvals) != 1 || al.Approvals[0].ID != wantApr[0] {
		t.Errorf("ApprovalList %+v of %s, want the newest request and a next_before", al, raw)
	}
	for i, callID := range asked {
		l, err := c.ListApprovals(ctx, client.ApprovalFilter{CallID: callID})
		if err != nil || len(l.Approvals) != 1 || l.Approvals[0].ID != wantApr[i] || l.Approvals[0].CallID != callID {
			t.Errorf("approvals of call %s = %+v, %v; want %s", callID, l, err, wantApr[i])
		}
	}

	// A cursor naming a record there is none of is a 404 that says how to go on.
	for name, err := range map[string]error{
		"calls": func() error {
			_, err := c.ListCalls(ctx, client.CallFilter{Page: client.Page{Before: "tc_gone"}})
			return err
		}(),
		"session calls": func() error { _, err := c.ListSessionCalls(ctx, sa.ID, client.Page{Before: "tc_gone"}); return err }(),
		"approvals": func() error {
			_, err := c.ListApprovals(ctx, client.ApprovalFilter{Page: client.Page{Before: "apr_gone"}})
			return err
		}(),
	} {
		var e *client.Error
		if !errors.As(err, &e) || !client.IsNotFound(err) || !strings.Contains(e.Message, "next_before") {
			t.Errorf("%s before a record there is none of: %v, want a 404 that names next_before", name, err)
		}
	}
}

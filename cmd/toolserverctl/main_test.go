package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

func ctl(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code, err := run(context.Background(), append([]string{"--url", url}, args...), strings.NewReader(""), &out, &errOut)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return code, out.String(), errOut.String()
}

func TestCommands(t *testing.T) {
	// The operator trusts the commands this test runs.
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })

	code, out, _ := ctl(t, d.URL, "tools", "--format", "openai")
	if code != 0 || !strings.Contains(out, `"execute_command"`) || !strings.Contains(out, `"function"`) {
		t.Fatalf("tools: %d %s", code, out)
	}
	code, out, errOut := ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"echo out; echo err >&2"}`)
	if code != 0 || !strings.HasPrefix(out, "out\n") || !strings.Contains(errOut, "err\n") || !strings.Contains(out, "--- execute_command (tc_") {
		t.Fatalf("run: %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	code, out, _ = ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"exit 3"}`)
	if code != 1 || !strings.Contains(out, "failed") {
		t.Fatalf("failing command: %d %s", code, out)
	}
	code, out, _ = ctl(t, d.URL, "session", "create", "--tools", "read_file,nope")
	if code != 0 || !strings.Contains(out, `"unknown tool: nope"`) {
		t.Fatalf("session create: %d %s", code, out)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.ID == "" {
		t.Fatalf("session create printed %s (%v)", out, err)
	}
	if code, _, errOut := ctl(t, d.URL, "session", "delete", created.ID); code != 0 {
		t.Fatalf("session delete: %d %s", code, errOut)
	}
	if code, _, errOut := ctl(t, d.URL, "session", "delete", created.ID); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("session delete again: %d %s", code, errOut)
	}
	code, _, errOut = ctl(t, d.URL, "call", "get", "tc_missing")
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("call get missing: %d %s", code, errOut)
	}
	if code, _, _ := ctl(t, d.URL, "bogus"); code != 2 {
		t.Fatalf("unknown command: %d", code)
	}
	if code, _, _ := ctl(t, d.URL, "run", "--tools", "x", "x", "{bad"); code != 2 {
		t.Fatalf("bad json: %d", code)
	}
}

// TestKeysAndMCPFromTheCLI: an admin creates a key, the key works and sees its
// tenant, is listed, is revoked and then refused; MCP servers are listed.
func TestKeysAndMCPFromTheCLI(t *testing.T) {
	d := testdaemon.Start(t, nil)
	code, out, errOut := ctl(t, d.URL, "keys", "create", "--roles", "agent,approver", "--tenant", "acme", "--name", "ci")
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "tsk_") || !strings.Contains(errOut, "tenant acme") {
		t.Fatalf("keys create: %d %q %q", code, out, errOut)
	}
	code, out, _ = ctl(t, d.URL, "--api-key", key, "whoami")
	if code != 0 || !strings.Contains(out, `"tenant": "acme"`) {
		t.Fatalf("whoami with the new key: %d %s", code, out)
	}
	code, out, _ = ctl(t, d.URL, "keys", "list", "--tenant", "acme")
	fields := strings.Fields(out)
	if code != 0 || len(fields) < 4 || fields[1] != "active" || fields[3] != "agent,approver" {
		t.Fatalf("keys list: %d %q", code, out)
	}
	if code, _, errOut := ctl(t, d.URL, "keys", "revoke", fields[0]); code != 0 {
		t.Fatalf("keys revoke: %d %s", code, errOut)
	}
	if code, _, errOut := ctl(t, d.URL, "--api-key", key, "whoami"); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("a revoked key: %d %s", code, errOut)
	}
	code, out, _ = ctl(t, d.URL, "keys", "hash", "tsk_abc")
	if code != 0 || len(strings.TrimSpace(out)) != 64 {
		t.Fatalf("keys hash: %d %q", code, out)
	}
	// With none configured, mcp list printed nothing at all.
	code, out, errOut = ctl(t, d.URL, "mcp", "list")
	if code != 0 || out != "" || !strings.Contains(errOut, "no MCP servers are configured") || !strings.Contains(errOut, "toolserverctl mcp add") {
		t.Fatalf("mcp list, none configured: %d %q %q; want exit 0, empty stdout, a line saying none and how to add one", code, out, errOut)
	}
	if code, _, errOut := ctl(t, d.URL, "mcp", "add", `{"name":"wary","transport":"stdio","command":"/bin/false","trust_annotations":false}`); code != 0 {
		t.Fatalf("mcp add: %d %s", code, errOut)
	}
	code, out, errOut = ctl(t, d.URL, "mcp", "list")
	if code != 0 || !strings.Contains(out, "wary") || !strings.Contains(out, "annotations-untrusted") || errOut != "" {
		t.Fatalf("mcp list: %d %q %s; want the server added, its annotations untrusted", code, out, errOut)
	}
	if code, _, errOut := ctl(t, d.URL, "mcp", "remove", "nope"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("mcp remove unknown: %d %s", code, errOut)
	}
	// The audit trail: newest first, one line each, narrowed and paged.
	code, out, errOut = ctl(t, d.URL, "audit")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "mcp_server.added") || !strings.Contains(lines[0], "wary") ||
		!strings.Contains(lines[1], "key.revoked") || !strings.Contains(lines[2], "key.created") {
		t.Fatalf("audit: %d %q %s; want the server added, the key revoked, the key created", code, out, errOut)
	}
	code, out, _ = ctl(t, d.URL, "audit", "--action", "key.created")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, fields[0]) {
		t.Fatalf("audit --action key.created: %d %q", code, out)
	}
	id := strings.Fields(lines[1])[0]
	code, out, _ = ctl(t, d.URL, "audit", "--before", id)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "key.created") {
		t.Fatalf("audit --before %s: %d %q", id, code, out)
	}
	if code, _, errOut := ctl(t, d.URL, "audit", "--limit", "5000"); code != 1 || !strings.Contains(errOut, "limit") {
		t.Fatalf("audit --limit 5000: %d %s", code, errOut)
	}
}

// TestApproveFromTheCLI: a call waits for approval; the approver lists it and approves
// it with toolserverctl; the call finishes.
func TestApproveFromTheCLI(t *testing.T) {
	d := testdaemon.Start(t, nil)
	done := make(chan int, 1)
	var runOut string
	go func() {
		code, out, _ := ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"touch approved.txt"}`)
		runOut = out
		done <- code
	}()
	var id string
	for i := 0; i < 200 && id == ""; i++ {
		_, out, _ := ctl(t, d.URL, "approvals", "list", "--wait", "5s")
		if f := strings.Fields(out); len(f) > 0 && strings.HasPrefix(f[0], "apr_") {
			id = f[0]
		}
	}
	if id == "" {
		t.Fatal("no pending approval listed")
	}
	if code, out, errOut := ctl(t, d.URL, "approvals", "approve", id); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %d %s %s", code, out, errOut)
	}
	if code := <-done; code != 0 || !strings.Contains(runOut, "Exit code 0") {
		t.Fatalf("run after approval: %d %s", code, runOut)
	}
	if code, _, errOut := ctl(t, d.URL, "approvals", "deny", id, "--reason", "late"); code != 1 || !strings.Contains(errOut, "409") {
		t.Fatalf("second decision: %d %s", code, errOut)
	}
}

// TestHealth: the container image's HEALTHCHECK. It needs no key, exits 0 when the
// endpoint answers 200 and 1 when it answers anything else or nothing.
func TestHealth(t *testing.T) {
	d := testdaemon.Start(t, func(c *config.Config) { c.Auth.Unauthenticated = false })
	for _, args := range [][]string{{"health"}, {"health", "--ready"}, {"health", "--timeout", "2s"}} {
		if code, out, errOut := ctl(t, d.URL, args...); code != 0 || out != "ok\n" {
			t.Fatalf("%v: %d %q %q", args, code, out, errOut)
		}
	}
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"not ready","checks":{"store":"failing: down"}}`))
	}))
	defer notReady.Close()
	if code, _, _ := ctl(t, notReady.URL, "health"); code != 0 {
		t.Fatalf("alive but not ready, health: %d", code)
	}
	if code, _, errOut := ctl(t, notReady.URL, "health", "--ready"); code != 1 || !strings.Contains(errOut, "503") {
		t.Fatalf("alive but not ready, health --ready: %d %q", code, errOut)
	}
	dead := "http://" + testnet.RefusedAddr(t)
	if code, _, errOut := ctl(t, dead, "health"); code != 1 || errOut == "" {
		t.Fatalf("nothing listening: %d %q", code, errOut)
	}
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	start := time.Now()
	code, _, errOut := ctl(t, hang.URL, "health", "--timeout", "200ms")
	t.Logf("hanging server: %d after %s: %s", code, time.Since(start), errOut)
	// The 200ms timeout ended it (its error says so); the bound is a hang guard,
	// as the server never answers.
	if code != 1 || !strings.Contains(errOut, "deadline exceeded") || time.Since(start) > 30*time.Second {
		t.Fatalf("hanging server: %d after %s: %q", code, time.Since(start), errOut)
	}
}

// TestWatchDeniesWithAReason: `approvals watch` asks for the reason of a denial (the
// model sees it), asks again after an answer it does not know, and `approvals show`
// prints the decision.
func TestWatchDeniesWithAReason(t *testing.T) {
	d := testdaemon.Start(t, nil)
	done := make(chan string, 1)
	go func() {
		_, out, _ := ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"touch denied.txt"}`)
		done <- out
	}()
	var id string
	for i := 0; i < 200 && id == ""; i++ {
		_, out, _ := ctl(t, d.URL, "approvals", "list", "--wait", "5s")
		if f := strings.Fields(out); len(f) > 0 && strings.HasPrefix(f[0], "apr_") {
			id = f[0]
		}
	}
	if id == "" {
		t.Fatal("no pending approval listed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_, _ = run(ctx, []string{"--url", d.URL, "approvals", "watch"}, strings.NewReader("d\nn\nno new files in the repo\n"), &out, &errOut)
	}()
	var runOut string
	select {
	case runOut = <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-watched
		t.Fatalf("the call was not decided; watch wrote:\n%s%s", out.String(), errOut.String())
	}
	cancel()
	<-watched
	if !strings.Contains(out.String(), `"d" is not an answer`) {
		t.Errorf("an unknown answer is not reported:\n%s", out.String())
	}
	if !strings.Contains(runOut, "no new files in the repo") {
		t.Fatalf("the model does not see the approver's reason:\n%s", runOut)
	}
	_, show, _ := ctl(t, d.URL, "approvals", "show", id)
	if !strings.Contains(show, `"kind": "deny"`) || !strings.Contains(show, "no new files in the repo") || !strings.Contains(show, "decided_at") {
		t.Fatalf("approvals show lacks the decision:\n%s", show)
	}
}

// pendingApproval starts a call of command that asks for approval and returns the
// approval's id.
func pendingApproval(t *testing.T, url, command string) string {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"command": command})
	go func() { _, _, _ = ctl(t, url, "run", "--tools", "execute_command", "execute_command", string(args)) }()
	for i := 0; i < 200; i++ {
		_, out, _ := ctl(t, url, "approvals", "list", "--wait", "5s")
		if f := strings.Fields(out); len(f) > 0 && strings.HasPrefix(f[0], "apr_") {
			return f[0]
		}
	}
	t.Fatal("no pending approval listed")
	return ""
}

// watchFor runs `approvals watch` with input for d and returns what it wrote.
func watchFor(t *testing.T, url, input string, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out bytes.Buffer
	_, _ = run(ctx, []string{"--url", url, "approvals", "watch"}, strings.NewReader(input), &out, io.Discard)
	return out.String()
}

// TestApprovalShowsTheCommandAsWritten: the approver reads the command the call would
// run; `&&`, `<` and `>` must not reach the terminal as \u0026, \u003c and \u003e.
func TestApprovalShowsTheCommandAsWritten(t *testing.T) {
	d := testdaemon.Start(t, nil)
	const command = `echo "<a>" && touch b.txt > /dev/null`
	id := pendingApproval(t, d.URL, command)
	want := strings.ReplaceAll(command, `"`, `\"`) // as a JSON string
	if _, show, _ := ctl(t, d.URL, "approvals", "show", id); !strings.Contains(show, want) {
		t.Errorf("approvals show does not print %s as written:\n%s", want, show)
	}
	if out := watchFor(t, d.URL, "\n", time.Second); !strings.Contains(out, `arguments: {"command":"`+want+`"}`) {
		t.Errorf("approvals watch does not print the arguments as written:\n%s", out)
	}
}

// TestWatchWaitsWhileNothingIsNew: with a skipped request still pending the daemon
// answers the long poll at once; watch must not turn that into a busy loop of
// requests.
func TestWatchWaitsWhileNothingIsNew(t *testing.T) {
	d := testdaemon.Start(t, nil)
	pendingApproval(t, d.URL, "touch skipped.txt")
	before := approvalListings(t, d.URL)
	if out := watchFor(t, d.URL, "\n", 2*time.Second); !strings.Contains(out, "skipped") {
		t.Fatalf("watch did not offer the request:\n%s", out)
	}
	if n := approvalListings(t, d.URL) - before; n > 5 {
		t.Fatalf("watch listed approvals %d times in 2 s", n)
	}
}

// approvalListings is how many GET /v1/approvals the daemon has answered.
func approvalListings(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "toolserverd_http_requests_total{") && strings.Contains(l, `method="GET",route="/v1/approvals"}`) {
			var v float64
			_, _ = fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v)
			n += int(v)
		}
	}
	return n
}

// TestWatchEndsCleanlyOnInterrupt: Ctrl-C is how watch is left; while it waits for
// requests that is not an error.
func TestWatchEndsCleanlyOnInterrupt(t *testing.T) {
	d := testdaemon.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	code, err := run(ctx, []string{"--url", d.URL, "approvals", "watch"}, strings.NewReader(""), io.Discard, io.Discard)
	if code != 0 || err != nil {
		t.Fatalf("watch interrupted while waiting: exit %d, error %v", code, err)
	}
}

// TestRunSaysWhatAnExternalCallWaitsFor: a call of ask_user waits for an answer posted
// to its record; run says so (with the call id to answer) instead of waiting in
// silence, and prints the answer when it comes.
func TestRunSaysWhatAnExternalCallWaitsFor(t *testing.T) {
	d := testdaemon.Start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code, err := run(ctx, []string{"--url", d.URL, "run", "--tools", "ask_user", "ask_user", `{"question":"which branch?"}`}, strings.NewReader(""), &out, pw)
		pw.Close()
		done <- fmt.Sprint(code, err, out.String())
	}()
	waiting := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(pr)
		for lines.Scan() {
			if l := lines.Text(); strings.Contains(l, "waiting for an answer") && strings.Contains(l, "which branch?") {
				if _, rest, ok := strings.Cut(l, "/v1/tool-calls/"); ok {
					waiting <- strings.SplitN(rest, "/", 2)[0]
				}
			}
		}
	}()
	var callID string
	select {
	case callID = <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not say that the call waits for an answer")
	}
	if err := client.New(d.URL).AnswerCall(context.Background(), callID, client.Answer{Text: "main"}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if !strings.HasPrefix(res, "0 <nil>") || !strings.Contains(res, "main") {
			t.Fatalf("run after the answer: %s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end after the answer")
	}
}

// TestListPagesFromTheCLI: call list and approvals list print a page of records on
// stdout and, when there are more, the --before that lists the next page on stderr.
func TestListPagesFromTheCLI(t *testing.T) {
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command(echo:*)"} })
	for i := range 3 {
		if code, out, errOut := ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", fmt.Sprintf(`{"command":"echo %d"}`, i)); code != 0 {
			t.Fatalf("run: %d %s %s", code, out, errOut)
		}
	}
	// pages lists args in pages of limit, following the printed --before, and returns
	// the records' lines.
	pages := func(limit int, args ...string) []string {
		var lines []string
		before := ""
		for range 10 {
			a := append(append([]string{}, args...), "--limit", fmt.Sprint(limit))
			if before != "" {
				a = append(a, "--before", before)
			}
			code, out, errOut := ctl(t, d.URL, a...)
			if code != 0 {
				t.Fatalf("%v: %d %s", a, code, errOut)
			}
			page := strings.Split(strings.TrimSpace(out), "\n")
			if out == "" {
				page = nil
			}
			lines = append(lines, page...)
			_, next, ok := strings.Cut(errOut, "--before ")
			if !ok {
				return lines
			}
			if len(page) != limit {
				t.Fatalf("%v: a page of %d with more after it: %s", a, len(page), errOut)
			}
			before = strings.Fields(next)[0]
		}
		t.Fatalf("%v: still listing after 10 pages", args)
		return nil
	}
	calls := pages(2, "call", "list")
	if len(calls) != 3 {
		t.Fatalf("call list: %q, want 3 calls", calls)
	}
	var prev string
	for _, l := range calls {
		f := strings.Fields(l)
		if len(f) != 5 || !strings.HasPrefix(f[0], "tc_") || f[1] != "succeeded" || f[2] != "execute_command" || !strings.HasPrefix(f[4], "ses_") {
			t.Errorf("call list line %q, want id, status, tool, time, session", l)
		}
		if prev != "" && f[3] > prev {
			t.Errorf("call list not newest first: %q", calls)
		}
		prev = f[3]
	}
	// One call's session (each run made its own).
	sess := strings.Fields(calls[1])[4]
	if got := pages(1, "call", "list", "--session", sess); len(got) != 1 || got[0] != calls[1] {
		t.Errorf("call list --session %s: %q, want %q", sess, got, calls[1])
	}
	if code, out, _ := ctl(t, d.URL, "call", "list", "--status", "running"); code != 0 || out != "" {
		t.Errorf("call list --status running: %d %q, want nothing", code, out)
	}
	if code, _, errOut := ctl(t, d.URL, "call", "list", "--before", "tc_gone"); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("call list --before tc_gone: %d %s, want a 404", code, errOut)
	}

	pendingApproval(t, d.URL, "touch one.txt")
	pendingApproval(t, d.URL, "touch two.txt")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, out, _ := ctl(t, d.URL, "approvals", "list"); strings.Count(out, "apr_") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second request is not pending after 10 s")
		}
	}
	var ids []string
	for _, l := range pages(1, "approvals", "list") {
		ids = append(ids, strings.Fields(l)[0])
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("approvals list in pages of 1: %q, want the two requests", ids)
	}
}

// TestCallListLive: call list --live shows the call that started a background job,
// marked as streaming, while the job runs, and not once it is killed.
func TestCallListLive(t *testing.T) {
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command", "kill_job"} })
	code, out, errOut := ctl(t, d.URL, "session", "create", "--tools", "execute_command,kill_job")
	if code != 0 {
		t.Fatalf("session create: %d %s %s", code, out, errOut)
	}
	var sess struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &sess); err != nil {
		t.Fatalf("session create printed %q: %v", out, err)
	}
	code, out, errOut = ctl(t, d.URL, "run", "--session", sess.ID, "execute_command", `{"command":"sleep 60","background":true}`)
	job := regexp.MustCompile(`job_[0-9a-f]+`).FindString(out)
	if code != 0 || job == "" {
		t.Fatalf("run in the background: %d %s %s", code, out, errOut)
	}
	code, out, _ = ctl(t, d.URL, "call", "list", "--live")
	if f := strings.Fields(out); code != 0 || len(f) != 6 || f[1] != "succeeded" || f[2] != "execute_command" || f[5] != "output-streaming" {
		t.Fatalf("call list --live while the job runs: %d %q", code, out)
	}
	if code, out, errOut := ctl(t, d.URL, "run", "--session", sess.ID, "kill_job", `{"job_id":"`+job+`"}`); code != 0 {
		t.Fatalf("kill_job: %d %s %s", code, out, errOut)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, out, _ := ctl(t, d.URL, "call", "list", "--live"); out == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed job's call is still live after 10 s")
		}
	}
	if code, _, errOut := ctl(t, d.URL, "call", "list", "--live", "--session", sess.ID); code != 2 || !strings.Contains(errOut, "leave out --session") {
		t.Errorf("--live with --session: %d %s", code, errOut)
	}
}

// TestMCPListSaysHowLongAServerIsDown: a server that cannot connect is listed with
// when it went down (down_since, which stays put over its attempts, where since moves
// at each) and when it is tried next; mcp add prints down_since as well.
func TestMCPListSaysHowLongAServerIsDown(t *testing.T) {
	d := testdaemon.Start(t, nil)
	code, out, errOut := ctl(t, d.URL, "mcp", "add", `{"name":"broken","transport":"stdio","command":"/bin/false"}`)
	if code != 0 || !strings.Contains(out, `"down_since"`) {
		t.Fatalf("mcp add: %d %s %s; want the server's status with down_since", code, out, errOut)
	}
	stamp := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`
	downSince := regexp.MustCompile(`\bdown_since=(` + stamp + `\S*)`)
	nextAttempt := regexp.MustCompile(`\bnext_attempt=` + stamp)
	var first string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, out, errOut = ctl(t, d.URL, "mcp", "list")
		if code != 0 {
			t.Fatalf("mcp list: %d %s", code, errOut)
		}
		m := downSince.FindStringSubmatch(out)
		if first == "" && m != nil {
			first = m[1]
		}
		if f := strings.Fields(out); len(f) > 2 && f[2] == "failed" && nextAttempt.MatchString(out) && m != nil {
			if m[1] != first {
				t.Errorf("down_since moved from %s to %s within one outage", first, m[1])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcp list of a server that cannot start: %q; want it failed, with down_since=… and next_attempt=…", out)
		}
	}
}

// TestMCPListDatesTheLastError: a server that failed and then connected is listed
// ready with the error it had, which the listing printed bare after its counts: at
// 3 a.m. "ready … connection refused" reads as a server down now. The error comes
// with last_error_at= and a last_error: label.
func TestMCPListDatesTheLastError(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	js := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MCP test server missing (%v): scripts/test.sh runs npm ci in testdata/npm", err)
		}
		t.Skip("MCP test server not installed: run npm ci in testdata/npm")
	}
	d := testdaemon.Start(t, nil)
	// Fails its first start (exit 3), then runs server-everything.
	marker := filepath.Join(t.TempDir(), "started-once")
	script := `if [ -e "$1" ]; then exec node "$2" stdio; fi; : > "$1"; echo first start fails >&2; exit 3`
	cfg, _ := json.Marshal(map[string]any{"name": "flaky", "transport": "stdio", "command": "sh", "args": []string{"-c", script, "sh", marker, js}})
	if code, out, errOut := ctl(t, d.URL, "mcp", "add", string(cfg)); code != 0 {
		t.Fatalf("mcp add: %d %s %s", code, out, errOut)
	}
	var out string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var code int
		var errOut string
		code, out, errOut = ctl(t, d.URL, "mcp", "list")
		if code != 0 {
			t.Fatalf("mcp list: %d %s", code, errOut)
		}
		if f := strings.Fields(out); len(f) > 2 && f[2] == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcp list: %q; want the server ready after its failed first start", out)
		}
	}
	if !regexp.MustCompile(`\blast_error_at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ last_error: initialize: `).MatchString(out) {
		t.Errorf("mcp list of a server ready after a failure: %q; want its last error dated (last_error_at=…) and labelled (last_error: …)", out)
	}
}

// TestNoDaemonSaysWhere: with no daemon at the URL (TOOLSERVER_URL unset, so the
// default 127.0.0.1:8080, or a daemon on another port), the error was Go's dial
// error alone; it now names the URL tried and how to give another.
func TestNoDaemonSaysWhere(t *testing.T) {
	url := "http://" + testnet.RefusedAddr(t)
	code, _, errOut := ctl(t, url, "mcp", "list")
	if code != 1 || !strings.Contains(errOut, "connection refused") || !strings.Contains(errOut, "no toolserverd answers at "+url) ||
		!strings.Contains(errOut, "TOOLSERVER_URL") || !strings.Contains(errOut, "--url") {
		t.Errorf("mcp list with no daemon: %d %q; want the dial error, the URL tried and how to give another (TOOLSERVER_URL, --url)", code, errOut)
	}
}

// TestCallOutput: call output prints a call's output as it was written (stdout, or
// the stream --stream names); with --follow it follows a background job's output
// until the job ends. call list --live marked such calls output-streaming, and the
// CLI had no way to read what they stream.
func TestCallOutput(t *testing.T) {
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	code, out, errOut := ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"printf 'a\\377b'; echo warn >&2"}`)
	call := regexp.MustCompile(`tc_[0-9a-zA-Z]+`).FindString(out)
	if code != 0 || call == "" {
		t.Fatalf("run: %d %q %s", code, out, errOut)
	}
	if code, out, errOut := ctl(t, d.URL, "call", "output", call); code != 0 || out != "a\xffb" || errOut != "" {
		t.Errorf("call output: %d %q %q; want the bytes as written", code, out, errOut)
	}
	if code, out, errOut := ctl(t, d.URL, "call", "output", call, "--stream", "stderr"); code != 0 || out != "warn\n" {
		t.Errorf("call output --stream stderr: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := ctl(t, d.URL, "call", "output", "tc_missing"); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("call output of an unknown call: %d %s", code, errOut)
	}

	code, out, errOut = ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command",
		`{"command":"for i in 1 2 3; do echo line$i; sleep 0.3; done","background":true}`)
	call = regexp.MustCompile(`tc_[0-9a-zA-Z]+`).FindString(out)
	if code != 0 || call == "" {
		t.Fatalf("run in the background: %d %q %s", code, out, errOut)
	}
	if code, out, errOut := ctl(t, d.URL, "call", "output", "--follow", call, "--stream", "stdout"); code != 0 || !strings.HasSuffix(out, "line1\nline2\nline3\n") {
		t.Errorf("call output --follow of a background job: %d %q %q; want its three lines", code, out, errOut)
	}
}

// TestToolsSaysWhatIsLeftOut: tools --format openai of a daemon with a hosted tool of
// OpenAI's names it on stderr with why (Chat Completions takes functions only), the
// registry's listing and a session's alike; stdout stays the tools' JSON.
func TestToolsSaysWhatIsLeftOut(t *testing.T) {
	d := testdaemon.Start(t, func(c *config.Config) {
		c.ProviderTools = []config.ProviderToolConfig{{Name: "web_search", Kind: "hosted", Description: "Search the web.",
			Specs: map[string]map[string]any{"openai": {"type": "web_search"}}}}
	})
	code, out, errOut := ctl(t, d.URL, "session", "create", "--tools", "read_file,web_search")
	var sess struct {
		ID string `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sess) != nil {
		t.Fatalf("session create: %d %q %s", code, out, errOut)
	}
	for _, args := range [][]string{{"tools", "--format", "openai"}, {"tools", "--session", sess.ID, "--format", "openai"}} {
		code, out, errOut := ctl(t, d.URL, args...)
		var tools []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &tools) != nil || strings.Contains(out, "web_search") {
			t.Errorf("%v: %d %q; want the tools' JSON without web_search", args, code, out)
		}
		if !strings.Contains(errOut, "web_search") || !strings.Contains(errOut, "openai_responses") {
			t.Errorf("%v: stderr %q; want web_search named as left out, and why", args, errOut)
		}
	}
	if code, out, errOut := ctl(t, d.URL, "tools", "--format", "openai_responses"); code != 0 || !strings.Contains(out, "web_search") || errOut != "" {
		t.Errorf("tools --format openai_responses: %d %q %q; want web_search listed, nothing left out", code, out, errOut)
	}
}

// TestSkillsFromTheCLI: an operator who pointed skills.dirs at a library sees which
// skills loaded and which did not, with why (scenario 6: a broken one is reported),
// and reads one skill whole; a skill that did not load is a 404 saying why.
func TestSkillsFromTheCLI(t *testing.T) {
	dir := t.TempDir()
	write := func(name, md string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("release-notes", "---\nname: release-notes\ndescription: Writes release notes\n  from the git log.\n---\n# Release notes\nRun git log.\n")
	write("broken", "---\nname: other-name\ndescription: Names another skill.\n---\nbody\n")
	d := testdaemon.Start(t, func(c *config.Config) { c.Skills.Dirs = []string{dir}; c.Skills.Watch = false })
	code, out, errOut := ctl(t, d.URL, "skills", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^release-notes\s+Writes release notes from the git log\.$`).MatchString(out) || strings.Contains(out, "broken") {
		t.Errorf("skills list: %d %q; want release-notes with its description on one line", code, out)
	}
	if !strings.Contains(errOut, "broken") || !strings.Contains(errOut, "not loaded") {
		t.Errorf("skills list: stderr %q; want the broken folder named, with why", errOut)
	}
	code, out, errOut = ctl(t, d.URL, "skills", "show", "release-notes")
	if code != 0 || !strings.Contains(out, `"body"`) || !strings.Contains(out, "Run git log.") {
		t.Errorf("skills show: %d %q %s", code, out, errOut)
	}
	if code, _, errOut := ctl(t, d.URL, "skills", "show", "broken"); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("skills show of a skill that did not load: %d %s", code, errOut)
	}
}

// TestCallListStatusWithSession: the session listing has no status filter, so
// --status with --session is refused saying so rather than ignored (it listed the
// session's finished calls to one asking for its running ones).
func TestCallListStatusWithSession(t *testing.T) {
	d := testdaemon.Start(t, func(c *config.Config) { c.Permissions.Allow = []string{"execute_command"} })
	code, out, errOut := ctl(t, d.URL, "run", "--tools", "execute_command", "execute_command", `{"command":"true"}`)
	if code != 0 {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	code, out, _ = ctl(t, d.URL, "call", "list")
	f := strings.Fields(out)
	if code != 0 || len(f) != 5 || f[1] != "succeeded" {
		t.Fatalf("call list: %d %q", code, out)
	}
	session := f[4]
	code, out, errOut = ctl(t, d.URL, "call", "list", "--session", session, "--status", "running")
	if code != 2 || out != "" || !strings.Contains(errOut, "leave out --session") {
		t.Errorf("--status running with --session: %d %q %q", code, out, errOut)
	}
	if code, out, _ := ctl(t, d.URL, "call", "list", "--session", session); code != 0 || !strings.Contains(out, "succeeded") {
		t.Errorf("--session alone: %d %q", code, out)
	}
	// run in a session with --tools: the session's own tools apply, so --tools is
	// refused rather than ignored.
	code, out, errOut = ctl(t, d.URL, "run", "--session", session, "--tools", "read_file", "execute_command", `{"command":"true"}`)
	if code != 2 || out != "" || !strings.Contains(errOut, "leave out --tools") {
		t.Errorf("run --session with --tools: %d %q %q", code, out, errOut)
	}
}

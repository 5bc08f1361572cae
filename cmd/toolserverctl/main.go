// Command toolserverctl is the command-line client of toolserverd: list tools, run a
// call and stream its output, read and list call records, read a call's output, list
// and decide approvals, manage API keys, upstream MCP servers and skills, read the
// audit trail.
//
//	toolserverctl [--url URL] [--api-key KEY] COMMAND [ARGS]
//
// The URL defaults to $TOOLSERVER_URL or http://127.0.0.1:8080, the key to
// $TOOLSERVER_API_KEY.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/jsontext"
)

const usage = `usage: toolserverctl [--url URL] [--api-key KEY] COMMAND

commands:
  tools [--session ID] [--format native|openai|openai_responses|anthropic|gemini|mcp]
  session create [--tools a,b,…] [--mode MODE] [--workdir DIR]
  session delete ID                                        delete an idle session, its records and workspace
  run (--session ID | --tools a,b,…) TOOL [ARGS_JSON]     run one call, stream its output
  call get CALL_ID | call cancel CALL_ID
  call list [--session ID | [--status running,…] [--live]] [--limit N] [--before CURSOR]
                                                           call records, newest first
  call output CALL_ID [--stream stderr] [--follow]         a call's output as written; --follow: until it ends
  approvals list [--status pending] [--wait 30s] [--limit N] [--before CURSOR]
  approvals show ID
  approvals approve ID [--for-session | --rule RULE]
  approvals deny ID --reason TEXT
  approvals watch                                          decide pending approvals interactively
  whoami                                                   the key's tenant and roles
  keys create --roles agent[,approver,admin] [--tenant T] [--name N]   prints the key once
  keys list [--tenant T] | keys revoke KEY_ID
  keys hash KEY                                            SHA-256 for auth.keys in the config
  mcp list | mcp add CONFIG_JSON | mcp remove NAME | mcp restart NAME
  skills list | skills show NAME                           loaded skills (folders that did not load on stderr)
  audit [--tenant T] [--action A] [--subject S] [--limit N] [--before ID]   the audit trail, newest first
  health [--ready] [--timeout 5s]                          exit 0 if /healthz (/readyz) answers 200
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolserverctl:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) (code int, err error) {
	global := flag.NewFlagSet("toolserverctl", flag.ContinueOnError)
	global.SetOutput(errOut)
	base := global.String("url", envOr("TOOLSERVER_URL", "http://127.0.0.1:8080"), "daemon URL")
	key := global.String("api-key", os.Getenv("TOOLSERVER_API_KEY"), "API key")
	global.Usage = func() { fmt.Fprint(errOut, usage) }
	if err := global.Parse(args); err != nil {
		return 2, nil
	}
	defer func() {
		// Go's dial error alone does not say that the URL may be the wrong one (the
		// default, with TOOLSERVER_URL unset).
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w: no toolserverd answers at %s; give its URL with TOOLSERVER_URL or --url", err, *base)
		}
	}()
	rest := global.Args()
	if len(rest) == 0 {
		fmt.Fprint(errOut, usage)
		return 2, nil
	}
	c := client.New(*base, client.WithAPIKey(*key))
	cmd, rest := rest[0], rest[1:]
	var sub string
	if len(rest) > 0 && (cmd == "session" || cmd == "call" || cmd == "approvals" || cmd == "keys" || cmd == "mcp" || cmd == "skills") {
		sub, rest = rest[0], rest[1:]
	}
	fs := flag.NewFlagSet(cmd+" "+sub, flag.ContinueOnError)
	fs.SetOutput(errOut)
	session := fs.String("session", "", "session id")
	format := fs.String("format", "native", "schema format")
	tools := fs.String("tools", "", "comma-separated tool whitelist")
	mode := fs.String("mode", "", "permission mode")
	workdir := fs.String("workdir", "", "session workdir")
	status := fs.String("status", "pending", "approval status filter (empty: all)")
	wait := fs.Duration("wait", 0, "long-poll for approvals")
	forSession := fs.Bool("for-session", false, "approve for the rest of the session")
	rule := fs.String("rule", "", "approve and add this suggested rule")
	reason := fs.String("reason", "", "why (sent to the model on deny)")
	roles := fs.String("roles", "", "comma-separated roles: agent, approver, admin")
	tenant := fs.String("tenant", "", "tenant")
	name := fs.String("name", "", "key name")
	ready := fs.Bool("ready", false, "health: ask /readyz instead of /healthz")
	timeout := fs.Duration("timeout", 5*time.Second, "health: give up after this long")
	action := fs.String("action", "", "audit: only entries of this action (key.created, approval.denied…)")
	subject := fs.String("subject", "", "audit: only entries about this (an approval or key id, an MCP server)")
	limit := fs.Int("limit", 0, "list: at most this many (the daemon's default: 0)")
	live := fs.Bool("live", false, "call list: only calls not finished, or whose background job's output goes on")
	before := fs.String("before", "", "list: the page after this cursor (printed after a page that has more)")
	stream := fs.String("stream", "stdout", "call output: the output stream to read (stdout, stderr)")
	follow := fs.Bool("follow", false, "call output: wait for more output until the call's output ends")
	if err := fs.Parse(reorder(rest)); err != nil {
		return 2, nil
	}
	pos := fs.Args()
	switch {
	case cmd == "tools":
		var l client.ToolList
		var err error
		if *session != "" {
			l, err = c.SessionTools(ctx, *session, client.ToolsQuery{Format: *format})
		} else {
			l, err = c.ListTools(ctx, *format)
		}
		if err != nil {
			return 1, err
		}
		// On stderr, like the paging hints: stdout stays the tools' JSON.
		for _, o := range l.Omitted {
			why := o.Reason
			switch {
			case why == "" && len(o.HostedBy) > 0:
				why = "a tool " + strings.Join(o.HostedBy, " and ") + " runs"
			case why == "":
				why = "the format cannot carry it"
			}
			fmt.Fprintf(errOut, "%s is left out of format %s: %s\n", o.Name, *format, why)
		}
		if l.Tools == nil {
			l.Tools = []json.RawMessage{}
		}
		return 0, printJSON(out, l.Tools)
	case cmd == "session" && sub == "create":
		s, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: splitList(*tools), PermissionMode: *mode, Workdir: *workdir})
		if err != nil {
			return 1, err
		}
		return 0, printJSON(out, s)
	case cmd == "session" && sub == "delete" && len(pos) == 1:
		return exitOf(c.DeleteSession(ctx, pos[0]))
	case cmd == "run":
		if *session != "" && flagSet(fs, "tools") {
			// The session's own tools are the ones it may call: ignoring --tools would
			// run a tool the user did not name as allowed.
			return 2, errors.New("run: --session runs in that session with its own tools; leave out --tools (or --session, for a new session with them)")
		}
		return runCall(ctx, c, *session, splitList(*tools), pos, out, errOut)
	case cmd == "call" && (sub == "get" || sub == "cancel") && len(pos) == 1:
		if sub == "cancel" {
			return exitOf(c.CancelCall(ctx, pos[0]))
		}
		r, err := c.GetCall(ctx, pos[0])
		if err != nil {
			return 1, err
		}
		return 0, printJSON(out, r)
	case cmd == "call" && sub == "output" && len(pos) == 1:
		return callOutput(ctx, c, pos[0], *stream, *follow, out, errOut)
	case cmd == "call" && sub == "list" && len(pos) == 0:
		page := client.Page{Limit: *limit, Before: *before}
		var l *client.CallList
		var err error
		if *session != "" && *live {
			return 2, errors.New("call list: --live lists the calls of every session; leave out --session")
		}
		if *session != "" && flagSet(fs, "status") {
			// The session listing has no status filter: ignoring --status would list
			// finished calls to one who asked for the running ones.
			return 2, errors.New("call list: --status lists the calls of every session; leave out --session")
		}
		if *session != "" {
			l, err = c.ListSessionCalls(ctx, *session, page)
		} else {
			f := client.CallFilter{Page: page, Live: *live}
			if flagSet(fs, "status") {
				f.Statuses = splitList(*status)
			}
			l, err = c.ListCalls(ctx, f)
		}
		if err != nil {
			return 1, err
		}
		for _, r := range l.Calls {
			streaming := ""
			if r.OutputOpen {
				streaming = "  output-streaming" // a background job it started still runs
			}
			fmt.Fprintf(out, "%s  %-9s %-24s %s  %s%s\n", r.ID, r.Status, r.Name, r.CreatedAt.Format(time.RFC3339), r.SessionID, streaming)
		}
		more(errOut, cmd+" "+sub, l.NextBefore)
		return 0, nil
	case cmd == "approvals" && sub == "list":
		l, err := c.ListApprovals(ctx, client.ApprovalFilter{Status: *status, Wait: *wait, Page: client.Page{Limit: *limit, Before: *before}})
		if err != nil {
			return 1, err
		}
		for _, a := range l.Approvals {
			fmt.Fprintf(out, "%s  %-8s %-6s %-20s %s\n", a.ID, a.Status, a.Risk, a.Tool, oneLine(a.Reason))
		}
		more(errOut, cmd+" "+sub, l.NextBefore)
		return 0, nil
	case cmd == "approvals" && sub == "show" && len(pos) == 1:
		a, err := c.GetApproval(ctx, pos[0])
		if err != nil {
			return 1, err
		}
		return 0, printJSON(out, a)
	case cmd == "approvals" && (sub == "approve" || sub == "deny") && len(pos) == 1:
		d := client.Decision{Decision: "approve", Reason: *reason}
		switch {
		case sub == "deny":
			d.Decision = "deny"
		case *rule != "":
			d.Decision, d.Rule = "approve_with_rule", *rule
		case *forSession:
			d.Decision = "approve_for_session"
		}
		a, err := c.Decide(ctx, pos[0], d)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(out, "%s %s\n", a.ID, a.Status)
		return 0, nil
	case cmd == "approvals" && sub == "watch":
		return watch(ctx, c, in, out)
	case cmd == "health" && len(pos) == 0:
		// The container image's HEALTHCHECK: distroless images have no curl.
		hctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if err := c.Health(hctx, *ready); err != nil {
			return 1, err
		}
		fmt.Fprintln(out, "ok")
		return 0, nil
	case cmd == "whoami":
		p, err := c.Whoami(ctx)
		if err != nil {
			return 1, err
		}
		return 0, printJSON(out, p)
	case cmd == "keys" && sub == "create":
		k, err := c.CreateKey(ctx, *name, *tenant, splitList(*roles))
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(errOut, "created %s (tenant %s, roles %s); the key is shown only now:\n", k.ID, k.Tenant, strings.Join(k.Roles, ","))
		fmt.Fprintln(out, k.Key)
		return 0, nil
	case cmd == "keys" && sub == "list":
		ks, err := c.Keys(ctx, *tenant)
		if err != nil {
			return 1, err
		}
		for _, k := range ks {
			state := "active"
			if k.RevokedAt != nil {
				state = "revoked"
			}
			fmt.Fprintf(out, "%s  %-8s %-16s %-24s %s\n", k.ID, state, k.Tenant, strings.Join(k.Roles, ","), k.Name)
		}
		return 0, nil
	case cmd == "keys" && sub == "revoke" && len(pos) == 1:
		return exitOf(c.RevokeKey(ctx, pos[0]))
	case cmd == "keys" && sub == "hash" && len(pos) == 1:
		fmt.Fprintln(out, auth.Hash(pos[0]))
		return 0, nil
	case cmd == "audit" && len(pos) == 0:
		var from int64
		if *before != "" {
			n, err := strconv.ParseInt(*before, 10, 64)
			if err != nil || n < 1 {
				return 2, fmt.Errorf("audit: --before takes the id of an entry (a number), not %q", *before)
			}
			from = n
		}
		es, err := c.Audit(ctx, client.AuditQuery{Tenant: *tenant, Action: *action, Subject: *subject, Limit: *limit, Before: from})
		if err != nil {
			return 1, err
		}
		for _, e := range es {
			fmt.Fprintf(out, "%d  %s  %-12s %-20s %-30s %s\n", e.ID, e.TS.Format(time.RFC3339), e.Tenant, e.Action, e.Subject, oneLine(e.Actor))
		}
		if full := max(*limit, 0); len(es) > 0 && (len(es) == full || (full == 0 && len(es) == 100)) {
			more(errOut, cmd, strconv.FormatInt(es[len(es)-1].ID, 10))
		}
		return 0, nil
	case cmd == "mcp" && sub == "list":
		ss, err := c.MCPServers(ctx)
		if err != nil {
			return 1, err
		}
		if len(ss) == 0 {
			// On stderr, like the paging hints: stdout stays a listing for scripts.
			fmt.Fprintln(errOut, `no MCP servers are configured; add one with toolserverctl mcp add '{"name":"NAME","transport":"stdio","command":"..."}' `+
				"or under mcp_servers in the config file")
			return 0, nil
		}
		for _, s := range ss {
			trust := ""
			if !s.TrustAnnotations {
				trust = "annotations-untrusted "
			}
			// A server that is down: since when (down_since stays put over the
			// attempts of one outage, where since moves at each) and the next try.
			down := ""
			if !s.DownSince.IsZero() {
				down += " down_since=" + s.DownSince.UTC().Format(time.RFC3339)
			}
			if !s.NextAttempt.IsZero() {
				down += " next_attempt=" + s.NextAttempt.UTC().Format(time.RFC3339)
			}
			// The last error stays after the server recovers: dated and labelled, so
			// that "ready … connection refused" does not read as a server down now.
			lastErr := ""
			if s.LastError != "" {
				if !s.LastErrorAt.IsZero() {
					lastErr = "last_error_at=" + s.LastErrorAt.UTC().Format(time.RFC3339) + " "
				}
				lastErr += "last_error: " + oneLine(s.LastError)
			}
			fmt.Fprintf(out, "%-20s %-16s %-10s tools=%d restarts=%d%s %s%s\n", s.Name, s.Transport, s.State, s.Tools, s.Restarts, down, trust, lastErr)
		}
		return 0, nil
	case cmd == "skills" && sub == "list" && len(pos) == 0:
		l, err := c.Skills(ctx)
		if err != nil {
			return 1, err
		}
		for _, s := range l.Skills {
			fmt.Fprintf(out, "%-32s %s\n", s.Name, oneLine(s.Description))
		}
		// On stderr: stdout stays a listing of what loaded.
		for _, p := range l.Problems {
			fmt.Fprintf(errOut, "not loaded: %s: %s\n", p.Dir, oneLine(p.Error))
		}
		return 0, nil
	case cmd == "skills" && sub == "show" && len(pos) == 1:
		s, err := c.GetSkill(ctx, pos[0])
		if err != nil {
			return 1, err
		}
		return 0, printJSON(out, s)
	case cmd == "mcp" && sub == "add" && len(pos) == 1:
		if !json.Valid([]byte(pos[0])) {
			return 2, errors.New("CONFIG_JSON is not valid JSON")
		}
		s, err := c.AddMCPServer(ctx, json.RawMessage(pos[0]))
		if err != nil {
			return 1, err
		}
		return 0, printJSON(out, s)
	case cmd == "mcp" && sub == "remove" && len(pos) == 1:
		return exitOf(c.RemoveMCPServer(ctx, pos[0]))
	case cmd == "mcp" && sub == "restart" && len(pos) == 1:
		return exitOf(c.RestartMCPServer(ctx, pos[0]))
	}
	fmt.Fprint(errOut, usage)
	return 2, nil
}

// runCall runs one call and streams its output: progress to stdout/stderr as it
// arrives, then the result. The exit status is 1 when the result is an error.
func runCall(ctx context.Context, c *client.Client, session string, tools, pos []string, out, errOut io.Writer) (int, error) {
	if len(pos) < 1 || len(pos) > 2 {
		return 2, errors.New("run needs TOOL and optionally ARGS_JSON")
	}
	args := json.RawMessage(`{}`)
	if len(pos) == 2 {
		if !json.Valid([]byte(pos[1])) {
			return 2, errors.New("ARGS_JSON is not valid JSON")
		}
		args = json.RawMessage(pos[1])
	}
	b := client.Batch{Calls: []client.Call{{ID: "cli_1", Name: pos[0], Arguments: args}}}
	if session == "" {
		b.Session = &client.SessionSpec{AvailableTools: tools}
	}
	failed := false
	err := c.Run(ctx, session, "", b, func(ev client.Event) error {
		switch ev.Type {
		case "tool_progress":
			if ev.Stream == "stderr" {
				fmt.Fprint(errOut, ev.Text)
			} else if !ev.Closed {
				fmt.Fprint(out, ev.Text)
			}
		case "approval_required":
			fmt.Fprintf(errOut, "[waiting for approval: %s]\n", plainJSON(ev.Approval))
		case "input_required":
			fmt.Fprintf(errOut, "[waiting for an answer to POST /v1/tool-calls/%s/result: %s]\n", ev.CallID, plainJSON(ev.Arguments))
		case "message":
			failed = ev.IsError
			fmt.Fprintf(out, "\n--- %s (%s)%s ---\n%s\n", ev.Name, ev.CallID, kindSuffix(ev), ev.Content())
		}
		return nil
	})
	if err != nil {
		return 1, err
	}
	if failed {
		return 1, nil
	}
	return 0, nil
}

// callOutput writes a call's output stream as it was written (the exact bytes), read
// by offset; with follow it polls until the output is complete (a background job's
// ends with the job). Output held by a replica that has stopped is lost, which it
// says (exit 1) rather than showing none.
func callOutput(ctx context.Context, c *client.Client, callID, stream string, follow bool, out, errOut io.Writer) (int, error) {
	var offset int64
	saidUnavailable := false
	for {
		p, err := c.Progress(ctx, callID, client.ProgressQuery{Stream: stream, Offset: offset, Encoding: "base64"})
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil // interrupted: how a follow ends
			}
			// Following, a replica out of reach for now (503 with Retry-After) is
			// waited for: a stopped one soon says its output is lost.
			var ce *client.Error
			if !follow || !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable {
				return 1, err
			}
			if !saidUnavailable {
				fmt.Fprintf(errOut, "waiting: %s\n", ce.Message)
				saidUnavailable = true
			}
			wait := min(max(ce.RetryAfter, time.Second), 30*time.Second)
			select {
			case <-ctx.Done():
				return 0, nil
			case <-time.After(wait):
			}
			continue
		}
		b, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil {
			return 1, fmt.Errorf("the daemon sent output that is not base64: %w", err)
		}
		if _, err := out.Write(b); err != nil {
			return 1, err
		}
		offset = p.NextOffset
		switch {
		case p.OutputLost:
			fmt.Fprintf(errOut, "the output of %s is lost: the replica that ran it has stopped; its result: toolserverctl call get %s\n", callID, callID)
			return 1, nil
		case p.Finished:
			return 0, nil
		case len(b) > 0:
			continue // more may be there already
		case !follow:
			// On stderr: stdout holds only the output.
			fmt.Fprintln(errOut, "the output goes on: add --follow to wait for the rest")
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// watch long-polls pending approvals and asks on the terminal for each. A denial
// asks for the reason, which the model sees.
func watch(ctx context.Context, c *client.Client, in io.Reader, out io.Writer) (int, error) {
	seen := map[string]bool{}
	r := bufio.NewReader(in)
	readLine := func() (string, bool) {
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			return "", false
		}
		return strings.TrimSpace(line), true
	}
	for ctx.Err() == nil {
		as, err := c.Approvals(ctx, "pending", 30*time.Second)
		if ctx.Err() != nil {
			return 0, nil // interrupted: how watch ends
		}
		if err != nil {
			return 1, err
		}
		fresh := false
		for _, a := range as {
			if seen[a.ID] {
				continue
			}
			seen[a.ID], fresh = true, true
			fmt.Fprintf(out, "\n%s wants to run %s (risk %s): %s\n  arguments: %s\n", a.SessionID, a.Tool, a.Risk, a.Reason, plainJSON(a.Arguments))
			for i, s := range a.Suggestions {
				fmt.Fprintf(out, "  rule %d: %s\n", i+1, s)
			}
			var d client.Decision
			for d.Decision == "" {
				fmt.Fprint(out, "approve [y], for session [s], with rule [1-9], deny [n], skip [enter]: ")
				line, ok := readLine()
				if !ok {
					return 0, nil
				}
				switch {
				case line == "":
				case line == "y":
					d.Decision = "approve"
				case line == "s":
					d.Decision = "approve_for_session"
				case line == "n":
					fmt.Fprint(out, "reason (the model sees it): ")
					reason, ok := readLine()
					if !ok {
						return 0, nil
					}
					if reason == "" {
						reason = "denied from toolserverctl"
					}
					d.Decision, d.Reason = "deny", reason
				case len(line) == 1 && line[0] >= '1' && int(line[0]-'1') < len(a.Suggestions):
					d.Decision, d.Rule = "approve_with_rule", a.Suggestions[line[0]-'1']
				default:
					fmt.Fprintf(out, "  %q is not an answer\n", line)
					continue
				}
				break
			}
			if d.Decision == "" {
				fmt.Fprintln(out, "  skipped")
				continue
			}
			if _, err := c.Decide(ctx, a.ID, d); err != nil {
				fmt.Fprintln(out, "  ", err)
			}
		}
		if !fresh {
			// The long poll only waits while nothing is pending: with skipped
			// requests left it answers at once, so wait here before asking again.
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
	return 0, nil
}

func kindSuffix(ev client.Event) string {
	if ev.IsError {
		return " " + ev.ErrorKind
	}
	return ""
}

// reorder moves flags before positional arguments so "show ID --x" works too.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) && !isBool(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func isBool(flag string) bool {
	f := strings.TrimLeft(flag, "-")
	return f == "for-session" || f == "ready" || f == "live" || f == "follow"
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// printJSON writes v indented, with &, < and > as themselves: an approver reads
// commands such as "make && make install > log" here.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsontext.UnescapeHTML(b), '\n'))
	return err
}

// plainJSON is raw JSON from the daemon on one line, with &, < and > as themselves.
func plainJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return string(jsontext.UnescapeHTML(b.Bytes()))
}

func exitOf(err error) (int, error) {
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// more tells, on stderr (stdout holds only the records), how to list the next page.
func more(errOut io.Writer, cmd, next string) {
	if next != "" {
		fmt.Fprintf(errOut, "more: toolserverctl %s --before %s (with the same filters)\n", cmd, next)
	}
}

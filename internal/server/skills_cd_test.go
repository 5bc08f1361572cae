package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestSkillScriptRunFromItsFolder: a skill's instructions say `cd {baseDir} &&
// node script.js ../y`; ../y is read from the skill's folder, where it names a
// sibling inside the working directory. Read from where the command line starts
// (the session's workspace, inside the data dir), it named the data dir, and the
// call asked for approval in every mode. A path that does climb into the data dir
// from the skill's folder still asks.
func TestSkillScriptRunFromItsFolder(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	skills := filepath.Join(filepath.Dir(file), "testdata", "skills")
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{skills} }})
	for _, mode := range []string{"default", "bypass"} {
		id := d.createSession(map[string]any{"available_tools": []string{"skill", "execute_command"}, "available_skills": []string{"greeting"},
			"permission_mode": mode})["id"].(string)
		calls := "/v1/sessions/" + id + "/tool-calls"
		_, evs := d.stream(calls, `{"calls":[{"id":"open","name":"skill","arguments":{"name":"greeting"}}]}`)
		if m := messages(t, evs)["open"]; !strings.Contains(string(m.raw), ".skills/greeting") {
			t.Fatalf("%s: open: %s", mode, m.raw)
		}

		runsUnasked(t, d, calls, "cd .skills/greeting && bash scripts/greet.sh ../greeting", "Hello, ../greeting, from the greeting skill")

		// ../../../x from the skill's folder is the data dir's workspaces/x.
		reason := asksThenDeny(t, d, calls, "cd .skills/greeting && bash scripts/greet.sh ../../../x")
		if !strings.Contains(reason, "../../../x") || !strings.Contains(reason, "data directory") {
			t.Fatalf("%s mode: approval reason %q does not name the path into the data dir", mode, reason)
		}
	}
}

// runsUnasked runs command with execute_command in the session whose calls path is
// calls, and fails unless it runs without asking for approval and its message holds
// each of want.
func runsUnasked(t *testing.T, d *daemon, calls, command string, want ...string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"id": "run", "name": "execute_command", "arguments": map[string]any{"command": command}}}})
	ev, rest, stop := streamUntilFirst(t, d, calls, string(b), "approval_required", "message")
	if ev["type"] == "approval_required" {
		stop()
		t.Fatalf("%q asked for approval: %v", command, ev["approval"])
	}
	<-rest
	stop()
	out, _ := json.Marshal(ev)
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Fatalf("%q: %s; want %q in it", command, out, w)
		}
	}
}

// asksThenDeny runs command with execute_command in the session whose calls path is
// calls, which must ask for approval; it denies the request and returns its reason.
func asksThenDeny(t *testing.T, d *daemon, calls, command string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"calls": []any{map[string]any{"id": "ask", "name": "execute_command", "arguments": map[string]any{"command": command}}}})
	apr, rest, stop := streamUntilApproval(t, d, calls, string(b))
	defer stop()
	reason, _ := apr["reason"].(string)
	if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", `{"decision":"deny","reason":"no","actor":"ada"}`); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	<-rest
	return reason
}

// streamUntilFirst posts body to path and reads the NDJSON answer up to the first
// event of one of types, which it returns; the rest of the stream arrives on rest.
func streamUntilFirst(t *testing.T, d *daemon, path, body string, types ...string) (ev map[string]any, rest <-chan []event, cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			resp.Body.Close()
			stop()
			t.Fatalf("stream ended before any of %v: %v", types, err)
		}
		validate(t, "StreamEvent", line)
		ev = nil
		_ = json.Unmarshal(line, &ev)
		if typ, _ := ev["type"].(string); typ != "" && strings.Contains(" "+strings.Join(types, " ")+" ", " "+typ+" ") {
			break
		}
	}
	out := make(chan []event, 1)
	go func() {
		defer resp.Body.Close()
		b, _ := readRest(br)
		out <- parseNDJSON(t, b)
	}()
	return ev, out, stop
}

package server_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// TestApproveForSessionWhoseRulesCannotBeSaved: "approve for this session" whose rules
// the store refuses to save (here a trigger; a full disk or a lost database in life)
// decides nothing: the approver gets an error, the request stays pending and the
// call waits, instead of a 200 for a decision recorded as "for session" whose rules
// the session never got (the next such command asked again, and nobody was told).
// Once the rules can be saved, the same decision approves, the call runs once and
// the session allows its suggestions.
func TestApproveForSessionWhoseRulesCannotBeSaved(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = nil
		c.Sessions.WorkdirRoots = []string{work}
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": work})["id"].(string)
	apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"w","name":"execute_command","arguments":{"command":"rm -rf build/ && echo ran >> ran.txt"}}]}`)
	defer stop()
	aprID := apr["id"].(string)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.dataDir, store.SQLiteFileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER block_spec BEFORE UPDATE OF spec ON sessions BEGIN SELECT RAISE(ABORT, 'spec writes blocked'); END`); err != nil {
		t.Fatal(err)
	}
	code, _, body := d.do("POST", "/v1/approvals/"+aprID+"/decision", `{"decision":"approve_for_session","actor":"alice"}`)
	if code < 500 {
		t.Fatalf("approve_for_session whose rules were not saved: %d %s, want a 5xx", code, body)
	}
	validate(t, "Error", body)
	time.Sleep(time.Second) // a run would start after the grace (300ms)
	code, _, body = d.do("GET", "/v1/approvals/"+aprID, nil)
	if code != 200 || !strings.Contains(string(body), `"status":"pending"`) {
		t.Fatalf("approval after the failed decision: %d %s, want still pending", code, body)
	}
	if _, err := os.Stat(filepath.Join(work, "ran.txt")); !os.IsNotExist(err) {
		t.Fatalf("the command ran although its decision failed (stat: %v)", err)
	}

	if _, err := db.Exec(`DROP TRIGGER block_spec`); err != nil {
		t.Fatal(err)
	}
	code, _, body = d.do("POST", "/v1/approvals/"+aprID+"/decision", `{"decision":"approve_for_session","actor":"alice"}`)
	if code != 200 {
		t.Fatalf("approve_for_session once rules save: %d %s", code, body)
	}
	if m := restMessages(t, <-rest)["w"]; m.m["is_error"] != false {
		t.Fatalf("approved call: %s", m.raw)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "ran.txt")); string(b) != "ran\n" {
		t.Fatalf("ran.txt = %q, want the command run once", b)
	}
	code, _, body = d.do("GET", "/v1/sessions/"+id, nil)
	if code != 200 {
		t.Fatalf("GET session: %d %s", code, body)
	}
	var sess struct {
		Rules struct {
			Allow []string `json:"allow"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(body, &sess); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"execute_command(rm -rf build/)"} {
		if !slices.Contains(sess.Rules.Allow, want) {
			t.Fatalf("session allow rules %v lack %s", sess.Rules.Allow, want)
		}
	}
}

package server_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

func skillsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "skills")
}

// TestActiveSkillSurvivesRestart: the skill a session opened, and the tools it allows,
// hold after the daemon restarts (the skill's restriction is not lifted by a restart).
func TestActiveSkillSurvivesRestart(t *testing.T) {
	t.Parallel()
	opts := daemonOpts{dataDir: t.TempDir(), mutate: func(c *config.Config) { c.Skills.Dirs = []string{skillsDir()} }}
	d := startDaemon(t, opts)
	id := d.createSession(map[string]any{"available_tools": []string{"skill", "read_file", "write_file"}, "available_skills": []string{"greeting"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"open","name":"skill","arguments":{"name":"greeting"}}]}`)
	if m := messages(t, evs)["open"]; m.m["is_error"] != false {
		t.Fatalf("open the skill: %s", m.raw)
	}
	d.stop()

	d2 := startDaemon(t, opts)
	_, evs = d2.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"no","name":"write_file","arguments":{"path":"x.txt","content":"x"}}]}`)
	if m := messages(t, evs)["no"]; m.str("error_kind") != "denied" || !strings.Contains(string(m.raw), "active skill greeting") {
		t.Fatalf("after a restart, a tool the active skill refuses: %s", m.raw)
	}
}

// TestSessionStateAcrossReplicas: what a turn changes on one replica — the ranked
// listing's narrowing, an expansion, the skill opened, an approval's session rule —
// holds for the session's next call on another replica that already had it loaded.
func TestSessionStateAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) { c.Skills.Dirs = []string{skillsDir()} })
	id := a.createSession(map[string]any{"available_skills": []string{"greeting"}})["id"].(string)
	calls := "/v1/sessions/" + id + "/tool-calls"

	// Turn 1 on B: a ranked listing narrows the session on B to file tools.
	_, _, body := b.do("GET", "/v1/sessions/"+id+"/tools?query=read+the+contents+of+a+file&limit=3", nil)
	if names := strings.Join(toolNames(t, body), ","); strings.Contains(names, "memory_save") || !strings.Contains(names, "tool_expand_tools") {
		t.Fatalf("ranked listing on B: %s", names)
	}
	// Turn 2 on A: a listing for memory, then the model expands a tool on A.
	_, _, body = a.do("GET", "/v1/sessions/"+id+"/tools?query=remember+a+fact+in+memory&limit=3", nil)
	if names := strings.Join(toolNames(t, body), ","); !strings.Contains(names, "memory_save") {
		t.Fatalf("ranked listing on A: %s", names)
	}
	_, evs := a.stream(calls, `{"calls":[{"id":"x","name":"tool_expand_tools","arguments":{"tool_names":["echo","skill"]}}]}`)
	if m := messages(t, evs)["x"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "echo") {
		t.Fatalf("expand on A: %s", m.raw)
	}
	// The model's calls land on B: the listing and the expansion made on A hold there.
	_, evs = b.stream(calls, `{"calls":[{"id":"m","name":"memory_save","arguments":{"content":"the launch code is 1234"}},{"id":"e","name":"echo","arguments":{"text":"hi"}}]}`)
	msgs := messages(t, evs)
	for _, k := range []string{"m", "e"} {
		if msgs[k].m["is_error"] != false {
			t.Errorf("call %s on B after turn 2 on A: %s", k, msgs[k].raw)
		}
	}

	// The skill opened on A restricts calls on B.
	_, evs = a.stream(calls, `{"calls":[{"id":"open","name":"skill","arguments":{"name":"greeting"}}]}`)
	if m := messages(t, evs)["open"]; m.m["is_error"] != false {
		t.Fatalf("open the skill on A: %s", m.raw)
	}
	_, evs = b.stream(calls, `{"calls":[{"id":"no","name":"write_file","arguments":{"path":"x.txt","content":"x"}}]}`)
	if m := messages(t, evs)["no"]; m.str("error_kind") != "denied" || !strings.Contains(string(m.raw), "active skill greeting") {
		t.Fatalf("on B, a tool the skill opened on A refuses: %s", m.raw)
	}
}

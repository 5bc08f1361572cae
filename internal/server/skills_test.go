package server_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

func TestSkills(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "testdata", "skills")
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{dir} }})

	code, _, body := d.do("GET", "/v1/skills", nil)
	if code != 200 || !strings.Contains(string(body), `"name":"greeting"`) || !strings.Contains(string(body), "broken") {
		t.Fatalf("skills: %d %s", code, body)
	}
	code, _, body = d.do("GET", "/v1/skills/greeting", nil)
	if code != 200 || !strings.Contains(string(body), "greet.sh NAME") || !strings.Contains(string(body), `"version":"1.2"`) {
		t.Fatalf("skill: %d %s", code, body)
	}
	validate(t, "Skill", body)
	if code, _, _ := d.do("GET", "/v1/skills/nope", nil); code != 404 {
		t.Fatalf("unknown skill: %d", code)
	}

	s := d.createSession(map[string]any{"available_tools": []string{"skill", "execute_command", "read_file", "write_file"}, "available_skills": []string{"greeting", "nope"}})
	if !strings.Contains(strings.Join(toStrings(s["warnings"]), ";"), "nope") {
		t.Fatalf("unknown skill not warned: %v", s["warnings"])
	}
	id := s["id"].(string)
	code, _, body = d.do("GET", "/v1/sessions/"+id+"/prompt", nil)
	if code != 200 || !strings.Contains(string(body), "- greeting: Greets people") || !strings.Contains(string(body), "- skill: ") {
		t.Fatalf("prompt: %d %s", code, body)
	}
	// Without the skill tool the model could not open them: the prompt offers none.
	noTool := d.createSession(map[string]any{"available_tools": []string{"read_file"}, "available_skills": []string{"greeting"}})["id"].(string)
	if code, _, body := d.do("GET", "/v1/sessions/"+noTool+"/prompt", nil); code != 200 || strings.Contains(string(body), "greeting") || strings.Contains(string(body), "skill tool") ||
		!strings.Contains(string(body), `"skills":[]`) {
		t.Fatalf("prompt of a session without the skill tool: %d %s", code, body)
	}
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[
		{"id":"open","name":"skill","arguments":{"name":"greeting"}},
		{"id":"file","name":"skill","arguments":{"name":"greeting","file":"scripts/greet.sh"}},
		{"id":"run","name":"execute_command","arguments":{"command":"bash .skills/greeting/scripts/greet.sh Ada"}},
		{"id":"esc","name":"skill","arguments":{"name":"greeting","file":"../../../../etc/passwd"}},
		{"id":"other","name":"skill","arguments":{"name":"broken"}}]}`)
	msgs := messages(t, evs)
	if !strings.Contains(string(msgs["open"].raw), ".skills/greeting") || !strings.Contains(string(msgs["open"].raw), "Run `bash .skills") {
		t.Fatalf("open: %s", msgs["open"].raw)
	}
	if !strings.Contains(string(msgs["file"].raw), "from the greeting skill") {
		t.Fatalf("file: %s", msgs["file"].raw)
	}
	if !strings.Contains(string(msgs["run"].raw), "Hello, Ada, from the greeting skill") {
		t.Fatalf("run: %s", msgs["run"].raw)
	}
	if msgs["esc"].str("error_kind") != "not_found" || strings.Contains(string(msgs["esc"].raw), "root:") {
		t.Fatalf("escape: %s", msgs["esc"].raw)
	}
	if msgs["other"].str("error_kind") != "not_found" {
		t.Fatalf("skill outside the session: %s", msgs["other"].raw)
	}
	// The greeting skill is active and allows Bash and Read: other tools are refused.
	_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[
		{"id":"ok","name":"read_file","arguments":{"path":".skills/greeting/SKILL.md"}},
		{"id":"no","name":"write_file","arguments":{"path":"x.txt","content":"x"}}]}`)
	msgs = messages(t, evs)
	if msgs["ok"].m["is_error"] != false || msgs["no"].str("error_kind") != "denied" || !strings.Contains(string(msgs["no"].raw), "active skill greeting") {
		t.Fatalf("allowed_tools: %s / %s", msgs["ok"].raw, msgs["no"].raw)
	}

	// A ranked listing (every tool: more than a small set) offers only what the active
	// skill allows.
	all := d.createSession(map[string]any{"available_skills": []string{"greeting"}})["id"].(string)
	_, evs = d.stream("/v1/sessions/"+all+"/tool-calls", `{"calls":[{"id":"open","name":"skill","arguments":{"name":"greeting"}}]}`)
	if m := messages(t, evs)["open"]; m.m["is_error"] != false {
		t.Fatalf("open the skill: %s", m.raw)
	}
	for _, q := range []string{"write+a+file&limit=5", "read+the+contents+of+a+file&limit=5", "zzzz+qqqq&limit=5"} {
		_, _, body = d.do("GET", "/v1/sessions/"+all+"/tools?query="+q, nil)
		names := strings.Join(toolNames(t, body), ",")
		if strings.Contains(names, "write_file") || strings.Contains(names, "glob") || !strings.Contains(names, "read_file") {
			t.Errorf("query %s under the greeting skill offers %s; want read_file and no tool the skill refuses", q, names)
		}
	}
}

// TestSkillsInGroups: a skill bundled in a tool group is hidden until the group is on.
func TestSkillsInGroups(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "testdata", "skills")
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Skills.Dirs = []string{dir}
		c.ToolGroups = []config.ToolGroupConfig{{Name: "social", Description: "Greetings.", Instructions: "Be warm.", Skills: []string{"greet*"}}}
	}})
	id := d.createSession(map[string]any{"available_tools": []string{"skill"}})["id"].(string)
	_, _, body := d.do("GET", "/v1/sessions/"+id+"/prompt", nil)
	if strings.Contains(string(body), "greeting") {
		t.Fatalf("a skill of an inactive group is listed: %s", body)
	}
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[
		{"id":"a","name":"skill","arguments":{"name":"greeting"}},
		{"id":"r","name":"reset_tools","arguments":{"social":true}},
		{"id":"b","name":"skill","arguments":{"name":"greeting"}}]}`)
	msgs := messages(t, evs)
	if msgs["a"].str("error_kind") != "not_found" || msgs["b"].m["is_error"] != false || !strings.Contains(string(msgs["r"].raw), "Be warm.") {
		t.Fatalf("skills in groups: %s / %s / %s", msgs["a"].raw, msgs["r"].raw, msgs["b"].raw)
	}
}

// TestSkillNotActiveWhenCopyFails: a skill that could not be copied into the working
// directory (the call failed) does not restrict the session's tools.
func TestSkillNotActiveWhenCopyFails(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{skillsDir()} }})
	id := d.createSession(map[string]any{"available_tools": []string{"skill", "write_file"}, "available_skills": []string{"greeting"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[
		{"id":"block","name":"write_file","arguments":{"path":".skills","content":"a file where the skills folder goes"}},
		{"id":"open","name":"skill","arguments":{"name":"greeting"}}]}`)
	msgs := messages(t, evs)
	if msgs["block"].m["is_error"] != false || msgs["open"].str("error_kind") != "failed" {
		t.Fatalf("setup: %s / %s", msgs["block"].raw, msgs["open"].raw)
	}
	_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"after","name":"write_file","arguments":{"path":"x.txt","content":"x"}}]}`)
	if m := messages(t, evs)["after"]; m.m["is_error"] != false {
		t.Fatalf("after a skill failed to open, write_file: %s", m.raw)
	}
}

// TestBrokenSkillSaysWhy: a skill whose folder is there but does not load is not
// answered as one that does not exist: GET /v1/skills/{name} and the skill tool say
// it is not loaded and why, as GET /v1/skills reports it. A session that may not
// see the skill is still told only that it has no such skill.
func TestBrokenSkillSaysWhy(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{skillsDir()} }})
	code, _, body := d.do("GET", "/v1/skills/broken", nil)
	if code != 404 || !strings.Contains(string(body), `skill broken is not loaded: invalid name \"Not A Valid Name\"`) {
		t.Errorf("GET /v1/skills/broken: %d %s", code, body)
	}
	validate(t, "Error", body)
	if code, _, body := d.do("GET", "/v1/skills/nope", nil); code != 404 || strings.Contains(string(body), "not loaded") {
		t.Errorf("GET /v1/skills/nope: %d %s", code, body)
	}

	all := d.createSession(map[string]any{"available_tools": []string{"skill"}})["id"].(string)
	only := d.createSession(map[string]any{"available_tools": []string{"skill"}, "available_skills": []string{"greeting"}})["id"].(string)
	call := `{"calls":[{"id":"b","name":"skill","arguments":{"name":"broken"}}]}`
	_, evs := d.stream("/v1/sessions/"+all+"/tool-calls", call)
	if m := messages(t, evs)["b"]; m.str("error_kind") != "not_found" ||
		!strings.Contains(string(m.raw), `skill broken is not loaded: invalid name \"Not A Valid Name\"`) || !strings.Contains(string(m.raw), "greeting") {
		t.Errorf("skill tool, broken skill: %s", m.raw)
	}
	_, evs = d.stream("/v1/sessions/"+only+"/tool-calls", call)
	if m := messages(t, evs)["b"]; m.str("error_kind") != "not_found" || strings.Contains(string(m.raw), "not loaded") ||
		!strings.Contains(string(m.raw), `no skill named \"broken\"`) {
		t.Errorf("skill tool, broken skill outside the session: %s", m.raw)
	}
}

// TestSkillFrontmatterFields: the public format's optional license, compatibility and
// metadata are returned by GET /v1/skills and /v1/skills/{name} when a skill has
// them, metadata as JSON whatever YAML it was written in (a mapping with a number as
// key, an infinite number), and left out when it has none.
func TestSkillFrontmatterFields(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkillFiles(t, root, map[string]string{"meta/SKILL.md": "---\nname: meta\ndescription: Has every field.\n" +
		"license: Complete terms in LICENSE.txt\ncompatibility: Needs python3 and network access\n" +
		"metadata:\n  author: example-org\n  tags: [a, b]\n  levels: {1: one}\n  ratio: .inf\n---\nbody\n"})
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{root, skillsDir()} }})
	want := []string{`"license":"Complete terms in LICENSE.txt"`, `"compatibility":"Needs python3 and network access"`,
		`"metadata":{"author":"example-org","levels":{"1":"one"},"ratio":"+Inf","tags":["a","b"]}`}
	code, _, list := d.do("GET", "/v1/skills", nil)
	code1, _, one := d.do("GET", "/v1/skills/meta", nil)
	for _, w := range want {
		if code != 200 || !strings.Contains(string(list), w) {
			t.Errorf("GET /v1/skills: %d, want %s in %s", code, w, list)
		}
		if code1 != 200 || !strings.Contains(string(one), w) {
			t.Errorf("GET /v1/skills/meta: %d, want %s in %s", code1, w, one)
		}
	}
	validate(t, "Skill", one)
	if _, _, g := d.do("GET", "/v1/skills/greeting", nil); strings.Contains(string(g), "license") || strings.Contains(string(g), "metadata") {
		t.Errorf("a skill without them lists them: %s", g)
	}
}

// TestSkillManualOnly: Claude Code skills marked disable-model-invocation: true are
// meant to run only when a person asks for them (Trail of Bits' git-cleanup deletes
// branches, github-triage writes to GitHub); the prompt fragment listed them for the
// model to pick like any other. The fragment leaves them out; GET /v1/skills says
// which they are, so a client can offer them to its users, and the skill tool opens
// one asked for by name.
func TestSkillManualOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSkillFiles(t, dir, map[string]string{
		"git-cleanup/SKILL.md": "---\nname: git-cleanup\ndescription: Deletes merged branches.\ndisable-model-invocation: true\n---\nThe steps.\n",
		"triage/SKILL.md":      "---\nname: triage\ndescription: Triages issues.\ndisable-model-invocation: \"True\"\n---\nThe steps.\n",
		"review/SKILL.md":      "---\nname: review\ndescription: Reviews code.\ndisable-model-invocation: false\n---\nThe steps.\n",
	})
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{dir} }})
	code, _, body := d.do("GET", "/v1/skills", nil)
	if code != 200 || strings.Count(string(body), `"disable_model_invocation":true`) != 2 {
		t.Fatalf("skills: %d %s", code, body)
	}
	code, _, body = d.do("GET", "/v1/skills/git-cleanup", nil)
	if code != 200 || !strings.Contains(string(body), `"disable_model_invocation":true`) {
		t.Fatalf("skill: %d %s", code, body)
	}
	validate(t, "Skill", body)

	id := d.createSession(map[string]any{"available_tools": []string{"skill"}})["id"].(string)
	_, _, body = d.do("GET", "/v1/sessions/"+id+"/prompt", nil)
	if !strings.Contains(string(body), "- review: Reviews code.") || strings.Contains(string(body), "git-cleanup") || strings.Contains(string(body), "triage") {
		t.Fatalf("prompt: %s", body)
	}
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"open","name":"skill","arguments":{"name":"git-cleanup"}}]}`)
	if m := messages(t, evs)["open"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "The steps.") {
		t.Fatalf("open by name: %s", m.raw)
	}
}

// writeSkillFiles writes a skill library into dir: files maps a slash-separated path
// below dir ("pdf/SKILL.md", "pdf/scripts/fill.py") to its content, folders made as
// needed.
func writeSkillFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPromptNamesOnlyTheSessionsTools: the prompt of the README's first session
// (execute_command and read_job_output) told the model to follow background jobs
// with await_job and kill_job, which it cannot call. The tool hints name no tool
// the session lacks.
func TestPromptNamesOnlyTheSessionsTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command", "read_job_output"}})["id"].(string)
	code, _, body := d.do("GET", "/v1/sessions/"+id+"/prompt", nil)
	if code != 200 || !strings.Contains(string(body), "- execute_command: ") {
		t.Fatalf("prompt: %d %s", code, body)
	}
	for _, absent := range []string{"await_job", "kill_job"} {
		if strings.Contains(string(body), absent) {
			t.Errorf("the prompt names %s, which the session cannot call: %s", absent, body)
		}
	}
}

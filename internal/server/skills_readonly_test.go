package server_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestSkillInExploreModeCopiesNothing: the skill tool is read-only, so a session in
// explore mode (which may change nothing) runs it; opening a skill still copied its
// folder into the working directory's .skills/. Through a real daemon, the explore
// session now gets the skill shown from the library, says why its files are not
// copied, names them relative to the skill ({baseDir} is "."), and its working
// directory stays empty; a default session opening the same skill gets the copy and
// paths into it.
func TestSkillInExploreModeCopiesNothing(t *testing.T) {
	t.Parallel()
	lib := t.TempDir()
	writeSkillFiles(t, lib, map[string]string{
		"pdf/SKILL.md":          "---\nname: pdf\ndescription: Fills PDF forms.\n---\nRun `python {baseDir}/scripts/fill.py form.pdf`; see {baseDir}/reference.md.\n",
		"pdf/reference.md":      "Fields are named in {baseDir}/fields.txt.\n",
		"pdf/scripts/fill.py":   "print('filled')\n",
		"pdf/scripts/common.py": "x = 1\n",
	})
	work := t.TempDir()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Skills.Dirs = []string{lib}
		c.Sessions.WorkdirRoots = []string{work}
	}})
	open := func(mode string) (dir string, texts map[string]string) {
		dir = filepath.Join(work, mode)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		id := d.createSession(map[string]any{"available_tools": []string{"skill"}, "available_skills": []string{"pdf"},
			"permission_mode": mode, "workdir": dir})["id"].(string)
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[
			{"id":"open","name":"skill","arguments":{"name":"pdf"}},
			{"id":"ref","name":"skill","arguments":{"name":"pdf","file":"reference.md"}},
			{"id":"scripts","name":"skill","arguments":{"name":"pdf","file":"scripts"}}]}`)
		texts = map[string]string{}
		for id, m := range messages(t, evs) {
			if strings.Contains(string(m.raw), `"is_error":true`) {
				t.Fatalf("%s mode, %s: %s", mode, id, m.raw)
			}
			texts[id] = string(m.raw)
		}
		return dir, texts
	}

	dir, got := open("explore")
	if _, err := os.Stat(filepath.Join(dir, ".skills")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("explore: .skills is in the working directory (%v)", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("explore: the working directory holds %d entries", len(entries))
	}
	for id, want := range map[string][]string{
		"open":    {"not copied", "explore", "python ./scripts/fill.py form.pdf", "see ./reference.md", "scripts/fill.py", "SKILL.md"},
		"ref":     {"Fields are named in ./fields.txt."},
		"scripts": {"scripts/ of skill pdf holds 2 files", "not copied", "scripts/common.py"},
	} {
		text := got[id]
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("explore, %s: no %q in %s", id, w, text)
			}
		}
		if strings.Contains(text, ".skills") || strings.Contains(text, dir) || strings.Contains(text, "{baseDir}") {
			t.Errorf("explore, %s: a path into the working directory (or a placeholder) in %s", id, text)
		}
	}

	dir, got = open("default")
	proj := filepath.Join(dir, ".skills", "pdf")
	if b, err := os.ReadFile(filepath.Join(proj, "scripts", "fill.py")); err != nil || string(b) != "print('filled')\n" {
		t.Errorf("default: the copy's scripts/fill.py: %v %q", err, b)
	}
	if !strings.Contains(got["open"], "python "+proj+"/scripts/fill.py") || strings.Contains(got["open"], "not copied") {
		t.Errorf("default, open: %s", got["open"])
	}
	if !strings.Contains(got["scripts"], ".skills/pdf/scripts/ of your working directory") {
		t.Errorf("default, scripts: %s", got["scripts"])
	}
}

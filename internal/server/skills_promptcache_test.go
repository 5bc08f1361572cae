package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestSkillPromptFollowsLibrary: the prompt route's skills part is cached, and the
// cache follows the library and the session. Sessions with different whitelists get
// their own listings, asked in turn; a skill edited, added or removed on disk (found
// by the watcher's reload) shows in the next listings of the sessions that see it.
func TestSkillPromptFollowsLibrary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, desc string) {
		t.Helper()
		writeSkillFiles(t, dir, map[string]string{name + "/SKILL.md": fmt.Sprintf("---\nname: %s\ndescription: %s\n---\nbody\n", name, desc)})
	}
	write("alpha", "Alpha does the first thing.")
	write("beta", "Beta does the second thing.")
	write("gamma", "Gamma does the third thing.")
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{dir}; c.Skills.Watch = true }})
	session := func(skills []string) string {
		spec := map[string]any{"available_tools": []string{"skill"}}
		if skills != nil {
			spec["available_skills"] = skills
		}
		return d.createSession(spec)["id"].(string)
	}
	a, b, all := session([]string{"alpha"}), session([]string{"beta", "gamma"}), session(nil)
	prompt := func(id string) string {
		t.Helper()
		code, _, body := d.do("GET", "/v1/sessions/"+id+"/prompt", nil)
		var p promptAnswer
		if err := json.Unmarshal(body, &p); code != 200 || err != nil {
			t.Fatalf("prompt: %d %v %.300s", code, err, body)
		}
		return p.Prompt
	}
	// check asks for id's prompt until it names every skill of want (with the text
	// given, "" for any) and none of lack, as a reload may take a moment to come.
	check := func(what, id string, want map[string]string, lack ...string) {
		t.Helper()
		var last string
		ok := func() bool {
			last = prompt(id)
			for name, text := range want {
				if !strings.Contains(last, "- "+name+": "+text) {
					return false
				}
			}
			for _, name := range lack {
				if strings.Contains(last, "- "+name+":") {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: prompt %q; want %v and none of %v", what, last, want, lack)
			}
		}
	}
	for range 2 { // the second round is answered from the cache
		check("a", a, map[string]string{"alpha": "Alpha does the first thing."}, "beta", "gamma")
		check("b", b, map[string]string{"beta": "", "gamma": ""}, "alpha")
		check("all", all, map[string]string{"alpha": "", "beta": "", "gamma": ""})
	}

	write("alpha", "Alpha now does something else.")
	check("a after the edit", a, map[string]string{"alpha": "Alpha now does something else."})
	check("all after the edit", all, map[string]string{"alpha": "Alpha now does something else."})
	write("delta", "Delta is new.")
	check("all after the addition", all, map[string]string{"delta": "Delta is new.", "beta": ""})
	check("a after the addition", a, map[string]string{"alpha": ""}, "delta")
	if err := os.RemoveAll(filepath.Join(dir, "beta")); err != nil {
		t.Fatal(err)
	}
	check("b after the removal", b, map[string]string{"gamma": ""}, "beta")
	check("all after the removal", all, map[string]string{"delta": "", "gamma": ""}, "beta")
}

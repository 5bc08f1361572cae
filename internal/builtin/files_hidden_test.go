package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestFileToolsSkipDataDirInWorkdir: a workdir that contains the daemon's data dir
// (the default data dir "data" under a checkout the session works in) keeps the data
// dir out of reach of every file tool: reads and writes are denied, listings and
// searches do not show it, and a symlink into it is reported, not followed. The rest
// of the workdir works as before.
func TestFileToolsSkipDataDirInWorkdir(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	data := filepath.Join(work, "data")
	for name, content := range map[string]string{
		"data/admin.key":                  "tsk_secret",
		"data/workspaces/ses_other/a.txt": "secret of another session",
		"src/main.go":                     "package main // secret-free\n",
		"datafile.txt":                    "not the data dir\n",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("data/admin.key", filepath.Join(work, "key-link")); err != nil {
		t.Fatal(err)
	}
	e := newFileEnvIn(t, work, sandbox.Config{Hide: []string{data}})

	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "data/admin.key"}},
		{"read_file", map[string]any{"path": filepath.Join(data, "admin.key")}},
		{"read_file", map[string]any{"path": "src/../data/workspaces/ses_other/a.txt"}},
		{"read_file", map[string]any{"path": "key-link"}},
		{"write_file", map[string]any{"path": "data/new.txt", "content": "x"}},
		{"list_dir", map[string]any{"path": "data"}},
		{"glob", map[string]any{"pattern": "*", "path": "data/workspaces"}},
		{"grep", map[string]any{"pattern": "secret", "path": "data"}},
	} {
		res := e.run(t, c.name, c.args)
		if !res.IsError || res.ErrorKind != tool.KindDenied || strings.Contains(res.Text(), "tsk_secret") {
			t.Errorf("%s(%v): is_error=%v kind=%q: %s", c.name, c.args, res.IsError, res.ErrorKind, res.Text())
		} else if !strings.Contains(res.Text(), "data directory") {
			t.Errorf("%s(%v): the message does not say why: %s", c.name, c.args, res.Text())
		}
	}
	if _, err := os.Stat(filepath.Join(data, "new.txt")); err == nil {
		t.Error("write_file created a file in the data dir")
	}

	// Walks from the root leave the data dir out entirely, however deep they go and
	// however the start is spelled; rest is a name the rest of the workdir shows.
	for _, c := range []struct {
		name string
		args map[string]any
		rest string
	}{
		{"list_dir", map[string]any{"path": "."}, "src"},
		{"list_dir", map[string]any{"path": ".", "depth": 5, "show_hidden": true}, "main.go"},
		{"glob", map[string]any{"pattern": "**/*"}, "main.go"},
		{"glob", map[string]any{"pattern": "*/*/*/*"}, ""},
		{"glob", map[string]any{"pattern": "d*/**"}, ""},
		{"grep", map[string]any{"pattern": "secret"}, "main.go"},
		{"grep", map[string]any{"pattern": "secret", "path": "src/.."}, "main.go"},
		{"grep", map[string]any{"pattern": "secret", "include": "*.txt"}, ""},
		{"tree", map[string]any{}, "main.go"},
		{"tree", map[string]any{"path": "src/..", "depth": 10, "show_hidden": true}, "main.go"},
	} {
		res := e.run(t, c.name, c.args)
		text := res.Text()
		leak := strings.Contains(text, "ses_other") || strings.Contains(text, "tsk_") || strings.Contains(text, "a.txt")
		for _, line := range strings.Split(text, "\n") {
			leak = leak || strings.Contains(line, "admin.key") && !strings.Contains(line, "key-link") // the link itself is in the workdir
		}
		if res.IsError || leak {
			t.Errorf("%s(%v) shows the data dir: %s", c.name, c.args, text)
		}
		if !strings.Contains(text, c.rest) {
			t.Errorf("%s(%v) lost the rest of the workdir: %s", c.name, c.args, text)
		}
	}
	if res := e.run(t, "read_file", map[string]any{"path": "datafile.txt"}); res.IsError {
		t.Errorf("a sibling whose name starts like the data dir: %s", res.Text())
	}
}

// TestFileToolsRefuseConfigFileInWorkdir: a workdir that contains the daemon's config
// file (a checkout holding its config.yaml) keeps that file out of reach of every
// file tool, as the data dir is: reads, writes and edits are denied, listings and
// searches leave it out, a symlink to it is reported, not followed. Its neighbours
// work as before.
func TestFileToolsRefuseConfigFileInWorkdir(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	for name, content := range map[string]string{
		"deploy/config.yaml": "web:\n  search:\n    api_key: tsk_secret\n",
		"deploy/other.yaml":  "secret-free: true\n",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("deploy/config.yaml", filepath.Join(work, "conf-link")); err != nil {
		t.Fatal(err)
	}
	e := newFileEnvIn(t, work, sandbox.Config{HideFiles: []string{filepath.Join(work, "deploy/config.yaml")}})

	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "deploy/config.yaml"}},
		{"read_file", map[string]any{"path": filepath.Join(work, "deploy/config.yaml")}},
		{"read_file", map[string]any{"path": "conf-link"}},
		{"write_file", map[string]any{"path": "deploy/config.yaml", "content": "x"}},
		{"edit_file", map[string]any{"path": "deploy/config.yaml", "old_string": "tsk_secret", "new_string": "x"}},
		{"grep", map[string]any{"pattern": "secret", "path": "deploy/config.yaml"}},
	} {
		res := e.run(t, c.name, c.args)
		if !res.IsError || res.ErrorKind != tool.KindDenied || strings.Contains(res.Text(), "tsk_secret") {
			t.Errorf("%s(%v): is_error=%v kind=%q: %s", c.name, c.args, res.IsError, res.ErrorKind, res.Text())
		} else if !strings.Contains(res.Text(), "config file") {
			t.Errorf("%s(%v): the message does not say why: %s", c.name, c.args, res.Text())
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "deploy/config.yaml")); err != nil || !strings.Contains(string(b), "tsk_secret") {
		t.Errorf("the config file changed: %q %v", b, err)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"list_dir", map[string]any{"path": "deploy"}},
		{"glob", map[string]any{"pattern": "**/*.yaml"}},
		{"grep", map[string]any{"pattern": "secret"}},
		{"grep", map[string]any{"pattern": "secret", "path": "deploy"}},
		{"tree", map[string]any{"depth": 5}},
	} {
		res := e.run(t, c.name, c.args)
		text := res.Text()
		leak := strings.Contains(text, "tsk_")
		for _, line := range strings.Split(text, "\n") {
			leak = leak || strings.Contains(line, "config.yaml") && !strings.Contains(line, "conf-link") // the link itself is in the workdir
		}
		if res.IsError || leak {
			t.Errorf("%s(%v) shows the config file: %s", c.name, c.args, text)
		}
		if !strings.Contains(text, "other.yaml") {
			t.Errorf("%s(%v) lost the rest of the workdir: %s", c.name, c.args, text)
		}
	}
}

package skills

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func TestLoadFormats(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	writeFile(t, filepath.Join(root, "toolkit", ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	writeFile(t, filepath.Join(root, ".hidden", "SKILL.md"), "---\nname: hidden\ndescription: d\n---\n", 0o644)
	m := newManager(t, Config{Dirs: []string{root}})

	if ps := m.Problems(); len(ps) != 0 {
		t.Fatalf("Problems = %+v, want none", ps)
	}
	var names []string
	for _, s := range m.List() {
		names = append(names, s.Name)
	}
	if want := []string{"claude-style", "frontmatter-only", "pdf", "toolkit", "with-yaml"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("List names = %q, want %q", names, want)
	}

	tests := []struct {
		name  string
		check func(t *testing.T, s Skill)
	}{
		{"frontmatter-only", func(t *testing.T, s Skill) {
			eq(t, "Version", s.Version, "1.2.0")
			eq(t, "AllowedTools", s.AllowedTools, []string{"read_file", "grep", "glob"})
			eq(t, "Files", s.Files, []string{"SKILL.md"})
			eq(t, "Scripts", s.Scripts, []string(nil))
			if !strings.HasPrefix(s.Body, "# Summarise a package\n") {
				t.Errorf("Body = %q", s.Body)
			}
		}},
		{"with-yaml", func(t *testing.T, s Skill) {
			eq(t, "Description", s.Description, "Draft release notes from the git history since the last tag.")
			eq(t, "Version", s.Version, "2.0")
			eq(t, "AllowedTools", s.AllowedTools, []string{"execute_command", "read_file", "write_file"})
			eq(t, "Activation", s.Activation, []string{"the user asks for release notes or a changelog", "a release is being prepared"})
			eq(t, "Metadata", s.Metadata, map[string]any{"owner": "release-team", "display_name": "Release Notes"})
			eq(t, "Files", s.Files, []string{"SKILL.md", "skill.yaml"})
			if !strings.HasPrefix(s.Body, "# Skill: Release Notes\n") {
				t.Errorf("Body = %q", s.Body)
			}
		}},
		{"pdf", func(t *testing.T, s Skill) {
			eq(t, "License", s.License, "Proprietary. LICENSE.txt has complete terms")
			eq(t, "AllowedTools", s.AllowedTools, []string{"Bash(python3:*)", "Read", "Write"})
			eq(t, "Version", s.Version, "1.4")
			eq(t, "Metadata", s.Metadata, map[string]any{"author": "example-org", "version": "1.4"})
			eq(t, "Files", s.Files, []string{"LICENSE.txt", "SKILL.md", "assets/fields.json", "forms.md",
				"scripts/extract_text.py", "scripts/fill_form.py"})
			eq(t, "Scripts", s.Scripts, []string{"scripts/extract_text.py", "scripts/fill_form.py"})
		}},
		{"claude-style", func(t *testing.T, s Skill) {
			eq(t, "AllowedTools", s.AllowedTools, []string{"Read", "Grep", "Glob", "Bash(git diff:*)"})
			eq(t, "Description", s.Description, "Review a diff for risky changes: migrations, auth, concurrency.")
		}},
		{"toolkit", func(t *testing.T, s Skill) {
			eq(t, "Description", s.Description, "Helper scripts and data tables for CSV clean-up.")
			eq(t, "Version", s.Version, "0.3.0")
			eq(t, "AllowedTools", s.AllowedTools, []string{"execute_command"})
			eq(t, "Activation", s.Activation, []string{"cleaning CSV exports"})
			eq(t, "Files", s.Files, []string{"SKILL.md", "assets/data/columns.csv", "assets/logo.txt",
				"scripts/lib/helper.py", "scripts/run.sh", "skill.yaml"})
			eq(t, "Scripts", s.Scripts, []string{"scripts/lib/helper.py", "scripts/run.sh"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := m.Get(tt.name)
			if !ok {
				t.Fatalf("Get(%q) missing", tt.name)
			}
			eq(t, "Name", s.Name, tt.name)
			eq(t, "Dir", s.Dir, filepath.Join(root, tt.name))
			if len(s.Hash) != 64 {
				t.Errorf("Hash = %q, want 64 hex digits", s.Hash)
			}
			tt.check(t, s)
		})
	}

	// Values handed out are copies: changing one does not change the Manager's.
	s, _ := m.Get("pdf")
	s.AllowedTools[0] = "changed"
	s.Metadata["author"] = "changed"
	again, _ := m.Get("pdf")
	eq(t, "AllowedTools[0] after caller's change", again.AllowedTools[0], "Bash(python3:*)")
	eq(t, "Metadata after caller's change", again.Metadata["author"], "example-org")
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func TestBrokenSkills(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "broken")
	m := newManager(t, Config{Dirs: []string{root}})
	var names []string
	for _, s := range m.List() {
		names = append(names, s.Name)
	}
	eq(t, "loaded", names, []string{"good-one"})
	want := map[string]string{
		"no-skill-md":    "missing SKILL.md",
		"bad-yaml":       "SKILL.md frontmatter: yaml: ",
		"unterminated":   "no closing --- line",
		"no-name":        "missing name",
		"no-description": "missing description",
		"bad-name":       `invalid name "Upper_Case"`, // not its folder's name in other case (TestDisplayNameOfItsFolder)
		"long-name":      "invalid name",
		"bad-skill-yaml": "skill.yaml: want a mapping",
		"not-a-mapping":  "SKILL.md frontmatter: want a mapping",
		// Two folders of one directory naming the same skill: neither is named after it.
		"twin-a": `name "twin" does not match its folder name "twin-a"`,
		"twin-b": `name "twin" does not match its folder name "twin-b"`,
	}
	ps := m.Problems()
	if len(ps) != len(want) {
		t.Errorf("%d problems, want %d: %+v", len(ps), len(want), ps)
	}
	for dir, msg := range want {
		p, ok := problemFor(ps, filepath.Join(root, dir))
		if !ok {
			t.Errorf("no problem reported for %s", dir)
			continue
		}
		if !strings.Contains(p.Error, msg) {
			t.Errorf("problem for %s = %q, want it to contain %q", dir, p.Error, msg)
		}
	}
}

func TestDuplicateAcrossDirsFirstWins(t *testing.T) {
	t.Parallel()
	skillsDir, _ := filepath.Abs(filepath.Join("testdata", "skills"))
	dupDir, _ := filepath.Abs(filepath.Join("testdata", "dup-first"))
	for _, order := range [][]string{{skillsDir, dupDir}, {dupDir, skillsDir}} {
		m := newManager(t, Config{Dirs: order})
		s, ok := m.Get("frontmatter-only")
		if !ok {
			t.Fatal("frontmatter-only missing")
		}
		if want := filepath.Join(order[0], "frontmatter-only"); s.Dir != want {
			t.Errorf("dirs %q: loaded from %s, want %s", order, s.Dir, want)
		}
		loser := filepath.Join(order[1], "frontmatter-only")
		if p, ok := problemFor(m.Problems(), loser); !ok || !strings.Contains(p.Error, "duplicate skill name") {
			t.Errorf("dirs %q: problem for %s = %+v, %v", order, loser, p, ok)
		}
	}
}

func TestSingleSkillDirAndMissingDir(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope")
	m := newManager(t, Config{Dirs: []string{filepath.Join("testdata", "single"), missing}})
	s, ok := m.Get("single")
	if !ok || s.Body != "alone\n" {
		t.Fatalf("Get(single) = %+v, %v", s, ok)
	}
	if p, ok := problemFor(m.Problems(), missing); !ok || !strings.Contains(p.Error, "skills directory") {
		t.Errorf("problem for missing dir = %+v, %v", p, ok)
	}
	if len(m.List()) != 1 {
		t.Errorf("List = %d skills, want 1", len(m.List()))
	}
}

func TestReloadDetectsChangesAndKeepsVersionOtherwise(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	m := newManager(t, Config{Dirs: []string{root}})
	v0 := m.Version()
	before, _ := m.Get("pdf")
	if m.Reload() || m.Version() != v0 {
		t.Fatalf("Reload without changes: version %d -> %d", v0, m.Version())
	}

	// Same size, same modification time: only the racy-window rule catches this.
	forms := filepath.Join(root, "pdf", "forms.md")
	info, _ := os.Stat(forms)
	data, _ := os.ReadFile(forms)
	data[0] = '%'
	writeFile(t, forms, string(data), 0o644)
	if err := os.Chtimes(forms, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if !m.Reload() {
		t.Fatal("Reload missed a same-size, same-mtime edit of a recent file")
	}
	after, _ := m.Get("pdf")
	if after.Hash == before.Hash || m.Version() != v0+1 {
		t.Errorf("hash %s -> %s, version %d -> %d", before.Hash, after.Hash, v0, m.Version())
	}

	// An executable bit is part of the content hash.
	if err := os.Chmod(forms, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Reload()
	if again, _ := m.Get("pdf"); again.Hash == after.Hash {
		t.Error("chmod +x did not change the hash")
	}

	// Folders that are old enough are recognised by their stat data and not re-read.
	old := time.Now().Add(-time.Hour)
	for _, s := range m.List() {
		for _, f := range s.Files {
			_ = os.Chtimes(filepath.Join(s.Dir, f), old, old)
		}
	}
	m.Reload()
	m.Reload()
	m.reloadMu.Lock()
	stable := m.folders[filepath.Join(root, "pdf")].stable
	m.reloadMu.Unlock()
	if !stable {
		t.Error("a folder untouched for an hour is not marked stable")
	}
}

func TestReadConfinement(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "outside.txt"), "SECRET", 0o644)
	root := filepath.Join(base, "skills")
	dir := writeSkill(t, root, "conf", "Confinement test.", "body\n")
	writeFile(t, filepath.Join(dir, "docs", "guide.md"), "guide", 0o644)
	writeFile(t, filepath.Join(dir, "swap.md"), "swap", 0o644)
	mustSymlink(t, "../../outside.txt", filepath.Join(dir, "escape.txt"))
	mustSymlink(t, filepath.Join(base, "outside.txt"), filepath.Join(dir, "absolute.txt"))
	mustSymlink(t, "docs/guide.md", filepath.Join(dir, "alias.md"))
	mustSymlink(t, "docs", filepath.Join(dir, "docs-link"))
	mustSymlink(t, "missing", filepath.Join(dir, "dangling"))
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "other", "SKILL.md"), "---\nname: other\ndescription: d\n---\n", 0o644)

	m := newManager(t, Config{Dirs: []string{root}})
	s, ok := m.Get("conf")
	if !ok {
		t.Fatalf("conf not loaded: %+v", m.Problems())
	}
	eq(t, "Files", s.Files, []string{"SKILL.md", "alias.md", "docs/guide.md", "swap.md"})

	got, err := m.Read("conf", "docs/guide.md")
	if err != nil || string(got) != "guide" {
		t.Errorf("Read(docs/guide.md) = %q, %v", got, err)
	}
	if got, err := m.Read("conf", "alias.md"); err != nil || string(got) != "guide" {
		t.Errorf("Read(alias.md) = %q, %v", got, err)
	}
	// A path that climbs back into the skill is read once cleaned (models write
	// scripts/../SKILL.md); cleaning is lexical, so a symlinked folder on the way
	// (docs-link) cannot lead elsewhere.
	for _, rel := range []string{"docs/../SKILL.md", "./docs/./guide.md", "docs-link/../docs/guide.md", "docs/x/../../swap.md"} {
		want, _ := os.ReadFile(filepath.Join(dir, filepath.Clean(rel)))
		if got, err := m.Read("conf", rel); err != nil || string(got) != string(want) {
			t.Errorf("Read(%q) = %q, %v; want %q", rel, got, err, want)
		}
	}
	for _, rel := range []string{"escape.txt", "absolute.txt", "../other/SKILL.md", "docs/../../other/SKILL.md", "docs/../..", "..", "./../conf/SKILL.md",
		"/etc/passwd", filepath.Join(base, "outside.txt"), "docs-link/guide.md", "dangling", "", "nope.md", "docs"} {
		if got, err := m.Read("conf", rel); err == nil || strings.Contains(string(got), "SECRET") {
			t.Errorf("Read(%q) = %q, %v; want an error", rel, got, err)
		}
	}
	if _, err := m.Read("conf", "nope.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read(nope.md) err = %v, want ErrNotFound", err)
	}
	if _, err := m.Read("missing", "SKILL.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of an unknown skill err = %v, want ErrNotFound", err)
	}

	// A listed file swapped for an escaping symlink after the scan is still refused.
	if err := os.Remove(filepath.Join(dir, "swap.md")); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "../../outside.txt", filepath.Join(dir, "swap.md"))
	if got, err := m.Read("conf", "swap.md"); err == nil || strings.Contains(string(got), "SECRET") {
		t.Errorf("Read(swap.md) after swap = %q, %v; want an error", got, err)
	}
	// A listed file replaced by a FIFO is refused without blocking on the open.
	guide := filepath.Join(dir, "docs", "guide.md")
	if err := os.Remove(guide); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(guide, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read("conf", "docs/guide.md"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Read of a FIFO err = %v", err)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	big := writeSkill(t, root, "big", "Too many bytes.", "")
	writeFile(t, filepath.Join(big, "blob.bin"), strings.Repeat("x", 4096), 0o644)
	many := writeSkill(t, root, "many", "Too many files.", "")
	for _, n := range []string{"a", "b", "c", "d"} {
		writeFile(t, filepath.Join(many, n), n, 0o644)
	}
	writeSkill(t, root, "small", "Fits.", "")
	m := newManager(t, Config{Dirs: []string{root}, MaxSkillBytes: 2048, MaxFiles: 4})
	if _, ok := m.Get("small"); !ok {
		t.Error("small skill not loaded")
	}
	for dir, msg := range map[string]string{"big": "more than 2048 bytes", "many": "more than 4 files"} {
		if p, ok := problemFor(m.Problems(), filepath.Join(root, dir)); !ok || !strings.Contains(p.Error, msg) {
			t.Errorf("problem for %s = %+v, %v; want %q", dir, p, ok, msg)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bad := Config{Dirs: []string{""}, MaxSkillBytes: -1, MaxFiles: -1, Debounce: -1, PollInterval: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate accepted an invalid config")
	}
	for _, want := range []string{"empty path", "max skill bytes", "max files", "debounce", "poll interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q lacks %q", err, want)
		}
	}
	if _, err := NewManager(bad, nil); err == nil {
		t.Error("NewManager accepted an invalid config")
	}
}

// TestBrokenSkillSymlinksReported: a symlink in a skills directory that leads nowhere
// (dangling, or a loop) is reported as a broken skill, not left out without a word;
// the other skills load.
func TestBrokenSkillSymlinksReported(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "fine", "Loads.", "")
	mustSymlink(t, filepath.Join(root, "gone"), filepath.Join(root, "dangling"))
	mustSymlink(t, filepath.Join(root, "loop"), filepath.Join(root, "loop"))
	m := newManager(t, Config{Dirs: []string{root}})
	if _, ok := m.Get("fine"); !ok {
		t.Errorf("the good skill did not load: %+v", m.Problems())
	}
	for dir, msg := range map[string]string{"dangling": "no such file", "loop": "too many levels"} {
		if p, ok := problemFor(m.Problems(), filepath.Join(root, dir)); !ok || !strings.Contains(p.Error, msg) || !strings.Contains(p.Error, "cannot be reached") {
			t.Errorf("problem for %s = %+v, %v; want %q", dir, p, ok, msg)
		}
	}
}

// TestFolderNameMustMatchName: the Agent Skills format says a skill's name matches
// the name of its folder. A folder whose SKILL.md names another skill is reported and
// not loaded, so the folder named after a skill is the one that loads, whatever the
// order of the folders; names the format forbids (leading, trailing or doubled
// hyphens) are reported too.
func TestFolderNameMustMatchName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "pdf", "The real pdf skill.", "real\n")
	copyDir := writeSkill(t, root, "a-copy-of-pdf", "An old copy.", "old\n")
	writeFile(t, filepath.Join(copyDir, "SKILL.md"), "---\nname: pdf\ndescription: An old copy.\n---\nold\n", 0o644)
	renamed := writeSkill(t, root, "renamed-folder", "Writes reports.", "r\n")
	writeFile(t, filepath.Join(renamed, "SKILL.md"), "---\nname: report-writer\ndescription: Writes reports.\n---\nr\n", 0o644)
	for _, bad := range []string{"double--hyphen", "-leading", "trailing-"} {
		writeSkill(t, root, bad, "Badly named.", "b\n")
	}
	m := newManager(t, Config{Dirs: []string{root}})
	var names []string
	for _, s := range m.List() {
		names = append(names, s.Name)
	}
	eq(t, "loaded", names, []string{"pdf"})
	if s, _ := m.Get("pdf"); s.Dir != filepath.Join(root, "pdf") || s.Body != "real\n" {
		t.Errorf("pdf loaded from %s (body %q), want the folder named pdf", s.Dir, s.Body)
	}
	want := map[string]string{
		"a-copy-of-pdf":  `name "pdf" does not match its folder name "a-copy-of-pdf"`,
		"renamed-folder": `name "report-writer" does not match its folder name "renamed-folder"`,
		"double--hyphen": `invalid name "double--hyphen"`,
		"-leading":       `invalid name "-leading"`,
		"trailing-":      `invalid name "trailing-"`,
	}
	ps := m.Problems()
	if len(ps) != len(want) {
		t.Errorf("%d problems, want %d: %+v", len(ps), len(want), ps)
	}
	for dir, msg := range want {
		if p, ok := problemFor(ps, filepath.Join(root, dir)); !ok || !strings.Contains(p.Error, msg) {
			t.Errorf("problem for %s = %+v, %v; want it to contain %q", dir, p, ok, msg)
		}
	}
}

// TestMissingSkillMDSaysWhy: a folder without SKILL.md is reported with what would
// make it load. Pointed at the root of a skills repository (Anthropic's keeps its
// skills in skills/), the operator was told only "missing SKILL.md" for skills/; a
// skill whose file is skill.md is told the name must be SKILL.md exactly.
func TestMissingSkillMDSaysWhy(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "skills"), "pdf", "PDFs.", "")
	writeSkill(t, filepath.Join(root, "skills"), "docx", "Word files.", "")
	writeSkill(t, filepath.Join(root, "skills"), "xlsx", "Spreadsheets.", "")
	writeSkill(t, filepath.Join(root, "skills"), "pptx", "Slides.", "")
	writeFile(t, filepath.Join(root, "skills", "README.md"), "the skills\n", 0o644)
	writeFile(t, filepath.Join(root, "lower", "skill.md"), "---\nname: lower\ndescription: Lower case.\n---\n", 0o644)
	writeFile(t, filepath.Join(root, "spec", "spec.md"), "the spec\n", 0o644)
	// A folder of Claude Code plugins named instead of one plugin's skills/.
	writeFile(t, filepath.Join(root, "myplug", ".claude-plugin", "plugin.json"), `{"name":"myplug"}`, 0o644)
	writeSkill(t, filepath.Join(root, "myplug", "skills"), "tool-a", "A plugin's skill.", "")
	// A SKILL.md that is a symlink out of its folder, and one that is no file.
	writeFile(t, filepath.Join(root, "shared.md"), "---\nname: linked\ndescription: Shared.\n---\n", 0o644)
	if err := os.MkdirAll(filepath.Join(root, "linked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared.md", filepath.Join(root, "linked", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "piped"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "piped", "SKILL.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{Dirs: []string{root}})
	want := map[string]string{
		"linked": "missing SKILL.md: SKILL.md is a symlink that leads out of the skill's folder, and a skill is only the files inside its folder: copy the file in",
		"piped":  "missing SKILL.md: SKILL.md is not a regular file",
		"myplug": "missing SKILL.md: this is a Claude Code plugin, whose skills are in its skills folder (tool-a): list " +
			filepath.Join(root, "myplug", "skills") + " in skills.dirs",
		"skills": "missing SKILL.md: this is no skill but a folder of skills (docx, pdf, pptx, … 4 in all): list it in skills.dirs rather than " + root,
		"lower":  "missing SKILL.md: the file is skill.md; the Agent Skills format wants the name SKILL.md exactly",
		"spec":   "missing SKILL.md",
	}
	ps := m.Problems()
	if len(ps) != len(want) {
		t.Errorf("%d problems, want %d: %+v", len(ps), len(want), ps)
	}
	for dir, msg := range want {
		if p, ok := problemFor(ps, filepath.Join(root, dir)); !ok || p.Error != msg {
			t.Errorf("problem for %s = %q, want %q", dir, p.Error, msg)
		}
	}
}

// TestNotLoaded: a skill folder that does not load is known by its folder's name,
// with the reason; a loaded skill, an unknown name and a configured directory that
// is missing (no skill's problem) are not.
func TestNotLoaded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "ok", "Loads.", "")
	writeFile(t, filepath.Join(root, "bad", "SKILL.md"), "---\nname: bad\n---\n", 0o644)
	gone := filepath.Join(t.TempDir(), "gone")
	m := newManager(t, Config{Dirs: []string{root, gone}})
	if why, ok := m.NotLoaded("bad"); !ok || why != "missing description" {
		t.Errorf(`NotLoaded("bad") = %q, %v`, why, ok)
	}
	for _, name := range []string{"ok", "nope", "gone", ""} {
		if why, ok := m.NotLoaded(name); ok {
			t.Errorf("NotLoaded(%q) = %q, want false", name, why)
		}
	}
}

// TestDisplayNameOfItsFolder: 64 of the 864 skills of ComposioHQ/awesome-claude-skills
// write a display name as their name ("Cloudinary Automation" in
// cloudinary-automation/, "Dynamics 365 Automation" in dynamics365-automation/) and
// were reported as invalid and not loaded. A name that is its folder's name but for
// case, spaces and punctuation loads under the folder's name, the written one kept as
// metadata display_name. A name that is another skill's still does not load, nor
// does a folder whose own name is no valid skill name.
func TestDisplayNameOfItsFolder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for folder, name := range map[string]string{
		"cloudinary-automation":  "Cloudinary Automation",
		"dynamics365-automation": "Dynamics 365 Automation",
		"customerio-automation":  "Customer.io Automation",
		"pdf":                    "PDF",
		"video-downloader":       "youtube-downloader",
		"Bad_Folder":             "Bad Folder",
	} {
		writeFile(t, filepath.Join(root, folder, "SKILL.md"), "---\nname: "+name+"\ndescription: Does "+name+".\n---\nbody\n", 0o644)
	}
	m := newManager(t, Config{Dirs: []string{root}})
	var names []string
	for _, s := range m.List() {
		names = append(names, s.Name)
	}
	eq(t, "loaded", names, []string{"cloudinary-automation", "customerio-automation", "dynamics365-automation", "pdf"})
	if s, _ := m.Get("dynamics365-automation"); s.Metadata["display_name"] != "Dynamics 365 Automation" || s.Description != "Does Dynamics 365 Automation." {
		t.Errorf("dynamics365-automation: metadata %v, description %q", s.Metadata, s.Description)
	}
	ps := m.Problems()
	for dir, msg := range map[string]string{
		"video-downloader": `name "youtube-downloader" does not match its folder name "video-downloader"`,
		"Bad_Folder":       `invalid name "Bad Folder"`,
	} {
		if p, ok := problemFor(ps, filepath.Join(root, dir)); !ok || !strings.Contains(p.Error, msg) {
			t.Errorf("problem for %s = %+v, %v; want it to contain %q", dir, p, ok, msg)
		}
	}
	if len(ps) != 2 {
		t.Errorf("problems: %+v", ps)
	}
}

// TestSymlinkOutLogged: a skill's symlink that leads out of its folder (a file shared
// by several skills) is left out of the skill, which still loads; the operator, who
// can fix it, is told in the log which files were left out and why, once, not at
// every rescan.
func TestSymlinkOutLogged(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := writeSkill(t, root, "linker", "Links a shared file.", "See references/common.md.\n")
	writeFile(t, filepath.Join(root, "common.md"), "shared\n", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "references"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../common.md", filepath.Join(dir, "references", "common.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../SKILL.md", filepath.Join(dir, "references", "inside.md")); err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	m, err := NewManager(Config{Dirs: []string{root}}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	s, ok := m.Get("linker")
	if !ok {
		t.Fatalf("not loaded: %v", m.Problems())
	}
	eq(t, "files", s.Files, []string{"SKILL.md", "references/inside.md"})
	log := buf.String()
	if !strings.Contains(log, "references/common.md") || !strings.Contains(log, "linker") || strings.Contains(log, "inside.md") {
		t.Errorf("log: %s", log)
	}
	// Read again (a racily recent folder is), the folder is not reported again.
	time.Sleep(10 * time.Millisecond)
	before := strings.Count(buf.String(), "references/common.md")
	for range 3 {
		m.Reload()
	}
	if after := strings.Count(buf.String(), "references/common.md"); after != before {
		t.Errorf("reported %d times after rescans, want %d: %s", after, before, buf.String())
	}
}

// syncBuffer is a bytes.Buffer a logger may write to while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLongDescriptionLogged: a description over the format's 1,024 characters loads
// (cut past KeptDescriptionChars), and the log says how long it was as written, not
// the length kept (it said 1536 of a 2,000-character description).
func TestLongDescriptionLogged(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "wordy", strings.Repeat("d", 2000), "Body.\n")
	var buf syncBuffer
	m, err := NewManager(Config{Dirs: []string{root}}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	s, ok := m.Get("wordy")
	if !ok {
		t.Fatalf("not loaded: %v", m.Problems())
	}
	if n := utf8.RuneCountInString(s.Description); n != KeptDescriptionChars {
		t.Errorf("description kept: %d characters, want %d", n, KeptDescriptionChars)
	}
	if log := buf.String(); !strings.Contains(log, "skill description too long") || !strings.Contains(log, "chars=2000") {
		t.Errorf("log: %s", log)
	}
}

// TestBrokenSkillReportSaysWhy: a SKILL.md an editor saved as UTF-16 or in a legacy
// encoding, one without frontmatter, an empty one and a skill too large for the limits
// are reported with what is wrong and what to do, not as a missing name or a YAML
// parser's "invalid trailing UTF-8 octet".
func TestBrokenSkillReportSaysWhy(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	front := func(name string) string { return "---\nname: " + name + "\ndescription: Does a thing.\n---\nbody\n" }
	utf16le := func(s string) string {
		b := []byte{0xff, 0xfe}
		for _, r := range s {
			b = append(b, byte(r), 0)
		}
		return string(b)
	}
	utf16be := func(s string) string {
		b := []byte{0xfe, 0xff}
		for _, r := range s {
			b = append(b, 0, byte(r))
		}
		return string(b)
	}
	writeFile(t, filepath.Join(root, "utf16", "SKILL.md"), utf16le(front("utf16")), 0o644)
	writeFile(t, filepath.Join(root, "utf16be", "SKILL.md"), utf16be(front("utf16be")), 0o644)
	writeFile(t, filepath.Join(root, "latin1", "SKILL.md"), "---\nname: latin1\ndescription: Caf\xe9 menus.\n---\nbody\n", 0o644)
	writeFile(t, filepath.Join(root, "latin1-yaml", "SKILL.md"), "# Latin-1 skill.yaml\n", 0o644)
	writeFile(t, filepath.Join(root, "latin1-yaml", "skill.yaml"), "id: latin1-yaml\ndescription: Na\xefve.\n", 0o644)
	writeFile(t, filepath.Join(root, "no-front", "SKILL.md"), "# Report writer\n\nWrites reports.\n", 0o644)
	writeFile(t, filepath.Join(root, "blank-first", "SKILL.md"), "\n"+front("blank-first"), 0o644)
	writeFile(t, filepath.Join(root, "empty", "SKILL.md"), "", 0o644)
	many := writeSkill(t, root, "many", "Has its node_modules.", "")
	for i := range 6 {
		writeFile(t, filepath.Join(many, "node_modules", "pkg", fmt.Sprintf("f%d.js", i)), "x", 0o644)
	}
	big := writeSkill(t, root, "big", "Carries a model.", "")
	writeFile(t, filepath.Join(big, "assets", "model.bin"), strings.Repeat("x", 8192), 0o644)
	m := newManager(t, Config{Dirs: []string{root}, MaxFiles: 5, MaxSkillBytes: 4096})

	want := map[string][]string{
		"utf16":       {"UTF-16", "save it as UTF-8"},
		"utf16be":     {"UTF-16", "save it as UTF-8"},
		"latin1":      {"line 3 of SKILL.md", "not UTF-8", `"description: Caf"`, "0xe9", "save the file as UTF-8"},
		"latin1-yaml": {"skill.yaml", "line 2", "not UTF-8", "0xef"},
		"no-front":    {"no frontmatter", `first line is "# Report writer"`, "missing name"},
		"blank-first": {"no frontmatter", `first line is ""`},
		"empty":       {"SKILL.md is empty"},
		"many":        {"more than 5 files", "node_modules/ holds 5 of the first 6"},
		"big":         {"more than 4096 bytes", "the largest: assets/model.bin, 8192 bytes"},
	}
	for dir, msgs := range want {
		p, ok := problemFor(m.Problems(), filepath.Join(root, dir))
		if !ok {
			t.Errorf("no problem reported for %s", dir)
			continue
		}
		for _, msg := range msgs {
			if !strings.Contains(p.Error, msg) {
				t.Errorf("problem for %s = %q, want it to say %q", dir, p.Error, msg)
			}
		}
		if strings.Contains(p.Error, "octet") {
			t.Errorf("problem for %s = %q: the YAML parser's words, not what to do", dir, p.Error)
		}
	}
}

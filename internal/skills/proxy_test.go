package skills

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func names(ss []Skill) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestProxyFilters(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	m := newManager(t, Config{Dirs: []string{root}})

	all, warnings := NewProxy(m, nil)
	eq(t, "nil whitelist", names(all.List()), names(m.List()))
	eq(t, "nil whitelist warnings", warnings, []string(nil))

	none, _ := NewProxy(m, []string{})
	eq(t, "empty whitelist", names(none.List()), []string(nil))
	if _, ok := none.Get("pdf"); ok {
		t.Error("empty whitelist shows pdf")
	}

	p, warnings := NewProxy(m, []string{"pdf", " pdf ", "later", "with-*", "zz-*", "[bad", ""})
	eq(t, "warnings", warnings, []string{"unknown skill: later", "skill pattern matches no skill yet: zz-*", "invalid skill pattern: [bad"})
	eq(t, "filtered", names(p.List()), []string{"pdf", "with-yaml"})
	if _, ok := p.Get("toolkit"); ok {
		t.Error("Get(toolkit) visible through a proxy that does not allow it")
	}
	if s, ok := p.Get("with-yaml"); !ok || s.Name != "with-yaml" {
		t.Errorf("Get(with-yaml) = %v, %v", s.Name, ok)
	}
	if _, err := p.Read("toolkit", "SKILL.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of a hidden skill err = %v, want ErrNotFound", err)
	}
	if data, err := p.Read("pdf", "forms.md"); err != nil || len(data) == 0 {
		t.Errorf("Read(pdf, forms.md) = %d bytes, %v", len(data), err)
	}

	// A whitelisted name that did not exist yet shows up once the skill is installed.
	writeSkill(t, root, "later", "Installed after the session started.", "")
	m.Reload()
	eq(t, "after install", names(p.List()), []string{"later", "pdf", "with-yaml"})

	projected, err := p.ProjectAll(t.TempDir())
	if err != nil {
		t.Fatalf("ProjectAll: %v", err)
	}
	if len(projected) != 3 || projected[1].Name != "pdf" || filepath.Base(projected[1].Path) != "pdf" {
		t.Errorf("ProjectAll = %+v", projected)
	}
}

// TestProxyWarnsOfBrokenSkill: a session that asks for a skill whose folder is there
// but does not load (its SKILL.md has no description) is told that, with the reason,
// not that no such skill exists.
func TestProxyWarnsOfBrokenSkill(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "ok", "Loads.", "")
	dir := writeSkill(t, root, "long", "Too long.", "")
	writeFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: long\n---\n", 0o644)
	m := newManager(t, Config{Dirs: []string{root}})
	_, warnings := NewProxy(m, []string{"ok", "long", "never"})
	if len(warnings) != 2 || !strings.HasPrefix(warnings[0], "skill long is not loaded: ") ||
		!strings.Contains(warnings[0], "missing description") || warnings[1] != "unknown skill: never" {
		t.Errorf("warnings = %q", warnings)
	}
}

// TestProxyNameInOtherCase: the skill tool opens PDF as pdf (skill names are
// lowercase), but a whitelist entry is a name as written: "PDF" lets the session see
// no skill. The warning says which skill was meant rather than only "unknown".
func TestProxyNameInOtherCase(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	m := newManager(t, Config{Dirs: []string{root}})
	_, warnings := NewProxy(m, []string{"PDF", "Nope"})
	eq(t, "warnings", warnings, []string{
		"unknown skill: PDF (skill names are lowercase: write pdf)",
		"unknown skill: Nope",
	})
}

package skills

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func readProjected(t *testing.T, projected, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(projected, rel))
	if err != nil {
		t.Fatalf("read projected %s: %v", rel, err)
	}
	return string(data)
}

func TestProjectCopiesOnceAndRefreshesAfterChange(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	for _, f := range []string{"extract_text.py", "fill_form.py"} {
		if err := os.Chmod(filepath.Join(root, "pdf", "scripts", f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, Config{Dirs: []string{root}})
	sandbox := t.TempDir()
	s, _ := m.Get("pdf")

	got, err := Project(s, sandbox)
	if err != nil {
		t.Fatalf("Project: %v", err)
	}
	want := filepath.Join(sandbox, ".skills", "pdf")
	if got != want || ProjectedPath(sandbox, "pdf") != want {
		t.Fatalf("Project path = %s, want %s", got, want)
	}
	for _, rel := range s.Files {
		src, _ := os.ReadFile(filepath.Join(s.Dir, rel))
		if readProjected(t, got, rel) != string(src) {
			t.Errorf("projected %s differs from the source", rel)
		}
	}
	if marker := markerHash(t, sandbox, "pdf"); marker != s.Hash {
		t.Errorf("marker = %q, want %s", marker, s.Hash)
	}
	if info, _ := os.Stat(filepath.Join(got, "scripts", "fill_form.py")); info.Mode()&0o111 == 0 {
		t.Error("script lost its executable bit")
	}
	if info, _ := os.Stat(filepath.Join(got, "forms.md")); info.Mode()&0o111 != 0 {
		t.Error("forms.md became executable")
	}

	// Same hash: nothing is copied, so a session's change to the copy survives.
	writeFile(t, filepath.Join(got, "forms.md"), "session edit", 0o644)
	if _, err := Project(s, sandbox); err != nil {
		t.Fatal(err)
	}
	if readProjected(t, got, "forms.md") != "session edit" {
		t.Error("Project copied again although the hash did not change")
	}

	// The skill changes on disk: the next projection replaces the whole copy.
	writeFile(t, filepath.Join(root, "pdf", "SKILL.md"),
		"---\nname: pdf\ndescription: PDF work, version two.\n---\nnew body\n", 0o644)
	if err := os.Remove(filepath.Join(root, "pdf", "LICENSE.txt")); err != nil {
		t.Fatal(err)
	}
	m.Reload()
	s2, _ := m.Get("pdf")
	if s2.Hash == s.Hash {
		t.Fatal("hash did not change")
	}
	if _, err := Project(s2, sandbox); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readProjected(t, got, "SKILL.md"), "new body") {
		t.Error("projection not refreshed after the skill changed")
	}
	if src, _ := os.ReadFile(filepath.Join(root, "pdf", "forms.md")); readProjected(t, got, "forms.md") != string(src) {
		t.Error("session edit not replaced by the refreshed copy")
	}
	if _, err := os.Stat(filepath.Join(got, "LICENSE.txt")); !os.IsNotExist(err) {
		t.Errorf("file removed from the skill still projected: %v", err)
	}
	if markerHash(t, sandbox, "pdf") != s2.Hash {
		t.Error("marker not updated")
	}
	assertNoLeftovers(t, sandbox)
}

// markerHash returns the content hash the projection marker of skill name holds.
func markerHash(t *testing.T, sandbox, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sandbox, ProjectionDir, markerName(name)))
	if err != nil {
		t.Fatalf("marker of %s: %v", name, err)
	}
	hash, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	return hash
}

// assertNoLeftovers: .skills holds the projections, their markers and .gitignore,
// no temporary or set-aside folder; and no projection holds a file its skill does not
// have (a marker inside one would be packed by the skill's own scripts).
func assertNoLeftovers(t *testing.T, sandbox string) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(sandbox, ProjectionDir))
	names := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names[e.Name()] = true
		}
	}
	for _, e := range entries {
		name, isMarker := strings.CutSuffix(strings.TrimPrefix(e.Name(), "."), ".hash")
		if strings.HasPrefix(e.Name(), ".") && e.Name() != ".gitignore" && !(isMarker && names[name]) {
			t.Errorf("leftover %s in %s", e.Name(), ProjectionDir)
		}
	}
	for name := range names {
		if _, err := os.Lstat(filepath.Join(sandbox, ProjectionDir, name, ".skill-hash")); err == nil {
			t.Errorf("projection %s holds a marker file", name)
		}
	}
}

func TestProjectNeverFollowsSymlinksOut(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "outside.txt"), "SECRET", 0o644)
	root := filepath.Join(base, "skills")
	dir := writeSkill(t, root, "links", "Symlink test.", "")
	writeFile(t, filepath.Join(dir, "real.md"), "real", 0o644)
	mustSymlink(t, "../../outside.txt", filepath.Join(dir, "escape.txt"))
	mustSymlink(t, "real.md", filepath.Join(dir, "alias.md"))
	m := newManager(t, Config{Dirs: []string{root}})
	s, _ := m.Get("links")

	// Also hand Project a Skill whose file list was tampered with.
	s.Files = append(s.Files, "escape.txt", "../outside.txt")
	sandbox := t.TempDir()
	got, err := Project(s, sandbox)
	if err != nil {
		t.Fatalf("Project: %v", err)
	}
	if readProjected(t, got, "alias.md") != "real" {
		t.Error("symlink inside the skill not copied as its content")
	}
	if info, _ := os.Lstat(filepath.Join(got, "alias.md")); info.Mode()&os.ModeSymlink != 0 {
		t.Error("projected alias.md is a symlink")
	}
	for _, p := range []string{filepath.Join(got, "escape.txt"), filepath.Join(sandbox, ProjectionDir, "outside.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was projected", p)
		}
	}
	_ = filepath.Walk(sandbox, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), "SECRET") {
				t.Errorf("secret leaked into %s", p)
			}
		}
		return nil
	})
}

func TestProjectRefusesPlantedSymlinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "plain", "Plain.", "body\n")
	m := newManager(t, Config{Dirs: []string{root}})
	s, _ := m.Get("plain")

	// .skills itself points outside the sandbox: refused, nothing written outside.
	outside := t.TempDir()
	sandbox := t.TempDir()
	mustSymlink(t, outside, filepath.Join(sandbox, ProjectionDir))
	if _, err := Project(s, sandbox); err == nil {
		t.Error("Project followed a .skills symlink out of the sandbox")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("Project wrote outside the sandbox: %v", entries)
	}

	// .skills/plain points outside: replaced by a real folder, the target untouched.
	outside2 := t.TempDir()
	writeFile(t, filepath.Join(outside2, ".skill-hash"), s.Hash, 0o644)
	sandbox2 := t.TempDir()
	if err := os.Mkdir(filepath.Join(sandbox2, ProjectionDir), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, outside2, filepath.Join(sandbox2, ProjectionDir, "plain"))
	got, err := Project(s, sandbox2)
	if err != nil {
		t.Fatalf("Project: %v", err)
	}
	if info, err := os.Lstat(got); err != nil || !info.IsDir() {
		t.Fatalf("projection is not a real folder: %v %v", info, err)
	}
	if readProjected(t, got, "SKILL.md") == "" {
		t.Error("SKILL.md not projected")
	}
	if entries, _ := os.ReadDir(outside2); len(entries) != 1 {
		t.Errorf("the symlink's target was changed: %v", entries)
	}

	if _, err := Project(Skill{Name: "../x", Dir: root}, t.TempDir()); err == nil {
		t.Error("Project accepted an invalid name")
	}
	if _, err := Project(s, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Project into a missing sandbox root succeeded")
	}
}

func TestProjectConcurrent(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	m := newManager(t, Config{Dirs: []string{root}})
	s, _ := m.Get("toolkit")
	sandbox := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	paths := make([]string, 8)
	for i := range 8 {
		wg.Go(func() { paths[i], errs[i] = Project(s, sandbox) })
	}
	wg.Wait()
	for i := range 8 {
		if errs[i] != nil || paths[i] != ProjectedPath(sandbox, "toolkit") {
			t.Errorf("projection %d: %s, %v", i, paths[i], errs[i])
		}
	}
	if markerHash(t, sandbox, "toolkit") != s.Hash {
		t.Error("marker wrong after concurrent projections")
	}
	if readProjected(t, paths[0], "scripts/run.sh") == "" {
		t.Error("scripts/run.sh missing")
	}
	assertNoLeftovers(t, sandbox)
}

// TestProjectionStaysOutOfGit: a session's working directory is often a git
// checkout; the projected skills do not show as changes there (an agent's
// `git add -A` would commit them), and the project's files still do.
func TestProjectionStaysOutOfGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed:", err)
	}
	m := newManager(t, Config{Dirs: []string{copyTree(t, "skills")}})
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	writeFile(t, filepath.Join(repo, "main.go"), "package main\n", 0o644)
	s, _ := m.Get("pdf")
	if _, err := Project(s, repo); err != nil {
		t.Fatal(err)
	}
	if st := git("status", "--porcelain", "--untracked-files=all"); strings.Contains(st, ".skills") || !strings.Contains(st, "main.go") {
		t.Fatalf("git status:\n%s\nwant main.go and nothing of .skills", st)
	}
}

// TestProjectConcurrentRefresh: sessions sharing a working directory refresh a
// skill whose projection is stale at the same time; each swap must land, none may
// fail because another moved the projection aside meanwhile.
func TestProjectConcurrentRefresh(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "skills")
	m := newManager(t, Config{Dirs: []string{root}})
	s, _ := m.Get("toolkit")
	s.Hash = "stale" // never current: every call copies and swaps
	sandbox := t.TempDir()
	var wg sync.WaitGroup
	var failures atomic.Int32
	for range 12 {
		wg.Go(func() {
			for range 15 {
				if _, err := Project(s, sandbox); err != nil {
					if failures.Add(1) == 1 {
						t.Errorf("Project: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of 180 projections failed", n)
	}
	if readProjected(t, ProjectedPath(sandbox, "toolkit"), "scripts/run.sh") == "" {
		t.Error("scripts/run.sh missing")
	}
	assertNoLeftovers(t, sandbox)
}

// projectedFiles lists every file under a projection, slash-separated and sorted.
func projectedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProjectionHoldsOnlyTheSkill: a projected folder holds the skill's files and
// nothing else. Skills' own scripts walk their folder (skill-creator's
// package_skill.py zipped a marker file it found in .skills/pdf into its output).
func TestProjectionHoldsOnlyTheSkill(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{Dirs: []string{copyTree(t, "skills")}})
	s, _ := m.Get("pdf")
	sandbox := t.TempDir()
	got, err := Project(s, sandbox)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "projected files", projectedFiles(t, got), s.Files)
	assertNoLeftovers(t, sandbox)
}

// TestProjectMigratesLegacyMarker: a projection made by an earlier version, with its
// marker inside the folder, is still recognised: current, it is kept as it is (a
// session's edits too) and its marker moves out of the folder; stale, it is replaced.
func TestProjectMigratesLegacyMarker(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{Dirs: []string{copyTree(t, "skills")}})
	s, _ := m.Get("pdf")
	legacy := func(hash string) (sandbox, dir string) {
		sandbox = t.TempDir()
		dir = ProjectedPath(sandbox, "pdf")
		for _, rel := range s.Files {
			data, err := os.ReadFile(filepath.Join(s.Dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, rel), string(data), 0o644)
		}
		writeFile(t, filepath.Join(dir, "forms.md"), "session edit", 0o644)
		writeFile(t, filepath.Join(dir, ".skill-hash"), hash+"\n", 0o644)
		return sandbox, dir
	}

	sandbox, dir := legacy(s.Hash)
	for range 2 {
		if got, err := Project(s, sandbox); err != nil || got != dir {
			t.Fatalf("Project = %s, %v", got, err)
		}
		if readProjected(t, dir, "forms.md") != "session edit" {
			t.Fatal("a current legacy projection was copied again")
		}
		eq(t, "projected files", projectedFiles(t, dir), s.Files)
		if markerHash(t, sandbox, "pdf") != s.Hash {
			t.Error("marker not moved out of the folder")
		}
	}

	sandbox, dir = legacy("stale")
	if _, err := Project(s, sandbox); err != nil {
		t.Fatal(err)
	}
	if readProjected(t, dir, "forms.md") == "session edit" {
		t.Error("a stale legacy projection was kept")
	}
	eq(t, "projected files", projectedFiles(t, dir), s.Files)
	assertNoLeftovers(t, sandbox)
}

// TestProjectMarkerBelongsToItsFolder: the marker beside a projection vouches only
// for the folder it was written for. A folder put in its place afterwards (by a
// process whose projection won a race, or by the session) is copied again rather
// than trusted, and a marker planted as a symlink is neither trusted nor followed.
func TestProjectMarkerBelongsToItsFolder(t *testing.T) {
	t.Parallel()
	m := newManager(t, Config{Dirs: []string{copyTree(t, "skills")}})
	s, _ := m.Get("pdf")
	sandbox := t.TempDir()
	dir, err := Project(s, sandbox)
	if err != nil {
		t.Fatal(err)
	}
	// Another folder takes the place; the marker stays.
	other := filepath.Join(sandbox, ProjectionDir, "other")
	if err := os.Rename(dir, other); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "SKILL.md"), "replaced", 0o644)
	if _, err := Project(s, sandbox); err != nil {
		t.Fatal(err)
	}
	if readProjected(t, dir, "SKILL.md") == "replaced" {
		t.Error("a folder swapped in after the marker was written was trusted")
	}
	eq(t, "projected files", projectedFiles(t, dir), s.Files)
	if err := os.RemoveAll(other); err != nil {
		t.Fatal(err)
	}

	// The marker is a symlink to a file outside holding what a marker would.
	marker := filepath.Join(sandbox, ProjectionDir, markerName("pdf"))
	content, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "marker")
	writeFile(t, outside, string(content), 0o644)
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, outside, marker)
	writeFile(t, filepath.Join(dir, "SKILL.md"), "edited", 0o644)
	if _, err := Project(s, sandbox); err != nil {
		t.Fatal(err)
	}
	if readProjected(t, dir, "SKILL.md") == "edited" {
		t.Error("a marker symlink was trusted")
	}
	if info, err := os.Lstat(marker); err != nil || !info.Mode().IsRegular() {
		t.Errorf("marker not replaced by a file: %v %v", info, err)
	}
	if data, _ := os.ReadFile(outside); string(data) != string(content) {
		t.Error("the marker symlink's target was written")
	}
	assertNoLeftovers(t, sandbox)
}

// TestProjectMakesScriptsExecutable: a skill library copied without file modes (a
// Kubernetes ConfigMap volume, a zip unpacked without them) loses its scripts'
// executable bits. superpowers' review-package runs its sibling sdd-workspace
// directly, so even `bash scripts/review-package` failed with "Permission denied"
// in the session. A file that starts with an interpreter line ("#!/…", "#! /…") is
// executable in the projection,
// whatever its mode in the library; other files keep theirs. The copy still counts
// as current, so it is not made again at every opening.
func TestProjectMakesScriptsExecutable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "sdd")
	writeFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: sdd\ndescription: Runs scripts.\n---\nRun scripts/review-package.\n", 0o644)
	writeFile(t, filepath.Join(dir, "scripts", "review-package"), "#!/usr/bin/env bash\n\"$(dirname \"$0\")/sdd-workspace\"\n", 0o644)
	writeFile(t, filepath.Join(dir, "scripts", "sdd-workspace"), "#!/bin/sh\necho workspace\n", 0o644)
	writeFile(t, filepath.Join(dir, "find-polluter.sh"), "#!/usr/bin/env bash\necho polluter\n", 0o644)
	writeFile(t, filepath.Join(dir, "scripts", "helper.py"), "print('no interpreter line')\n", 0o644)
	writeFile(t, filepath.Join(dir, "notes.md"), "#! is how a script starts\n", 0o644)
	writeFile(t, filepath.Join(dir, "scripts", "kept.sh"), "echo kept its mode\n", 0o755)
	m := newManager(t, Config{Dirs: []string{root}})
	s, ok := m.Get("sdd")
	if !ok {
		t.Fatalf("not loaded: %v", m.Problems())
	}
	sandbox := t.TempDir()
	got, err := Project(s, sandbox)
	if err != nil {
		t.Fatal(err)
	}
	for rel, exec := range map[string]bool{"scripts/review-package": true, "scripts/sdd-workspace": true, "find-polluter.sh": true,
		"scripts/kept.sh": true, "notes.md": false, "scripts/helper.py": false, "SKILL.md": false} {
		info, err := os.Stat(filepath.Join(got, filepath.FromSlash(rel)))
		if err != nil || (info.Mode()&0o111 != 0) != exec {
			t.Errorf("%s: %v, executable %v, want %v", rel, err, err == nil && info.Mode()&0o111 != 0, exec)
		}
	}
	out, err := exec.Command(filepath.Join(got, "scripts", "review-package")).CombinedOutput()
	if err != nil || string(out) != "workspace\n" {
		t.Errorf("review-package: %v %q", err, out)
	}
	if marker := markerHash(t, sandbox, "sdd"); marker != s.Hash {
		t.Errorf("marker %s, want the skill's hash %s: the copy would be made again at every opening", marker, s.Hash)
	}
}

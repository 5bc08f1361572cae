package skills

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchPicksUpNewChangedAndRemovedSkills(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeSkill(t, root, "alpha", "First skill.", "alpha body\n")
	m := newManager(t, Config{Dirs: []string{root}, Watch: true, Debounce: 20 * time.Millisecond})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}

	// New skill.
	v := m.Version()
	beta := writeSkill(t, root, "beta", "Second skill.", "v1\n")
	waitFor(t, "beta to appear", func() bool { _, ok := m.Get("beta"); return ok })
	if m.Version() == v {
		t.Error("Version unchanged after a skill appeared")
	}

	// Edited SKILL.md.
	v = m.Version()
	writeFile(t, filepath.Join(beta, "SKILL.md"), "---\nname: beta\ndescription: Second skill, edited.\n---\nv2\n", 0o644)
	waitFor(t, "beta's edit", func() bool { s, _ := m.Get("beta"); return s.Body == "v2\n" })
	if s, _ := m.Get("beta"); s.Description != "Second skill, edited." || m.Version() == v {
		t.Errorf("after edit: description %q, version %d (was %d)", s.Description, m.Version(), v)
	}

	// A file in a folder created after the watch started, then an edit of that file:
	// the second change is only seen if the new folder got its own watch.
	writeFile(t, filepath.Join(beta, "scripts", "deep", "run.sh"), "echo 1\n", 0o755)
	waitFor(t, "the new script", func() bool {
		s, _ := m.Get("beta")
		return slices.Contains(s.Scripts, "scripts/deep/run.sh")
	})
	s, _ := m.Get("beta")
	writeFile(t, filepath.Join(beta, "scripts", "deep", "run.sh"), "echo 22\n", 0o755)
	waitFor(t, "the script edit", func() bool { again, _ := m.Get("beta"); return again.Hash != s.Hash })

	// A skill that breaks is reported and dropped; fixed, it returns.
	writeFile(t, filepath.Join(root, "alpha", "SKILL.md"), "---\nname: [alpha\n---\n", 0o644)
	waitFor(t, "alpha to break", func() bool { _, ok := m.Get("alpha"); return !ok })
	if p, ok := problemFor(m.Problems(), filepath.Join(root, "alpha")); !ok || !strings.Contains(p.Error, "yaml") {
		t.Errorf("problem for broken alpha = %+v, %v", p, ok)
	}
	writeSkill(t, root, "alpha", "First skill, fixed.", "fixed\n")
	waitFor(t, "alpha to be fixed", func() bool { s, _ := m.Get("alpha"); return s.Body == "fixed\n" })
	if len(m.Problems()) != 0 {
		t.Errorf("Problems after fix = %+v", m.Problems())
	}

	// Removed skill.
	v = m.Version()
	if err := os.RemoveAll(beta); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "beta to go", func() bool { _, ok := m.Get("beta"); return !ok })
	if m.Version() == v {
		t.Error("Version unchanged after a skill was removed")
	}

	// After Stop nothing changes any more.
	m.Stop()
	m.Stop()
	v = m.Version()
	writeSkill(t, root, "gamma", "Too late.", "")
	time.Sleep(150 * time.Millisecond)
	if _, ok := m.Get("gamma"); ok || m.Version() != v {
		t.Error("a change after Stop was picked up")
	}
}

func TestWatchDebouncesBursts(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	m := newManager(t, Config{Dirs: []string{root}, Watch: true, Debounce: 300 * time.Millisecond})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the start-up rescan pass
	v := m.Version()
	// Ten skills written 10 ms apart: one debounced rescan sees all of them.
	for i := range 10 {
		writeSkill(t, root, "burst-"+string(rune('a'+i)), "Burst.", "")
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the burst", func() bool { return len(m.List()) == 10 })
	if got := m.Version() - v; got != 1 {
		t.Errorf("burst of 10 writes caused %d versions, want 1", got)
	}
}

func TestPollingWithoutWatcher(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	m := newManager(t, Config{Dirs: []string{root}, PollInterval: 20 * time.Millisecond})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, root, "polled", "Found by polling.", "")
	waitFor(t, "polled skill", func() bool { _, ok := m.Get("polled"); return ok })
}

func TestStartWithoutWatchIsStatic(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	m := newManager(t, Config{Dirs: []string{root}})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, root, "later", "Needs a Reload.", "")
	time.Sleep(50 * time.Millisecond)
	if _, ok := m.Get("later"); ok {
		t.Fatal("skill appeared without watching")
	}
	if !m.Reload() {
		t.Fatal("Reload found nothing")
	}
	if _, ok := m.Get("later"); !ok {
		t.Fatal("skill missing after Reload")
	}
}

// TestWatchFollowsReplacedFolders: a skill folder or a skills directory that is removed
// and created again (rm -rf && cp -r, a checkout, an rsync of a release) gets a new
// inode; its old watch died with the old one, so later edits inside the new folder are
// only seen if the watcher watches the new folder.
func TestWatchFollowsReplacedFolders(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "skills")
	writeSkill(t, root, "swap", "Replaced.", "v0\n")
	// Debounce long enough that the removal and the re-creation land in one rescan.
	m := newManager(t, Config{Dirs: []string{root}, Watch: true, Debounce: 300 * time.Millisecond})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitWatching(t, m, root)
	body := func(b string) func() bool {
		return func() bool { s, _ := m.Get("swap"); return s.Body == b }
	}

	// The skill folder replaced, then edited.
	if err := os.RemoveAll(filepath.Join(root, "swap")); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, root, "swap", "Replaced.", "v1\n")
	waitFor(t, "the replaced folder", body("v1\n"))
	writeSkill(t, root, "swap", "Replaced.", "v2\n")
	waitFor(t, "an edit in the replaced folder", body("v2\n"))

	// The whole skills directory replaced, then a skill added to it.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, root, "swap", "Replaced.", "v3\n")
	waitFor(t, "the replaced directory", body("v3\n"))
	writeSkill(t, root, "added", "Added later.", "")
	waitFor(t, "a skill added to the replaced directory", func() bool { _, ok := m.Get("added"); return ok })
}

// TestWatchNoticesDirectoryCreatedLater: a configured directory that does not exist yet
// is reported, and its skills load once it is created.
func TestWatchNoticesDirectoryCreatedLater(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "later", "skills")
	other := filepath.Join(base, "other")
	m := newManager(t, Config{Dirs: []string{root, other}, Watch: true, Debounce: 20 * time.Millisecond})
	if _, ok := problemFor(m.Problems(), root); !ok {
		t.Fatalf("missing directory not reported: %+v", m.Problems())
	}
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitWatching(t, m, other)
	writeSkill(t, root, "late", "Created later.", "")
	waitFor(t, "the skill of a directory created later", func() bool { _, ok := m.Get("late"); return ok })
	if len(m.Problems()) != 0 {
		t.Errorf("Problems = %+v", m.Problems())
	}
}

// waitWatching returns once m's watcher follows root: a probe skill written there
// after Start has come and gone.
func waitWatching(t *testing.T, m *Manager, root string) {
	t.Helper()
	dir := writeSkill(t, root, "watch-probe", "Probe.", "")
	waitFor(t, "the watcher to see a probe", func() bool { _, ok := m.Get("watch-probe"); return ok })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher to see the probe go", func() bool { _, ok := m.Get("watch-probe"); return !ok })
}

// watchLimitChild, set in the environment, makes TestWatchLimitChild the child of
// TestWatchPastInotifyLimit: it runs in a user namespace whose inotify watch limit
// is too small for the library.
const watchLimitChild = "TOOLSERVERD_SKILLS_WATCH_LIMIT_CHILD"

// TestWatchPastInotifyLimit: a library with more folders than inotify watches are
// left (fs.inotify.max_user_watches, shared with every other program of the user)
// still has its skills followed: the folders that cannot be watched are polled, and
// the log says so once, not once per folder at every rescan. Before, an edit to a
// skill whose folder got no watch was never seen, and every rescan logged "cannot
// watch directory" for each such folder. The child process runs in a user namespace
// (unshare -Ur) with a limit of 2 watches: the skills directory and one folder.
func TestWatchPastInotifyLimit(t *testing.T) {
	t.Parallel()
	if os.Getenv(watchLimitChild) != "" {
		t.Skip("the child runs TestWatchLimitChild")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare: cannot set an inotify limit of its own")
	}
	if out, err := exec.Command(unshare, "-Ur", "sh", "-c", "echo 2 > /proc/sys/user/max_inotify_watches").CombinedOutput(); err != nil {
		t.Skipf("cannot set an inotify limit in a user namespace: %v %s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), unshare, "-Ur", "sh", "-c",
		`echo 2 > /proc/sys/user/max_inotify_watches && exec "$0" -test.run='^TestWatchLimitChild$' -test.v -test.count=1`, os.Args[0])
	cmd.Env = append(os.Environ(), watchLimitChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWatchLimitChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestWatchLimitChild(t *testing.T) {
	if os.Getenv(watchLimitChild) == "" {
		t.Skip("runs as the child of TestWatchPastInotifyLimit")
	}
	root := t.TempDir()
	for _, name := range []string{"alpha", "beta", "gamma", "delta"} {
		dir := writeSkill(t, root, name, "The first "+name+".", "")
		writeFile(t, filepath.Join(dir, "scripts", "run.sh"), "#!/bin/sh\n", 0o755)
	}
	var logs syncBuffer
	m, err := NewManager(Config{Dirs: []string{root}, Watch: true, Debounce: 20 * time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Two watches cover the skills directory and alpha, the first folder scanned;
	// gamma's SKILL.md changes where no watch sees it. It is edited once the first
	// scans are done, so that no rescan finds the edit by chance.
	waitFor(t, "the watches set up", func() bool { return strings.Contains(logs.String(), "cannot watch") })
	time.Sleep(200 * time.Millisecond)
	writeSkill(t, root, "gamma", "The second gamma.", "")
	waitFor(t, "gamma edited", func() bool { sk, _ := m.Get("gamma"); return sk.Description == "The second gamma." })
	// More rescans (a skill added, then removed) add no more warnings.
	writeSkill(t, root, "epsilon", "Added.", "")
	waitFor(t, "epsilon", func() bool { _, ok := m.Get("epsilon"); return ok })
	if err := os.RemoveAll(filepath.Join(root, "epsilon")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "epsilon removed", func() bool { _, ok := m.Get("epsilon"); return !ok })
	text := logs.String()
	if n := strings.Count(text, "cannot watch"); n != 1 {
		t.Errorf("%d warnings of folders not watched, want 1:\n%s", n, text)
	}
	if !strings.Contains(text, "max_user_watches") || !strings.Contains(text, "polling") {
		t.Errorf("the warning does not say why and what is done instead:\n%s", text)
	}
}

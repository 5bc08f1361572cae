package chain

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestArtifactsBoundedPerSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := NewArtifacts(dir, 1000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	var refs []string
	for i := range 3 {
		ref, truncated, err := a.Put("ses_a", bytes.Repeat([]byte{'a' + byte(i)}, 400))
		if err != nil || truncated {
			t.Fatalf("put %d: %v %v", i, err, truncated)
		}
		// Distinct ages, oldest first, whatever the file system's clock granularity.
		at := old.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(dir, "ses_a", ref), at, at); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	// 3 × 400 > 1000: the oldest went to make room for the third.
	if _, _, err := a.Read("ses_a", refs[0], 0, 10); !errors.Is(err, ErrNoArtifact) {
		t.Errorf("oldest artifact still readable: %v", err)
	}
	data, size, err := a.Read("ses_a", refs[2], 390, 100)
	if err != nil || size != 400 || string(data) != "cccccccccc" {
		t.Errorf("read = %q %d %v", data, size, err)
	}
	// Other sessions, bad references and path tricks find nothing.
	for _, c := range [][2]string{{"ses_b", refs[2]}, {"ses_a", "art_x"}, {"ses_a", "../ses_a/" + refs[2]}, {"../ses_a", refs[2]}} {
		if _, _, err := a.Read(c[0], c[1], 0, 10); !errors.Is(err, ErrNoArtifact) {
			t.Errorf("Read(%q, %q) = %v, want ErrNoArtifact", c[0], c[1], err)
		}
	}
	// One result larger than the whole budget is cut to it.
	ref, truncated, err := a.Put("ses_a", bytes.Repeat([]byte{'z'}, 1500))
	if err != nil || !truncated {
		t.Fatalf("put big: %v %v", err, truncated)
	}
	if _, size, _ := a.Read("ses_a", ref, 0, 1); size != 1000 {
		t.Errorf("big artifact size %d, want 1000", size)
	}
}

// newStore returns a store in a fresh directory with a roomy per-session bound.
func newStore(t *testing.T, retention time.Duration) *Artifacts {
	t.Helper()
	a, err := NewArtifacts(t.TempDir(), 1<<20, retention)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// age sets the modification time of path to now minus d.
func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// put stores data for session and returns its reference and file.
func put(t *testing.T, a *Artifacts, session, data string) (ref, path string) {
	t.Helper()
	ref, _, err := a.Put(session, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return ref, filepath.Join(a.dir, session, ref)
}

func TestSweepDeletesUnusedSessions(t *testing.T) {
	t.Parallel()
	a := newStore(t, time.Hour)
	dir := a.dir
	// ses_old: artifact and directory two hours old.
	_, oldFile := put(t, a, "ses_old", "old")
	age(t, oldFile, 2*time.Hour)
	age(t, filepath.Join(dir, "ses_old"), 2*time.Hour)
	// ses_new: just written, with a crashed Put's temporary file of two hours ago
	// and one of a minute ago.
	newRef, _ := put(t, a, "ses_new", "new")
	for name, d := range map[string]time.Duration{".tmp-stale": 2 * time.Hour, ".tmp-young": time.Minute} {
		f := filepath.Join(dir, "ses_new", name)
		if err := os.WriteFile(f, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		age(t, f, d)
	}
	// ses_mixed: an old directory holding an artifact used half an hour ago.
	mixedRef, mixedFile := put(t, a, "ses_mixed", "mixed")
	age(t, mixedFile, 30*time.Minute)
	age(t, filepath.Join(dir, "ses_mixed"), 2*time.Hour)
	// Empty directories are judged by their own time.
	for name, d := range map[string]time.Duration{"ses_empty_old": 2 * time.Hour, "ses_empty_new": time.Minute} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o750); err != nil {
			t.Fatal(err)
		}
		age(t, filepath.Join(dir, name), d)
	}
	// What is not a session directory is not the sweep's.
	if err := os.Mkdir(filepath.Join(dir, "not.a.session"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, filepath.Join(dir, "not.a.session"), 2*time.Hour)
	age(t, filepath.Join(dir, "stray-file"), 2*time.Hour)
	// A directory an earlier sweep set aside and did not finish deleting.
	leftover := filepath.Join(dir, doomedPrefix+"ses_gone-1")
	if err := os.MkdirAll(filepath.Join(leftover, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "sub", "artifact"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	n, err := a.Sweep(time.Now())
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 sessions deleted", n, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), doomedPrefix) {
			t.Errorf("%s left behind: set-aside directories must be deleted", e.Name())
		}
	}
	for name, want := range map[string]bool{
		"ses_old": false, "ses_empty_old": false, "ses_new": true, "ses_mixed": true, "ses_empty_new": true,
		"ses_new/.tmp-stale": false, "ses_new/.tmp-young": true, "not.a.session": true, "stray-file": true,
	} {
		if got := exists(t, filepath.Join(dir, name)); got != want {
			t.Errorf("%s exists = %v, want %v", name, got, want)
		}
	}
	for session, ref := range map[string]string{"ses_new": newRef, "ses_mixed": mixedRef} {
		if _, size, err := a.Read(session, ref, 0, 10); err != nil || size == 0 {
			t.Errorf("Read(%s) after sweep = %d, %v", session, size, err)
		}
	}
}

func TestReadKeepsSessionAlive(t *testing.T) {
	t.Parallel()
	a := newStore(t, time.Hour)
	dir := a.dir
	refs := map[string]string{}
	for _, session := range []string{"ses_read", "ses_idle"} {
		ref, file := put(t, a, session, "data")
		age(t, file, 50*time.Minute)
		age(t, filepath.Join(dir, session), 50*time.Minute)
		refs[session] = ref
	}
	if data, _, err := a.Read("ses_read", refs["ses_read"], 0, 10); err != nil || string(data) != "data" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	// Half an hour on, ses_idle was last used 80 minutes before, ses_read 30.
	n, err := a.Sweep(time.Now().Add(30 * time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 session deleted", n, err)
	}
	if _, _, err := a.Read("ses_idle", refs["ses_idle"], 0, 10); !errors.Is(err, ErrNoArtifact) {
		t.Errorf("idle session's artifact: %v, want ErrNoArtifact", err)
	}
	if data, _, err := a.Read("ses_read", refs["ses_read"], 0, 10); err != nil || string(data) != "data" {
		t.Errorf("read session's artifact = %q, %v", data, err)
	}
}

func TestZeroRetentionKeepsEverything(t *testing.T) {
	t.Parallel()
	a := newStore(t, 0)
	dir := a.dir
	ref, file := put(t, a, "ses_a", "kept")
	age(t, file, 10*365*24*time.Hour)
	age(t, filepath.Join(dir, "ses_a"), 10*365*24*time.Hour)
	if err := os.WriteFile(filepath.Join(dir, "ses_a", ".tmp-old"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, filepath.Join(dir, "ses_a", ".tmp-old"), 10*365*24*time.Hour)
	if n, err := a.Sweep(time.Now()); n != 0 || err != nil {
		t.Fatalf("Sweep = %d, %v; want nothing deleted", n, err)
	}
	if !exists(t, filepath.Join(dir, "ses_a", ".tmp-old")) {
		t.Error("temporary file deleted with retention 0")
	}
	if data, _, err := a.Read("ses_a", ref, 0, 10); err != nil || string(data) != "kept" {
		t.Errorf("Read = %q, %v", data, err)
	}
	// No sweeper runs (the package's leak check would see one).
	if err := a.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	a.Stop()
}

func TestNegativeRetentionIsRefused(t *testing.T) {
	t.Parallel()
	if _, err := NewArtifacts(t.TempDir(), 1<<20, -time.Second); err == nil {
		t.Fatal("negative retention accepted")
	}
}

func TestSweeperStartsOnceAndStops(t *testing.T) {
	t.Parallel()
	a := newStore(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, nil); err == nil {
		t.Error("second Start accepted")
	}
	a.Stop()
	a.Stop() // idempotent; the package's leak check sees a sweeper left running
}

func TestSweepInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ retention, want time.Duration }{
		{24 * time.Hour, 10 * time.Minute},
		{10 * time.Minute, 5 * time.Minute},
		{time.Millisecond, time.Second},
	} {
		if got := (&Artifacts{retention: c.retention}).sweepInterval(); got != c.want {
			t.Errorf("sweepInterval(%v) = %v, want %v", c.retention, got, c.want)
		}
	}
}

// A Put into a session the sweep is deleting neither fails nor loses its artifact.
func TestPutRacingSweep(t *testing.T) {
	t.Parallel()
	a := newStore(t, time.Hour)
	dir := a.dir
	data := bytes.Repeat([]byte("x"), 64<<10)
	deleted := 0
	for i := range 200 {
		// The session's directory, as every round starts, is stale: the sweep deletes it
		// unless the Put comes first.
		put(t, a, "ses_race", "stale")
		files, err := filepath.Glob(filepath.Join(dir, "ses_race", "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(files, filepath.Join(dir, "ses_race")) {
			age(t, f, 2*time.Hour)
		}
		var (
			wg       sync.WaitGroup
			ref      string
			perr     error
			swept    int
			sweepErr error
		)
		begin := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-begin
			swept, sweepErr = a.Sweep(time.Now())
		}()
		go func() {
			defer wg.Done()
			<-begin
			ref, _, perr = a.Put("ses_race", data)
		}()
		close(begin)
		wg.Wait()
		deleted += swept
		if perr != nil || sweepErr != nil {
			t.Fatalf("round %d: Put: %v, Sweep: %v", i, perr, sweepErr)
		}
		got, size, err := a.Read("ses_race", ref, 0, int64(len(data)))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d (swept %d): Read = %d bytes of %d, %v", i, swept, len(got), size, err)
		}
	}
	t.Logf("the sweep came first in %d of 200 rounds", deleted)
}

package chain

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestArtifactsBoundedPerSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := NewArtifacts(dir, 1000)
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

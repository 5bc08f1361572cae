package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSkillProblemsLoggedOnce: a broken skill is one warning at start, not two (the
// skills manager reports what it could not load; the app does not repeat it).
func TestSkillProblemsLoggedOnce(t *testing.T) {
	t.Parallel()
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skills, "broken", "SKILL.md"), []byte("---\nname: broken\ndescription: [unclosed\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Addr = "127.0.0.1:0"
	cfg.Auth.Unauthenticated = true
	cfg.DataDir = t.TempDir()
	cfg.Skills.Dirs = []string{skills}
	var logs lockedBuffer
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n := strings.Count(logs.String(), `"msg":"skill not loaded"`); n != 1 {
		t.Fatalf("%d 'skill not loaded' lines for one broken skill, want 1:\n%s", n, logs.String())
	}
}

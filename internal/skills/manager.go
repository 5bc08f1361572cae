package skills

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Manager holds the skills of the configured directories. Reads (List, Get, Read,
// Version) are lock-free against an immutable snapshot that each reload replaces.
type Manager struct {
	cfg Config
	log *slog.Logger

	reloadMu sync.Mutex         // serializes reloads
	folders  map[string]*folder // last scan's folders by path; guarded by reloadMu
	snap     atomic.Pointer[snapshot]

	lifeMu sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// dirProblem starts the Problem of a configured directory that cannot be scanned.
const dirProblem = "skills directory: "

type snapshot struct {
	version  uint64
	digest   [32]byte
	byName   map[string]Skill
	list     []Skill
	names    []string // the names of list, in its order (sorted)
	problems []Problem
	// watch lists the configured directories that exist (or, for one that does not,
	// its closest existing parent) and every folder inside their skills, for the
	// watcher.
	watch []string
}

// NewManager validates cfg and loads every skill once. Broken skills do not fail it;
// they are reported by Problems.
func NewManager(cfg Config, log *slog.Logger) (*Manager, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: log, folders: map[string]*folder{}}
	m.snap.Store(&snapshot{byName: map[string]Skill{}})
	m.Reload()
	return m, nil
}

// List returns every loaded skill, sorted by name.
func (m *Manager) List() []Skill {
	s := m.snap.Load()
	out := make([]Skill, len(s.list))
	for i, sk := range s.list {
		out[i] = sk.clone()
	}
	return out
}

// Get returns the skill called name.
func (m *Manager) Get(name string) (Skill, bool) {
	sk, ok := m.snap.Load().byName[name]
	if !ok {
		return Skill{}, false
	}
	return sk.clone(), true
}

// Problems returns the folders (and configured directories) that could not be loaded,
// in scan order.
func (m *Manager) Problems() []Problem { return slices.Clone(m.snap.Load().problems) }

// NotLoaded returns why the skill called name is not loaded when its folder is there
// but could not be loaded (a problem whose folder, or symlink, has that name), so
// that asking for it is answered with the reason rather than as for a skill that does
// not exist. It returns false for a loaded skill and for one with no folder.
func (m *Manager) NotLoaded(name string) (string, bool) {
	return m.snap.Load().notLoaded(name)
}

func (s *snapshot) notLoaded(name string) (string, bool) {
	if _, ok := s.byName[name]; ok || name == "" {
		return "", false
	}
	for _, pr := range s.problems {
		// A configured directory's own problem (missing, not a directory) is no skill's.
		if filepath.Base(pr.Dir) == name && !strings.HasPrefix(pr.Error, dirProblem) {
			return pr.Error, true
		}
	}
	return "", false
}

// Version changes whenever a reload finds different skills, contents or problems.
func (m *Manager) Version() uint64 { return m.snap.Load().version }

// Read returns the content of one of a skill's files. relPath is relative to the skill
// folder and must name one of Skill.Files; the file is opened through an os.Root of
// the folder, so neither ".." nor a symlink swapped in since the scan leads outside it.
func (m *Manager) Read(name, relPath string) ([]byte, error) {
	sk, ok := m.snap.Load().byName[name]
	if !ok {
		return nil, fmt.Errorf("skill %q: %w", name, ErrNotFound)
	}
	return readSkillFile(sk, relPath, m.cfg.MaxSkillBytes)
}

func readSkillFile(sk Skill, relPath string, limit int64) ([]byte, error) {
	rel, err := cleanRel(relPath)
	if err != nil {
		return nil, fmt.Errorf("skill %q: %w", sk.Name, err)
	}
	if _, found := slices.BinarySearch(sk.Files, rel); !found {
		return nil, fmt.Errorf("skill %q: file %q: %w", sk.Name, rel, ErrNotFound)
	}
	root, err := os.OpenRoot(sk.Dir)
	if err != nil {
		return nil, fmt.Errorf("skill %q: %w", sk.Name, err)
	}
	defer root.Close()
	f, _, err := openRegular(root, rel)
	if err != nil {
		return nil, fmt.Errorf("skill %q: file %q: %w", sk.Name, rel, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("skill %q: file %q: %w", sk.Name, rel, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("skill %q: file %q: larger than %d bytes", sk.Name, rel, limit)
	}
	return data, nil
}

// Reload rescans every directory now and reports whether anything changed. Folders
// whose file list, sizes and modification times are unchanged since the previous scan
// are not read again (unless a file was modified within a couple of seconds of that
// scan, see racyWindow).
func (m *Manager) Reload() bool {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	start := time.Now()
	next := &snapshot{byName: map[string]Skill{}}
	folders := map[string]*folder{}
	for _, root := range m.cfg.Dirs {
		paths, broken, err := candidates(root)
		next.problems = append(next.problems, broken...)
		if err != nil {
			next.problems = append(next.problems, Problem{Dir: root, Error: dirProblem + err.Error()})
			if errors.Is(err, fs.ErrNotExist) {
				// Watch the closest folder that exists, so the directory is noticed
				// once it is created (or created again after being replaced).
				if anc := existingAncestor(root); anc != "" {
					next.watch = append(next.watch, anc)
				}
			}
			continue
		}
		next.watch = append(next.watch, root)
		for _, dir := range paths {
			prev := m.folders[dir]
			f := loadFolder(dir, prev, m.cfg, start)
			folders[dir] = f
			if len(f.leftOut) > 0 && (prev == nil || !slices.Equal(prev.leftOut, f.leftOut)) {
				m.log.Warn("skill files left out", "dir", dir, "files", f.leftOut,
					"why", "symlinks that lead out of the skill's folder, to a folder or nowhere are not part of a skill; copy the files in")
			}
			if f.err == nil && (prev == nil || prev.err != nil || prev.skill.Description != f.skill.Description) && f.skill.descriptionChars > MaxDescriptionChars {
				m.log.Warn("skill description too long", "dir", dir, "chars", f.skill.descriptionChars,
					"why", fmt.Sprintf("the Agent Skills format allows at most %d characters; the skill is loaded (a description over %d is cut); prompts show 250 of them: say what the skill does and when to use it first, and put the rest in the body", MaxDescriptionChars, KeptDescriptionChars))
			}
			next.watch = append(next.watch, f.dirs...)
			if f.err != nil {
				next.problems = append(next.problems, Problem{Dir: dir, Error: f.err.Error()})
				continue
			}
			if other, dup := next.byName[f.skill.Name]; dup {
				next.problems = append(next.problems, Problem{Dir: dir,
					Error: fmt.Sprintf("duplicate skill name %q: already loaded from %s", f.skill.Name, other.Dir)})
				continue
			}
			next.byName[f.skill.Name] = f.skill
		}
	}
	m.folders = folders
	for _, sk := range next.byName {
		next.list = append(next.list, sk)
	}
	slices.SortFunc(next.list, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	for _, sk := range next.list {
		next.names = append(next.names, sk.Name)
	}
	next.watch = dedupe(next.watch)
	next.digest = digest(next)

	prev := m.snap.Load()
	next.version = prev.version
	changed := next.digest != prev.digest || prev.version == 0
	if changed {
		next.version++
		m.logChanges(prev, next, time.Since(start))
	}
	m.snap.Store(next)
	return changed
}

func digest(s *snapshot) [32]byte {
	h := sha256.New()
	for _, sk := range s.list {
		fmt.Fprintf(h, "s\x00%s\x00%s\x00%s\n", sk.Name, sk.Dir, sk.Hash)
	}
	for _, p := range s.problems {
		fmt.Fprintf(h, "p\x00%s\x00%s\n", p.Dir, p.Error)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func (m *Manager) logChanges(prev, next *snapshot, took time.Duration) {
	known := map[Problem]bool{}
	for _, p := range prev.problems {
		known[p] = true
	}
	for _, p := range next.problems {
		if !known[p] {
			m.log.Warn("skill not loaded", "dir", p.Dir, "err", p.Error)
		}
	}
	m.log.Info("skills loaded", "skills", len(next.list), "problems", len(next.problems),
		"version", next.version, "duration_ms", float64(took.Microseconds())/1000)
}

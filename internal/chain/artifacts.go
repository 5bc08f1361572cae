package chain

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
)

// ErrNoArtifact is returned for a reference this session does not have.
var ErrNoArtifact = errors.New("no such artifact in this session")

var (
	refPattern     = regexp.MustCompile(`^art_[a-z2-7]{26}$`)
	sessionPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	refEncoding    = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
)

// Artifacts keeps large results of chained calls as files, one directory per session
// under dir, at most maxPerSession bytes per session (the oldest go first). A session
// reads only its own: the reference is looked up under the caller's session.
type Artifacts struct {
	dir           string
	maxPerSession int64
	mu            sync.Mutex // serializes a session's store-and-evict
}

// NewArtifacts returns a store rooted at dir (created if missing).
func NewArtifacts(dir string, maxPerSession int64) (*Artifacts, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("chain: artifact dir must be absolute, got %q", dir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("chain: artifact dir: %w", err)
	}
	return &Artifacts{dir: dir, maxPerSession: maxPerSession}, nil
}

func (a *Artifacts) sessionDir(sessionID string) (string, error) {
	if !sessionPattern.MatchString(sessionID) {
		return "", fmt.Errorf("chain: invalid session id %q", sessionID)
	}
	return filepath.Join(a.dir, sessionID), nil
}

// Put stores data for a session and returns its reference. Data larger than the
// per-session bound is cut to it (truncated reports that).
func (a *Artifacts) Put(sessionID string, data []byte) (ref string, truncated bool, err error) {
	dir, err := a.sessionDir(sessionID)
	if err != nil {
		return "", false, err
	}
	if int64(len(data)) > a.maxPerSession {
		data, truncated = data[:a.maxPerSession], true
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	ref = "art_" + refEncoding.EncodeToString(b[:])
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", false, fmt.Errorf("chain: artifact dir: %w", err)
	}
	if err := a.evict(dir, a.maxPerSession-int64(len(data))); err != nil {
		return "", false, err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", false, fmt.Errorf("chain: store artifact: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return "", false, fmt.Errorf("chain: store artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, ref)); err != nil {
		_ = os.Remove(tmp.Name())
		return "", false, fmt.Errorf("chain: store artifact: %w", err)
	}
	return ref, truncated, nil
}

// evict deletes the session's oldest artifacts until they hold at most keep bytes.
func (a *Artifacts) evict(dir string, keep int64) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("chain: list artifacts: %w", err)
	}
	type file struct {
		name string
		size int64
		mod  int64
	}
	var files []file
	var total int64
	for _, e := range entries {
		if !refPattern.MatchString(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{e.Name(), fi.Size(), fi.ModTime().UnixNano()})
		total += fi.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod < files[j].mod })
	for _, f := range files {
		if total <= keep {
			break
		}
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("chain: evict artifact: %w", err)
		}
		total -= f.size
	}
	return nil
}

// Read returns up to limit bytes of a session's artifact from offset, and its size.
func (a *Artifacts) Read(sessionID, ref string, offset, limit int64) ([]byte, int64, error) {
	dir, err := a.sessionDir(sessionID)
	if err != nil || !refPattern.MatchString(ref) {
		return nil, 0, ErrNoArtifact
	}
	f, err := os.Open(filepath.Join(dir, ref))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, ErrNoArtifact
	}
	if err != nil {
		return nil, 0, fmt.Errorf("chain: read artifact: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("chain: read artifact: %w", err)
	}
	size := fi.Size()
	if offset >= size {
		return []byte{}, size, nil
	}
	buf := make([]byte, min(limit, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("chain: read artifact: %w", err)
	}
	return buf[:n], size, nil
}

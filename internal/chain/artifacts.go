package chain

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
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
//
// A session's directory unused for longer than the retention is deleted by Sweep
// (run every so often after Start). Its last use is the newest modification time of
// the directory and its files: Put creates and renames files in it, which updates the
// directory's, and Read touches the directory.
type Artifacts struct {
	// replicas knows which replica holds each artifact when replicas share a store;
	// nil: every artifact is in this process.
	replicas      ArtifactDirectory
	dir           string
	maxPerSession int64
	retention     time.Duration // 0: kept forever

	// mu serializes Put's store-and-evict, Read's touch and the sweep of a directory,
	// and guards stop and done (set by Start).
	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

// NewArtifacts returns a store rooted at dir (created if missing) that keeps a
// session's artifacts for retention after their last use (0: forever).
func NewArtifacts(dir string, maxPerSession int64, retention time.Duration) (*Artifacts, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("chain: artifact dir must be absolute, got %q", dir)
	}
	if retention < 0 {
		return nil, fmt.Errorf("chain: artifact retention %v is negative", retention)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("chain: artifact dir: %w", err)
	}
	return &Artifacts{dir: dir, maxPerSession: maxPerSession, retention: retention}, nil
}

// ArtifactDirectory knows which replica holds each artifact, when replicas share a
// PostgreSQL store: an artifact is a file in the data_dir of the replica that ran the
// chain, and artifact_read may land on another.
type ArtifactDirectory interface {
	// Stored records that this replica holds ref, an artifact of ctx's session.
	Stored(ctx context.Context, sess *tool.Session, ref string) error
	// Evicted records that this replica no longer holds ref.
	Evicted(ctx context.Context, ref string) error
	// Swept records that this replica no longer holds the artifacts of session it
	// stored before at.
	Swept(ctx context.Context, session string, at time.Time) error
	// Forward runs ctx's artifact_read call (with args) on the replica holding ref;
	// handled is false when no other replica holds it for ctx's session.
	Forward(ctx *tool.Context, ref string, args json.RawMessage) (res *tool.Result, handled bool, err error)
}

// Share makes the artifacts readable from the other replicas through d; call it
// before the tools are used.
func (a *Artifacts) Share(d ArtifactDirectory) { a.replicas = d }

// keep stores data as an artifact of sess (Put) and notes in the directory, if any,
// that this replica holds it and no longer holds those Put evicted to make room.
// The new one is noted before its reference is returned, so that a read on another
// replica finds it.
func (a *Artifacts) keep(ctx context.Context, sess *tool.Session, data []byte) (ref string, truncated bool, err error) {
	ref, truncated, evicted, err := a.put(sess.ID, data)
	if a.replicas == nil {
		return ref, truncated, err
	}
	for _, old := range evicted {
		// A row left behind (this write failed) only sends reads of the evicted
		// artifact here, where they are not found, until the session's rows go.
		_ = a.replicas.Evicted(ctx, old)
	}
	if err != nil {
		return ref, truncated, err
	}
	return ref, truncated, a.replicas.Stored(ctx, sess, ref)
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
	ref, truncated, _, err = a.put(sessionID, data)
	return ref, truncated, err
}

// put is Put, also returning the references of the artifacts it evicted.
func (a *Artifacts) put(sessionID string, data []byte) (ref string, truncated bool, evicted []string, err error) {
	dir, err := a.sessionDir(sessionID)
	if err != nil {
		return "", false, nil, err
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
		return "", false, evicted, fmt.Errorf("chain: artifact dir: %w", err)
	}
	if evicted, err = a.evict(dir, a.maxPerSession-int64(len(data))); err != nil {
		return "", false, evicted, err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", false, evicted, fmt.Errorf("chain: store artifact: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return "", false, evicted, fmt.Errorf("chain: store artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, ref)); err != nil {
		_ = os.Remove(tmp.Name())
		return "", false, evicted, fmt.Errorf("chain: store artifact: %w", err)
	}
	return ref, truncated, evicted, nil
}

// evict deletes the session's oldest artifacts until they hold at most keep bytes,
// and returns the references of those it deleted.
func (a *Artifacts) evict(dir string, keep int64) (evicted []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("chain: list artifacts: %w", err)
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
			return evicted, fmt.Errorf("chain: evict artifact: %w", err)
		}
		evicted = append(evicted, f.name)
		total -= f.size
	}
	return evicted, nil
}

// Read returns up to limit bytes of a session's artifact from offset, and its size.
func (a *Artifacts) Read(sessionID, ref string, offset, limit int64) ([]byte, int64, error) {
	dir, err := a.sessionDir(sessionID)
	if err != nil || !refPattern.MatchString(ref) {
		return nil, 0, ErrNoArtifact
	}
	if err := a.touch(dir); errors.Is(err, os.ErrNotExist) {
		return nil, 0, ErrNoArtifact
	} else if err != nil {
		return nil, 0, fmt.Errorf("chain: read artifact: %w", err)
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

// touch marks a session's directory used now. Reading is use: under mu, so the
// sweep either sees the read and keeps the session for another retention, or has
// already deleted it and the read finds nothing.
func (a *Artifacts) touch(dir string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	return os.Chtimes(dir, now, now)
}

// sweepInterval checks often enough that a session outlives the retention by at most
// half of it, and at most every 10 minutes.
func (a *Artifacts) sweepInterval() time.Duration {
	return min(max(a.retention/2, time.Second), 10*time.Minute)
}

// Start sweeps every sweepInterval until ctx ends or Stop is called, logging to log
// (nil: nowhere). With retention 0 nothing is ever deleted and no sweeper runs.
func (a *Artifacts) Start(ctx context.Context, log *slog.Logger) error {
	if a.retention == 0 {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop != nil {
		return errors.New("chain: artifact sweeper already started")
	}
	ctx, a.stop = context.WithCancel(ctx)
	a.done = make(chan struct{})
	go func(done chan<- struct{}) {
		defer close(done)
		t := time.NewTicker(a.sweepInterval())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				swept, err := a.sweep(now)
				if err != nil {
					log.Warn("sweeping chain artifacts", "err", err)
				}
				if len(swept) > 0 {
					log.Info("chain artifacts of unused sessions deleted", "sessions", len(swept))
				}
				a.forgetSwept(ctx, log, swept)
			}
		}
	}(a.done)
	return nil
}

// Stop ends the sweeper and waits for it. It is idempotent.
func (a *Artifacts) Stop() {
	a.mu.Lock()
	stop, done := a.stop, a.done
	a.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Sweep deletes, whole, the directory of every session whose last use is more than
// the retention before now, and in the others the temporary files a failed Put left
// that long. It returns how many sessions it deleted.
func (a *Artifacts) Sweep(now time.Time) (int, error) {
	swept, err := a.sweep(now)
	return len(swept), err
}

// sweptSession is a session whose artifacts a sweep deleted, and when: an artifact
// the session stored after that is a new one.
type sweptSession struct {
	id string
	at time.Time
}

// forgetSwept notes in the directory, if any, that this replica no longer holds the
// swept sessions' artifacts, so that a read of one is not found from any replica.
func (a *Artifacts) forgetSwept(ctx context.Context, log *slog.Logger, swept []sweptSession) {
	if a.replicas == nil {
		return
	}
	for _, s := range swept {
		if err := a.replicas.Swept(ctx, s.id, s.at); err != nil {
			log.Warn("forgetting the swept chain artifacts of a session", "session_id", s.id, "err", err)
		}
	}
}

// sweep is Sweep, returning the sessions it deleted.
func (a *Artifacts) sweep(now time.Time) ([]sweptSession, error) {
	if a.retention == 0 {
		return nil, nil
	}
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, fmt.Errorf("chain: sweep artifacts: %w", err)
	}
	cutoff := now.Add(-a.retention)
	var deleted []sweptSession
	var errs []error
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), doomedPrefix) {
			// Set aside by a sweep that did not finish deleting it (the process ended).
			if err := os.RemoveAll(filepath.Join(a.dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("chain: sweep artifacts: %w", err))
			}
			continue
		}
		if !e.IsDir() || !sessionPattern.MatchString(e.Name()) {
			continue
		}
		gone, at, err := a.sweepSession(filepath.Join(a.dir, e.Name()), cutoff)
		if gone {
			deleted = append(deleted, sweptSession{e.Name(), at})
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return deleted, errors.Join(errs...)
}

// doomedPrefix names a session directory the sweep has set aside for deletion. Session
// names cannot start with a dot, so it is never a session's.
const doomedPrefix = ".deleting-"

// sweepSession judges a session's directory under mu, as Put holds it, so that a Put
// never finds its directory removed half-way and nothing is added between judging and
// removing. A directory to delete is renamed aside under mu and deleted after: a large
// one would otherwise hold every session's Put and Read for as long as that takes.
func (a *Artifacts) sweepSession(dir string, cutoff time.Time) (gone bool, at time.Time, err error) {
	doomed, at, err := a.judgeSession(dir, cutoff)
	if doomed == "" || err != nil {
		return false, at, err
	}
	if err := os.RemoveAll(doomed); err != nil {
		return true, at, fmt.Errorf("chain: sweep artifacts: %w", err)
	}
	return true, at, nil
}

// judgeSession removes the stale temporary files of a session in use, or sets the
// directory of an unused session aside and returns where, and when (under mu: an
// artifact of the session recorded after that is a new one). The caller deletes it.
func (a *Artifacts) judgeSession(dir string, cutoff time.Time) (doomed string, at time.Time, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at = time.Now()
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", at, nil
	}
	if err != nil {
		return "", at, fmt.Errorf("chain: sweep artifacts: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", at, fmt.Errorf("chain: sweep artifacts: %w", err)
	}
	last := fi.ModTime()
	var staleTemp []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		mod := info.ModTime()
		if mod.After(last) {
			last = mod
		}
		if strings.HasPrefix(e.Name(), ".tmp-") && mod.Before(cutoff) {
			staleTemp = append(staleTemp, e.Name())
		}
	}
	if last.Before(cutoff) {
		doomed := filepath.Join(filepath.Dir(dir), doomedPrefix+filepath.Base(dir)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		if err := os.Rename(dir, doomed); err != nil {
			return "", at, fmt.Errorf("chain: sweep artifacts: %w", err)
		}
		return doomed, at, nil
	}
	var errs []error
	for _, name := range staleTemp {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("chain: sweep artifacts: %w", err))
		}
	}
	return "", at, errors.Join(errs...)
}

package builtin

import (
	"crypto/sha256"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// fileGuardKey is where a session's file guard lives in its tool.State.
const fileGuardKey = "builtin.fileguard"

// maxGuardHash is the largest file whose content the guard hashes; larger files are
// compared by size and modification time only.
const maxGuardHash = 64 << 20

// fileStamp is what the guard remembers of a file the session has seen.
type fileStamp struct {
	size   int64
	mtime  time.Time
	sum    [sha256.Size]byte
	hashed bool // sum holds the hash of the whole content
}

// stampOf builds a stamp from a file's info and, when content is whole, its hash.
func stampOf(fi fs.FileInfo, content []byte) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if content != nil && int64(len(content)) == fi.Size() {
		s.sum, s.hashed = sha256.Sum256(content), true
	}
	return s
}

// fileGuard enforces read-before-write for one session: a file that exists may only be
// overwritten or edited when the session has read it (read_file, json_read, or an
// earlier write or edit) and it has not changed on disk since. Files are keyed by their
// physical absolute path, so two names of one file (a symlink and its target) share a
// record.
type fileGuard struct {
	mu   sync.Mutex
	seen map[string]fileStamp
}

// guardFor returns the session's file guard, creating it on first use.
func guardFor(ctx *tool.Context) (*fileGuard, error) {
	if ctx.Session == nil || ctx.Session.State == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "the call has no session state for the file guard")
	}
	return ctx.Session.State.LoadOrStore(fileGuardKey, func() any {
		return &fileGuard{seen: map[string]fileStamp{}}
	}).(*fileGuard), nil
}

// record remembers that the session has seen abs as it is described by s.
func (g *fileGuard) record(abs string, s fileStamp) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen[abs] = s
}

// guardVerdict is the outcome of a check.
type guardVerdict int

const (
	guardOK guardVerdict = iota
	guardUnread
	guardChanged
)

// check decides whether the session may replace the existing file abs, whose current
// info is fi. content returns its current bytes when the guard needs to hash them
// (nil to give up on the hash, e.g. for files above maxGuardHash). A file whose size
// differs from the one read has changed; one whose size matches is compared by its
// SHA-256, so that a touch or a rewrite with identical content does not force a
// re-read; files too large to hash fall back to the modification time.
func (g *fileGuard) check(abs string, fi fs.FileInfo, content func() ([]byte, error)) (guardVerdict, error) {
	g.mu.Lock()
	rec, ok := g.seen[abs]
	g.mu.Unlock()
	switch {
	case !ok:
		return guardUnread, nil
	case rec.size != fi.Size():
		return guardChanged, nil
	case !rec.hashed || fi.Size() > maxGuardHash:
		if rec.mtime.Equal(fi.ModTime()) {
			return guardOK, nil
		}
		return guardChanged, nil
	}
	data, err := content()
	if err != nil {
		return guardOK, err
	}
	if data == nil {
		if rec.mtime.Equal(fi.ModTime()) {
			return guardOK, nil
		}
		return guardChanged, nil
	}
	if sha256.Sum256(data) != rec.sum {
		return guardChanged, nil
	}
	if !rec.mtime.Equal(fi.ModTime()) {
		g.record(abs, stampOf(fi, data))
	}
	return guardOK, nil
}

// guardError is the is_error a refused write gets: kind denied, since nothing is wrong
// with the arguments, the tool declines to act until the model has seen the file.
func guardError(v guardVerdict, t fileTarget, toolName string) error {
	if v == guardUnread {
		return tool.Errorf(tool.KindDenied,
			"%q exists and has not been read in this session; read it with read_file (or json_read) first, then call %s again. Nothing was written.",
			t.given, toolName)
	}
	return tool.Errorf(tool.KindDenied,
		"%q has changed on disk since this session last read it; read it again with read_file (or json_read) and redo the change against its current content. Nothing was written.",
		t.given)
}

// hashingReader feeds what it reads into a running SHA-256, when h is set.
type hashingReader struct {
	r io.Reader
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if h.h != nil && n > 0 {
		_, _ = h.h.Write(p[:n])
	}
	h.n += int64(n)
	return n, err
}

// stampFromHash builds a stamp for a file read whole through a hashingReader.
func stampFromHash(fi fs.FileInfo, hr *hashingReader, whole bool) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if whole && hr.h != nil && hr.n == fi.Size() {
		copy(s.sum[:], hr.h.Sum(nil))
		s.hashed = true
	}
	return s
}

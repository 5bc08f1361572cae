package builtin

import (
	"context"
	"crypto/sha256"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
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

// guardMemory is what one session's file guard remembers in this process, kept in the
// session's tool.State. Files are keyed by their physical absolute path, so two names
// of one file (a symlink and its target) share a record.
type guardMemory struct {
	mu   sync.Mutex
	seen map[string]fileStamp
	// kept holds the files the session has a stamp of in a store that keeps only
	// some stamps (Stamps.Replicated false): those this process put there, and those
	// it found there when it first used the guard (loadKept), put by an earlier one.
	// Their later stamps are written there too, so that the stamp the store holds is
	// never older than what the session has seen since.
	kept     map[string]bool
	keptOnce sync.Once
}

func (m *guardMemory) get(abs string) (fileStamp, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.seen[abs]
	return s, ok
}

func (m *guardMemory) put(abs string, s fileStamp) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[abs] = s
}

// keep marks abs as kept in the store and reports whether it already was.
func (m *guardMemory) keep(abs string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.kept[abs]
	m.kept[abs] = true
	return was
}

func (m *guardMemory) isKept(abs string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kept[abs]
}

// FileStamps keeps what sessions' file guards have seen in a store
// (store.FileStampStore): *store.Postgres and *store.SQLite have it.
type FileStamps interface {
	PutFileStamp(ctx context.Context, sessionID, path string, s store.FileStamp) error
	GetFileStamp(ctx context.Context, sessionID, path string) (*store.FileStamp, error)
	FileStampPaths(ctx context.Context, sessionID string) ([]string, error)
}

// Stamps says where the file guard keeps what sessions have seen besides this
// process's memory. The zero value keeps nothing beyond it: a restart forgets it.
type Stamps struct {
	// Store keeps stamps; nil: this process's memory only.
	Store FileStamps
	// Replicated: replicas share Store and a session's calls may land on any of
	// them, so a file read through one must be writable through another: every stamp
	// is written to Store (PostgreSQL). Otherwise one process serves every call, its
	// memory is authoritative, and Store holds only what must outlive it: the stamp a
	// call about to wait for approval was checked against (its tool's Precheck), so
	// that the call, approved after a restart, runs as it would have without one. A
	// read_file then costs no write; a parked call costs one.
	Replicated bool
	// Log receives the stamps that could not be written to Store; nil: discarded.
	Log *slog.Logger
}

// fileGuard enforces read-before-write for one session, as one call sees it: a file
// that exists may only be overwritten or edited when the session has read it
// (read_file, json_read, or an earlier write or edit) and it has not changed on disk
// since. With shared stamps, what the session saw through another replica counts too;
// with kept ones, what it saw before this process started.
type fileGuard struct {
	mem        *guardMemory
	ctx        context.Context
	session    string
	shared     FileStamps // nil: this process's memory only
	replicated bool       // Stamps.Replicated
	log        *slog.Logger
	callID     string
	// forgot: the session was loaded anew in this process and its reads before that
	// are not kept (stamps not replicated), so "not read" may mean "read before".
	forgot bool
}

// guardFor returns the session's file guard for the call ctx, creating the session's
// memory of it on first use.
func guardFor(ctx *tool.Context, stamps Stamps) (*fileGuard, error) {
	if ctx.Session == nil || ctx.Session.State == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "the call has no session state for the file guard")
	}
	mem := ctx.Session.State.LoadOrStore(fileGuardKey, func() any {
		return &guardMemory{seen: map[string]fileStamp{}, kept: map[string]bool{}}
	}).(*guardMemory)
	g := &fileGuard{mem: mem, ctx: ctx, session: ctx.Session.ID, shared: stamps.Store, replicated: stamps.Replicated, log: stamps.Log, callID: ctx.CallID,
		forgot: ctx.Session.Loaded && !stamps.Replicated}
	g.loadKept()
	return g, nil
}

// loadKept marks kept, once per session memory (once per process, or after the
// session was unloaded), the files an earlier process put the session's stamp of in a
// store that keeps only some stamps: one query per session, none per read. Should the
// store not answer, their later stamps are not written there, and a restart may
// check a later write against the stamp an earlier process kept.
func (g *fileGuard) loadKept() {
	if g.shared == nil || g.session == "" || g.replicated {
		return
	}
	g.mem.keptOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stampWriteTimeout)
		defer cancel()
		paths, err := g.shared.FileStampPaths(ctx, g.session)
		if err != nil {
			if g.log != nil {
				g.log.Warn("listing the files whose stamps the store keeps for a session failed; later stamps of those files stay in memory only, "+
					"so after a restart a write may be checked against an older read", "session_id", g.session, "call_id", g.callID, "err", err)
			}
			return
		}
		for _, p := range paths {
			g.mem.keep(p)
		}
	})
}

// record remembers that the session has seen abs as it is described by s, and shares
// it (replicated, or abs kept). A stamp that cannot be shared costs only a refusal on
// another replica or after a restart, which asks the model to read the file again: the
// read or write that saw it stands.
func (g *fileGuard) record(abs string, s fileStamp) {
	g.mem.put(abs, s)
	if g.shared != nil && g.session != "" && (g.replicated || g.mem.isKept(abs)) {
		if err := g.put(abs, s); err != nil && g.log != nil {
			g.log.Warn("writing a file stamp to the store failed; the file may have to be read again on another replica or after a restart",
				"session_id", g.session, "call_id", g.callID, "path", abs, "err", err)
		}
	}
}

// keep writes to the store the stamp the session's memory holds of abs, when the
// store keeps only some stamps: a call that passed the guard on it is about to wait
// for approval, and must pass it again if approved after a restart. With replicated
// stamps the store has it already (record), or a newer one from another replica.
func (g *fileGuard) keep(abs string) {
	if g.shared == nil || g.session == "" || g.replicated {
		return
	}
	s, ok := g.mem.get(abs)
	if !ok {
		return // a new file: nothing to keep
	}
	g.mem.keep(abs)
	if err := g.put(abs, s); err != nil && g.log != nil {
		g.log.Error("writing the file stamp a call waiting for approval was checked against failed; "+
			"approved after a restart, the call is refused until the file is read again",
			"session_id", g.session, "call_id", g.callID, "path", abs, "err", err)
	}
}

// put writes s to the store as the session's stamp of abs.
func (g *fileGuard) put(abs string, s fileStamp) error {
	st := store.FileStamp{Size: s.size, ModTime: s.mtime}
	if s.hashed {
		st.SHA256 = s.sum[:]
	}
	// Written even when the call was just cancelled (its read stands), but not
	// waited for longer than a stalled database deserves.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stampWriteTimeout)
	defer cancel()
	return g.shared.PutFileStamp(ctx, g.session, abs, st)
}

// stampWriteTimeout bounds the guard's writes (the read or write a stamp describes
// is done) and its one listing of a session's kept files.
const stampWriteTimeout = 5 * time.Second

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
// re-read; files too large to hash fall back to the modification time. When this
// process's memory refuses, the shared stamp decides: the session may have read the
// file, or written it last, through another replica. When stamps are not replicated,
// the store is asked only about a file this process's memory has no record of (the
// session may have seen it before a restart): for one it has, memory is the newest.
func (g *fileGuard) check(abs string, fi fs.FileInfo, content func() ([]byte, error)) (guardVerdict, error) {
	content = onceContent(content)
	rec, ok := g.mem.get(abs)
	v := guardUnread
	if ok {
		var err error
		if v, err = g.compare(abs, rec, fi, content); err != nil || v == guardOK {
			return v, err
		}
	}
	if g.shared == nil || g.session == "" || (ok && !g.replicated) {
		return v, nil
	}
	st, err := g.shared.GetFileStamp(g.ctx, g.session, abs)
	if err != nil {
		return v, nil // none, or the store cannot say: this replica's verdict stands
	}
	shared := fileStamp{size: st.Size, mtime: st.ModTime}
	if len(st.SHA256) == sha256.Size {
		copy(shared.sum[:], st.SHA256)
		shared.hashed = true
	}
	if ok && shared.size == rec.size && shared.mtime.Equal(rec.mtime) && shared.sum == rec.sum && shared.hashed == rec.hashed {
		return v, nil // what this replica saw
	}
	sv, err := g.compare(abs, shared, fi, content)
	if err != nil || sv != guardOK {
		// Read through another replica and changed since, said as such.
		return max(v, sv), err
	}
	g.mem.put(abs, shared)
	return guardOK, nil
}

// compare checks the file abs, whose current info is fi, against rec (see check).
func (g *fileGuard) compare(abs string, rec fileStamp, fi fs.FileInfo, content func() ([]byte, error)) (guardVerdict, error) {
	switch {
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
		// Same content, touched: remember the new time here; sharing it would cost a
		// write for what the hash already settles.
		g.mem.put(abs, stampOf(fi, data))
	}
	return guardOK, nil
}

// onceContent calls content at most once, for check's two comparisons.
func onceContent(content func() ([]byte, error)) func() ([]byte, error) {
	var (
		done bool
		data []byte
		err  error
	)
	return func() ([]byte, error) {
		if !done {
			data, err = content()
			done = true
		}
		return data, err
	}
}

// refusal is the is_error a refused write gets: kind denied, since nothing is wrong
// with the arguments, the tool declines to act until the model has seen the file.
func (g *fileGuard) refusal(v guardVerdict, t fileTarget, toolName string) error {
	if v == guardUnread && g.forgot {
		// The model may well have read it, before a restart or an eviction: saying it
		// has not reads as a contradiction.
		return tool.Errorf(tool.KindDenied,
			"%q exists and has not been read since the daemon restarted or this session was reloaded from the store; reads from before that are not kept, so it must be read again: read it with read_file (or json_read), then call %s again. Nothing was written.",
			t.given, toolName)
	}
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

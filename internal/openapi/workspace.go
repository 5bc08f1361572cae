package openapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Workspaces gives a session its sandbox: a file argument given as {path} is read
// from its working directory, and a binary answer the model cannot read is saved in
// it. *sandbox.Manager is one; the file tools resolve paths through the same
// sandboxes, so a path means the same thing to both.
type Workspaces interface {
	For(sess *tool.Session) (sandbox.Sandbox, error)
}

// DownloadDir is the directory of the working directory where binary answers are
// saved.
const DownloadDir = "downloads"

// workspace is the calling session's working directory, opened when a call first
// needs it (a file argument, an answer to save) and closed when the call ends.
type workspace struct {
	o    *Operation
	ctx  *tool.Context
	sb   sandbox.Sandbox
	root *os.Root
	err  error
	done bool
	// sent counts the bytes of files read for the request: max_file_bytes bounds
	// them together, not each.
	sent int64
}

func (o *Operation) workspace(ctx *tool.Context) *workspace { return &workspace{o: o, ctx: ctx} }

// available reports whether the call has a session and the source a way to its
// working directory; without, answers are shown as they were before files could be
// saved, and {path} arguments are refused.
func (w *workspace) available() bool {
	return w.o.workspaces != nil && w.ctx != nil && w.ctx.Session != nil
}

// open opens the working directory once.
func (w *workspace) open() error {
	if w.done {
		return w.err
	}
	w.done = true
	switch {
	case w.o.workspaces == nil:
		w.err = tool.Errorf(tool.KindUnavailable, "the %s API's tools have no access to working directories here, so a file cannot be given by path; give its content or content_base64", w.o.spec.Source)
		return w.err
	case w.ctx == nil || w.ctx.Session == nil:
		w.err = tool.Errorf(tool.KindUnavailable, "this call has no session working directory, so a file cannot be given by path; give its content or content_base64")
		return w.err
	}
	sb, err := w.o.workspaces.For(w.ctx.Session)
	if err != nil {
		w.err = tool.Errorf(tool.KindUnavailable, "the session's working directory is not available: %v", err)
		return w.err
	}
	root, err := os.OpenRoot(sb.Root())
	if err != nil {
		w.err = tool.Errorf(tool.KindUnavailable, "the working directory cannot be opened: %v", err)
		return w.err
	}
	w.sb, w.root = sb, root
	return nil
}

func (w *workspace) Close() {
	if w.root != nil {
		_ = w.root.Close()
	}
}

// rel resolves a path a model gave the way the file tools do (Sandbox.Resolve: ".."
// and symlinks leading out, the data dir, NUL bytes refused) and returns it relative
// to the root, for the os.Root, which also keeps a symlink swapped in after the check
// from leading out.
func (w *workspace) rel(given string) (string, error) {
	abs, err := w.sb.Resolve(given)
	if err != nil {
		return "", pathError(given, err)
	}
	rel, err := filepath.Rel(w.sb.Root(), abs)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", tool.Errorf(tool.KindDenied, "path %q is outside the working directory", given)
	}
	return rel, nil
}

// pathError classifies an error about a path a model gave: outside the working
// directory (by "..", an absolute path or a symlink) or in the daemon's data dir is
// denied, a path that cannot name a file (a NUL byte, a loop, a missing or non-file
// component) is invalid.
func pathError(given string, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrOutsideRoot) || errors.Is(err, sandbox.ErrHidden):
		return tool.Errorf(tool.KindDenied, "%v", err)
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: no such file in the working directory", given)
	case errors.Is(err, sandbox.ErrInvalidPath) || errors.Is(err, sandbox.ErrSymlinkLoop) || errors.Is(err, sandbox.ErrNotDir):
		return tool.Errorf(tool.KindInvalidArgs, "%v", err)
	case errors.Is(err, syscall.ELOOP):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: too many levels of symbolic links", given)
	case errors.Is(err, syscall.ENOTDIR):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: a component of it is a file, not a directory", given)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: a name in it is too long", given)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf(tool.KindDenied, "path %q: permission denied", given)
	}
	var pe *os.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		// os.Root: a symlink swapped in after the check leads out.
		return tool.Errorf(tool.KindDenied, "path %q is outside the working directory", given)
	}
	return tool.Errorf(tool.KindFailed, "path %q: %v", given, err)
}

// readFile reads a regular file of the working directory named by a model and
// returns its name. The files one call sends are at most max bytes together.
func (w *workspace) readFile(given string, max int64) (string, []byte, error) {
	if strings.TrimSpace(given) == "" {
		return "", nil, tool.Errorf(tool.KindInvalidArgs, "path is empty; give a file path relative to the working directory")
	}
	if err := w.open(); err != nil {
		return "", nil, err
	}
	rel, err := w.rel(given)
	if err != nil {
		return "", nil, err
	}
	if rel == "." {
		return "", nil, tool.Errorf(tool.KindInvalidArgs, "path %q names the working directory; give a file", given)
	}
	// O_NONBLOCK: a named pipe put there does not hold the call.
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", nil, pathError(given, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, pathError(given, err)
	}
	if fi.IsDir() {
		return "", nil, tool.Errorf(tool.KindInvalidArgs, "path %q is a directory, not a file", given)
	}
	if !fi.Mode().IsRegular() {
		return "", nil, tool.Errorf(tool.KindInvalidArgs, "path %q is not a regular file", given)
	}
	left := max - w.sent
	tooBig := func(n int64) error {
		if w.sent > 0 {
			return tool.Errorf(tool.KindInvalidArgs, "path %q is %d bytes; the files one call sends from the working directory may be at most %d bytes together (max_file_bytes), and %d are taken", given, n, max, w.sent)
		}
		return tool.Errorf(tool.KindInvalidArgs, "path %q is %d bytes; a file sent from the working directory may be at most %d bytes (max_file_bytes)", given, n, max)
	}
	if fi.Size() > left {
		return "", nil, tooBig(fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, left+1))
	if err != nil {
		return "", nil, pathError(given, err)
	}
	if int64(len(data)) > left { // it grew since the stat
		return "", nil, tooBig(int64(len(data)))
	}
	w.sent += int64(len(data))
	// The name the model gave, not its target's: latest.pdf, a link to v3.pdf, is sent
	// as latest.pdf.
	return filepath.Base(filepath.Clean(given)), data, nil
}

// saved is an answer written to the working directory.
type saved struct {
	Path      string `json:"path"` // relative to the working directory, with slashes
	MediaType string `json:"media_type"`
	Bytes     int64  `json:"bytes"`
	SHA256    string `json:"sha256"`
}

// errTooLarge is a body longer than max_file_bytes; nothing of it is kept.
var errTooLarge = errors.New("too large")

// readError is a failure to read the answer (the connection, the call's time), as
// opposed to a failure to write it.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// save writes head and then the rest of body to a new file of DownloadDir named name
// (or name-2, name-3 … when it is taken: nothing is overwritten), at most max bytes
// in all. The bytes go to a hidden temporary file first, linked under the name once
// whole, so that the name never shows a partial file; a body longer than max, or one
// whose reading fails, leaves nothing behind.
func (w *workspace) save(name, mediaType string, head []byte, body io.Reader, max int64) (saved, error) {
	if int64(len(head)) > max {
		return saved{}, errTooLarge
	}
	if err := w.open(); err != nil {
		return saved{}, err
	}
	dir, err := w.rel(DownloadDir)
	if err != nil {
		return saved{}, err
	}
	if err := w.root.MkdirAll(dir, 0o755); err != nil {
		return saved{}, fmt.Errorf("%s cannot be made: %w", DownloadDir, err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, ".download-"+hex.EncodeToString(rnd[:])+".part")
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return saved{}, err
	}
	defer func() { _ = w.root.Remove(tmp) }()
	h := sha256.New()
	out := io.MultiWriter(f, h)
	n, err := out.Write(head)
	total := int64(n)
	if err == nil {
		var m int64
		m, err = io.Copy(out, readerOnly{io.LimitReader(body, max-total+1)})
		total += m
		var re readError
		if err != nil && !errors.As(err, &re) {
			err = fmt.Errorf("writing the file: %w", err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return saved{}, err
	}
	if total > max {
		return saved{}, errTooLarge
	}
	stem, ext := splitExt(name)
	for i := 1; i <= 100; i++ {
		final := name
		if i > 1 {
			final = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		err := w.root.Link(tmp, filepath.Join(dir, final))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return saved{}, err
		}
		return saved{Path: filepath.ToSlash(filepath.Join(dir, final)), MediaType: mediaType, Bytes: total, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
	}
	return saved{}, fmt.Errorf("%s and 99 numbered names after it are taken in %s", name, DownloadDir)
}

// readerOnly marks the errors of reading the answer, and hides io.WriterTo so that
// io.Copy reads through it.
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = readError{err}
	}
	return n, err
}

// splitExt splits a file name before its extension; a compound archive extension
// (.tar.gz) stays whole, so that report.tar.gz is followed by report-2.tar.gz.
func splitExt(name string) (string, string) {
	lower := strings.ToLower(name)
	for _, e := range []string{".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst"} {
		if strings.HasSuffix(lower, e) && len(name) > len(e) {
			return name[:len(name)-len(e)], name[len(name)-len(e):]
		}
	}
	ext := filepath.Ext(name)
	if ext == name {
		return name, ""
	}
	return strings.TrimSuffix(name, ext), ext
}

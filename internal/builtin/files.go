// This file and the other files*.go, search*.go, jsonfile*.go and guard*.go files are
// the file tools: reading, writing and editing files, listing and searching the tree,
// and reading and writing JSON documents, all confined to the session's sandbox root.
//
// Every path a model gives goes through Sandbox.Resolve, which refuses ".." escapes,
// NUL bytes, absolute paths outside the root, symlink loops and symlinks leading out of
// it, and returns a physical path. The I/O itself then goes through an os.Root opened
// on the sandbox root with the path relative to it, so that even a symlink swapped in
// between the check and the use cannot lead outside the root; what is opened is then
// checked not to lie in a directory hidden from the session either (confined), and a
// write renames its temporary file into a directory it opened once.
package builtin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Limits shared by the file tools.
const (
	// maxTextFile is the largest text file read whole, edited or parsed as JSON.
	maxTextFile = 10 << 20
	// maxImageFile is the largest image read_file returns.
	maxImageFile = 5 << 20
	// maxLineChars is where long lines are cut in read_file and grep output.
	maxLineChars = 2000
	// outputBudget is how many bytes of listing or file text one result shows; the
	// dispatcher's token budget (12000 tokens by default) holds about this much.
	outputBudget = 48 << 10
	// sniffLen is how much of a file is looked at to tell text from binary.
	sniffLen = 8 << 10
	// newFileMode is the mode of files the tools create.
	newFileMode fs.FileMode = 0o644
	// newDirMode is the mode of parent directories write tools create.
	newDirMode fs.FileMode = 0o755
)

// FileTools returns the file tools: read_file, write_file, edit_file, multi_edit,
// list_dir, tree, glob, grep, json_read and json_write, all working in the sandboxes m
// hands out. The tools that change files share a per-session file guard (see guard.go);
// stamps says what of what the guard has seen is kept in a store, for the other
// replicas of a shared store or for calls approved after a restart.
func FileTools(m *sandbox.Manager, stamps Stamps) []tool.Tool {
	d := fileDeps{m: m, stamps: stamps}
	return []tool.Tool{
		&readFile{d}, &writeFile{d}, &editFile{d}, &multiEdit{d},
		&listDir{m: m, tree: false}, &listDir{m: m, tree: true},
		&globFiles{m}, &grepFiles{m},
		&jsonRead{d}, &jsonWrite{d},
	}
}

// fileDeps is what the tools that read or replace one file work with.
type fileDeps struct {
	m      *sandbox.Manager
	stamps Stamps // the zero value: the guard is this process's memory only
}

// fileSpec fills the fields every file tool shares.
func fileSpec(s tool.Spec, readOnly bool) tool.Spec {
	s.Flags = tool.Flags{ReadOnly: readOnly, ConcurrencySafe: readOnly}
	s.Risk = tool.RiskMedium
	if readOnly {
		s.Risk = tool.RiskSafe
	}
	s.Mode = tool.ModeDirect
	s.Source = "builtin"
	return s
}

// fileRoot is the session's sandbox root opened for one call.
type fileRoot struct {
	sb     sandbox.Sandbox
	root   *os.Root
	rd     string          // the physical root
	hidden map[string]bool // Sandbox.Hidden (dirs and files) as slash paths relative to the root: walks skip them
	// hiddenAbs is Sandbox.Hidden: what is opened is checked against it (confined).
	hiddenAbs []string
	tools     tool.Catalog // the session's tools, for advice naming them (nil: all)
}

// openFileRoot opens the session's sandbox root; the caller closes it.
// openFile is how every single-file tool starts: it opens the session's file root,
// resolves path to a file inside it and fetches the session's file guard. The caller
// closes the root.
func openFile(d fileDeps, ctx *tool.Context, path string) (*fileRoot, fileTarget, *fileGuard, error) {
	w, err := openFileRoot(d.m, ctx)
	if err != nil {
		return nil, fileTarget{}, nil, err
	}
	tg, err := w.resolveFile(path)
	if err == nil {
		var guard *fileGuard
		if guard, err = guardFor(ctx, d.stamps); err == nil {
			return w, tg, guard, nil
		}
	}
	w.Close()
	return nil, fileTarget{}, nil, err
}

func openFileRoot(m *sandbox.Manager, ctx *tool.Context) (*fileRoot, error) {
	sb, err := sandboxFor(m, ctx)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(sb.Root())
	if err != nil {
		return nil, tool.Errorf(tool.KindUnavailable, "the working directory cannot be opened: %v", err)
	}
	w := &fileRoot{sb: sb, root: root, rd: sb.Root(), hiddenAbs: sb.Hidden()}
	if ctx.Session != nil {
		w.tools = ctx.Session.Tools
	}
	for _, h := range sb.Hidden() {
		if rel, err := filepath.Rel(w.rd, h); err == nil && filepath.IsLocal(rel) {
			if w.hidden == nil {
				w.hidden = map[string]bool{}
			}
			w.hidden[filepath.ToSlash(rel)] = true
		}
	}
	return w, nil
}

func (w *fileRoot) Close() { _ = w.root.Close() }

// fileTarget is a path given by a model, resolved inside the root.
type fileTarget struct {
	given string // as the model wrote it
	abs   string // physical, absolute, inside the root
	rel   string // relative to the root ("." for the root itself)
}

// show names the target for the model: relative to the root, with slashes.
func (t fileTarget) show() string { return filepath.ToSlash(t.rel) }

// place names the target in a sentence: "the working directory" rather than ".",
// which a sentence's full stop would turn into "..".
func (t fileTarget) place() string {
	if t.rel == "." {
		return "the working directory"
	}
	return t.show()
}

// resolve confines a model's path to the root.
func (w *fileRoot) resolve(given string) (fileTarget, error) {
	abs, err := w.sb.Resolve(given)
	if err != nil {
		return fileTarget{}, filePathError(given, err)
	}
	rel, err := filepath.Rel(w.rd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fileTarget{}, tool.Errorf(tool.KindInvalidArgs, "path %q is outside the working directory", given)
	}
	return fileTarget{given: given, abs: abs, rel: rel}, nil
}

// resolveFile is resolve for tools that need a file name: a path ending in "/" or
// naming the root itself is refused.
func (w *fileRoot) resolveFile(given string) (fileTarget, error) {
	if strings.TrimSpace(given) == "" {
		return fileTarget{}, tool.Errorf(tool.KindInvalidArgs, "path is empty; give a file path relative to the working directory")
	}
	t, err := w.resolve(given)
	if err != nil {
		return t, err
	}
	if t.rel == "." || strings.HasSuffix(given, "/") {
		return t, tool.Errorf(tool.KindInvalidArgs, "path %q names a directory; give a file path", given)
	}
	return t, nil
}

// filePathError classifies an error about a path the model gave.
func filePathError(given string, err error) error {
	var pe *sandbox.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf(tool.KindNotFound, "%q does not exist", given)
	case errors.As(err, &pe) && errors.Is(err, sandbox.ErrHidden):
		return tool.Errorf(tool.KindDenied, "%v", err)
	case errors.As(err, &pe) && (errors.Is(err, sandbox.ErrOutsideRoot) || errors.Is(err, sandbox.ErrInvalidPath) ||
		errors.Is(err, sandbox.ErrSymlinkLoop) || errors.Is(err, sandbox.ErrNotDir)):
		return tool.Errorf(tool.KindInvalidArgs, "%v", err)
	case errors.Is(err, syscall.ELOOP):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: too many levels of symbolic links", given)
	case errors.Is(err, syscall.ENOTDIR):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: a component of it is a file, not a directory", given)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return tool.Errorf(tool.KindInvalidArgs, "path %q: a name in it is too long", given)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf(tool.KindFailed, "path %q: permission denied", given)
	case errors.As(err, &pe):
		return tool.Errorf(tool.KindFailed, "%v", err) // it names the path
	}
	return tool.Errorf(tool.KindFailed, "path %q: %v", given, err)
}

// describeMode says what kind of file a mode is, for messages.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a regular file"
}

// notAFile is the error for a path that names something other than a regular file.
// For a directory it names the session's tools that show one, and only those.
func (w *fileRoot) notAFile(t fileTarget, m fs.FileMode) error {
	if m.IsDir() {
		var ways []string
		for _, name := range []string{"list_dir", "tree"} {
			if w.has(name) {
				ways = append(ways, name)
			}
		}
		if len(ways) == 0 {
			return tool.Errorf(tool.KindInvalidArgs, "%q is a directory, not a file", t.given)
		}
		return tool.Errorf(tool.KindInvalidArgs, "%q is a directory, not a file; use %s to see what it holds", t.given, strings.Join(ways, " or "))
	}
	return tool.Errorf(tool.KindInvalidArgs, "%q is %s, not a regular file", t.given, describeMode(m))
}

// stat returns what is at t, nil when nothing is.
func (w *fileRoot) stat(t fileTarget) (fs.FileInfo, error) {
	fi, err := w.root.Stat(t.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, filePathError(t.given, err)
	}
	return fi, nil
}

// openRegular opens t for reading, refusing anything but an existing regular file.
// O_NONBLOCK keeps a named pipe swapped in after the check from blocking the call.
func (w *fileRoot) openRegular(t fileTarget) (*os.File, fs.FileInfo, error) {
	f, err := w.root.OpenFile(t.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		// A socket cannot be opened at all: say what it is, as for a named pipe.
		if fi, serr := w.root.Stat(t.rel); serr == nil && !fi.Mode().IsRegular() {
			return nil, nil, w.notAFile(t, fi.Mode())
		}
	}
	if err != nil {
		return nil, nil, filePathError(t.given, err)
	}
	if err := w.confined(f, t.given); err != nil {
		f.Close()
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, filePathError(t.given, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, w.notAFile(t, fi.Mode())
	}
	return f, fi, nil
}

// openNonBlocking opens rel (a slash path relative to the root) for reading without
// blocking on a named pipe that a model may have put where a file or directory was.
func (w *fileRoot) openNonBlocking(rel string) (*os.File, error) {
	f, err := w.root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := w.confined(f, rel); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// confined checks that f, just opened through the root, lies inside the root and
// outside its hidden dirs. The path was checked (Sandbox.Resolve, or listed by a
// walk) before it was opened, and os.Root keeps every open inside the root, but a
// command running meanwhile (a background job) can put a symlink where a file or
// directory of the path was: inside the root still, it may lead into a hidden dir
// (the daemon's data dir, when the root holds it). Where the kernel says the open
// file is settles it. Without hidden dirs inside the root there is nothing to check
// (and no need for /proc): os.Root alone keeps every open inside the root.
func (w *fileRoot) confined(f *os.File, given string) error {
	if len(w.hiddenAbs) == 0 {
		return nil
	}
	var at string
	var err error
	conn, err := f.SyscallConn()
	if err == nil {
		cerr := conn.Control(func(fd uintptr) {
			at, err = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
		})
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return tool.Errorf(tool.KindFailed, "path %q: cannot tell where the opened file lies: %v", given, err)
	}
	at = strings.TrimSuffix(at, " (deleted)")
	leads := !insideDir(at, w.rd)
	for _, h := range w.hiddenAbs {
		leads = leads || insideDir(at, h)
	}
	if leads {
		return tool.Errorf(tool.KindFailed, "path %q changed while it was opened: a symlink put in its way led to %s, outside the working directory or into a directory hidden from the session; nothing was read or written. Check the path (list_dir) and try again",
			given, at)
	}
	return nil
}

// insideDir reports whether the clean absolute path p is dir or lies inside it.
func insideDir(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// readWhole reads a regular file of at most limit bytes for toolName; a larger file is
// refused with what to use instead.
func (w *fileRoot) readWhole(t fileTarget, limit int64, toolName string) ([]byte, fs.FileInfo, error) {
	f, fi, err := w.openRegular(t)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, nil, tool.Errorf(tool.KindFailed, "%q is %s, larger than the %s %s handles%s", t.given, overText(fi.Size(), limit), sizeText(limit), toolName,
			w.tooLargeAdvice(t, toolName))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, filePathError(t.given, err)
	}
	if int64(len(data)) > limit {
		return nil, nil, tool.Errorf(tool.KindFailed, "%q grew beyond %s while it was read", t.given, sizeText(limit))
	}
	return data, fi, nil
}

// writeAtomic replaces (or creates) t with data: a temporary file in the same
// directory, synced, given the mode, then renamed over t. Readers see the old or the
// new content, never a mix. mkdirs creates missing parent directories. The directory
// is opened once (and checked, see confined) and the temporary file is made and
// renamed in it by descriptor, so that a symlink put in the path's way meanwhile
// cannot send the write elsewhere.
func (w *fileRoot) writeAtomic(t fileTarget, data []byte, mode fs.FileMode, mkdirs bool) (fs.FileInfo, error) {
	d, err := w.openParent(t, mkdirs)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := w.confined(d, t.given); err != nil {
		return nil, err
	}
	dir := filepath.Dir(t.rel)
	dfd := int(d.Fd())
	base, tmp := filepath.Base(t.rel), tempName(filepath.Base(t.rel))
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, filePathError(t.given, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return nil, tool.Errorf(tool.KindFailed, "writing %q: %v", t.given, err)
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		return nil, tool.Errorf(tool.KindFailed, "writing %q: %v", t.given, err)
	}
	if err := f.Sync(); err != nil {
		return nil, tool.Errorf(tool.KindFailed, "writing %q: %v", t.given, err)
	}
	fi, err := f.Stat() // what is renamed into place: closing and renaming keep size and mtime
	if err != nil {
		return nil, tool.Errorf(tool.KindFailed, "writing %q: %v", t.given, err)
	}
	if err := f.Close(); err != nil {
		return nil, tool.Errorf(tool.KindFailed, "writing %q: %v", t.given, err)
	}
	done = true
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		if errors.Is(err, syscall.EISDIR) {
			return nil, w.notAFile(t, fs.ModeDir)
		}
		return nil, filePathError(t.given, err)
	}
	return renamedInfo{fi, base}, nil
}

// openParent opens the directory t lies in, from the root one name at a time,
// creating the missing ones when mkdirs. t.rel is physical (Sandbox.Resolve), so no
// name on the way is a symlink unless one was put there since the check: it is not
// followed.
func (w *fileRoot) openParent(t fileTarget, mkdirs bool) (*os.File, error) {
	d, err := w.root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, filePathError(t.given, err)
	}
	dir := filepath.Dir(t.rel)
	if dir == "." {
		return d, nil
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	for _, name := range strings.Split(dir, string(filepath.Separator)) {
		dfd := int(d.Fd())
		fd, err := unix.Openat(dfd, name, flags, 0)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(dfd, name, uint32(newDirMode)); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = unix.Openat(dfd, name, flags, 0)
			}
		}
		if err != nil && (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
			var st unix.Stat_t
			if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = tool.Errorf(tool.KindFailed, "path %q changed while it was written: a symlink was put in place of its directory %q; nothing was written. Check the path (list_dir) and try again",
					t.given, name)
			} else if mkdirs {
				err = tool.Errorf(tool.KindInvalidArgs, "cannot create the parent directories of %q: a component is a file", t.given)
			} else {
				err = filePathError(t.given, err)
			}
		} else if err != nil {
			err = filePathError(t.given, err)
		}
		d.Close()
		if err != nil {
			return nil, err
		}
		d = os.NewFile(uintptr(fd), name)
	}
	return d, nil
}

// renamedInfo is the FileInfo of the temporary file under the name it was renamed to.
type renamedInfo struct {
	fs.FileInfo
	name string
}

func (r renamedInfo) Name() string { return r.name }

// maxNameLen is the longest name of one directory entry (NAME_MAX).
const maxNameLen = 255

// tempName is the name of the temporary file a write of base goes through: hidden,
// random, and naming base as far as the length of a name allows, cut on a character
// boundary, so that base itself may be as long as any name.
func tempName(base string) string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	suffix := ".tmp-" + hex.EncodeToString(rnd[:])
	if room := maxNameLen - len(".") - len(suffix); len(base) > room {
		cut := base[:room]
		for utf8.ValidString(base) && !utf8.ValidString(cut) {
			cut = cut[:len(cut)-1]
		}
		base = cut
	}
	return "." + base + suffix
}

// has reports whether the session may call the named tool.
func (w *fileRoot) has(name string) bool {
	if w.tools == nil {
		return true
	}
	return catalogHas(w.tools, name)
}

// tooLargeAdvice is what a refusal of a file too large for toolName suggests instead:
// the session's tools that work on such a file (grep searches a named file whatever
// its size and prints line numbers; read_file reads a part with offset and limit;
// execute_command runs sed or jq on the whole file). "" when it has none of them.
func (w *fileRoot) tooLargeAdvice(t fileTarget, toolName string) string {
	var ways []string
	isJSON := strings.HasPrefix(toolName, "json_")
	if w.has("grep") {
		ways = append(ways, fmt.Sprintf("find the lines with grep (path %q; it shows line numbers)", t.given))
	}
	if w.has("read_file") {
		ways = append(ways, "read them with read_file with offset and limit")
	}
	if w.has("execute_command") {
		q := shellQuote(t.given)
		switch {
		case toolName == "json_read":
			ways = append(ways, fmt.Sprintf("query it with execute_command and jq if it is installed (e.g. jq '.key' %s)", q))
		case isJSON:
			ways = append(ways, fmt.Sprintf("change it with execute_command and jq if it is installed (e.g. jq '.key = 1' %s > %s.new && mv %s.new %s)", q, q, q, q))
		default:
			ways = append(ways, fmt.Sprintf("change lines with execute_command and sed (e.g. sed -i '120s/old/new/' %s)", q))
		}
	}
	if len(ways) == 0 {
		return ""
	}
	advice := "; instead, " + strings.Join(ways, ", ") + "."
	if toolName != "json_read" {
		advice += " Nothing was changed."
	}
	return advice
}

// shellQuote quotes s for bash (execute_command's shell) when it needs it; a name
// bash cannot spell (a NUL byte) is single-quoted as it is.
func shellQuote(s string) string {
	if q, err := syntax.Quote(s, syntax.LangBash); err == nil {
		return q
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// overText is the size of something over limit: in bytes when sizeText would round
// it to the limit's own text ("10.0 MiB, larger than the 10.0 MiB…").
func overText(n, limit int64) string {
	if sizeText(n) == sizeText(limit) {
		return fmt.Sprintf("%s (%d bytes, %d over)", sizeText(n), n, n-limit)
	}
	return sizeText(n)
}

// sizeText renders a byte count for a model.
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return countOf(n, "byte", "bytes")
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// textResult is a successful result with one text block and optional structured and
// details values (nil leaves them out).
func fileResult(text string, structured, details any) (*tool.Result, error) {
	res := tool.TextResult(text)
	if structured != nil {
		b, err := marshalNoEscape(structured)
		if err != nil {
			return nil, err
		}
		res.Structured = b
	}
	if details != nil {
		b, err := marshalNoEscape(details)
		if err != nil {
			return nil, err
		}
		res.Details = b
	}
	return res, nil
}

// callEndError turns a context's end into the matching error.
func callEndError(ctx *tool.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return tool.Errorf(tool.KindTimeout, "the call's deadline passed")
	}
	return tool.Errorf(tool.KindCancelled, "the call was cancelled")
}

// marshalNoEscape is json.Marshal without HTML escaping: results are read by models and
// programs, not embedded in web pages, and "<" reads better than "\u003c".
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

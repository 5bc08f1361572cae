package builtin

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// Walk control: a callback returns errSkipDir to keep the walk out of a directory
// and errStopWalk to end it.
var (
	errSkipDir  = errors.New("skip this directory")
	errStopWalk = errors.New("stop the walk")
)

// walkEntry is one thing a walk found.
type walkEntry struct {
	rel   string      // slash path relative to the root
	name  string      // base name
	depth int         // 1 for the entries of the start directory
	last  bool        // the last entry shown of its directory
	mode  fs.FileMode // the type bits of the entry itself
	info  fs.FileInfo // the entry's, or its target's for a symlink kept inside the root; may be nil
	isDir bool        // a directory, or a symlink to one inside the root
	// For symlinks: the target as written, the target's path relative to the root (with
	// slashes) when it stays inside the root, and why it is not followed otherwise.
	link, target, broken string
}

// file is the path to open to read the entry's content (its target for a symlink).
func (e walkEntry) file() string {
	if e.mode&fs.ModeSymlink != 0 {
		return e.target
	}
	return e.rel
}

// treeWalker walks a directory tree of a fileRoot depth-first in name order. It never
// leaves the root: directories are read through the os.Root, every symlink met is
// resolved with Sandbox.Resolve, and symlinks are never descended into (a symlink to
// a directory inside the root is reported, not followed, which also rules out cycles);
// symlinks that lead outside the root, loop or dangle are reported as broken.
type treeWalker struct {
	w        *fileRoot
	ctx      context.Context
	ignore   bool // honour .gitignore files (and skip what they exclude)
	hidden   bool // include entries whose name starts with "."
	maxDepth int  // levels below the start directory to visit; 0 means all
	stat     bool // stat every entry (sizes and modification times)

	hiddenSkipped  int // entries left out for starting with "."
	ignoredSkipped int // entries left out by .gitignore rules
	unreadable     int // directories that could not be read
}

// walk visits the entries below start (a directory, as a path relative to the root).
func (wk *treeWalker) walk(start string, fn func(walkEntry) error) error {
	start = path.Clean(filepath.ToSlash(start))
	var rules ignoreRules
	if wk.ignore && start != "." {
		// The .gitignore files of the directories above the start apply too, but not
		// their rules that exclude the start or a directory on the way to it: a
		// directory named explicitly is searched, as a file named explicitly is, also
		// when the rule excluding it is a "*" that would exclude all below it too
		// (.skills/.gitignore, which keeps the skill tool's copies out of git).
		parts := strings.Split(start, "/")
		for i := range parts {
			rules = rules.with(wk.readIgnore(path.Join(append([]string{"."}, parts[:i]...)...)))
			if p := path.Join(parts[:i+1]...); rules.ignored(p, true) {
				rules = rules.sparing(p, true)
			}
		}
	}
	err := wk.dir(start, 0, rules, fn)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

func (wk *treeWalker) dir(rel string, depth int, rules ignoreRules, fn func(walkEntry) error) error {
	if err := wk.ctx.Err(); err != nil {
		return err
	}
	d, err := wk.w.openNonBlocking(rel)
	if err != nil {
		if depth == 0 {
			return filePathError(rel, err)
		}
		wk.unreadable++
		return nil
	}
	dirents, err := d.ReadDir(-1)
	d.Close()
	if err != nil && len(dirents) == 0 {
		if depth == 0 {
			return filePathError(rel, err)
		}
		wk.unreadable++
		return nil
	}
	if wk.ignore {
		own := ignoreRules(wk.readIgnore(rel))
		if depth == 0 && rel != "." {
			// The start's own rules that exclude its .gitignore exclude everything in it
			// ("*": .skills, a virtualenv, a cache keeping itself out of git); named
			// explicitly, it is searched. Its other rules apply.
			own = own.sparing(path.Join(rel, ".gitignore"), false)
		}
		rules = rules.with(own)
	}
	slices.SortFunc(dirents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	entries := make([]walkEntry, 0, len(dirents))
	for _, de := range dirents {
		name := de.Name()
		if !wk.hidden && strings.HasPrefix(name, ".") {
			wk.hiddenSkipped++
			continue
		}
		e := wk.entry(rel, depth+1, de)
		if wk.w.hidden[e.rel] {
			continue // the daemon's data dir or config file: Resolve refuses it, walks do not show it
		}
		if wk.ignore && rules.ignored(e.rel, e.isDir) {
			wk.ignoredSkipped++
			continue
		}
		entries = append(entries, e)
	}
	for i, e := range entries {
		e.last = i == len(entries)-1
		err := fn(e)
		switch {
		case errors.Is(err, errSkipDir):
			continue
		case err != nil:
			return err
		}
		descend := e.isDir && e.mode.IsDir() && e.name != ".git" && (wk.maxDepth == 0 || e.depth < wk.maxDepth)
		if descend {
			if err := wk.dir(e.rel, e.depth, rules, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry describes one directory entry, resolving it if it is a symlink.
func (wk *treeWalker) entry(dir string, depth int, de fs.DirEntry) walkEntry {
	rel := path.Join(dir, de.Name())
	if dir == "." {
		rel = de.Name()
	}
	e := walkEntry{rel: rel, name: de.Name(), depth: depth, mode: de.Type(), isDir: de.IsDir()}
	if de.Type()&fs.ModeSymlink == 0 {
		if wk.stat {
			e.info, _ = de.Info()
		}
		return e
	}
	e.link, _ = wk.w.root.Readlink(filepath.FromSlash(rel))
	abs, err := wk.w.sb.Resolve(rel)
	if err != nil {
		switch {
		case errors.Is(err, sandbox.ErrOutsideRoot):
			e.broken = "leads outside the working directory"
		case errors.Is(err, sandbox.ErrHiddenFile):
			e.broken = "leads to the daemon's config file"
		case errors.Is(err, sandbox.ErrHidden):
			e.broken = "leads into the daemon's data directory"
		case errors.Is(err, sandbox.ErrSymlinkLoop):
			e.broken = "is in a loop"
		default:
			e.broken = "cannot be resolved"
		}
		return e
	}
	target, err := filepath.Rel(wk.w.rd, abs)
	if err != nil {
		e.broken = "cannot be resolved"
		return e
	}
	fi, err := wk.w.root.Stat(target)
	if err != nil {
		e.broken = "dangles (its target does not exist)"
		return e
	}
	e.target, e.info, e.isDir = filepath.ToSlash(target), fi, fi.IsDir()
	return e
}

// readIgnore reads the rules of the .gitignore in dir, if there is one.
func (wk *treeWalker) readIgnore(dir string) []ignoreRule {
	f, err := wk.w.openNonBlocking(path.Join(dir, ".gitignore"))
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile))
	if err != nil {
		return nil
	}
	return parseIgnore(ignoreBase(dir), data)
}

// walkStart resolves the directory a listing or search starts at ("" is the root).
func (w *fileRoot) walkStart(given string) (fileTarget, error) {
	if given == "" {
		given = "."
	}
	tg, err := w.resolve(given)
	if err != nil {
		return tg, err
	}
	fi, err := w.stat(tg)
	switch {
	case err != nil:
		return tg, err
	case fi == nil:
		return tg, filePathError(given, fs.ErrNotExist)
	case !fi.IsDir():
		return tg, tool.Errorf(tool.KindInvalidArgs, "%q is a file, not a directory; read it with read_file, or give its directory", given)
	}
	return tg, nil
}

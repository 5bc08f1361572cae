package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks matches the kernel's limit on symlinks followed in one lookup (40) with
// room to spare; a loop always hits it.
const maxSymlinks = 255

// maxPathLen rejects absurd inputs before touching the file system.
const maxPathLen = 4096

// resolver maps model-given paths to physical paths inside a root.
type resolver struct {
	// root is absolute, clean and free of symlinks.
	root string
	// alias is the root as it was given (clean); absolute paths may use either form.
	alias string
	// hidden are physical directories strictly inside the root that no path may
	// resolve into (the daemon's data dir when the root contains it).
	hidden []string
	// hiddenFiles are physical files inside the root (outside hidden) that no path
	// may resolve to (the daemon's config file when the root contains it).
	hiddenFiles []string
}

func newResolver(dir string) (resolver, error) {
	if !filepath.IsAbs(dir) {
		return resolver{}, fmt.Errorf("sandbox root %q: must be an absolute path", dir)
	}
	alias := filepath.Clean(dir)
	root, err := filepath.EvalSymlinks(alias)
	if err != nil {
		return resolver{}, fmt.Errorf("sandbox root: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return resolver{}, fmt.Errorf("sandbox root: %w", err)
	}
	if !fi.IsDir() {
		return resolver{}, fmt.Errorf("sandbox root %q: %w", dir, ErrNotDir)
	}
	return resolver{root: root, alias: alias}, nil
}

func within(p, root string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

func (r resolver) inside(p string) bool { return within(p, r.root) }

// Resolve maps path to a physical absolute path inside the root, following symlinks
// the way the kernel would. Relative paths start at the root; absolute paths must
// name something inside it. A path may not contain NUL, climb above the root with
// "..", or pass through a symlink that leads outside it (at any component, the final
// one included), or end inside one of the hidden directories or at a hidden file. Components that do not
// exist yet are kept as given, so the result can name a file about to be created.
func (r resolver) Resolve(path string) (string, error) {
	fail := func(err error, reason string) (string, error) {
		return "", &PathError{Path: path, Root: r.root, Err: err, Reason: reason}
	}
	if strings.IndexByte(path, 0) >= 0 {
		return fail(ErrInvalidPath, "it contains a NUL byte")
	}
	if len(path) > maxPathLen {
		return fail(ErrInvalidPath, fmt.Sprintf("it is longer than %d bytes", maxPathLen))
	}
	start, entered := r.root, true
	if filepath.IsAbs(path) {
		clean := filepath.Clean(path)
		if !r.inside(clean) && !within(clean, r.alias) {
			return fail(ErrOutsideRoot, "absolute paths must lie inside it")
		}
		// Walk from "/" so that symlinks in the host part of the path are followed
		// too; the walk is confined from the moment it enters the root.
		start, entered = "/", false
	}
	links := 0
	out, err := r.walk(start, path, entered, &links)
	if err != nil {
		var pe *PathError
		if errors.As(err, &pe) {
			pe.Path, pe.Root = path, r.root
		}
		return "", err
	}
	if !r.inside(out) {
		return fail(ErrOutsideRoot, "it resolves to "+out)
	}
	for _, h := range r.hidden {
		if within(out, h) {
			return fail(ErrHidden, h)
		}
	}
	for _, h := range r.hiddenFiles {
		if out == h {
			return fail(ErrHiddenFile, h)
		}
	}
	return out, nil
}

// walk resolves rest against dest, which is already physical. entered says whether
// dest has reached the root, after which leaving it is an error.
func (r resolver) walk(dest, rest string, entered bool, links *int) (string, error) {
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			parent := filepath.Dir(dest)
			if entered && !r.inside(parent) {
				return "", &PathError{Err: ErrOutsideRoot, Reason: `".." climbs above it`}
			}
			dest = parent
			continue
		}
		next := filepath.Join(dest, comp)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			// Nothing there yet: a name cannot be a symlink, keep it as given.
			dest = next
			entered = entered || r.inside(dest)
			continue
		case err != nil:
			return "", &PathError{Err: err}
		case fi.Mode()&fs.ModeSymlink == 0:
			dest = next
			entered = entered || r.inside(dest)
			continue
		}
		*links++
		if *links > maxSymlinks {
			return "", &PathError{Err: ErrSymlinkLoop, Reason: "a symlink loop, at " + r.show(next)}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", &PathError{Err: err}
		}
		base, subEntered := dest, entered
		if filepath.IsAbs(target) {
			base, subEntered = "/", false
		}
		resolved, err := r.walk(base, target, subEntered, links)
		if err != nil {
			var pe *PathError
			if errors.As(err, &pe) && errors.Is(pe.Err, ErrOutsideRoot) {
				pe.Reason = fmt.Sprintf("symlink %s points to %q, which leads outside it", r.show(next), target)
			}
			return "", err
		}
		if entered && !r.inside(resolved) {
			return "", &PathError{Err: ErrOutsideRoot,
				Reason: fmt.Sprintf("symlink %s points to %q, outside it", r.show(next), target)}
		}
		dest = resolved
		entered = entered || r.inside(dest)
	}
	return dest, nil
}

// show names p relative to the root when it is inside it.
func (r resolver) show(p string) string {
	if rel, err := filepath.Rel(r.root, p); err == nil && r.inside(p) {
		return fmt.Sprintf("%q", rel)
	}
	return fmt.Sprintf("%q", p)
}

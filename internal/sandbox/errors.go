package sandbox

import (
	"errors"
	"fmt"
)

// Sentinel errors; match them with errors.Is. Their messages are written for a model
// that has to correct its next call.
var (
	ErrOutsideRoot          = errors.New("path is outside the working directory")
	ErrHidden               = errors.New("path is in the daemon's data directory")
	ErrSymlinkLoop          = errors.New("too many levels of symbolic links")
	ErrInvalidPath          = errors.New("invalid path")
	ErrNotDir               = errors.New("not a directory")
	ErrJobNotFound          = errors.New("no such job in this session")
	ErrTooManyJobs          = errors.New("too many running jobs in this session")
	ErrInvalidStream        = errors.New(`stream must be "stdout" or "stderr"`)
	ErrInvalidCommand       = errors.New("invalid command")
	ErrIsolationUnavailable = errors.New("isolated sandbox is not available on this host")
	ErrClosed               = errors.New("sandbox is closed")
	ErrOutputDiscarded      = errors.New("the job's output was discarded")
	ErrWorkdirGone          = errors.New("the session's working directory does not exist any more")
)

// ErrHiddenFile is the ErrHidden of a hidden file (Config.HideFiles) rather than a
// hidden directory; errors.Is(err, ErrHidden) holds for it too.
var ErrHiddenFile error = hiddenFileError{}

type hiddenFileError struct{}

func (hiddenFileError) Error() string        { return "path is a file the daemon hides (its configuration)" }
func (hiddenFileError) Is(target error) bool { return target == ErrHidden }

// ErrJobDropped is an ErrJobNotFound for a job the session had: it ended and was
// dropped with its logs, to keep Config.JobRetention finished jobs.
var ErrJobDropped = fmt.Errorf("%w: it ended and was dropped", ErrJobNotFound)

// PathError describes a path that Resolve refused.
type PathError struct {
	// Path is the path as given.
	Path string
	// Root is the sandbox root.
	Root string
	// Err is one of ErrOutsideRoot, ErrHidden (or ErrHiddenFile), ErrSymlinkLoop, ErrInvalidPath,
	// ErrNotDir or an error from the file system.
	Err error
	// Reason says what went wrong, e.g. `".." climbs above it` or
	// `symlink "a/b" points to "/etc"`.
	Reason string
}

func (e *PathError) Error() string {
	switch {
	case errors.Is(e.Err, ErrOutsideRoot):
		return fmt.Sprintf("path %q is outside the working directory %s (%s); use a path inside it, relative paths are resolved against it",
			e.Path, e.Root, e.Reason)
	case errors.Is(e.Err, ErrHiddenFile):
		return fmt.Sprintf("path %q is %s, the daemon's config file (or another file the daemon hides): it may hold secrets; tools cannot reach it, use another path",
			e.Path, e.Reason)
	case errors.Is(e.Err, ErrHidden):
		return fmt.Sprintf("path %q lies in the daemon's data directory %s, which is inside the working directory but holds the daemon's keys, database and other sessions' files; tools cannot reach it, use another path",
			e.Path, e.Reason)
	case e.Reason != "":
		return fmt.Sprintf("path %q: %v (%s)", e.Path, e.Err, e.Reason)
	default:
		return fmt.Sprintf("path %q: %v", e.Path, e.Err)
	}
}

func (e *PathError) Unwrap() error { return e.Err }

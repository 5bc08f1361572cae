package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sandbox runs commands and resolves paths for one session inside its root.
type Sandbox interface {
	// Root is the physical (symlink-free) root directory.
	Root() string
	// Backend is how commands are confined: BackendNone for local sandboxes.
	Backend() Backend
	// Network reports whether commands may use the network (always true when local).
	Network() bool
	// Resolve maps a path given by a model to a physical path inside the root, or
	// fails with a *PathError (ErrOutsideRoot, ErrHidden, ErrSymlinkLoop, ErrInvalidPath …).
	Resolve(path string) (string, error)
	// Hidden lists the physical directories and files inside the root that Resolve
	// refuses (ErrHidden): the daemon's data dir and config file when the root
	// contains them. Code that walks the root without Resolve must skip them.
	Hidden() []string
	// Start runs c.Command with bash -c. ctx bounds the job's life: when it ends the
	// job is killed; pass context.WithoutCancel(ctx) for a job that outlives a call.
	Start(ctx context.Context, c Cmd) (*Job, error)
	// Job finds a job of this sandbox by id (ErrJobNotFound otherwise).
	Job(id string) (*Job, error)
	// Jobs lists the retained jobs, oldest first.
	Jobs() []*Job
	// Close kills the running jobs, waits for them (up to ctx) and deletes every log.
	Close(ctx context.Context) error
}

// Cmd is a command to start.
type Cmd struct {
	// Command is run with bash -c.
	Command string
	// Dir is the working directory, resolved like any path ("" is the root).
	Dir string
	// Env holds extra "NAME=value" entries, applied over the scrubbed environment.
	Env []string
	// Timeout kills the job when it passes: 0 means Config.DefaultTimeout, NoTimeout
	// none; above Config.MaxTimeout is an error.
	Timeout time.Duration
}

// NoTimeout lets a job run until it exits or is killed (background jobs).
const NoTimeout time.Duration = -1

// maxCommandLen is the kernel's limit on one argument (MAX_ARG_STRLEN) minus the NUL.
const maxCommandLen = 128<<10 - 1

// box is the Sandbox of one session.
type box struct {
	m       *Manager
	res     resolver
	backend Backend
	network bool
	dir     string // holds jobs/ and tmp/
	tmp     string // the commands' TMPDIR
	home    string // the commands' HOME: caches and dotfiles stay out of the workspace

	mu       sync.Mutex
	jobs     map[string]*Job
	order    []*Job
	starting int
	closed   bool
	// dropped holds the ids of the latest jobs evictLocked dropped (at most
	// maxDroppedIDs, oldest first in droppedOrder), so that a question about one is
	// answered as such rather than as an id the session never had.
	dropped      map[string]bool
	droppedOrder []string
}

// maxDroppedIDs bounds the dropped job ids a session remembers (a few dozen bytes each).
const maxDroppedIDs = 1000

func (b *box) Root() string                        { return b.res.root }
func (b *box) Backend() Backend                    { return b.backend }
func (b *box) Network() bool                       { return b.network }
func (b *box) Resolve(path string) (string, error) { return b.res.Resolve(path) }
func (b *box) Hidden() []string {
	return slices.Concat(b.res.hidden, b.res.hiddenFiles)
}

func (b *box) Job(id string) (*Job, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.jobs[id]; ok {
		return j, nil
	}
	if b.dropped[id] {
		return nil, fmt.Errorf("%w: %q", ErrJobDropped, id)
	}
	return nil, fmt.Errorf("%w: %q", ErrJobNotFound, id)
}

func (b *box) Jobs() []*Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Job(nil), b.order...)
}

func (b *box) Start(ctx context.Context, c Cmd) (*Job, error) {
	cfg := b.m.cfg
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(c.Command) == "":
		return nil, fmt.Errorf("%w: the command is empty", ErrInvalidCommand)
	case strings.IndexByte(c.Command, 0) >= 0:
		return nil, fmt.Errorf("%w: the command contains a NUL byte", ErrInvalidCommand)
	case len(c.Command) > maxCommandLen:
		return nil, fmt.Errorf("%w: the command is %d bytes, the limit is %d; write it to a script file and run that",
			ErrInvalidCommand, len(c.Command), maxCommandLen)
	}
	timeout := c.Timeout
	switch {
	case timeout == 0:
		timeout = cfg.DefaultTimeout
	case timeout > cfg.MaxTimeout:
		return nil, fmt.Errorf("%w: timeout %s exceeds the maximum %s", ErrInvalidCommand, timeout, cfg.MaxTimeout)
	case timeout < 0:
		timeout = 0
	}
	if fi, err := os.Stat(b.res.root); err != nil || !fi.IsDir() {
		// Removed (or replaced) since the session began: no cwd the command gives
		// can be right, and naming it would send the model after the wrong thing.
		return nil, fmt.Errorf("%w: %s was removed or moved since the session began; commands can run again once it is back",
			ErrWorkdirGone, b.res.alias)
	}
	dir, err := b.res.Resolve(c.Dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		reason := "it does not exist"
		if err == nil {
			reason = "it is a file"
		}
		return nil, &PathError{Path: c.Dir, Root: b.res.root, Err: ErrNotDir, Reason: reason}
	}
	env, err := buildEnv(os.Environ(), cfg.EnvAllow, b.home, b.tmp, b.m.caps.Bash, cfg.Env, c.Env)
	if err != nil {
		return nil, err
	}
	if err := b.reserve(); err != nil {
		return nil, err
	}
	defer func() {
		b.mu.Lock()
		b.starting--
		b.mu.Unlock()
	}()
	j, err := b.spawn(ctx, c.Command, dir, env, timeout)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	closed := b.closed
	b.jobs[j.id] = j
	b.order = append(b.order, j)
	evicted := b.evictLocked()
	b.mu.Unlock()
	if closed {
		j.Kill()
	}
	for _, old := range evicted {
		if err := old.remove(); err != nil {
			cfg.Logger.Warn("sandbox: removing an old job", "job", old.id, "err", err)
		}
	}
	return j, nil
}

// reserve counts a job as starting, unless the session already runs too many.
func (b *box) reserve() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	running := b.starting
	for _, j := range b.order {
		select {
		case <-j.done:
		default:
			running++
		}
	}
	if running >= b.m.cfg.MaxRunningJobs {
		return fmt.Errorf("%w: %d are running (the limit); wait for one or kill one", ErrTooManyJobs, running)
	}
	b.starting++
	return nil
}

// evictLocked drops the oldest finished jobs beyond the retention limit.
func (b *box) evictLocked() []*Job {
	finished := 0
	for _, j := range b.order {
		if isDone(j) {
			finished++
		}
	}
	var evicted []*Job
	kept := b.order[:0]
	for _, j := range b.order {
		if finished > b.m.cfg.JobRetention && isDone(j) {
			finished--
			evicted = append(evicted, j)
			delete(b.jobs, j.id)
			b.rememberDroppedLocked(j.id)
			continue
		}
		kept = append(kept, j)
	}
	clear(b.order[len(kept):])
	b.order = kept
	return evicted
}

func (b *box) rememberDroppedLocked(id string) {
	if b.dropped == nil {
		b.dropped = map[string]bool{}
	}
	if len(b.droppedOrder) >= maxDroppedIDs {
		delete(b.dropped, b.droppedOrder[0])
		b.droppedOrder = b.droppedOrder[1:]
	}
	b.dropped[id] = true
	b.droppedOrder = append(b.droppedOrder, id)
}

func isDone(j *Job) bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// spawn creates the job's logs and cgroup, starts the process and its helpers.
func (b *box) spawn(ctx context.Context, command, dir string, env []string, timeout time.Duration) (j *Job, err error) {
	cfg := b.m.cfg
	j = &Job{
		id: newJobID(), command: command, dir: dir, backend: b.backend, grace: cfg.KillGrace,
		killCh: make(chan killRequest, 1), exited: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{}),
	}
	j.dirPath = filepath.Join(b.dir, "jobs", j.id)
	if err := os.MkdirAll(j.dirPath, 0o700); err != nil {
		return nil, err
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range closers {
				_ = c()
			}
			_ = j.remove()
		}
	}()
	var files, readers, writers [2]*os.File
	for i, name := range []string{Stdout, Stderr} {
		path := filepath.Join(j.dirPath, name+".log")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			f.Close()
			return nil, err
		}
		j.logs[i] = &outputLog{path: path, limit: cfg.OutputCap}
		files[i], readers[i], writers[i] = f, r, w
		closers = append(closers, f.Close, r.Close, w.Close)
	}
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	if b.m.cgroupDir != "" {
		// +1: the launching thread stays in the cgroup while the job runs.
		if j.cgroup, err = makePidsCgroup(b.m.cgroupDir, j.id, cfg.PidsLimit+1); err != nil {
			return nil, fmt.Errorf("job pids cgroup: %w", err)
		}
	}
	if b.m.memoryDir != "" {
		if j.memCgroup, err = makeMemoryCgroup(b.m.memoryDir, j.id, cfg.MemoryLimit); err != nil {
			return nil, fmt.Errorf("job memory cgroup: %w", err)
		}
		j.memLimit = cfg.MemoryLimit
	}
	l, err := b.launch(dir, command, env)
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{j.cgroup, j.memCgroup} {
		if dir != "" {
			l.cgroups = append(l.cgroups, dir)
		}
	}
	var copied sync.WaitGroup
	copied.Add(2) // before the spawn: finish may run before the copiers start
	j.started = time.Now()
	j.oomCount = &b.m.oomKills
	cmd, err := spawn(l, stdin, writers[0], writers[1], func(cmd *exec.Cmd) { j.finish(cmd, readers, &copied) })
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", l.argv[0], err)
	}
	b.m.started.Add(1)
	j.mu.Lock()
	j.pid = cmd.Process.Pid
	j.mu.Unlock()
	for i := range 2 {
		writers[i].Close() // the child holds its own copies
		go func() {
			defer copied.Done()
			j.logs[i].copyFrom(readers[i], files[i], j.notify)
		}()
	}
	go j.supervise(ctx, timeout)
	return j, nil
}

func (b *box) launch(dir, command string, env []string) (launch, error) {
	bash, rw := b.m.caps.Bash, append([]string{b.res.root, b.tmp, b.home}, b.m.cfg.WritableDirs...)
	files := coveredFiles(hiddenFiles(b.m.cfg.HideFiles), b.m.hide, rw)
	switch b.backend {
	case BackendBwrap:
		return oomShim(bash, bwrapLaunch(b.m.caps.Bwrap, bash, dir, command, env, rw, b.m.hide, files, b.network)), nil
	case BackendNamespaces:
		return namespacesLaunch(bash, dir, command, env, rw, b.m.hide, files, b.network, b.m.caps.LandlockABI)
	default:
		return oomShim(bash, localLaunch(bash, dir, command, env)), nil
	}
}

func (b *box) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	jobs := append([]*Job(nil), b.order...)
	b.mu.Unlock()
	for _, j := range jobs {
		j.Kill()
	}
	var errs []error
	for _, j := range jobs {
		if _, err := j.Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("job %s still running: %w", j.id, err))
			continue
		}
		errs = append(errs, j.remove())
	}
	errs = append(errs, os.RemoveAll(b.dir))
	b.m.forget(b)
	return errors.Join(errs...)
}

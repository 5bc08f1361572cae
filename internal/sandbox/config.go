// Package sandbox runs shell commands and resolves paths for one session, confined to
// the session's working directory (its root). A Manager hands every session its own
// Sandbox; each Sandbox keeps that session's jobs, whose stdout and stderr go to
// append-only log files that can be read back by byte offset.
//
// Two modes exist. "local" confines path resolution and the working directory of
// commands to the root, scrubs the environment and kills whole process groups, but the
// processes themselves run with the daemon's rights. "isolated" additionally runs every
// command in new Linux namespaces with a read-only view of the host, a writable root,
// no capabilities and no network (unless allowed): through bubblewrap when it is
// installed and works, otherwise through clone flags and a small init helper that is
// the daemon's own binary re-executed (see helper.go: it needs no wiring in main, the
// package's init function handles it). A host that can do neither refuses to create
// isolated sandboxes; nothing ever silently runs unisolated.
//
// Where the host offers a writable cgroup v1 pids hierarchy, every job runs in its own
// pids cgroup (Config.PidsLimit), which bounds fork bombs and lets a kill reach
// processes that left the job's process group; where it offers a memory hierarchy,
// in its own memory cgroup (Config.MemoryLimit), so that a command filling memory is
// killed by the kernel alone, and its result says so.
package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Mode selects how commands are confined.
type Mode string

const (
	// ModeLocal runs commands as the daemon's user; only paths and cwd are confined.
	ModeLocal Mode = "local"
	// ModeIsolated runs commands in namespaces with a read-only host.
	ModeIsolated Mode = "isolated"
)

// Backend names how isolated commands are confined.
type Backend string

const (
	// BackendAuto picks bubblewrap when it works, else namespaces.
	BackendAuto Backend = "auto"
	// BackendBwrap uses bubblewrap (bwrap) with a read-only bind of /.
	BackendBwrap Backend = "bwrap"
	// BackendNamespaces uses clone flags (user, mount, pid, net, ipc, uts), read-only
	// mounts set up by an init helper, no capabilities, and Landlock.
	BackendNamespaces Backend = "namespaces"
	// BackendNone is what local sandboxes report.
	BackendNone Backend = "none"
)

// Config configures a Manager. The zero value of every field means "the default".
type Config struct {
	// Mode is ModeLocal (default) or ModeIsolated.
	Mode Mode
	// Backend chooses the isolated backend; BackendAuto by default.
	Backend Backend
	// StateDir holds job logs and per-session temp dirs; it must lie outside every
	// isolated session root. Default: $TMPDIR/toolserverd.
	StateDir string
	// OutputCap is the most bytes kept per stream and job; later bytes are counted
	// and discarded (the job keeps running). Default 64 MiB.
	OutputCap int64
	// DefaultTimeout applies to commands that give none. Default 2 minutes.
	DefaultTimeout time.Duration
	// MaxTimeout bounds any timeout a command asks for. Default 30 minutes.
	MaxTimeout time.Duration
	// KillGrace is how long a process group gets between SIGTERM and SIGKILL.
	// Default 2 seconds.
	KillGrace time.Duration
	// Hide lists directories isolated commands must not see (the daemon's data dir:
	// its database, keys, other sessions' workspaces): each is covered by an empty
	// read-only tmpfs, with the session's own directories inside bound back.
	// StateDir is always hidden so. Local commands see everything. Where a root
	// contains one, Resolve refuses paths into it (ErrHidden), in both modes.
	Hide []string
	// HideFiles lists files isolated commands must not see (the daemon's config file,
	// which may hold inline secrets, wherever it lies): each is covered by a read-only
	// bind of /dev/null, so it cannot be opened (bubblewrap's binds are nodev) or
	// reads as empty, and cannot be written, renamed or removed. Symlinks to one
	// lead to the cover too; hard links made before are other names and stay
	// readable. Local commands see everything. Where a root contains one, Resolve
	// refuses it (ErrHiddenFile, an ErrHidden), in both modes.
	HideFiles []string
	// AllowNetwork is the default for sessions that do not say (see
	// MetadataAllowNetwork). Only isolated sandboxes can deny the network.
	AllowNetwork bool
	// PidsLimit caps the tasks of one job through a pids cgroup when the host offers
	// one (cgroup v1 pids, writable). Default 1024; negative disables.
	PidsLimit int
	// MemoryLimit caps the memory (and swap) of one job, all its processes together,
	// through a memory cgroup when the host offers one (cgroup v1 memory, writable):
	// past it the kernel kills the job's largest process. Default: half the memory
	// this process may use (Capabilities.Memory); negative disables.
	//
	// A job held at the limit may stall instead, its file pages reclaimed and read
	// back over and over, until its timeout. It is not ended earlier on purpose: a
	// job streaming a large file through mmap at the limit, at full disk speed,
	// showed memory.pressure_level critical events, refaults, CPU time and PSI
	// memory stall in the same ranges as a job making 1% of its progress, and major
	// faults in an overlapping range, 2 to 3 times fewer on average: a gap set by the
	// disk and the readahead (measured under 100 MiB on Linux 6.18; memory.failcnt
	// stayed 0 throughout, OOM kills included).
	MemoryLimit int64
	// MaxRunningJobs bounds concurrently running jobs per session. Default 16.
	MaxRunningJobs int
	// JobRetention is how many finished jobs (and their logs) a session keeps.
	// Default 100.
	JobRetention int
	// EnvAllow names extra host variables passed to commands, besides the built-in
	// allowlist (PATH, LANG, LC_*, TERM, TZ, USER, LOGNAME).
	EnvAllow []string
	// Env ("NAME=value") is set for every command, after the sandbox's own HOME and
	// TMPDIR (which it may replace) and before the variables a call gives.
	Env []string
	// WritableDirs are absolute directories isolated commands may write besides their
	// session's own (shared caches such as GOCACHE): every session shares them. Local
	// commands may write wherever the daemon's user may anyway.
	WritableDirs []string
	// Logger receives warnings (cleanup failures). Default: discard.
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultOutputCap  int64 = 64 << 20
	DefaultTimeout          = 2 * time.Minute
	DefaultMaxTimeout       = 30 * time.Minute
	DefaultKillGrace        = 2 * time.Second
	DefaultPidsLimit        = 1024
	// MinMemoryLimit is the least MemoryLimit may be: below it a shell barely starts.
	MinMemoryLimit        int64 = 16 << 20
	DefaultMaxRunningJobs       = 16
	DefaultJobRetention         = 100
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeLocal
	}
	if c.Backend == "" {
		c.Backend = BackendAuto
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(os.TempDir(), "toolserverd")
	}
	if c.OutputCap == 0 {
		c.OutputCap = DefaultOutputCap
	}
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = DefaultTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.PidsLimit == 0 {
		c.PidsLimit = DefaultPidsLimit
	}
	if c.MaxRunningJobs == 0 {
		c.MaxRunningJobs = DefaultMaxRunningJobs
	}
	if c.JobRetention == 0 {
		c.JobRetention = DefaultJobRetention
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// evalOrClean resolves p's symlinks, or only cleans it when it does not exist (yet).
func evalOrClean(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// Validate reports every invalid field of c (after WithDefaults) in one error.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeLocal, ModeIsolated:
	default:
		errs = append(errs, fmt.Errorf("sandbox mode %q: want %q or %q", c.Mode, ModeLocal, ModeIsolated))
	}
	switch c.Backend {
	case BackendAuto, BackendBwrap, BackendNamespaces:
	default:
		errs = append(errs, fmt.Errorf("sandbox backend %q: want %q, %q or %q", c.Backend, BackendAuto, BackendBwrap, BackendNamespaces))
	}
	if !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("sandbox state dir %q: must be an absolute path", c.StateDir))
	}
	if c.OutputCap < 1024 {
		errs = append(errs, fmt.Errorf("sandbox output cap %d: must be at least 1024 bytes", c.OutputCap))
	}
	if c.DefaultTimeout <= 0 || c.MaxTimeout <= 0 || c.KillGrace <= 0 {
		errs = append(errs, errors.New("sandbox timeouts and kill grace must be positive"))
	}
	if c.DefaultTimeout > c.MaxTimeout {
		errs = append(errs, fmt.Errorf("sandbox default timeout %s exceeds max timeout %s", c.DefaultTimeout, c.MaxTimeout))
	}
	if c.MemoryLimit > 0 && c.MemoryLimit < MinMemoryLimit {
		errs = append(errs, fmt.Errorf("sandbox memory limit %d: must be at least %d bytes (16 MiB), or negative for none", c.MemoryLimit, MinMemoryLimit))
	}
	if c.MaxRunningJobs < 1 || c.JobRetention < 1 {
		errs = append(errs, errors.New("sandbox max running jobs and job retention must be at least 1"))
	}
	for _, name := range c.EnvAllow {
		if !validEnvName(name) {
			errs = append(errs, fmt.Errorf("sandbox env allow %q: not a variable name", name))
		}
	}
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); !ok || !validEnvName(k) || strings.IndexByte(v, 0) >= 0 {
			errs = append(errs, fmt.Errorf("sandbox env %q: want NAME=value", kv))
		}
	}
	hidden := append([]string{c.StateDir}, c.Hide...)
	for _, d := range c.WritableDirs {
		switch fi, err := os.Stat(d); {
		case !filepath.IsAbs(d) || filepath.Clean(d) == "/":
			errs = append(errs, fmt.Errorf("sandbox writable dir %q: must be an absolute path other than /", d))
		case err != nil:
			errs = append(errs, fmt.Errorf("sandbox writable dir %q: %w", d, err))
		case !fi.IsDir():
			errs = append(errs, fmt.Errorf("sandbox writable dir %q: not a directory", d))
		default:
			real := evalOrClean(d)
			for _, h := range hidden {
				if h = evalOrClean(h); within(real, h) || within(h, real) {
					errs = append(errs, fmt.Errorf("sandbox writable dir %q: overlaps %s, which commands must not see", d, h))
				}
			}
		}
	}
	return errors.Join(errs...)
}

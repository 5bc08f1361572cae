package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// MetadataAllowNetwork is the session metadata key (a bool) that overrides
// Config.AllowNetwork for one session.
const MetadataAllowNetwork = "sandbox.allow_network"

// stateKey is where For keeps a session's sandbox in tool.State.
const stateKey = "sandbox.sandbox"

// Manager gives each session its Sandbox and owns the state directory and the pids
// and memory cgroups of this daemon instance.
type Manager struct {
	cfg       Config
	caps      Capabilities
	backend   Backend
	dir       string   // <StateDir>/sandbox-<random>, physical
	cgroupDir string   // pids cgroup of this instance, "" without one
	memoryDir string   // memory cgroup of this instance, "" without one
	lock      *os.File // holds the state dir's owner lock (reap.go)
	hide      []string // physical dirs isolated commands do not see and paths cannot resolve into (Config.Hide)

	mu     sync.Mutex
	boxes  map[*box]struct{}
	closed bool

	started, oomKills atomic.Uint64 // see Stats
}

// Stats counts what this Manager's commands did.
type Stats struct {
	// Started counts the commands started.
	Started uint64
	// OOMKills counts the processes the kernel killed for reaching their command's
	// memory limit (Config.MemoryLimit).
	OOMKills uint64
}

// Stats returns the counts so far.
func (m *Manager) Stats() Stats {
	return Stats{Started: m.started.Load(), OOMKills: m.oomKills.Load()}
}

// Options adjust one sandbox.
type Options struct {
	// AllowNetwork overrides Config.AllowNetwork when set.
	AllowNetwork *bool
}

// NewManager validates cfg, detects what the host supports and prepares the state
// directory. In ModeIsolated it fails with ErrIsolationUnavailable when the host can
// neither run bubblewrap nor namespaces with Landlock.
func NewManager(cfg Config) (*Manager, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Bound as they are on disk: a symlink cannot be a mount point.
	cfg.WritableDirs = slices.Clone(cfg.WritableDirs)
	for i, d := range cfg.WritableDirs {
		cfg.WritableDirs[i] = evalOrClean(d)
	}
	m := &Manager{cfg: cfg, caps: Detect(), backend: BackendNone, boxes: map[*box]struct{}{}}
	if m.caps.Bash == "" {
		return nil, errors.New("sandbox: " + m.caps.BashError)
	}
	if cfg.Mode == ModeIsolated {
		b, err := m.caps.backend(cfg.Backend)
		if err != nil {
			return nil, err
		}
		m.backend = b
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	dir, err := os.MkdirTemp(cfg.StateDir, "sandbox-")
	if err != nil {
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	if m.dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	if m.lock, err = lockState(m.dir); err != nil {
		_ = os.RemoveAll(m.dir)
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	reapStale(cfg.StateDir, m.dir, []string{m.caps.PidsCgroup, m.caps.MemoryCgroup}, cfg.Logger)
	m.hide = hiddenDirs(append([]string{cfg.StateDir}, cfg.Hide...))
	instance := "toolserverd-" + filepath.Base(m.dir)
	if cfg.PidsLimit > 0 && m.caps.PidsCgroup != "" {
		cg, err := makePidsCgroup(m.caps.PidsCgroup, instance, 0)
		if err != nil {
			cfg.Logger.Warn("sandbox: no pids cgroup, jobs are not limited in tasks", "err", err)
		}
		m.cgroupDir = cg
	}
	if m.cfg.MemoryLimit == 0 {
		m.cfg.MemoryLimit = -1 // how much there is is unknown
		if m.caps.Memory > 0 {
			m.cfg.MemoryLimit = max(m.caps.Memory/2, MinMemoryLimit)
		}
	}
	if m.cfg.MemoryLimit > 0 && m.caps.MemoryCgroup != "" {
		cg, err := makeMemoryCgroup(m.caps.MemoryCgroup, instance, 0)
		if err != nil {
			m.cfg.Logger.Warn("sandbox: no memory cgroup, jobs are not limited in memory", "err", err)
		}
		m.memoryDir = cg
	}
	return m, nil
}

// Config returns the effective configuration (defaults applied).
func (m *Manager) Config() Config { return m.cfg }

// Capabilities returns what Detect found when the Manager was made.
func (m *Manager) Capabilities() Capabilities { return m.caps }

// Backend is how new sandboxes confine commands (BackendNone in local mode).
func (m *Manager) Backend() Backend { return m.backend }

// PidsLimited reports whether jobs run in a pids cgroup.
func (m *Manager) PidsLimited() bool { return m.cgroupDir != "" }

// MemoryLimit is the most memory one job may use, 0 when jobs are not limited (the
// host has no writable memory cgroup, or Config.MemoryLimit is negative).
func (m *Manager) MemoryLimit() int64 {
	if m.memoryDir == "" {
		return 0
	}
	return m.cfg.MemoryLimit
}

// New makes a sandbox rooted at root (absolute, existing). Most callers want For.
func (m *Manager) New(root string, opt Options) (Sandbox, error) {
	res, err := newResolver(root)
	if err != nil {
		return nil, err
	}
	for _, h := range m.hide {
		// A hidden dir that holds the root (a session's own workspace in the data
		// dir) leaves the root reachable; one inside the root is cut out of it.
		if h != res.root && within(h, res.root) {
			res.hidden = append(res.hidden, h)
		}
	}
	for _, f := range hiddenFiles(m.cfg.HideFiles) {
		if within(f, res.root) && !insideAny(f, res.hidden) {
			res.hiddenFiles = append(res.hiddenFiles, f)
		}
	}
	if m.backend != BackendNone && within(m.dir, res.root) && !insideAny(m.dir, res.hidden) {
		return nil, fmt.Errorf("sandbox: the state dir %s lies inside the working directory %s; an isolated command could rewrite its own logs", m.dir, res.root)
	}
	network := m.cfg.AllowNetwork
	if opt.AllowNetwork != nil {
		network = *opt.AllowNetwork
	}
	if m.backend == BackendNone {
		network = true // a local command cannot be kept off the network
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	b := &box{
		m: m, res: res, backend: m.backend, network: network,
		dir:  filepath.Join(m.dir, "box_"+hex.EncodeToString(id[:])),
		jobs: map[string]*Job{},
	}
	b.tmp, b.home = filepath.Join(b.dir, "tmp"), filepath.Join(b.dir, "home")
	for _, d := range []string{b.tmp, b.home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			_ = os.RemoveAll(b.dir)
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_ = os.RemoveAll(b.dir)
		return nil, ErrClosed
	}
	m.boxes[b] = struct{}{}
	return b, nil
}

type slot struct {
	mu sync.Mutex
	sb *box
}

// For returns the session's sandbox, making it on first use (rooted at the session's
// workdir, network from the session metadata key MetadataAllowNetwork or the
// default) and keeping it in the session state. Jobs belong to the sandbox, so a job
// of one session can never be found through another.
func (m *Manager) For(sess *tool.Session) (Sandbox, error) {
	if sess == nil || sess.State == nil {
		return nil, errors.New("sandbox: the call has no session state")
	}
	s := sess.State.LoadOrStore(stateKey, func() any { return &slot{} }).(*slot)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sb != nil && !s.sb.isClosed() {
		return s.sb, nil
	}
	var opt Options
	if v, ok := sess.Metadata[MetadataAllowNetwork].(bool); ok {
		opt.AllowNetwork = &v
	}
	sb, err := m.New(sess.Workdir, opt)
	if err != nil {
		return nil, err
	}
	s.sb = sb.(*box)
	return sb, nil
}

// Release closes the session's sandbox if it has one: its jobs are killed and their
// logs deleted. The session package calls it when it evicts a session from memory.
func (m *Manager) Release(ctx context.Context, sess *tool.Session) error {
	if sess == nil || sess.State == nil {
		return nil
	}
	s := sess.State.LoadOrStore(stateKey, func() any { return &slot{} }).(*slot)
	s.mu.Lock()
	sb := s.sb
	s.sb = nil
	s.mu.Unlock()
	if sb == nil {
		return nil
	}
	return sb.Close(ctx)
}

// Busy reports whether the session's sandbox runs a job (or is starting one), which
// Release would kill: a session that idles while its background job runs is kept.
func (m *Manager) Busy(sess *tool.Session) bool {
	if sess == nil || sess.State == nil {
		return false
	}
	s := sess.State.LoadOrStore(stateKey, func() any { return &slot{} }).(*slot)
	s.mu.Lock()
	sb := s.sb
	s.mu.Unlock()
	return sb != nil && sb.busy()
}

// Shutdown closes every sandbox (killing running jobs, waiting up to ctx) and removes
// the instance's state directory and cgroups.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	boxes := make([]*box, 0, len(m.boxes))
	for b := range m.boxes {
		boxes = append(boxes, b)
	}
	m.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		errs = append(errs, b.Close(ctx))
	}
	errs = append(errs, os.RemoveAll(m.dir))
	for _, dir := range []string{m.cgroupDir, m.memoryDir} {
		if dir != "" {
			errs = append(errs, removeCgroup(dir))
		}
	}
	_ = m.lock.Close()
	return errors.Join(errs...)
}

func (m *Manager) forget(b *box) {
	m.mu.Lock()
	delete(m.boxes, b)
	m.mu.Unlock()
}

func (b *box) busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	if b.starting > 0 {
		return true
	}
	for _, j := range b.order {
		if !isDone(j) {
			return true
		}
	}
	return false
}

func (b *box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// hiddenDirs is dirs as physical paths, without the ones that do not exist, "/" and
// the ones inside another of them.
func hiddenDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		p, err := filepath.Abs(d)
		if err == nil {
			p, err = filepath.EvalSymlinks(p)
		}
		if err != nil || p == "/" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	// Not by neighbours: "/d-x" sorts between "/d" and "/d/sandbox".
	return slices.DeleteFunc(slices.Clone(out), func(p string) bool {
		return slices.ContainsFunc(out, func(q string) bool { return q != p && within(p, q) })
	})
}

// hiddenFiles returns the physical paths of the files (anything but a directory) in
// files that exist, without duplicates. One that does not exist (yet) has nothing to
// hide. It is called for every sandbox and command, not once: a config file mounted
// as Kubernetes mounts a ConfigMap (config.yaml -> ..data/config.yaml, ..data -> a
// timestamped dir) leads elsewhere after an update, and its old target is gone.
func hiddenFiles(files []string) []string {
	var out []string
	for _, f := range files {
		if f == "" {
			continue // no config file
		}
		p, err := filepath.Abs(f)
		if err == nil {
			p, err = filepath.EvalSymlinks(p)
		}
		if err != nil {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// coveredFiles returns the hidden files an isolated command would still see once the
// hidden dirs are covered and the writable dirs bound back (see bwrapLaunch): those
// inside no hidden dir, or inside a writable dir deeper than every hidden dir
// holding them. Those left out are under a tmpfs already, where nothing could be
// mounted onto them.
func coveredFiles(files, hide, rw []string) []string {
	deepest := func(f string, dirs []string) string {
		d := ""
		for _, x := range dirs {
			if within(f, x) && len(x) > len(d) {
				d = x
			}
		}
		return d
	}
	var out []string
	for _, f := range files {
		if h := deepest(f, hide); h == "" || len(deepest(f, rw)) > len(h) {
			out = append(out, f)
		}
	}
	return out
}

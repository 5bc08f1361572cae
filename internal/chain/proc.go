package chain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	// workerExe is the running binary, which serves as the worker (worker.go).
	workerExe = "/proc/self/exe"
	// cancelGrace is how long a worker told to stop has to answer (with its steps and
	// result) before it is killed: a Starlark step in progress is never interrupted. It
	// is below the executor's own grace for a cancelled tool (500 ms), so that the
	// answer, with its call trace, is the chain's.
	cancelGrace = 300 * time.Millisecond
	// writeTimeout bounds a write to a worker, which always reads: one that does not
	// is stuck (stopped, or dying) and is killed.
	writeTimeout = 5 * time.Second
	// exitGrace is how long a worker that answered, or whose stdout ended, has to exit
	// before it is killed.
	exitGrace = 2 * time.Second
	// stderrKept is how much of a worker's stderr is kept for the report of its end.
	stderrKept = 16 << 10
	// workerHeadroom is what a worker may use besides what its script keeps: the Go
	// runtime and the interpreter (a worker's RSS at start is about 12 MiB, see
	// BenchmarkChainWorker), its stacks and buffers.
	workerHeadroom = 64 << 20
	// addressHeadroom is what, without a memory cgroup, the address space may grow
	// by besides the hard bound: the Go heap grows its address space in 64 MiB arenas,
	// and threads need stacks.
	addressHeadroom = 128 << 20
)

// hardMemoryLimit is the most memory a chain's worker may use, the kernel's bound: the
// script may keep limit between two steps (the memory guard stops it then), and one
// step may make a value as large again (`x + x`) before the guard can act.
func hardMemoryLimit(limit int64) int64 { return 2*limit + workerHeadroom }

// softMemoryLimit is the Go runtime's memory limit in the worker: the collector works
// hard well before the hard bound.
func softMemoryLimit(limit int64) int64 { return limit + limit/2 + workerHeadroom/2 }

// workers finds, once, where chain workers get their memory cgroup.
type workers struct {
	once   sync.Once
	parent string // "" when no memory cgroup can be made: RLIMIT_AS then
	seq    atomic.Uint64
}

func (ws *workers) cgroupParent() string {
	ws.once.Do(func() {
		if p, err := sandbox.MemoryCgroupParent(); err == nil {
			ws.parent = p
			removeStaleCgroups(p)
		}
	})
	return ws.parent
}

// workerCgroupPrefix starts the name of a worker's cgroup, followed by the daemon's
// pid and a sequence number.
const workerCgroupPrefix = "toolserverd-chain-"

// removeStaleCgroups removes the workers' cgroups a daemon that is gone left under
// parent (a daemon killed while a worker ran: the worker died with it, its cgroup
// stayed, empty). A cgroup with a process in it cannot be removed, and is not.
func removeStaleCgroups(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, workerCgroupPrefix+"*"))
	for _, dir := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), workerCgroupPrefix), "-")
		if n, err := strconv.Atoi(pid); err != nil || n == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
			_ = syscall.Rmdir(dir)
		}
	}
}

// worker is the daemon's handle on one worker process.
type worker struct {
	proc   *sandbox.BoundedProcess
	cgroup bool
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	msgs   chan message // the worker's messages; closed when its stdout ends
	// gone ends when the worker's stdout ends (it died) or the chain's context does:
	// the call in flight is cancelled then.
	gone    context.Context
	endGone context.CancelFunc
	quit    chan struct{}
	readers sync.WaitGroup

	errMu   sync.Mutex
	errText bytes.Buffer // the head of its stderr
}

// startWorker starts a worker process for a script bounded by limit, in a memory
// cgroup of its own when parent is not "", whose lines are read up to maxLine bytes (a
// longer one kills it).
func startWorker(ctx context.Context, parent, name string, limit, maxLine int64) (*worker, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	// No environment from the daemon (its keys stay there); no goroutine dump on a
	// crash (only the head of stderr is kept); a race-detector build (tests) would
	// otherwise sleep a second at exit.
	argv, env := []string{workerArg0}, []string{"GOTRACEBACK=none", "GORACE=atexit_sleep_ms=0"}
	proc, err := sandbox.StartBounded(parent, name, hardMemoryLimit(limit), workerExe, argv, env, inR, outW, errW)
	if err != nil && parent != "" {
		// The cgroup could not be made (the host changed since the probe): the worker
		// bounds its own address space instead.
		parent = ""
		proc, err = sandbox.StartBounded("", name, 0, workerExe, argv, env, inR, outW, errW)
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	// The worker's ends are its own now: its stdout ends when it exits.
	_, _, _ = inR.Close(), outW.Close(), errW.Close()
	w := &worker{proc: proc, cgroup: parent != "", stdin: inW, stdout: outR, stderr: errR, msgs: make(chan message), quit: make(chan struct{})}
	w.gone, w.endGone = context.WithCancel(ctx)
	w.readers.Add(2)
	go w.readMessages(int(maxLine))
	go w.readStderr()
	return w, nil
}

// readMessages hands the worker's lines to msgs. A line longer than maxLine or that is
// no message kills it.
func (w *worker) readMessages(maxLine int) {
	defer w.readers.Done()
	defer close(w.msgs)
	defer w.endGone()
	br := bufio.NewReaderSize(w.stdout, 64<<10)
	for {
		line, err := readLine(br, maxLine)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				w.proc.Kill()
			}
			return
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			w.proc.Kill()
			return
		}
		select {
		case w.msgs <- m:
		case <-w.quit:
			return
		}
	}
}

// readLine reads one line of at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, fmt.Errorf("a line of the worker is longer than %d bytes", max)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return line, nil
	}
}

func (w *worker) readStderr() {
	defer w.readers.Done()
	buf := make([]byte, 4096)
	for {
		n, err := w.stderr.Read(buf)
		w.errMu.Lock()
		if room := stderrKept - w.errText.Len(); room > 0 {
			w.errText.Write(buf[:min(n, room)])
		}
		w.errMu.Unlock()
		if err != nil {
			return
		}
	}
}

// send writes one message to the worker; one that cannot be written kills it.
func (w *worker) send(m message) {
	b, err := json.Marshal(m)
	if err == nil {
		_ = w.stdin.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err = w.stdin.Write(append(b, '\n'))
	}
	if err != nil {
		w.proc.Kill()
	}
}

// wait waits for the worker to exit, killing it when it does not within exitGrace.
func (w *worker) wait() sandbox.BoundedExit {
	select {
	case <-w.proc.Done():
	case <-time.After(exitGrace):
		w.proc.Kill()
		<-w.proc.Done()
	}
	return w.proc.Exit()
}

// close ends the worker (closing its stdin ends one that has answered) and waits for
// it and the goroutines reading it.
func (w *worker) close() {
	_ = w.stdin.Close()
	w.wait()
	close(w.quit)
	w.readers.Wait()
	w.endGone()
	_, _ = w.stdout.Close(), w.stderr.Close()
}

// death says why a worker ended before it answered.
func (w *worker) death(limit int64) *outcomeError {
	ex := w.wait()
	w.readers.Wait() // its stderr is complete
	w.errMu.Lock()
	stderr := strings.TrimSpace(w.errText.String())
	w.errMu.Unlock()
	killed := false
	if ex.State != nil {
		if st, ok := ex.State.Sys().(syscall.WaitStatus); ok && st.Signaled() && st.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	// Its stack passed workerMaxStack ("runtime: goroutine stack exceeds 67108864-byte
	// limit", "fatal error: stack overflow").
	if containsAny(stderr, "stack overflow", "goroutine stack exceeds") {
		return &outcomeError{Kind: tool.KindFailed, Message: fmt.Sprintf(
			"the script nests too deep and was stopped: the interpreter walked a value or an expression nested hundreds of thousands of levels deep (str() or hashing of a deeply nested list or tuple, a very long chain of operators) past its stack bound (%d MiB); keep values under %d levels and split long expressions",
			workerMaxStack>>20, maxValueDepth)}
	}
	// The kernel killed it for its cgroup's limit (counted, or seen as a SIGKILL with
	// the cgroup full), or the Go runtime could not have the memory it asked for
	// ("fatal error: runtime: out of memory"; under RLIMIT_AS a race-detector build
	// fails to map its heap or shadow instead).
	if ex.OOMKills > 0 || (killed && ex.Cgroup && ex.MemoryPeak >= hardMemoryLimit(limit)-(1<<20)) ||
		containsAny(stderr, "out of memory", "failed to allocate", "address space collisions") {
		return &outcomeError{Kind: tool.KindFailed, Message: fmt.Sprintf(
			"the script exceeded its memory limit (%d MiB, chain.max_memory_bytes) and was stopped: one operation asked for more memory than that at once (a string or list made whole in one step, like s.replace(a, s), sep.join(list) or [x] * n)",
			limit>>20)}
	}
	how := "it exited"
	if ex.State != nil {
		how = ex.State.String()
	} else if ex.Err != nil {
		how = ex.Err.Error()
	}
	msg := "the script's process ended unexpectedly (" + how + ")"
	if first, _, _ := strings.Cut(stderr, "\n"); first != "" {
		msg += ": " + first
	}
	return &outcomeError{Kind: tool.KindFailed, Message: msg}
}

// drive runs the script in a worker and serves its calls until it answers. Without an
// answer (the worker could not start, or died) it returns why.
func (r *run) drive(script string) (*workerDone, *outcomeError) {
	p := r.t.policy
	parent := r.t.workers.cgroupParent()
	name := fmt.Sprintf("%s%d-%d", workerCgroupPrefix, os.Getpid(), r.t.workers.seq.Add(1))
	w, err := startWorker(r.ctx, parent, name, p.MaxMemoryBytes, p.maxLine())
	if err != nil {
		return nil, &outcomeError{Kind: tool.KindFailed, Message: "the script's process could not be started: " + err.Error()}
	}
	// Linux counts in a child's maxrss the peak of the process it was started from,
	// the daemon's: read after the start, this bounds what the worker inherited.
	r.inheritedRSS = peakRSS()
	defer func() {
		w.close()
		r.exit = w.proc.Exit()
	}()
	start := &workerStart{Script: script, MaxToolCalls: p.MaxToolCalls, MaxSteps: p.MaxSteps, MaxMemoryBytes: p.MaxMemoryBytes, MaxLineBytes: p.maxLine(),
		MaxInlineResultBytes: p.MaxInlineResultBytes, SoftMemoryLimit: softMemoryLimit(p.MaxMemoryBytes)}
	if !w.cgroup {
		start.AddressSpace = hardMemoryLimit(p.MaxMemoryBytes) + addressHeadroom
	}
	if r.tc.Session.Tools != nil {
		start.Tools = r.tc.Session.Tools.Names()
	}
	w.send(message{Type: msgStart, Start: start})
	ctxDone := r.ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case m, ok := <-w.msgs:
			if !ok {
				return nil, w.death(p.MaxMemoryBytes)
			}
			switch {
			case m.Type == msgCall && m.Call != nil:
				w.send(message{Type: msgReply, Reply: r.call(w.gone, m.Call)})
			case m.Type == msgPrint:
				r.print(m.Text)
			case m.Type == msgDone && m.Done != nil:
				return m.Done, nil
			default:
				w.proc.Kill()
			}
		case <-ctxDone:
			ctxDone = nil
			w.send(message{Type: msgCancel, Reason: r.ctxReason()})
			grace = time.After(cancelGrace)
		case <-grace:
			grace = nil
			w.proc.Kill()
		}
	}
}

// workerUse is what a chain's worker used, for the result's details (logs and UIs;
// never sent to the model).
type workerUse struct {
	// MaxRSSBytes is the most memory the worker held (getrusage's ru_maxrss), when
	// that is above the daemon's own peak as the worker started, which Linux counts in
	// a child's maxrss (0, left out: the worker's own peak is unknown, and below that).
	MaxRSSBytes int64 `json:"max_rss_bytes,omitempty"`
	// CgroupPeakBytes is its memory cgroup's peak (page cache included), when it ran
	// in one.
	CgroupPeakBytes int64 `json:"cgroup_peak_bytes,omitempty"`
}

// use reads what the worker that ended with ex, started when the daemon's peak RSS
// was inherited, used; nil when that is unknown.
func use(ex sandbox.BoundedExit, inherited int64) *workerUse {
	if ex.State == nil {
		return nil
	}
	u := &workerUse{}
	if ru, ok := ex.State.SysUsage().(*syscall.Rusage); ok && ru.Maxrss<<10 > inherited {
		u.MaxRSSBytes = ru.Maxrss << 10 // kilobytes on Linux
	}
	if ex.Cgroup {
		u.CgroupPeakBytes = ex.MemoryPeak
	}
	if *u == (workerUse{}) {
		return nil
	}
	return u
}

// peakRSS is this process's peak resident size (VmHWM); 0 when unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

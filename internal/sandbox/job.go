package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// Status is where a job is in its life.
type Status string

const (
	StatusRunning Status = "running"
	// StatusExited: the shell exited by itself (any exit code).
	StatusExited Status = "exited"
	// StatusKilled: killed on request, because its context ended, or by a signal
	// nobody in the daemon sent (Reason says which).
	StatusKilled Status = "killed"
	// StatusTimeout: killed because its timeout passed.
	StatusTimeout Status = "timeout"
)

// drainTimeout is how long output is still read after the shell exited and its
// process group was killed; only a process that left the group (setsid) can hold
// the pipes that long, and it loses them afterwards.
const drainTimeout = time.Second

// JobInfo is a snapshot of a job.
type JobInfo struct {
	ID      string  `json:"id"`
	Command string  `json:"command"`
	Dir     string  `json:"dir"`
	Status  Status  `json:"status"`
	Backend Backend `json:"backend"`
	// PID is the host pid of the job's first process (bash, or bwrap), which is also
	// its process group id.
	PID int `json:"pid"`
	// ExitCode is set when the shell exited by itself.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the shell, if one did.
	Signal string `json:"signal,omitempty"`
	// Reason explains a kill or timeout.
	Reason    string        `json:"reason,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	EndedAt   time.Time     `json:"ended_at,omitzero"`
	Duration  time.Duration `json:"duration"`
	// StdoutBytes and StderrBytes are what the logs hold; the Dropped counts are the
	// bytes discarded beyond the output cap, the Lost counts those that could not be
	// written to the logs (StdoutError and StderrError say why).
	StdoutBytes   int64 `json:"stdout_bytes"`
	StderrBytes   int64 `json:"stderr_bytes"`
	StdoutDropped int64 `json:"stdout_dropped,omitempty"`
	StderrDropped int64 `json:"stderr_dropped,omitempty"`
	StdoutLost    int64 `json:"stdout_lost,omitempty"`
	StderrLost    int64 `json:"stderr_lost,omitempty"`
	// Truncated is set when any output was dropped or lost.
	Truncated bool `json:"truncated"`
	// PidsPeak is the most tasks the job's pids cgroup held (0: no cgroup).
	PidsPeak int `json:"pids_peak,omitempty"`
	// MemoryLimit is the most memory the job's processes may use together (0: no
	// memory cgroup); MemoryPeak the most they used, known once the job is over.
	MemoryLimit int64 `json:"memory_limit_bytes,omitempty"`
	MemoryPeak  int64 `json:"memory_peak_bytes,omitempty"`
	// OOMKills counts the job's processes the kernel killed for reaching
	// MemoryLimit, known once the job is over.
	OOMKills int `json:"oom_kills,omitempty"`
	// StdoutError and StderrError say why a log could not be written (disk full …);
	// the bytes that were not are counted as lost.
	StdoutError string `json:"stdout_error,omitempty"`
	StderrError string `json:"stderr_error,omitempty"`
	// StdoutLostTail and StderrLostTail are the last bytes (at most 16 KiB) of the
	// lost output, kept in memory: on a full disk, what the command said is still seen.
	StdoutLostTail string `json:"stdout_lost_tail,omitempty"`
	StderrLostTail string `json:"stderr_lost_tail,omitempty"`
}

// Job is one command started by a Sandbox. Its methods are safe for concurrent use.
type Job struct {
	id, command, dir string
	backend          Backend
	started          time.Time
	grace            time.Duration
	dirPath          string // holds the logs
	cgroup           string // pids cgroup
	memCgroup        string // memory cgroup
	memLimit         int64
	oomCount         *atomic.Uint64 // the Manager's count of OOM kills, or nil
	logs             [2]*outputLog
	pid              int

	killCh chan killRequest
	exited chan struct{} // closed when the shell has exited (not yet reaped)
	done   chan struct{} // closed when the job is over and its output drained

	mu         sync.Mutex
	changed    chan struct{}
	stopStatus Status // set by the first kill: StatusKilled or StatusTimeout
	stopReason string
	reaped     bool
	state      *os.ProcessState
	ended      time.Time
	pidsPeak   int
	memPeak    int64
	oomKills   int
}

type killRequest struct {
	status Status
	reason string
}

func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "job_" + hex.EncodeToString(b[:])
}

// ID is the job's id ("job_…"), unique within the daemon.
func (j *Job) ID() string { return j.id }

// Done is closed when the job has ended and all its output is in the logs.
func (j *Job) Done() <-chan struct{} { return j.done }

// Changed returns a channel closed at the next output or status change.
func (j *Job) Changed() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}

func (j *Job) notify() {
	j.mu.Lock()
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
}

// Status reports the job's status.
func (j *Job) Status() Status { return j.Info().Status }

// ExitCode is the shell's exit code, or -1 while it runs or when a signal ended it.
func (j *Job) ExitCode() int {
	if c := j.Info().ExitCode; c != nil {
		return *c
	}
	return -1
}

// Info returns a snapshot.
func (j *Job) Info() JobInfo {
	j.mu.Lock()
	defer j.mu.Unlock()
	in := JobInfo{
		ID: j.id, Command: j.command, Dir: j.dir, Backend: j.backend, PID: j.pid, Status: StatusRunning,
		StartedAt: j.started, Duration: time.Since(j.started),
		StdoutBytes: j.logs[0].size.Load(), StderrBytes: j.logs[1].size.Load(),
		StdoutDropped: j.logs[0].dropped.Load(), StderrDropped: j.logs[1].dropped.Load(),
		StdoutLost: j.logs[0].lost.Load(), StderrLost: j.logs[1].lost.Load(),
		PidsPeak: j.pidsPeak, MemoryLimit: j.memLimit, MemoryPeak: j.memPeak, OOMKills: j.oomKills,
	}
	in.Truncated = in.StdoutDropped+in.StderrDropped+in.StdoutLost+in.StderrLost > 0
	in.StdoutError, in.StderrError = j.logs[0].writeErr(), j.logs[1].writeErr()
	if in.StdoutLost+in.StderrLost > 0 {
		in.StdoutLostTail, in.StderrLostTail = j.logs[0].lostText(), j.logs[1].lostText()
	}
	if j.ended.IsZero() {
		return in
	}
	in.EndedAt, in.Duration = j.ended, j.ended.Sub(j.started)
	var ws syscall.WaitStatus
	if j.state != nil {
		ws, _ = j.state.Sys().(syscall.WaitStatus)
	}
	switch {
	case j.stopStatus != "":
		in.Status, in.Reason = j.stopStatus, j.stopReason
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && j.oomKills > 0:
		in.Status, in.Reason = StatusKilled, fmt.Sprintf("out of memory: the command's processes may use %s together", humanize.IBytes(uint64(j.memLimit)))
	case ws.Signaled():
		in.Status, in.Reason = StatusKilled, "ended by signal "+ws.Signal().String()
	default:
		in.Status = StatusExited
	}
	if ws.Exited() {
		code := ws.ExitStatus()
		in.ExitCode = &code
	} else if ws.Signaled() {
		in.Signal = ws.Signal().String()
	}
	return in
}

// Wait blocks until the job is over or ctx ends.
func (j *Job) Wait(ctx context.Context) (JobInfo, error) {
	select {
	case <-j.done:
		return j.Info(), nil
	case <-ctx.Done():
		return j.Info(), ctx.Err()
	}
}

// Kill asks for the job to end: its process group (and pids cgroup) gets SIGTERM,
// then SIGKILL after the grace period. It does not wait; use Wait or Done.
func (j *Job) Kill() { j.stop(StatusKilled, "killed on request") }

func (j *Job) stop(status Status, reason string) {
	select {
	case j.killCh <- killRequest{status, reason}:
	default: // a request is already pending
	}
}

// ReadOutputRange returns exactly the bytes of stream ("stdout" or "stderr") from
// offset, at most max (DefaultReadMax when max <= 0, never above MaxReadMax), and the
// offset after them. An offset at or past the end gives no bytes and no error.
func (j *Job) ReadOutputRange(stream string, offset int64, max int) ([]byte, int64, error) {
	o, err := j.log(stream)
	if err != nil {
		return nil, offset, err
	}
	return o.readRange(offset, max)
}

// Tail returns the last n lines of stream (at most 1 MiB) and their start offset.
func (j *Job) Tail(stream string, n int) ([]byte, int64, error) {
	o, err := j.log(stream)
	if err != nil {
		return nil, 0, err
	}
	return o.tail(n)
}

// Size is how many bytes of stream the log holds so far.
func (j *Job) Size(stream string) int64 {
	o, err := j.log(stream)
	if err != nil {
		return 0
	}
	return o.size.Load()
}

func (j *Job) log(stream string) (*outputLog, error) {
	switch stream {
	case Stdout:
		return j.logs[0], nil
	case Stderr:
		return j.logs[1], nil
	}
	return nil, fmt.Errorf("%w, not %q", ErrInvalidStream, stream)
}

// supervise turns the context, the timeout and kill requests into signals; it ends
// when the shell exits.
func (j *Job) supervise(ctx context.Context, timeout time.Duration) {
	var timeoutC, graceC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	grace := time.NewTimer(time.Hour)
	grace.Stop()
	defer grace.Stop()
	ctxDone := ctx.Done()
	for {
		var req killRequest
		select {
		case <-j.exited:
			return
		case <-ctxDone:
			ctxDone = nil
			req = killRequest{StatusKilled, "cancelled: the call that started it was cancelled"}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				req = killRequest{StatusTimeout, "the call's deadline passed"}
			}
		case <-timeoutC:
			req = killRequest{StatusTimeout, "its timeout of " + timeout.String() + " passed"}
		case req = <-j.killCh:
		case <-graceC:
			j.signal(syscall.SIGKILL)
			continue
		}
		j.mu.Lock()
		first := j.stopStatus == ""
		if first {
			j.stopStatus, j.stopReason = req.status, req.reason
		}
		j.mu.Unlock()
		if first {
			j.signal(syscall.SIGTERM)
			grace.Reset(j.grace)
			graceC = grace.C
		}
	}
}

// signal sends sig to the job's process group and pids cgroup, unless the shell has
// been reaped (its pid, and so the group id, could belong to someone else by then).
func (j *Job) signal(sig syscall.Signal) {
	j.mu.Lock()
	if !j.reaped {
		_ = syscall.Kill(-j.pid, sig)
	}
	j.mu.Unlock()
	if dir := j.killCgroup(); dir != "" {
		signalCgroup(dir, sig)
	}
}

// killCgroup is the cgroup that holds every process of the job, to signal them by:
// its pids cgroup, else its memory cgroup ("" without either).
func (j *Job) killCgroup() string {
	if j.cgroup != "" {
		return j.cgroup
	}
	return j.memCgroup
}

// finish runs on the launching thread once the shell has exited: it kills what the
// shell left behind, reaps it, lets the output drain and publishes the end.
func (j *Job) finish(cmd *exec.Cmd, readers [2]*os.File, copied *sync.WaitGroup) {
	close(j.exited)
	j.mu.Lock()
	// Leftovers of the group die with the shell; background work is what jobs are for.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	j.reaped = true
	j.mu.Unlock()
	if dir := j.killCgroup(); dir != "" {
		killCgroup(dir, 2*time.Second)
	}
	_ = cmd.Wait() // the status is in ProcessState; non-zero exits are not errors here
	for _, r := range readers {
		_ = r.SetReadDeadline(time.Now().Add(drainTimeout))
	}
	copied.Wait()
	peak := 0
	if j.cgroup != "" {
		// One task of the peak is the daemon's launching thread.
		peak = max(0, cgroupPeak(j.cgroup)-1)
	}
	var memPeak int64
	var oomKills int
	if j.memCgroup != "" {
		memPeak, oomKills = memoryUse(j.memCgroup)
	}
	if j.oomCount != nil {
		j.oomCount.Add(uint64(oomKills))
	}
	j.leaveCgroups()
	j.mu.Lock()
	j.state, j.ended, j.pidsPeak, j.memPeak, j.oomKills = cmd.ProcessState, time.Now(), peak, memPeak, oomKills
	j.mu.Unlock()
	close(j.done)
	j.notify()
}

// leaveCgroups removes the job's cgroups once what they tell has been read, rather
// than when the session drops the job: a session keeps its last JobRetention
// finished jobs, and at two cgroups each a busy daemon ran the kernel out of memory
// cgroups (65,535 at most), after which no command could start. It runs on the
// launching thread, which sits in them: it moves back to their parent first (a cgroup
// with a task in it cannot be removed). A cgroup that cannot be removed yet (a
// process that outlived the kill) is left for remove.
func (j *Job) leaveCgroups() {
	tid := unix.Gettid()
	for _, dir := range []string{j.cgroup, j.memCgroup} {
		if dir == "" {
			continue
		}
		if err := joinCgroup(filepath.Dir(dir), tid); err != nil {
			continue
		}
		_ = removeCgroup(dir)
	}
}

// remove deletes the job's logs and cgroup; the job must be over.
func (j *Job) remove() error {
	err := os.RemoveAll(j.dirPath)
	for _, dir := range []string{j.cgroup, j.memCgroup} {
		if dir != "" {
			err = errors.Join(err, removeCgroup(dir))
		}
	}
	return err
}

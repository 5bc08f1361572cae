// Package builtin holds the tools toolserverd ships with. This file and jobs.go are
// the command tools: execute_command runs shell commands in the session's sandbox,
// await_job, read_job_output and kill_job work on the jobs it leaves behind.
package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// CommandTools returns execute_command, await_job, read_job_output and kill_job, all
// running in the sandboxes p hands out. jobs finds the jobs other replicas run; nil
// when this process is the only one.
func CommandTools(p *sandbox.Manager, jobs JobDirectory) []tool.Tool {
	return []tool.Tool{&executeCommand{p, jobs}, &awaitJob{p, jobs}, &readJobOutput{p, jobs}, &killJob{p, jobs}}
}

// JobDirectory knows which replica runs each background job, when replicas share a
// store: a job's process and output logs live on the replica that started it.
type JobDirectory interface {
	// Started records that this replica runs job jobID of sess.
	Started(ctx context.Context, sess *tool.Session, jobID string) error
	// Forward runs ctx's call (a job tool's, with args) on the replica that runs
	// jobID. handled is false when no other replica runs such a job of ctx's session.
	Forward(ctx *tool.Context, jobID string, args json.RawMessage) (res *tool.Result, handled bool, err error)
}

// decodeArgs unmarshals args strictly; the dispatcher has validated them already, so
// this only guards direct callers.
func decodeArgs(args json.RawMessage, v any) error {
	if err := tool.DecodeArgs(args, v); err != nil {
		return tool.Errorf(tool.KindInvalidArgs, "arguments: %v", err)
	}
	return nil
}

// sandboxFor returns the session's sandbox.
func sandboxFor(p *sandbox.Manager, ctx *tool.Context) (sandbox.Sandbox, error) {
	sb, err := p.For(ctx.Session)
	if err != nil {
		return nil, tool.Errorf(tool.KindUnavailable, "no sandbox for this session: %v", err)
	}
	return sb, nil
}

// startError classifies an error from Sandbox.Start.
func startError(err error) error {
	kind := tool.KindFailed
	switch {
	case errors.Is(err, sandbox.ErrOutsideRoot), errors.Is(err, sandbox.ErrInvalidPath),
		errors.Is(err, sandbox.ErrSymlinkLoop), errors.Is(err, sandbox.ErrNotDir),
		errors.Is(err, sandbox.ErrInvalidCommand):
		kind = tool.KindInvalidArgs
	case errors.Is(err, sandbox.ErrHidden):
		kind = tool.KindDenied
	case errors.Is(err, sandbox.ErrTooManyJobs), errors.Is(err, sandbox.ErrClosed), errors.Is(err, sandbox.ErrWorkdirGone):
		kind = tool.KindUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		kind = tool.KindTimeout
	case errors.Is(err, context.Canceled):
		kind = tool.KindCancelled
	}
	return tool.Errorf(kind, "%v", err)
}

type executeCommand struct {
	p    *sandbox.Manager
	jobs JobDirectory
}

type executeArgs struct {
	Command    string `json:"command"`
	Cwd        string `json:"cwd"`
	TimeoutMS  *int64 `json:"timeout_ms"`
	Background bool   `json:"background"`
}

// commandOutput is the structured result of execute_command (and await_job).
type commandOutput struct {
	JobID      string         `json:"job_id"`
	Status     sandbox.Status `json:"status"`
	ExitCode   *int           `json:"exit_code"`
	Stdout     string         `json:"stdout"`
	Stderr     string         `json:"stderr"`
	DurationMS int64          `json:"duration_ms"`
	// Truncated: the output shown is not all of it (cut here, or beyond the cap).
	Truncated bool   `json:"truncated"`
	Reason    string `json:"reason,omitempty"`
	// OOMKills counts the processes the kernel killed for reaching the command's
	// memory limit.
	OOMKills int `json:"oom_kills,omitempty"`
}

func (t *executeCommand) Spec() tool.Spec {
	cfg := t.p.Config()
	return tool.Spec{
		Name:  "execute_command",
		Label: "Run command",
		Description: "Run a bash command in the session's working directory and return its exit code, stdout and stderr. " +
			"Set background:true for servers and other long-running work; it returns a job_id at once.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The command line, run with bash -c. Pipes, redirections and && work."},
    "cwd": {"type": "string", "description": "Working directory, relative to the session's working directory (default: that directory). Must stay inside it."},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Kill the command after this many milliseconds (default %d). In the background there is no timeout unless one is given."},
    "background": {"type": "boolean", "description": "Start the command as a background job and return its job_id immediately."}
  },
  "required": ["command"],
  "additionalProperties": false
}`, cfg.MaxTimeout.Milliseconds(), cfg.DefaultTimeout.Milliseconds())),
		Documentation: executeDoc,
		PromptHint: "Use execute_command for shell work. Long-running processes (servers, watchers, long builds) " +
			"go in the background (background:true); the answer gives the job's id and the tools of this session that follow it.",
		Flags:   tool.Flags{},
		Risk:    tool.RiskHigh,
		Mode:    tool.ModeDirect,
		Timeout: cfg.MaxTimeout + cfg.KillGrace + 10*time.Second,
		Source:  "builtin",
	}
}

func (t *executeCommand) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args executeArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	cfg := t.p.Config()
	if strings.TrimSpace(args.Command) == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "command is empty")
	}
	cmd := sandbox.Cmd{Command: args.Command, Dir: args.Cwd}
	if args.TimeoutMS != nil {
		d := time.Duration(*args.TimeoutMS) * time.Millisecond
		if *args.TimeoutMS < 1 || d > cfg.MaxTimeout {
			return nil, tool.Errorf(tool.KindInvalidArgs, "timeout_ms %d: must be between 1 and %d", *args.TimeoutMS, cfg.MaxTimeout.Milliseconds())
		}
		cmd.Timeout = d
	} else if args.Background {
		cmd.Timeout = sandbox.NoTimeout
	}
	sb, err := sandboxFor(t.p, ctx)
	if err != nil {
		return nil, err
	}
	if args.Background {
		// The job belongs to the session, not to this call: it outlives both the call
		// and the client's connection.
		job, err := sb.Start(context.WithoutCancel(ctx), cmd)
		if err == nil && t.jobs != nil {
			if rerr := t.jobs.Started(ctx, ctx.Session, job.ID()); rerr != nil {
				// A job other replicas cannot find would answer not_found half the time
				// behind a load balancer: stop it rather than hand out its id.
				job.Kill()
				return nil, tool.Errorf(tool.KindUnavailable, "job %s was stopped: recording where it runs failed: %v", job.ID(), rerr)
			}
		}
		if err != nil {
			return nil, startError(err)
		}
		followInBackground(ctx, job)
		return backgroundResult(ctx, job)
	}
	run, stop := beforeDeadline(ctx)
	defer stop()
	job, err := sb.Start(run, cmd)
	if err != nil {
		return nil, startError(err)
	}
	p := &pump{job: job, emit: ctx.Emit}
	p.follow(run)
	if run.Err() != nil {
		// The sandbox is killing the job (the context was its lifetime); give it the
		// grace period to go, then report what it printed. Past its deadline the call
		// is answered without the tool, so a job slower to die than the margin
		// beforeDeadline left (one that ignores SIGTERM waits out the kill grace) is
		// reported still being killed, half that margin before the deadline.
		wait, cancel := context.WithTimeout(context.Background(), cfg.KillGrace+3*time.Second)
		if dl, ok := ctx.Deadline(); ok && errors.Is(run.Err(), context.DeadlineExceeded) {
			var stopWait context.CancelFunc
			wait, stopWait = context.WithDeadline(wait, dl.Add(-time.Until(dl)/2))
			defer stopWait()
		}
		_, _ = job.Wait(wait)
		cancel()
	}
	return commandResult(job, run.Err(), hasTool(ctx, "read_job_output"))
}

// beforeDeadline is ctx ending a little before its deadline (a tenth of the time left,
// at most a second), so that a command, or a wait for a job, ends in time for the tool
// to answer with what it has (the output so far, a job still running) rather than the
// dispatcher answering for it with a bare "did not finish" once the deadline passes
// (a request's timeout_ms shorter than the command's).
func beforeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-min(time.Until(dl)/10, time.Second)))
}

// followInBackground keeps the call's progress open while the job runs and carries the
// job's output on it: a UI polling the call that started the job sees the output as
// it comes and sees the call's output finished only when the job is over. The result
// (the job's id) goes to the model at once, as before.
func followInBackground(ctx *tool.Context, job *sandbox.Job) {
	h, ok := ctx.Progress.(tool.ProgressHolder)
	if !ok {
		return
	}
	release := h.Hold()
	p := &pump{job: job, emit: ctx.Progress.Emit}
	go func() {
		defer release()
		// Ends when the job does: killed, exited, or stopped with the session's sandbox.
		p.follow(context.Background())
	}()
}

// hasTool reports whether the call's session may call the named tool (true when the
// call carries no list of them), so that advice names only tools the model can call.
func hasTool(ctx *tool.Context, name string) bool {
	if ctx.Session == nil || ctx.Session.Tools == nil {
		return true
	}
	return catalogHas(ctx.Session.Tools, name)
}

// catalogHas reports whether c allows the named tool now or once reset_tools switches
// on the tool group that hides it: a call of such a tool is answered with how to
// switch the group on, and telling the model it has no way to follow a job (or see
// a folder) would be false.
func catalogHas(c tool.Catalog, name string) bool {
	if _, ok := c.Lookup(name); ok {
		return true
	}
	g, ok := c.(interface {
		Gated(string) (tool.Spec, bool)
	})
	if !ok {
		return false
	}
	_, ok = g.Gated(name)
	return ok
}

// backgroundResult tells the model how to follow the job with the job tools its
// session has, and only those: one it cannot call would be refused as not available.
func backgroundResult(ctx *tool.Context, job *sandbox.Job) (*tool.Result, error) {
	b, err := json.Marshal(map[string]any{"job_id": job.ID(), "status": sandbox.StatusRunning})
	if err != nil {
		return nil, err
	}
	has := func(name string) bool { return hasTool(ctx, name) }
	var uses []string
	if has("await_job") {
		uses = append(uses, fmt.Sprintf("await_job {\"job_id\":%q} to wait for it and get new output", job.ID()))
	}
	if has("read_job_output") {
		uses = append(uses, fmt.Sprintf("read_job_output {\"job_id\":%q} to read its output by offset", job.ID()))
	}
	if has("kill_job") {
		uses = append(uses, "kill_job to stop it")
	}
	text := fmt.Sprintf("Started background job %s (status: running). It keeps running after this call. ", job.ID())
	if len(uses) == 0 {
		text += "This session has no tool to follow it: its output and exit code will not be shown; " +
			"run the command without background to see them."
	} else {
		text += "Use " + strings.Join(uses, ", ") + "."
	}
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: text}}, Structured: b}, nil
}

// commandResult is the result of a foreground command: exit code and output, an
// error result (with the output) unless it exited with 0. canRead: the session may
// call read_job_output (writeOutput).
func commandResult(job *sandbox.Job, ctxErr error, canRead bool) (*tool.Result, error) {
	info := job.Info()
	out, err := showOutput(job, [2]int64{})
	if err != nil {
		return nil, err
	}
	var w strings.Builder
	kind := tool.ErrorKind("")
	switch {
	case errors.Is(ctxErr, context.Canceled):
		kind = tool.KindCancelled
		fmt.Fprintf(&w, "Cancelled: the call was cancelled and the command's process group killed (status: %s).\n", info.Status)
	case info.Status == sandbox.StatusRunning:
		// Only when the process group outlived the kill grace (it is still being killed).
		kind = tool.KindTimeout
		fmt.Fprintf(&w, "The command did not end in time; it is being killed (job %s).\n", info.ID)
	case info.Status == sandbox.StatusTimeout:
		kind = tool.KindTimeout
		w.WriteString(describe(info) + " Output so far:\n")
	case info.Status == sandbox.StatusKilled:
		kind = tool.KindFailed
		w.WriteString(describe(info) + "\n")
	default:
		if info.ExitCode == nil || *info.ExitCode != 0 {
			kind = tool.KindFailed
		}
		w.WriteString(describe(info) + "\n")
	}
	writeOutput(&w, info.ID, out, info, canRead)
	structured, err := json.Marshal(commandOutput{
		JobID: info.ID, Status: info.Status, ExitCode: info.ExitCode,
		Stdout: out[0].raw, Stderr: out[1].raw, DurationMS: info.Duration.Milliseconds(),
		Truncated: info.Truncated || out[0].start > 0 || out[1].start > 0,
		Reason:    info.Reason, OOMKills: info.OOMKills,
	})
	if err != nil {
		return nil, err
	}
	return &tool.Result{
		Content:    []tool.Content{{Type: tool.ContentText, Text: strings.TrimRight(w.String(), "\n")}},
		Structured: structured,
		IsError:    kind != "",
		ErrorKind:  kind,
	}, nil
}

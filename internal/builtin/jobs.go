package builtin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	awaitDefault = 30 * time.Second
	awaitMax     = 10 * time.Minute
	maxReadBytes = 1 << 20
)

const jobIDSchema = `"job_id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The job_id execute_command returned."}`

// findJob looks the job up in the session's own sandbox: another session's jobs do
// not exist from here.
func findJob(p *sandbox.Manager, ctx *tool.Context, id string) (*sandbox.Job, error) {
	sb, err := sandboxFor(p, ctx)
	if err != nil {
		return nil, err
	}
	job, err := sb.Job(id)
	if errors.Is(err, sandbox.ErrJobDropped) {
		return nil, tool.Errorf(tool.KindNotFound, "job %q has ended and is no longer kept: a session keeps its last %d finished jobs "+
			"(every command counts, foreground ones too) and drops older ones with their output; run its command again if you need its output",
			id, p.Config().JobRetention)
	}
	if errors.Is(err, sandbox.ErrJobNotFound) {
		msg := fmt.Sprintf("no job %q in this session", id)
		if known := latestJobs(sb.Jobs()); known != "" {
			msg += "; " + known
		}
		if ctx.Session != nil && ctx.Session.Loaded {
			// The job table lives in this process: a restart ended the jobs of the one
			// before (an eviction released those that had ended), which the model,
			// which started the job itself, could not tell from a wrong id.
			msg += ". Jobs started before the daemon restarted or this session was reloaded from the store " +
				"are not kept: such a job has ended and its output is gone; start it again if it is still needed"
		}
		return nil, tool.Errorf(tool.KindNotFound, "%s", msg)
	}
	return job, err
}

// maxListedJobs bounds the jobs a not-found answer names: a session keeps a hundred
// finished ones, most of them foreground commands long done.
const maxListedJobs = 20

// latestJobs names the running jobs and the latest finished ones of jobs (oldest
// first), at most maxListedJobs in all, saying how many older ones it leaves out.
func latestJobs(jobs []*sandbox.Job) string {
	keep := make([]bool, len(jobs))
	n := 0
	for i, j := range jobs {
		if j.Status() == sandbox.StatusRunning && n < maxListedJobs {
			keep[i], n = true, n+1
		}
	}
	for i := len(jobs) - 1; i >= 0 && n < maxListedJobs; i-- {
		if !keep[i] {
			keep[i], n = true, n+1
		}
	}
	var named []string
	for i, j := range jobs {
		if keep[i] {
			named = append(named, fmt.Sprintf("%s (%s)", j.ID(), j.Status()))
		}
	}
	switch {
	case len(named) == 0:
		return ""
	case len(named) == len(jobs):
		return "its jobs are: " + strings.Join(named, ", ")
	}
	return fmt.Sprintf("its latest jobs are: %s (and %d older ones)", strings.Join(named, ", "), len(jobs)-len(named))
}

// elsewhere answers a call about a job this replica does not have (findJob failed
// with notFound): the replica running it answers, when there is one.
func elsewhere(jobs JobDirectory, ctx *tool.Context, id string, raw json.RawMessage, notFound error) (*tool.Result, error) {
	var te *tool.Error
	if jobs == nil || !errors.As(notFound, &te) || te.Kind != tool.KindNotFound {
		return nil, notFound
	}
	res, handled, err := jobs.Forward(ctx, id, raw)
	if !handled {
		return nil, notFound
	}
	return res, err
}

// cursors remember, per session and job, how much output await_job has returned.
type cursors struct {
	mu sync.Mutex
	m  map[string]*[2]int64
}

const cursorsKey = "builtin.job_cursors"

func cursorsOf(sess *tool.Session) *cursors {
	return sess.State.LoadOrStore(cursorsKey, func() any { return &cursors{m: map[string]*[2]int64{}} }).(*cursors)
}

func (c *cursors) get(id string) [2]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.m[id]; p != nil {
		return *p
	}
	return [2]int64{}
}

// advance returns the cursor and moves it to end in one step, so that concurrent
// awaits of one job never return the same bytes twice.
func (c *cursors) advance(id string, end func() [2]int64) (from, to [2]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.m[id]
	if p == nil {
		p = &[2]int64{}
		c.m[id] = p
	}
	from, to = *p, end()
	*p = to
	return from, to
}

type awaitJob struct {
	p    *sandbox.Manager
	jobs JobDirectory
}

func (t *awaitJob) Spec() tool.Spec {
	return tool.Spec{
		Name:  "await_job",
		Label: "Wait for job",
		Description: "Wait for a background job to finish (or for timeout_ms) and return its status, exit code " +
			"and the output it printed since the previous await_job of that job.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    %s,
    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": %d, "description": "How long to wait at most (default %d). 0 returns at once."}
  },
  "required": ["job_id"],
  "additionalProperties": false
}`, jobIDSchema, awaitMax.Milliseconds(), awaitDefault.Milliseconds())),
		Documentation: awaitDoc,
		Flags:         tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:          tool.RiskSafe,
		Mode:          tool.ModeDirect,
		Timeout:       awaitMax + 10*time.Second,
		Source:        "builtin",
	}
}

func (t *awaitJob) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		JobID     string `json:"job_id"`
		TimeoutMS *int64 `json:"timeout_ms"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	bound := awaitDefault
	if args.TimeoutMS != nil {
		bound = time.Duration(*args.TimeoutMS) * time.Millisecond
		if *args.TimeoutMS < 0 || bound > awaitMax {
			return nil, tool.Errorf(tool.KindInvalidArgs, "timeout_ms %d: must be between 0 and %d", *args.TimeoutMS, awaitMax.Milliseconds())
		}
	}
	job, err := findJob(t.p, ctx, args.JobID)
	if err != nil {
		return elsewhere(t.jobs, ctx, args.JobID, raw, err)
	}
	early, stop := beforeDeadline(ctx)
	defer stop()
	limited := false
	if dl, ok := early.Deadline(); ok && time.Until(dl) < bound {
		// The call's own deadline comes first: wait until just before it and answer
		// with the job as it is, rather than be stopped with nothing to show.
		bound, limited = max(time.Until(dl), 0).Round(time.Millisecond), true
	}
	cur := cursorsOf(ctx.Session)
	p := &pump{job: job, off: cur.get(job.ID()), emit: ctx.Emit}
	wait, cancel := context.WithTimeout(early, bound)
	p.follow(wait)
	cancel()
	if err := ctx.Err(); err != nil {
		// The job goes on; only the waiting stopped. The cursor stays where it was.
		return nil, startError(err)
	}
	var out [2]shown
	var readErr error
	info := job.Info() // before the sizes: a job seen as done has all its output in them
	from, to := cur.advance(job.ID(), func() [2]int64 {
		return [2]int64{job.Size(sandbox.Stdout), job.Size(sandbox.Stderr)}
	})
	ba, bb := splitBudget(to[0]-from[0], to[1]-from[1], resultBudget)
	for i, budget := range []int{ba, bb} {
		if out[i], readErr = showStream(job, streams[i], from[i], to[i], budget); readErr != nil {
			return nil, readErr
		}
	}
	var w strings.Builder
	w.WriteString(describe(info))
	if info.Status == sandbox.StatusRunning {
		fmt.Fprintf(&w, " Waited %s.", bound)
		if limited {
			w.WriteString(" (The call's time limit allowed no longer; the job goes on.)")
		}
	}
	w.WriteString(" Output since the previous await_job of this job:\n")
	writeOutput(&w, info.ID, out, info, hasTool(ctx, "read_job_output"))
	res := awaitOutput{
		commandOutput: commandOutput{
			JobID: info.ID, Status: info.Status, ExitCode: info.ExitCode,
			Stdout: out[0].raw, Stderr: out[1].raw, DurationMS: info.Duration.Milliseconds(),
			Truncated: info.Truncated || out[0].start > from[0] || out[1].start > from[1],
			Reason:    info.Reason, OOMKills: info.OOMKills,
		},
		Done: info.Status != sandbox.StatusRunning, StdoutOffset: to[0], StderrOffset: to[1],
	}
	structured, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &tool.Result{
		Content:    []tool.Content{{Type: tool.ContentText, Text: strings.TrimRight(w.String(), "\n")}},
		Structured: structured,
	}, nil
}

type awaitOutput struct {
	commandOutput
	Done bool `json:"done"`
	// The offsets the next await_job continues from.
	StdoutOffset int64 `json:"stdout_offset"`
	StderrOffset int64 `json:"stderr_offset"`
}

type readJobOutput struct {
	p    *sandbox.Manager
	jobs JobDirectory
}

func (t *readJobOutput) Spec() tool.Spec {
	return tool.Spec{
		Name:  "read_job_output",
		Label: "Read job output",
		Description: "Read a job's stdout or stderr by byte offset (returns next_offset to continue from) " +
			"or its last lines (tail_lines). Does not wait.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    %s,
    "stream": {"type": "string", "enum": ["stdout", "stderr"], "description": "Which stream (default stdout)."},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to read from (default 0)."},
    "max_bytes": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Most bytes to return (default %d)."},
    "tail_lines": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "Return the last N lines instead of reading from an offset."},
    "encoding": {"type": "string", "enum": ["text", "base64"], "description": "text (default; invalid UTF-8 shown as U+FFFD) or base64 (exact bytes)."}
  },
  "required": ["job_id"],
  "additionalProperties": false
}`, jobIDSchema, maxReadBytes, sandbox.DefaultReadMax)),
		Documentation: readDoc,
		Flags:         tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:          tool.RiskSafe,
		Mode:          tool.ModeDirect,
		Timeout:       30 * time.Second,
		Source:        "builtin",
	}
}

type readOutput struct {
	JobID      string         `json:"job_id"`
	Stream     string         `json:"stream"`
	Offset     int64          `json:"offset"`
	NextOffset int64          `json:"next_offset"`
	Size       int64          `json:"size"`
	EOF        bool           `json:"eof"`
	Status     sandbox.Status `json:"status"`
	ExitCode   *int           `json:"exit_code"`
	Encoding   string         `json:"encoding"`
	Data       string         `json:"data"`
	Replaced   bool           `json:"invalid_utf8_replaced,omitempty"`
}

func (t *readJobOutput) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		JobID     string `json:"job_id"`
		Stream    string `json:"stream"`
		Offset    *int64 `json:"offset"`
		MaxBytes  int    `json:"max_bytes"`
		TailLines int    `json:"tail_lines"`
		Encoding  string `json:"encoding"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	switch {
	case args.Stream == "":
		args.Stream = sandbox.Stdout
	case args.Stream != sandbox.Stdout && args.Stream != sandbox.Stderr:
		return nil, tool.Errorf(tool.KindInvalidArgs, `stream must be "stdout" or "stderr", not %q`, args.Stream)
	}
	if args.Encoding == "" {
		args.Encoding = "text"
	}
	if args.Encoding != "text" && args.Encoding != "base64" {
		return nil, tool.Errorf(tool.KindInvalidArgs, `encoding must be "text" or "base64", not %q`, args.Encoding)
	}
	if args.Offset != nil && args.TailLines > 0 {
		return nil, tool.Errorf(tool.KindInvalidArgs, "give offset or tail_lines, not both")
	}
	if args.MaxBytes <= 0 {
		args.MaxBytes = sandbox.DefaultReadMax
	}
	if args.MaxBytes > maxReadBytes || args.TailLines < 0 || (args.Offset != nil && *args.Offset < 0) {
		return nil, tool.Errorf(tool.KindInvalidArgs, "offset must be >= 0, tail_lines >= 1, max_bytes between 1 and %d", maxReadBytes)
	}
	job, err := findJob(t.p, ctx, args.JobID)
	if err != nil {
		return elsewhere(t.jobs, ctx, args.JobID, raw, err)
	}
	info := job.Info() // before reading: if the job is done, the sizes are final
	var data []byte
	var offset, next int64
	if args.TailLines > 0 {
		data, offset, err = job.Tail(args.Stream, args.TailLines)
		if len(data) > args.MaxBytes {
			offset += int64(len(data) - args.MaxBytes)
			data = data[len(data)-args.MaxBytes:]
		}
		next = offset + int64(len(data))
	} else {
		if args.Offset != nil {
			offset = *args.Offset
		}
		data, next, err = job.ReadOutputRange(args.Stream, offset, args.MaxBytes)
	}
	if err != nil {
		return nil, tool.Errorf(tool.KindFailed, "reading %s of %s: %v", args.Stream, job.ID(), err)
	}
	size := job.Size(args.Stream)
	res := readOutput{
		JobID: job.ID(), Stream: args.Stream, Offset: offset, Size: size,
		Status: info.Status, ExitCode: info.ExitCode, Encoding: args.Encoding,
	}
	if args.Encoding == "base64" {
		res.Data = base64.StdEncoding.EncodeToString(data)
	} else {
		// Stop before a character cut in half; the next read starts with it.
		if cut := incompleteTail(data); cut > 0 && cut < len(data) && next < size {
			data = data[:len(data)-cut]
			next -= int64(cut)
		}
		res.Data, res.Replaced = sanitize(data)
	}
	res.NextOffset = max(next, offset)
	res.EOF = info.Status != sandbox.StatusRunning && res.NextOffset >= size
	structured, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	text := string(structured)
	if args.Encoding == "text" {
		var w strings.Builder
		fmt.Fprintf(&w, "%s of %s, bytes %d-%d of %d (job %s", res.Stream, res.JobID, res.Offset, res.NextOffset, size, res.Status)
		if res.ExitCode != nil {
			fmt.Fprintf(&w, ", exit code %d", *res.ExitCode)
		}
		w.WriteString("):\n" + res.Data)
		if !res.EOF && res.NextOffset < size {
			fmt.Fprintf(&w, "\n[more output: continue with offset %d]", res.NextOffset)
		}
		if res.Replaced {
			w.WriteString("\n[bytes that are not UTF-8 text are shown as U+FFFD; use encoding base64 for the exact bytes]")
		}
		text = w.String()
	}
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: text}}, Structured: structured}, nil
}

type killJob struct {
	p    *sandbox.Manager
	jobs JobDirectory
}

func (t *killJob) Spec() tool.Spec {
	return tool.Spec{
		Name:        "kill_job",
		Label:       "Kill job",
		Description: "Stop a job of this session: SIGTERM to its whole process group, SIGKILL after a grace period.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {` + jobIDSchema + `},
  "required": ["job_id"],
  "additionalProperties": false
}`),
		Documentation: killDoc,
		Flags:         tool.Flags{ConcurrencySafe: true},
		Risk:          tool.RiskLow,
		Mode:          tool.ModeDirect,
		Timeout:       t.p.Config().KillGrace + 10*time.Second,
		Source:        "builtin",
	}
}

func (t *killJob) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		JobID string `json:"job_id"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	job, err := findJob(t.p, ctx, args.JobID)
	if err != nil {
		return elsewhere(t.jobs, ctx, args.JobID, raw, err)
	}
	already := job.Status() != sandbox.StatusRunning
	if !already {
		job.Kill()
		wait, cancel := context.WithTimeout(ctx, t.p.Config().KillGrace+3*time.Second)
		_, _ = job.Wait(wait)
		cancel()
	}
	info := job.Info()
	text := describe(info)
	if already {
		text = "The job had already ended. " + text
	}
	b, err := json.Marshal(map[string]any{
		"job_id": info.ID, "status": info.Status, "exit_code": info.ExitCode,
		"signal": info.Signal, "already_ended": already,
	})
	if err != nil {
		return nil, err
	}
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: text}}, Structured: b}, nil
}

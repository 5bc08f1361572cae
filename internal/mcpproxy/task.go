package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Tasks (MCP 2025-11-25, SEP-1686). A tool whose server declares taskSupport
// "required" refuses a plain tools/call; the proxy calls it as a task and follows the
// task to its end within the call, so that to the daemon it is a call like any other.
// Tools with taskSupport "optional" keep plain calls: the caller waits for the result
// either way, and a plain call has it in one round trip, with progress and
// cancellation as they always were.
//
// The interval of tasks/get is the server's pollInterval when it gives one, within
// the server's task_poll_min and task_poll_max, else its task_poll_default. A task
// may stay input_required for task_input_wait: the proxy offers servers no
// elicitation (it has no one to ask) and declines what they ask through
// tasks/result; a server that keeps waiting for input after that has its task
// cancelled, rather than the call hanging until its deadline.
const (
	// taskKeep is how long past the call's timeout the server is asked to keep the
	// task (its ttl): long enough to fetch the result of a task that ended just in time.
	taskKeep = time.Minute
	// taskCreateGrace is how long, once the call has ended, the proxy still waits for
	// the answer to a tools/call that creates a task, to cancel the task it created:
	// an answer late past the call's deadline must not leave the task running.
	taskCreateGrace = 10 * time.Second
)

// taskWatchers hands a connection's notifications/tasks/status to the call following
// the task. Task ids are the server's, so a server can only reach the calls made on
// its own connection.
type taskWatchers struct {
	mu sync.Mutex
	by map[string]func(mcp.Task)
}

// watch passes the task's status notifications to f until the returned function is
// called. f runs on the transport's reading goroutine and must not block.
func (w *taskWatchers) watch(id string, f func(mcp.Task)) func() {
	w.mu.Lock()
	if w.by == nil {
		w.by = map[string]func(mcp.Task){}
	}
	w.by[id] = f
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.by, id)
		w.mu.Unlock()
	}
}

func (w *taskWatchers) deliver(n mcp.JSONRPCNotification) {
	w.mu.Lock()
	empty := len(w.by) == 0
	w.mu.Unlock()
	if empty {
		return
	}
	b, err := json.Marshal(n.Params.AdditionalFields)
	if err != nil {
		return
	}
	var task mcp.Task
	if json.Unmarshal(b, &task) != nil || task.TaskId == "" {
		return
	}
	w.mu.Lock()
	f := w.by[task.TaskId]
	w.mu.Unlock()
	if f != nil {
		f(task)
	}
}

// createdTask reads the CreateTaskResult a task-augmented tools/call answered.
func createdTask(raw json.RawMessage) (mcp.Task, bool) {
	var r struct {
		Task *mcp.Task `json:"task"`
	}
	if raw == nil || json.Unmarshal(raw, &r) != nil || r.Task == nil || r.Task.TaskId == "" {
		return mcp.Task{}, false
	}
	return *r.Task, true
}

// taskFollow is what a call knows of the task it follows.
type taskFollow struct {
	id     string
	token  string
	router *progressRouter
	// The server's task settings (ServerConfig.TaskPollMin …).
	pollMin, pollMax, pollDefault, inputWait time.Duration

	mu       sync.Mutex
	status   mcp.TaskStatus
	message  string
	poll     time.Duration
	updated  time.Time // the newest lastUpdatedAt seen
	inputAt  time.Time // when the task became input_required; zero when it is not
	inputMsg string
}

// follow is what the call with progress token token knows of task id, with the
// server's task settings.
func (t *proxyTool) follow(id, token string) *taskFollow {
	cfg := &t.srv.cfg
	return &taskFollow{id: id, token: token, router: t.srv.m.progress,
		pollMin: cfg.TaskPollMin, pollMax: cfg.TaskPollMax, pollDefault: cfg.TaskPollDefault, inputWait: cfg.TaskInputWait}
}

// saw takes a status the server reported (tasks/get, a notification, the creation):
// a change of status or message becomes a line of the call's progress.
func (f *taskFollow) saw(task mcp.Task) {
	f.mu.Lock()
	if task.PollInterval != nil && *task.PollInterval > 0 {
		f.poll = min(max(time.Duration(min(*task.PollInterval, int64(f.pollMax/time.Millisecond)))*time.Millisecond, f.pollMin), f.pollMax)
	}
	// A poll's answer may arrive after a newer notification: a status older than one
	// seen is not news (the stages would go back), unless it ends the task.
	at, _ := time.Parse(time.RFC3339Nano, task.LastUpdatedAt)
	older := !at.IsZero() && at.Before(f.updated) && !task.Status.IsTerminal()
	if f.status.IsTerminal() || older || (task.Status == f.status && task.StatusMessage == f.message) {
		f.mu.Unlock()
		return
	}
	if at.After(f.updated) {
		f.updated = at
	}
	// A task that ends keeps its last message ("Generating report..."), which is
	// not news.
	stale := task.Status != f.status && task.StatusMessage == f.message
	f.status, f.message = task.Status, task.StatusMessage
	switch {
	case task.Status != mcp.TaskStatusInputRequired:
		f.inputAt = time.Time{}
	case f.inputAt.IsZero():
		f.inputAt, f.inputMsg = time.Now(), task.StatusMessage
	}
	f.mu.Unlock()
	line := task.StatusMessage
	switch {
	case line == "" || (stale && task.Status.IsTerminal()):
		line = "task " + string(task.Status)
	case task.Status != mcp.TaskStatusWorking:
		line = "task " + string(task.Status) + ": " + line
	}
	f.router.line(f.token, line)
}

func (f *taskFollow) interval() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.poll == 0 {
		return f.pollDefault
	}
	return f.poll
}

func (f *taskFollow) last() (mcp.TaskStatus, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, f.message
}

// waitingForInput is the status message of a task input_required for longer than
// the server's task_input_wait.
func (f *taskFollow) waitingForInput() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inputMsg, !f.inputAt.IsZero() && time.Since(f.inputAt) > f.inputWait
}

// callTask calls the tool as a task: tools/call with params.task answers at once
// with the task (CreateTaskResult); tasks/result, which blocks until the task ends
// (the specification's MUST), is asked at once and brings the final CallToolResult,
// mapped like a plain call's. Meanwhile the task's status (notifications/tasks/status,
// and tasks/get every pollInterval for servers whose notifications do not reach the
// proxy) becomes the call's progress. The call ending first (cancelled, its deadline)
// cancels the task (tasks/cancel). ctx is the call's, bounded by its deadline and the
// connection's life.
func (t *proxyTool) callTask(ctx context.Context, tc *tool.Context, c *conn, req mcp.CallToolRequest, trace *callTrace, token string) (*tool.Result, error) {
	ttl := (t.srv.cfg.CallTimeout + taskKeep).Milliseconds()
	req.Params.Task = &mcp.TaskParams{TTL: &ttl}
	a, ok := t.createTask(ctx, c, req)
	if !ok {
		return nil, callError{err: ctx.Err(), deadline: tc.Err() == nil && c.ctx.Err() == nil, stray: c.strayNote(trace)}
	}
	if a.err == nil {
		// A server may run a call as a plain one despite params.task.
		return convertResult(a.res), nil
	}
	created, ok := createdTask(a.raw)
	if !ok {
		return t.callFailed(ctx, tc, c, trace, a.err)
	}
	f := t.follow(created.TaskId, token)
	// The task's progress goes on with the call's token (the specification keeps it
	// valid for the task's life), and its status notifications come to this call.
	defer c.progress.hold(token)()
	defer c.tasks.watch(f.id, f.saw)()
	f.saw(created)

	type fetched struct {
		res *mcp.TaskResultResult
		err error
	}
	got := make(chan fetched, 1)
	// The fetch ends with the call but has no deadline of its own: mcp-go's SSE
	// transport arms its own response timer at the context's remaining time, which
	// can fire before the context ends and answer a plain "timeout waiting for SSE
	// response" in place of the deadline (a call that timed out read as one that
	// failed). Its timer now falls past the call's end (response_timeout is at
	// least call_timeout).
	fctx, stopFetch := context.WithCancel(context.WithoutCancel(ctx))
	defer context.AfterFunc(ctx, stopFetch)()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, err := c.client.TaskResult(fctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: f.id}})
		got <- fetched{r, err}
	}()
	defer func() {
		stopFetch()
		wg.Wait()
	}()

	poll := time.NewTimer(f.interval())
	defer poll.Stop()
	for {
		select {
		case r := <-got:
			if ctx.Err() == nil {
				return t.taskEnded(ctx, tc, c, f, trace, r.res, r.err)
			}
		case <-poll.C:
			// Bounded: a server slow to say the status must not hold up its result.
			// The bound is a timer, not a deadline on the request's context: that
			// would be the call's when nearer, which mcp-go's SSE transport can
			// beat (see requestContext).
			gctx, gcancel := context.WithCancel(context.WithoutCancel(ctx))
			stopGet := context.AfterFunc(ctx, gcancel)
			bound := time.AfterFunc(f.pollMax, gcancel)
			task, err := c.client.GetTask(gctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: f.id}})
			bound.Stop()
			stopGet()
			gcancel()
			if err == nil {
				f.saw(task.Task)
			} else if ctx.Err() == nil {
				c.log.Debug("mcp: tasks/get failed", "task", f.id, "err", err)
			}
			if msg, long := f.waitingForInput(); long && ctx.Err() == nil {
				t.cancelTask(c, f.id)
				return nil, tool.Errorf(tool.KindFailed, "mcp server %s: the task of %s asked for input (%q), which toolserverd cannot give (it answers no elicitation from MCP servers); "+
					"after %s it was cancelled", t.srv.cfg.Name, t.upstream, msg, f.inputWait)
			}
			poll.Reset(f.interval())
			continue
		case <-ctx.Done():
		}
		// The call ended before the task: cancel it, unless the connection is gone
		// (then there is no one to tell).
		stopFetch()
		wg.Wait()
		t.cancelTask(c, f.id)
		return nil, callError{err: ctx.Err(), deadline: ctx.Err() != nil && tc.Err() == nil && c.ctx.Err() == nil, stray: c.strayNote(trace)}
	}
}

// createAnswer is what a task-augmented tools/call answered: a plain result, or an
// error and the raw result (a CreateTaskResult, which mcp-go does not read).
type createAnswer struct {
	res *mcp.CallToolResult
	err error
	raw json.RawMessage
}

// createTask sends the task-augmented tools/call and waits for its answer while the
// call (ctx) lasts; false when the call ended first. The request itself is not
// bound to ctx: mcp-go forgets a request whose context ends (over HTTP+SSE it drops
// the answer arriving after, over streamable HTTP it abandons the response), and the
// task the answer names would run on with no one to cancel it. So the answer is
// awaited in the background for taskCreateGrace more, and the task it creates is
// cancelled; then the request is abandoned, and the goroutine ends.
func (t *proxyTool) createTask(ctx context.Context, c *conn, req mcp.CallToolRequest) (createAnswer, bool) {
	// Without ctx's cancel but with its values (the call's trace).
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	stopConn := context.AfterFunc(c.ctx, rcancel)
	answered := make(chan createAnswer, 1)
	if !c.spawn(func() {
		res, err := c.client.CallTool(rctx, req)
		var raw json.RawMessage
		if tr := traceOf(rctx); tr != nil {
			raw = tr.result
		}
		answered <- createAnswer{res, err, raw}
	}) {
		stopConn()
		rcancel()
		return createAnswer{err: transport.ErrTransportClosed}, true
	}
	select {
	case a := <-answered:
		stopConn()
		rcancel()
		return a, true
	case <-ctx.Done():
	}
	if !c.spawn(func() {
		defer rcancel()
		defer stopConn()
		grace := time.NewTimer(taskCreateGrace)
		defer grace.Stop()
		var a createAnswer
		select {
		case a = <-answered:
		case <-grace.C:
			rcancel()
			a = <-answered // the request ends with rctx
		}
		if task, ok := createdTask(a.raw); ok && a.err != nil {
			c.log.Debug("mcp: a task was created after its call ended; cancelling it", "task", task.TaskId)
			t.cancelTask(c, task.TaskId)
		}
	}) {
		// The connection is closing: there is no one to tell.
		stopConn()
		rcancel()
	}
	return createAnswer{}, false
}

// taskEnded maps what tasks/result answered. A result that is not an error is the
// task's (completed); otherwise the task's final status says whether it failed or
// was cancelled, with the server's status message.
func (t *proxyTool) taskEnded(ctx context.Context, tc *tool.Context, c *conn, f *taskFollow, trace *callTrace, r *mcp.TaskResultResult, err error) (*tool.Result, error) {
	var res *tool.Result
	switch {
	case err == nil:
		res = convertResult(&mcp.CallToolResult{Result: r.Result, Content: r.Content, StructuredContent: r.StructuredContent, IsError: r.IsError})
		if !res.IsError {
			// tasks/result answers once the task ended, and a result that is not an
			// error is a completed task's. Its status notification may still be on
			// its way (over streamable HTTP mcp-go can deliver it on another stream,
			// after this answer), and the call's progress would lack its end.
			_, msg := f.last()
			f.saw(mcp.Task{TaskId: f.id, Status: mcp.TaskStatusCompleted, StatusMessage: msg})
			return res, nil
		}
	case c.ended() != nil || ctx.Err() != nil:
		t.giveUp(c, f)
		return t.callFailed(ctx, tc, c, trace, err)
	case isSessionLost(err):
		// The server forgot the session, and the task with it. Unlike a refused
		// tools/call, the call must not go again (Run would): the task ran, or part of it.
		c.markDead(fmt.Errorf("session lost: %w", err))
		return nil, t.lostDuringCall(err)
	}
	status, msg := f.last()
	if !status.IsTerminal() {
		// Ended with the call but with no deadline of its own (see requestContext):
		// over SSE a deadline could fail it early and lose the task's last status.
		rctx, release := requestContext(ctx)
		task, gerr := c.client.GetTask(rctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: f.id}})
		release()
		if gerr == nil {
			f.saw(task.Task)
			status, msg = f.last()
		}
	}
	var kind tool.ErrorKind
	switch status {
	case mcp.TaskStatusFailed:
		kind = tool.KindFailed
	case mcp.TaskStatusCancelled:
		kind = tool.KindCancelled
	default:
		if err != nil {
			t.giveUp(c, f)
			return t.callFailed(ctx, tc, c, trace, err)
		}
		return res, nil // completed with isError: the tool's own error, as a plain call's
	}
	if msg == "" {
		msg = "no reason given"
	}
	note := fmt.Sprintf("mcp server %s: the task running %s ended %s: %s", t.srv.cfg.Name, t.upstream, status, msg)
	if res == nil {
		return nil, tool.Errorf(kind, "%s", note)
	}
	res.ErrorKind = kind
	res.Content = append([]tool.Content{{Type: tool.ContentText, Text: "[" + note + "]"}}, res.Content...)
	return res, nil
}

// giveUp cancels a task whose result could not be had (tasks/result failed without
// an answer: mcp-go's own response timeout, which over HTTP+SSE falls at the call's
// deadline and can beat it, or the call ending) unless it is seen to have ended: the
// call is over, and the task must not run on without it.
func (t *proxyTool) giveUp(c *conn, f *taskFollow) {
	if status, _ := f.last(); !status.IsTerminal() {
		t.cancelTask(c, f.id)
	}
}

// cancelTask asks the server to cancel the task, within cancelNoticeTimeout: best
// effort, and only while the connection lives.
func (t *proxyTool) cancelTask(c *conn, id string) {
	if c.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, cancelNoticeTimeout)
	defer cancel()
	if _, err := c.client.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}}); err != nil {
		c.log.Debug("mcp: tasks/cancel failed", "task", id, "err", err)
	}
}

package mcpproxy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// The four stages of server-everything's simulate-research-query, as its task's
// status messages.
var researchStages = []string{"Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."}

// taskServers starts server-everything over stdio, streamable HTTP and the older
// HTTP+SSE transport, each its own harness, named ev, with a function killing it.
func taskServers(t *testing.T, pooling string) map[string]func(t *testing.T) (*harness, func()) {
	return map[string]func(t *testing.T) (*harness, func()){
		"stdio": func(t *testing.T) (*harness, func()) {
			cfg := stdioEverything(t, "ev")
			cfg.Pooling = pooling
			h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{cfg}})
			h.start(t)
			h.waitState(t, "ev", StateReady, 30*time.Second)
			return h, func() {
				if err := syscall.Kill(h.stdioPid(t, "ev"), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		},
		"streamableHttp": func(t *testing.T) (*harness, func()) {
			srv := startHTTPServer(t, "streamableHttp", 0)
			h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{
				{Name: "ev", Transport: TransportStreamableHTTP, URL: srv.url(), Enabled: true, Pooling: pooling}}})
			h.start(t)
			h.waitState(t, "ev", StateReady, 30*time.Second)
			return h, srv.kill
		},
		"sse": func(t *testing.T) (*harness, func()) {
			srv := startHTTPServer(t, "sse", 0)
			h := newHarness(t, Config{HealthInterval: time.Hour, MaxBackoff: time.Second, Servers: []ServerConfig{
				{Name: "ev", Transport: TransportSSE, URL: srv.url(), Enabled: true, Pooling: pooling}}})
			h.start(t)
			h.waitState(t, "ev", StateReady, 30*time.Second)
			return h, srv.kill
		},
	}
}

// upstreamTasks is what the server says of its tasks over connection c (its
// tasks/list), by task id.
func upstreamTasks(t *testing.T, c *conn) map[string]mcp.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := c.client.ListTasks(ctx, mcp.ListTasksRequest{})
	if err != nil {
		t.Fatalf("tasks/list: %v", err)
	}
	out := map[string]mcp.Task{}
	for _, task := range res.Tasks {
		out[task.TaskId] = task
	}
	return out
}

// waitProgress waits until the call's progress contains substr.
func waitProgress(t *testing.T, prog *progressLog, substr string) {
	t.Helper()
	if !eventually(20*time.Second, func() bool { return strings.Contains(strings.Join(prog.all(), ""), substr) }) {
		t.Fatalf("progress %q never contained %q", prog.all(), substr)
	}
}

// TestTaskResearchQuery: a tool that requires task augmentation (taskSupport
// "required") runs as a task: the call returns its final result, the task's status
// messages come as progress, in order, and an ambiguous query (which would ask for
// clarification of a client that takes elicitation) ends with its report too.
func TestTaskResearchQuery(t *testing.T) {
	t.Parallel()
	for name, start := range taskServers(t, PoolShared) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _ := start(t)
			e, ok := h.tools.Lookup("mcp__ev__simulate-research-query")
			if !ok {
				t.Fatal("simulate-research-query is not listed")
			}
			if doc := e.Tool.Spec().Documentation; !strings.Contains(doc, "runs as an MCP task") {
				t.Errorf("documentation %q does not say the tool runs as a task upstream", doc)
			}

			prog := &progressLog{}
			start := time.Now()
			res := h.call(t.Context(), t, "mcp__ev__simulate-research-query", `{"topic":"quantum error correction"}`, prog)
			ended := time.Now()
			wantText(t, res, "# Research Report: quantum error correction")
			if !strings.Contains(res.Text(), "Stage 4: Generating report") {
				t.Errorf("report %q lacks its last stage", res.Text())
			}
			got := strings.Join(prog.all(), "")
			last := -1
			for _, stage := range researchStages {
				i := strings.Index(got, stage)
				if i < 0 || i < last {
					t.Fatalf("progress %q lacks stage %q in order", got, stage)
				}
				// A poll answered after a newer notification must not step back.
				if n := strings.Count(got, stage); n != 1 {
					t.Errorf("progress %q has stage %q %d times, want once", got, stage, n)
				}
				last = i
			}
			if !strings.Contains(got, "task completed\n") || strings.Contains(got, "task completed: ") {
				t.Errorf("progress %q should end with a bare \"task completed\" (not the last stage's message again)", got)
			}
			if at := prog.when(researchStages[len(researchStages)-1]); !at.IsZero() {
				// The last stage lasts 1s upstream.
				t.Logf("call took %s; its result came %s after the last stage began", ended.Sub(start), ended.Sub(at))
			}
			if n := h.calls("ev", outcomeOK); n != 1 {
				t.Errorf("calls_total{outcome=ok} = %v, want 1", n)
			}

			// toolserverd offers MCP servers no elicitation, so the server goes on
			// without asking; the call must end with the report, not hang.
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			res = h.call(ctx, t, "mcp__ev__simulate-research-query", `{"topic":"python","ambiguous":true}`, nil)
			wantText(t, res, "# Research Report: python")
		})
	}
}

// TestTaskCancel: a call cancelled mid-task, or whose deadline passes, ends as
// cancelled (timeout), and the upstream task is cancelled (tasks/cancel).
func TestTaskCancel(t *testing.T) {
	t.Parallel()
	for name, start := range taskServers(t, PoolShared) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _ := start(t)
			prog := &progressLog{}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan *tool.Result, 1)
			go func() { done <- h.call(ctx, t, "mcp__ev__simulate-research-query", `{"topic":"cancelled"}`, prog) }()
			waitProgress(t, prog, "Gathering sources...")
			cancelled := time.Now()
			cancel()
			var res *tool.Result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("call still running 10s after it was cancelled")
			}
			t.Logf("cancelled call ended %s after the cancel", time.Since(cancelled))
			wantKind(t, res, tool.KindCancelled)

			// The deadline: the call's own, shorter than the task.
			ctx, cancel = context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			res = h.call(ctx, t, "mcp__ev__simulate-research-query", `{"topic":"too slow"}`, nil)
			wantKind(t, res, tool.KindTimeout)

			// The daemon answers a deadline at once; the tool sends tasks/cancel
			// as it ends, just after.
			var tasks map[string]mcp.Task
			cancelledAll := eventually(10*time.Second, func() bool {
				tasks = upstreamTasks(t, h.m.server("ev").liveConn())
				for _, task := range tasks {
					if task.Status != mcp.TaskStatusCancelled {
						return false
					}
				}
				return len(tasks) == 2
			})
			if !cancelledAll {
				t.Fatalf("upstream tasks %v; want the 2 of the calls, cancelled", tasks)
			}
			for id, task := range tasks {
				if task.StatusMessage == "" {
					t.Errorf("upstream task %s says nothing of its cancellation", id)
				}
			}
			if n := h.calls("ev", outcomeCancelled); n != 1 {
				t.Errorf("calls_total{outcome=cancelled} = %v, want 1", n)
			}
		})
	}
}

// TestTaskUpstreamKilled: the server dying mid-task ends the call as unavailable,
// saying whether it ran is unknown, like a plain call.
func TestTaskUpstreamKilled(t *testing.T) {
	t.Parallel()
	for name, start := range taskServers(t, PoolShared) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, kill := start(t)
			prog := &progressLog{}
			done := make(chan *tool.Result, 1)
			go func() {
				done <- h.call(context.Background(), t, "mcp__ev__simulate-research-query", `{"topic":"doomed"}`, prog)
			}()
			waitProgress(t, prog, "Analyzing content...")
			killed := time.Now()
			kill()
			select {
			case res := <-done:
				t.Logf("call ended %s after the kill: %s", time.Since(killed), res.Text())
				wantKind(t, res, tool.KindUnavailable)
				if !strings.Contains(res.Text(), "whether it ran is unknown") {
					t.Errorf("result %q does not say whether the task ran is unknown", res.Text())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("call still running 10s after its server was killed")
			}
		})
	}
}

// TestTaskPerSession: with per-session pooling the task is created, followed and
// fetched on the daemon session's own upstream session, not the shared one.
func TestTaskPerSession(t *testing.T) {
	t.Parallel()
	for name, start := range taskServers(t, PoolPerSession) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _ := start(t)
			e, _ := h.tools.Lookup("mcp__ev__simulate-research-query")
			tc := &tool.Context{Context: t.Context(), CallID: "tc_test", ToolName: e.Tool.Spec().Name,
				Progress: tool.NoProgress, Session: &tool.Session{ID: "ses_task"}}
			res := h.tools.Run(e, toolmgr.Invocation{Ctx: tc, Args: json.RawMessage(`{"topic":"pooled"}`)})
			wantText(t, res, "# Research Report: pooled")

			s := h.m.server("ev")
			s.pool.mu.Lock()
			p := s.pool.conns["ses_task"]
			s.pool.mu.Unlock()
			if p == nil || p.conn == nil {
				t.Fatal("no upstream session for the daemon session")
			}
			own := upstreamTasks(t, p.conn)
			if len(own) != 1 {
				t.Fatalf("the session's upstream session has %d tasks, want 1", len(own))
			}
			for _, task := range own {
				if task.Status != mcp.TaskStatusCompleted {
					t.Errorf("task is %s, want completed", task.Status)
				}
			}
			if shared := upstreamTasks(t, s.liveConn()); len(shared) != 0 {
				t.Errorf("the shared upstream session has %d tasks, want none", len(shared))
			}
		})
	}
}

// taskServer is testdata/npm/task-server.mjs, a TypeScript SDK server whose tasks
// fail or wait for input, over stdio.
func taskServer(t *testing.T, tweaks ...func(*ServerConfig)) *harness {
	t.Helper()
	npmPackage(t, "server-everything") // node and the installed packages, or skip
	cfg := ServerConfig{Name: "tk", Transport: TransportStdio, Command: "node",
		Args: []string{filepath.Join(repoRoot(t), "testdata", "npm", "task-server.mjs")}, Enabled: true}
	for _, f := range tweaks {
		f(&cfg)
	}
	h := newHarness(t, Config{HealthInterval: time.Hour, Servers: []ServerConfig{cfg}})
	h.start(t)
	h.waitState(t, "tk", StateReady, 30*time.Second)
	return h
}

// TestTaskFailed: a task that ends failed is an error result of kind failed with the
// server's status message, and with what it stored, if anything.
func TestTaskFailed(t *testing.T) {
	t.Parallel()
	h := taskServer(t)
	prog := &progressLog{}
	res := h.call(t.Context(), t, "mcp__tk__break", `{}`, prog)
	wantKind(t, res, tool.KindFailed)
	if !strings.Contains(res.Text(), "ended failed: the index is corrupt") {
		t.Errorf("result %q does not give the task's status message", res.Text())
	}
	if got := strings.Join(prog.all(), ""); !strings.Contains(got, "Reading the index...") {
		t.Errorf("progress %q lacks the task's working message", got)
	}

	res = h.call(t.Context(), t, "mcp__tk__refuse", `{}`, nil)
	wantKind(t, res, tool.KindFailed)
	if !strings.Contains(res.Text(), "quota exceeded for today") || !strings.Contains(res.Text(), "ended failed") {
		t.Errorf("result %q does not give the task's stored result and its failure", res.Text())
	}
}

// TestTaskInputRequired: a task that waits for input the proxy cannot give (it
// offers no elicitation) ends the call as failed, saying what the server asked,
// after task_input_wait (default 10s) rather than at the call's deadline, and is
// cancelled upstream.
func TestTaskInputRequired(t *testing.T) {
	t.Parallel()
	h := taskServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	prog := &progressLog{}
	start := time.Now()
	res := h.call(ctx, t, "mcp__tk__ask", `{}`, prog)
	t.Logf("the call ended after %s: %s", time.Since(start), res.Text())
	wantKind(t, res, tool.KindFailed)
	if !strings.Contains(res.Text(), "asked for input") || !strings.Contains(res.Text(), "Which dataset should be used?") ||
		!strings.Contains(res.Text(), "after 10s it was cancelled") {
		t.Errorf("result %q does not say the task asked for input, and what", res.Text())
	}
	if got := strings.Join(prog.all(), ""); !strings.Contains(got, "task input_required: Which dataset should be used?") {
		t.Errorf("progress %q lacks the task's input_required status", got)
	}
	tasks := upstreamTasks(t, h.m.server("tk").liveConn())
	if len(tasks) != 1 {
		t.Fatalf("upstream has %d tasks, want 1", len(tasks))
	}
	for _, task := range tasks {
		if task.Status != mcp.TaskStatusCancelled {
			t.Errorf("upstream task is %s, want cancelled", task.Status)
		}
	}
}

// TestTaskInputWaitConfigured: a server's task_input_wait replaces the 10s default:
// the task waiting for input is cancelled after it, and the call says so.
func TestTaskInputWaitConfigured(t *testing.T) {
	t.Parallel()
	h := taskServer(t, func(c *ServerConfig) { c.TaskInputWait = 1500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	res := h.call(ctx, t, "mcp__tk__ask", `{}`, nil)
	wantKind(t, res, tool.KindFailed)
	if !strings.Contains(res.Text(), "after 1.5s it was cancelled") {
		t.Errorf("result %q does not say the task was cancelled after the configured 1.5s", res.Text())
	}
	for _, task := range upstreamTasks(t, h.m.server("tk").liveConn()) {
		if task.Status != mcp.TaskStatusCancelled {
			t.Errorf("upstream task is %s, want cancelled", task.Status)
		}
	}
}

// TestTaskPollSettings: the server's task_poll_min, task_poll_max and
// task_poll_default bound and set the interval of tasks/get a call follows its task
// with, in place of the defaults (200ms, 5s, 1s).
func TestTaskPollSettings(t *testing.T) {
	t.Parallel()
	ms := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		name   string
		cfg    ServerConfig
		server *int64 // the task's pollInterval, ms
		want   time.Duration
	}{
		{"defaults, none given", ServerConfig{}, nil, time.Second},
		{"defaults, server's", ServerConfig{}, ms(700), 700 * time.Millisecond},
		{"defaults, server's too short", ServerConfig{}, ms(10), 200 * time.Millisecond},
		{"defaults, server's too long", ServerConfig{}, ms(60000), 5 * time.Second},
		{"task_poll_default", ServerConfig{TaskPollDefault: 300 * time.Millisecond}, nil, 300 * time.Millisecond},
		{"task_poll_min", ServerConfig{TaskPollMin: 2 * time.Second}, ms(700), 2 * time.Second},
		{"task_poll_min lifts the default", ServerConfig{TaskPollMin: 2 * time.Second}, nil, 2 * time.Second},
		{"task_poll_max", ServerConfig{TaskPollMax: 400 * time.Millisecond}, ms(60000), 400 * time.Millisecond},
		{"task_poll_max lowers the default", ServerConfig{TaskPollMax: 100 * time.Millisecond}, nil, 100 * time.Millisecond},
		{"task_poll_max alone lowers the min", ServerConfig{TaskPollMax: 100 * time.Millisecond}, ms(20), 100 * time.Millisecond},
		{"all three", ServerConfig{TaskPollMin: 50 * time.Millisecond, TaskPollMax: 80 * time.Millisecond, TaskPollDefault: 60 * time.Millisecond}, ms(70), 70 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Name, c.cfg.Transport, c.cfg.Command = "tk", TransportStdio, "node"
			if err := c.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			s := &server{cfg: c.cfg.withDefaults(), m: &Manager{progress: newProgressRouter()}}
			f := (&proxyTool{srv: s}).follow("t1", "tok")
			f.saw(mcp.Task{TaskId: "t1", Status: mcp.TaskStatusWorking, PollInterval: c.server})
			if got := f.interval(); got != c.want {
				t.Errorf("interval = %s, want %s", got, c.want)
			}
		})
	}
}

// TestTaskConfig: the task settings go through the API's and the store's JSON as
// durations, and contradictory ones are refused.
func TestTaskConfig(t *testing.T) {
	t.Parallel()
	c, err := DecodeServerConfig([]byte(`{"name":"x","transport":"stdio","command":"y","task_input_wait":"30s","task_poll_min":"100ms","task_poll_max":"2s","task_poll_default":"500ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ServerConfig{Name: "x", Transport: TransportStdio, Command: "y", Enabled: true,
		TaskInputWait: 30 * time.Second, TaskPollMin: 100 * time.Millisecond, TaskPollMax: 2 * time.Second, TaskPollDefault: 500 * time.Millisecond}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded %+v, want %+v", c, want)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back ServerConfig
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("round trip of %s = %+v (%v)", b, back, err)
	}
	for cfg, wantErr := range map[string]string{
		`"task_poll_min":"2s","task_poll_max":"1s"`:                             "task_poll_min 2s must not be above task_poll_max 1s",
		`"task_poll_min":"100ms","task_poll_max":"1s","task_poll_default":"3s"`: "task_poll_default 3s must lie within",
		`"task_poll_default":"50ms"`:                                            "task_poll_default 50ms must lie within",
		`"task_poll_min":"1ms"`:                                                 "task_poll_min 1ms must be at least 10ms",
		`"task_input_wait":"-1s"`:                                               "must not be negative",
	} {
		c, err := DecodeServerConfig([]byte(`{"name":"x","transport":"stdio","command":"y",` + cfg + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want an error with %q", cfg, err, wantErr)
		}
	}
	if _, err := DecodeServerConfig([]byte(`{"name":"x","transport":"stdio","command":"y","task_poll_max":"soon"}`)); err == nil {
		t.Error("a bad duration was taken")
	}
}

// TestTaskResultEndsProgress: a task's result may come before its last status
// notification (over streamable HTTP mcp-go can deliver the notification on another
// stream, after the answer; CI saw it): a result that is not an error still ends the
// call's progress with "task completed", once, and an error result adds nothing (it
// could be a failed task's or a completed one's).
func TestTaskResultEndsProgress(t *testing.T) {
	t.Parallel()
	cfg := ServerConfig{Name: "tk", Transport: TransportStdio, Command: "node"}
	for _, c := range []struct {
		name      string
		notified  bool // the completed notification came before the result
		isError   bool
		wantLines []string
	}{
		{"notification late", false, false, []string{"Generating report...\n", "task completed\n"}},
		{"notification first", true, false, []string{"Generating report...\n", "task completed\n"}},
		{"error result", false, true, []string{"Generating report...\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &server{cfg: cfg.withDefaults(), m: &Manager{progress: newProgressRouter()}}
			log := &progressLog{}
			token := s.m.progress.add(&tool.Context{Progress: log})
			pt := &proxyTool{srv: s}
			f := pt.follow("t1", token)
			f.saw(mcp.Task{TaskId: "t1", Status: mcp.TaskStatusWorking, StatusMessage: "Generating report..."})
			if c.notified {
				f.saw(mcp.Task{TaskId: "t1", Status: mcp.TaskStatusCompleted, StatusMessage: "Generating report..."})
			}
			r := &mcp.TaskResultResult{Content: []mcp.Content{mcp.NewTextContent("# Report")}, IsError: c.isError}
			if c.isError {
				// An error result asks the task's status (tasks/get): give the
				// follow a terminal one so that no connection is needed.
				f.saw(mcp.Task{TaskId: "t1", Status: mcp.TaskStatusFailed, StatusMessage: "Generating report..."})
				c.wantLines = append(c.wantLines, "task failed\n")
			}
			res, err := pt.taskEnded(t.Context(), nil, nil, f, nil, r, nil)
			if err != nil || !strings.Contains(res.Text(), "# Report") {
				t.Fatalf("taskEnded = %v, %v", res, err)
			}
			if got := log.all(); !reflect.DeepEqual(got, c.wantLines) {
				t.Errorf("progress %q, want %q", got, c.wantLines)
			}
		})
	}
}

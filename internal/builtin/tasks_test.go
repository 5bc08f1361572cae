package builtin

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// storeEnv is a real SQLite store with the task, memory and scratchpad tools on it.
type storeEnv struct {
	st    *store.SQLite
	tools map[string]tool.Tool
}

func newStoreEnv(t *testing.T) *storeEnv {
	t.Helper()
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "toolserverd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &storeEnv{st: st, tools: map[string]tool.Tool{}}
	for _, tl := range append(append(TaskTools(st), MemoryTools(st)...), ScratchpadTools(st)...) {
		e.tools[tl.Spec().Name] = tl
	}
	return e
}

func storeSession(tenant, id string) *tool.Session {
	return &tool.Session{ID: id, Tenant: tenant, State: tool.NewState()}
}

// run calls a tool the way the dispatcher does (a returned error becomes an error
// result); args is marshalled unless it is a string, which is sent as it is.
func (e *storeEnv) run(t *testing.T, ctx context.Context, sess *tool.Session, name string, args any) *tool.Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	tl, found := e.tools[name]
	if !found {
		t.Fatalf("no tool %s", name)
	}
	tctx := &tool.Context{Context: ctx, CallID: "tc_test", ToolName: name, Session: sess, Progress: tool.NoProgress}
	res, err := tl.Run(tctx, json.RawMessage(raw))
	if err != nil {
		res = tool.FromError(err)
	}
	if res == nil {
		t.Fatalf("%s returned no result and no error", name)
	}
	if !res.IsError && !json.Valid(res.Structured) {
		t.Errorf("%s: structured content %q is not JSON", name, res.Structured)
	}
	return res
}

func (e *storeEnv) ok(t *testing.T, sess *tool.Session, name string, args any) *tool.Result {
	t.Helper()
	res := e.run(t, t.Context(), sess, name, args)
	if res.IsError {
		t.Fatalf("%s(%v): %s: %s", name, args, res.ErrorKind, res.Text())
	}
	return res
}

// fails runs a call that must fail with kind, its text containing every of want.
func (e *storeEnv) fails(t *testing.T, sess *tool.Session, name string, args any, kind tool.ErrorKind, want ...string) {
	t.Helper()
	res := e.run(t, t.Context(), sess, name, args)
	if !res.IsError || res.ErrorKind != kind {
		t.Errorf("%s(%v) = is_error %v kind %q %q, want kind %q", name, args, res.IsError, res.ErrorKind, res.Text(), kind)
		return
	}
	for _, w := range want {
		if !strings.Contains(res.Text(), w) {
			t.Errorf("%s(%v): message %q does not contain %q", name, args, res.Text(), w)
		}
	}
}

type taskOut struct {
	ID           string          `json:"id"`
	Subject      string          `json:"subject"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	Owner        string          `json:"owner"`
	BlockedBy    []string        `json:"blocked_by"`
	OpenBlockers []string        `json:"open_blockers"`
	Blocks       []string        `json:"blocks"`
	Metadata     json.RawMessage `json:"metadata"`
	CreatedAt    string          `json:"created_at"`
}

func (e *storeEnv) createTask(t *testing.T, sess *tool.Session, args map[string]any) taskOut {
	t.Helper()
	return decode[taskOut](t, e.ok(t, sess, "task_create", args))
}

func TestTaskCreateGet(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	a := e.createTask(t, sess, map[string]any{"subject": "  Set up the repo  "})
	if !strings.HasPrefix(a.ID, "task_") || a.Subject != "Set up the repo" || a.Status != "pending" ||
		a.BlockedBy == nil || len(a.BlockedBy) != 0 || a.CreatedAt == "" {
		t.Errorf("created %+v", a)
	}
	res := e.ok(t, sess, "task_create", map[string]any{
		"subject": "Write tests", "description": "Cover the parser.\nAll branches.", "owner": "agent-2",
		"blocked_by": []string{a.ID, a.ID}, "metadata": map[string]any{"files": []string{"parser.go"}},
	})
	b := decode[taskOut](t, res)
	if !strings.Contains(res.Text(), "Created "+b.ID+" [pending] Write tests (owner: agent-2) — blocked by "+a.ID) {
		t.Errorf("create text %q", res.Text())
	}
	if !reflect.DeepEqual(b.BlockedBy, []string{a.ID}) || !reflect.DeepEqual(b.OpenBlockers, []string{a.ID}) ||
		string(b.Metadata) != `{"files":["parser.go"]}` {
		t.Errorf("created %+v", b)
	}

	res = e.ok(t, sess, "task_get", map[string]any{"id": a.ID})
	got := decode[taskOut](t, res)
	if got.ID != a.ID || !reflect.DeepEqual(got.Blocks, []string{b.ID}) {
		t.Errorf("task_get(a) = %+v, want blocks [%s]", got, b.ID)
	}
	res = e.ok(t, sess, "task_get", map[string]any{"id": " " + b.ID + " "})
	got = decode[taskOut](t, res)
	if got.Description != "Cover the parser.\nAll branches." || got.Owner != "agent-2" || len(got.Blocks) != 0 {
		t.Errorf("task_get(b) = %+v", got)
	}
	for _, want := range []string{"Cover the parser.", "blocked_by: " + a.ID, `metadata: {"files":["parser.go"]}`} {
		if !strings.Contains(res.Text(), want) {
			t.Errorf("task_get text %q lacks %q", res.Text(), want)
		}
	}
}

func TestTaskBadInput(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	a := e.createTask(t, sess, map[string]any{"subject": "a"})
	b := e.createTask(t, sess, map[string]any{"subject": "b", "blocked_by": []string{a.ID}})
	other := e.createTask(t, storeSession("acme", "ses_2"), map[string]any{"subject": "elsewhere"})
	long := strings.Repeat("x", maxTaskSubject+1)
	tests := []struct {
		name string
		tool string
		args any
		kind tool.ErrorKind
		want []string
	}{
		{"create: no subject", "task_create", map[string]any{}, tool.KindInvalidArgs, []string{"subject is empty"}},
		{"create: blank subject", "task_create", map[string]any{"subject": " \t"}, tool.KindInvalidArgs, []string{"subject"}},
		{"create: subject too long", "task_create", map[string]any{"subject": long}, tool.KindInvalidArgs, []string{"301 characters"}},
		{"create: NUL", "task_create", map[string]any{"subject": "a\u0000b"}, tool.KindInvalidArgs, []string{"NUL"}},
		{"create: huge description", "task_create", map[string]any{"subject": "x", "description": strings.Repeat("d", maxTaskDescription+1)}, tool.KindInvalidArgs, []string{"description"}},
		{"create: unknown blocker", "task_create", map[string]any{"subject": "x", "blocked_by": []string{"task_nope"}}, tool.KindInvalidArgs, []string{"task_nope is not a task of this session"}},
		{"create: other session's blocker", "task_create", map[string]any{"subject": "x", "blocked_by": []string{other.ID}}, tool.KindInvalidArgs, []string{other.ID}},
		{"create: empty blocker", "task_create", map[string]any{"subject": "x", "blocked_by": []string{" "}}, tool.KindInvalidArgs, []string{"empty task id"}},
		{"create: metadata not an object", "task_create", `{"subject":"x","metadata":[1]}`, tool.KindInvalidArgs, []string{"metadata"}},
		{"create: unknown field", "task_create", `{"subject":"x","priority":1}`, tool.KindInvalidArgs, []string{"priority"}},
		{"get: unknown id", "task_get", map[string]any{"id": "task_nope"}, tool.KindNotFound, []string{"task_nope"}},
		{"get: other session's id", "task_get", map[string]any{"id": other.ID}, tool.KindNotFound, nil},
		{"list: bad status", "task_list", map[string]any{"status": "done"}, tool.KindInvalidArgs, []string{`"done"`}},
		{"update: unknown id", "task_update", map[string]any{"id": "task_nope", "status": "completed"}, tool.KindNotFound, []string{"task_nope"}},
		{"update: other session's id", "task_update", map[string]any{"id": other.ID, "status": "completed"}, tool.KindNotFound, nil},
		{"update: nothing to change", "task_update", map[string]any{"id": a.ID}, tool.KindInvalidArgs, []string{"nothing to update"}},
		{"update: bad status", "task_update", map[string]any{"id": a.ID, "status": "finished"}, tool.KindInvalidArgs, []string{"finished"}},
		{"update: empty subject", "task_update", map[string]any{"id": a.ID, "subject": ""}, tool.KindInvalidArgs, []string{"subject is empty"}},
		{"update: blocks itself", "task_update", map[string]any{"id": a.ID, "blocked_by": []string{a.ID}}, tool.KindInvalidArgs, []string{"cannot block itself"}},
		{"update: cycle", "task_update", map[string]any{"id": a.ID, "blocked_by": []string{b.ID}}, tool.KindInvalidArgs, []string{"cycle", b.ID + " is blocked by " + a.ID}},
		{"update: unknown blocker", "task_update", map[string]any{"id": a.ID, "blocked_by": []string{"task_ghost"}}, tool.KindInvalidArgs, []string{"task_ghost"}},
		{"update: too many blockers", "task_update", map[string]any{"id": a.ID, "blocked_by": make([]string, maxTaskBlockers+1)}, tool.KindInvalidArgs, []string{"51 tasks"}},
		{"update: metadata string", "task_update", `{"id":"` + a.ID + `","metadata":"x"}`, tool.KindInvalidArgs, []string{"metadata"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fails(t, sess, tt.tool, tt.args, tt.kind, tt.want...)
		})
	}
	// Nothing of the refused calls was written.
	list := decode[taskListOut](t, e.ok(t, sess, "task_list", map[string]any{}))
	if list.Total != 2 {
		t.Errorf("%d tasks after refused calls, want 2", list.Total)
	}
	if got := decode[taskOut](t, e.ok(t, sess, "task_get", map[string]any{"id": a.ID})); len(got.BlockedBy) != 0 || got.Status != "pending" {
		t.Errorf("a changed by refused updates: %+v", got)
	}
	// Without a session the tools cannot work.
	res := e.run(t, t.Context(), nil, "task_list", map[string]any{})
	if res.ErrorKind != tool.KindUnavailable {
		t.Errorf("task_list without a session: %s %s", res.ErrorKind, res.Text())
	}
}

type taskListOut struct {
	Tasks  []taskOut      `json:"tasks"`
	Counts map[string]int `json:"counts"`
	Total  int            `json:"total"`
}

func TestTaskListAndUpdate(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	empty := e.ok(t, sess, "task_list", map[string]any{})
	if out := decode[taskListOut](t, empty); out.Total != 0 || out.Tasks == nil || !strings.Contains(empty.Text(), "No tasks") {
		t.Errorf("empty list: %s / %s", empty.Text(), empty.Structured)
	}
	a := e.createTask(t, sess, map[string]any{"subject": "design", "owner": "alice", "description": "long text"})
	if one := e.ok(t, sess, "task_list", map[string]any{}); !strings.HasPrefix(one.Text(), "1 task in this session: 1 pending,") {
		t.Errorf("one task: %q", one.Text())
	}
	b := e.createTask(t, sess, map[string]any{"subject": "build", "blocked_by": []string{a.ID}})
	c := e.createTask(t, sess, map[string]any{"subject": "ship", "blocked_by": []string{a.ID, b.ID}})

	res := e.ok(t, sess, "task_update", map[string]any{"id": a.ID, "status": "in_progress", "owner": "bob"})
	if !strings.Contains(res.Text(), "status: pending → in_progress") || !strings.Contains(res.Text(), `owner: "alice" → "bob"`) {
		t.Errorf("update text %q", res.Text())
	}
	type updateOut struct {
		Task      taskOut  `json:"task"`
		Changed   []string `json:"changed"`
		Unblocked []string `json:"unblocked"`
	}
	if u := decode[updateOut](t, res); !reflect.DeepEqual(u.Changed, []string{"status", "owner"}) || u.Task.Owner != "bob" {
		t.Errorf("update = %+v", u)
	}
	// Starting b while a is open is allowed, with a note.
	res = e.ok(t, sess, "task_update", map[string]any{"id": b.ID, "status": "in_progress"})
	if !strings.Contains(res.Text(), "still blocked by open tasks: "+a.ID) {
		t.Errorf("no note about open blockers: %q", res.Text())
	}
	// Completing a unblocks b, not c (c also waits for b); completing b unblocks c.
	if u := decode[updateOut](t, e.ok(t, sess, "task_update", map[string]any{"id": a.ID, "status": "completed"})); !reflect.DeepEqual(u.Unblocked, []string{b.ID}) {
		t.Errorf("completing a unblocked %v, want [%s]", u.Unblocked, b.ID)
	}
	res = e.ok(t, sess, "task_update", map[string]any{"id": b.ID, "status": "completed", "metadata": map[string]any{"pr": 12}})
	if u := decode[updateOut](t, res); !reflect.DeepEqual(u.Unblocked, []string{c.ID}) || string(u.Task.Metadata) != `{"pr":12}` {
		t.Errorf("completing b: %+v (%s)", u, res.Text())
	}
	// Same values again: nothing changed, said so.
	res = e.ok(t, sess, "task_update", map[string]any{"id": b.ID, "status": "completed"})
	if u := decode[updateOut](t, res); len(u.Changed) != 0 || !strings.Contains(res.Text(), "Nothing changed") {
		t.Errorf("no-op update: %+v %q", u, res.Text())
	}
	// Clearing blocked_by and editing text fields.
	res = e.ok(t, sess, "task_update", map[string]any{"id": c.ID, "blocked_by": []string{}, "subject": "ship it", "description": "now"})
	if u := decode[updateOut](t, res); !reflect.DeepEqual(u.Changed, []string{"subject", "description", "blocked_by"}) ||
		len(u.Task.BlockedBy) != 0 || u.Task.Subject != "ship it" {
		t.Errorf("edit c: %+v", u)
	}

	tests := []struct {
		name   string
		args   map[string]any
		want   []string
		counts map[string]int
	}{
		{"all", map[string]any{}, []string{a.ID, b.ID, c.ID}, nil},
		{"completed", map[string]any{"status": "completed"}, []string{a.ID, b.ID}, nil},
		{"pending", map[string]any{"status": "pending"}, []string{c.ID}, nil},
		{"owner", map[string]any{"owner": "bob"}, []string{a.ID}, nil},
		{"no match", map[string]any{"status": "cancelled", "owner": "bob"}, []string{}, nil},
	}
	for _, tt := range tests {
		res := e.ok(t, sess, "task_list", tt.args)
		out := decode[taskListOut](t, res)
		var ids []string
		for _, task := range out.Tasks {
			ids = append(ids, task.ID)
			if task.Description != "" || task.Metadata != nil {
				t.Errorf("%s: list shows description/metadata of %s", tt.name, task.ID)
			}
		}
		if ids == nil {
			ids = []string{}
		}
		if !reflect.DeepEqual(ids, tt.want) || out.Total != 3 ||
			!reflect.DeepEqual(out.Counts, map[string]int{"pending": 1, "in_progress": 0, "completed": 2, "cancelled": 0}) {
			t.Errorf("%s: ids %v total %d counts %v; want %v", tt.name, ids, out.Total, out.Counts, tt.want)
		}
		if !strings.HasPrefix(res.Text(), "3 tasks in this session: 1 pending, 0 in_progress, 2 completed, 0 cancelled.") {
			t.Errorf("%s: text %q", tt.name, res.Text())
		}
	}
}

func TestTaskIsolation(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	mine := storeSession("acme", "ses_1")
	a := e.createTask(t, mine, map[string]any{"subject": "private"})
	for _, other := range []*tool.Session{storeSession("acme", "ses_2"), storeSession("globex", "ses_1"), storeSession("", "ses_1")} {
		if out := decode[taskListOut](t, e.ok(t, other, "task_list", map[string]any{})); out.Total != 0 {
			t.Errorf("%s/%s sees %d tasks", other.Tenant, other.ID, out.Total)
		}
		e.fails(t, other, "task_get", map[string]any{"id": a.ID}, tool.KindNotFound)
		e.fails(t, other, "task_update", map[string]any{"id": a.ID, "status": "cancelled"}, tool.KindNotFound)
		e.fails(t, other, "task_create", map[string]any{"subject": "x", "blocked_by": []string{a.ID}}, tool.KindInvalidArgs)
	}
	if got := decode[taskOut](t, e.ok(t, mine, "task_get", map[string]any{"id": a.ID})); got.Status != "pending" {
		t.Errorf("status changed from another scope: %s", got.Status)
	}
}

func TestTaskSessionLimit(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	for i := range maxTasksPerSession {
		if err := e.st.CreateTask(t.Context(), &store.Task{Tenant: "acme", SessionID: "ses_1", Subject: "t" + string(rune('a'+i%26))}); err != nil {
			t.Fatal(err)
		}
	}
	e.fails(t, sess, "task_create", map[string]any{"subject": "one too many"}, tool.KindFailed, "500 tasks")
	e.ok(t, storeSession("acme", "ses_2"), "task_create", map[string]any{"subject": "other session is fine"})
}

func TestTaskCancelled(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, args := range map[string]any{
		"task_create": map[string]any{"subject": "x"}, "task_list": map[string]any{},
		"task_get": map[string]any{"id": "task_x"}, "task_update": map[string]any{"id": "task_x", "status": "completed"},
	} {
		if res := e.run(t, ctx, sess, name, args); res.ErrorKind != tool.KindCancelled {
			t.Errorf("%s with a cancelled context: %s %s", name, res.ErrorKind, res.Text())
		}
	}
}

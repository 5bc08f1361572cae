package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// RunTasks runs the conformance suite of store.TaskStore. open is called once per
// subtest and must return an empty store closed in t.Cleanup.
func RunTasks(t *testing.T, open func(t *testing.T) store.TaskStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.TaskStore)
	}{
		{"RoundTrip", testTaskRoundTrip},
		{"Defaults", testTaskDefaults},
		{"Invalid", testTaskInvalid},
		{"Duplicate", testTaskDuplicate},
		{"Scoping", testTaskScoping},
		{"List", testTaskList},
		{"Update", testTaskUpdate},
		{"UpdateDependencies", testTaskUpdateDependencies},
		{"ConcurrentCycle", testTaskConcurrentCycle},
		{"ContextCancelled", testTaskContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

func newTestTask(id, session, subject string, created time.Time) *store.Task {
	return &store.Task{ID: id, Tenant: "acme", SessionID: session, Subject: subject, CreatedAt: created, UpdatedAt: created}
}

func mustCreateTask(t *testing.T, s store.TaskStore, task *store.Task) *store.Task {
	t.Helper()
	if err := s.CreateTask(t.Context(), task); err != nil {
		t.Fatalf("CreateTask(%s): %v", task.ID, err)
	}
	return task
}

func mustGetTask(t *testing.T, s store.TaskStore, tenant, session, id string) *store.Task {
	t.Helper()
	got, err := s.GetTask(t.Context(), tenant, session, id)
	if err != nil {
		t.Fatalf("GetTask(%s): %v", id, err)
	}
	return got
}

// checkTaskEqual compares every field; Metadata semantically, BlockedBy in order.
func checkTaskEqual(t *testing.T, got, want *store.Task) {
	t.Helper()
	if got.ID != want.ID || got.Tenant != want.Tenant || got.SessionID != want.SessionID ||
		got.Subject != want.Subject || got.Description != want.Description || got.Status != want.Status ||
		got.Owner != want.Owner {
		t.Errorf("task = %+v, want %+v", got, want)
	}
	wantBlocked := want.BlockedBy
	if wantBlocked == nil {
		wantBlocked = []string{}
	}
	if got.BlockedBy == nil || !reflect.DeepEqual(got.BlockedBy, wantBlocked) {
		t.Errorf("%s BlockedBy = %#v, want %#v", want.ID, got.BlockedBy, wantBlocked)
	}
	if !sameJSON(got.Metadata, want.Metadata) {
		t.Errorf("%s Metadata = %s, want %s", want.ID, got.Metadata, want.Metadata)
	}
	checkTime(t, want.ID+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, want.ID+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

func taskIDs(tasks []*store.Task) []string {
	ids := []string{}
	for _, t := range tasks {
		ids = append(ids, t.ID)
	}
	return ids
}

func testTaskRoundTrip(t *testing.T, s store.TaskStore) {
	first := mustCreateTask(t, s, newTestTask("task_1", "ses_1", "set up", base))
	full := &store.Task{
		ID: "task_2", Tenant: "acme", SessionID: "ses_1", Subject: "Write the <parser> & tests ü",
		Description: "line 1\nline 2 \u2028 end", Status: store.TaskInProgress, Owner: "agent-7",
		BlockedBy: []string{first.ID}, Metadata: json.RawMessage(`{"priority": 2, "labels": ["a", "b"]}`),
		CreatedAt: at(time.Second), UpdatedAt: at(time.Minute),
	}
	want := *full
	mustCreateTask(t, s, full)
	got := mustGetTask(t, s, "acme", "ses_1", "task_2")
	checkTaskEqual(t, got, &want)
	if string(got.Metadata) != string(want.Metadata) {
		t.Errorf("Metadata = %q, want the bytes given %q", got.Metadata, want.Metadata)
	}
	wantFirst := newTestTask("task_1", "ses_1", "set up", base)
	wantFirst.Status = store.TaskPending
	checkTaskEqual(t, mustGetTask(t, s, "acme", "ses_1", "task_1"), wantFirst)
}

func testTaskDefaults(t *testing.T, s store.TaskStore) {
	before := time.Now().Add(-time.Second)
	task := &store.Task{Tenant: "acme", SessionID: "ses_1", Subject: "x"}
	mustCreateTask(t, s, task)
	if !strings.HasPrefix(task.ID, "task_") || len(task.ID) < len("task_")+10 {
		t.Errorf("generated id %q, want task_ and random characters", task.ID)
	}
	if task.Status != store.TaskPending {
		t.Errorf("default status %q, want pending", task.Status)
	}
	if task.CreatedAt.Before(before) || task.CreatedAt.After(time.Now().Add(time.Second)) || !task.UpdatedAt.Equal(task.CreatedAt) {
		t.Errorf("timestamps %s / %s, want about now and equal", task.CreatedAt, task.UpdatedAt)
	}
	got := mustGetTask(t, s, "acme", "ses_1", task.ID)
	checkTaskEqual(t, got, task)
	if got.Metadata != nil {
		t.Errorf("Metadata = %q, want nil", got.Metadata)
	}
	other := &store.Task{Tenant: "acme", SessionID: "ses_1", Subject: "y"}
	mustCreateTask(t, s, other)
	if other.ID == task.ID {
		t.Errorf("two generated ids are both %q", task.ID)
	}
	// Duplicate blocked_by ids are kept once, in order.
	dup := &store.Task{Tenant: "acme", SessionID: "ses_1", Subject: "z", BlockedBy: []string{other.ID, task.ID, other.ID}}
	mustCreateTask(t, s, dup)
	if got := mustGetTask(t, s, "acme", "ses_1", dup.ID); !reflect.DeepEqual(got.BlockedBy, []string{other.ID, task.ID}) {
		t.Errorf("BlockedBy = %v, want [%s %s]", got.BlockedBy, other.ID, task.ID)
	}
}

func testTaskInvalid(t *testing.T, s store.TaskStore) {
	mustCreateTask(t, s, newTestTask("task_1", "ses_1", "exists", base))
	mustCreateTask(t, s, newTestTask("task_other", "ses_2", "other session", base))
	tests := []struct {
		name    string
		task    *store.Task
		problem string // a *DependencyError's Problem, or "" for other ErrInvalid
	}{
		{"nil", nil, ""},
		{"no session", &store.Task{ID: "task_x", Subject: "x"}, ""},
		{"blank subject", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: " \n"}, ""},
		{"unknown status", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "x", Status: "done"}, ""},
		{"metadata array", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "x", Metadata: json.RawMessage(`[1]`)}, ""},
		{"metadata null", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "x", Metadata: json.RawMessage(`null`)}, ""},
		{"metadata not JSON", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "x", Metadata: json.RawMessage(`{`)}, ""},
		{"NUL in subject", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "a\x00b"}, ""},
		{"invalid UTF-8", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "x", Description: "\xff"}, ""},
		{"empty blocker id", &store.Task{ID: "task_x", SessionID: "ses_1", Subject: "x", BlockedBy: []string{""}}, ""},
		{"blocked by itself", &store.Task{ID: "task_x", Tenant: "acme", SessionID: "ses_1", Subject: "x", BlockedBy: []string{"task_x"}}, "self"},
		{"unknown blocker", &store.Task{ID: "task_x", Tenant: "acme", SessionID: "ses_1", Subject: "x", BlockedBy: []string{"task_1", "task_nope"}}, "unknown"},
		{"blocker of another session", &store.Task{ID: "task_x", Tenant: "acme", SessionID: "ses_1", Subject: "x", BlockedBy: []string{"task_other"}}, "unknown"},
		{"blocker of another tenant", &store.Task{ID: "task_x", Tenant: "globex", SessionID: "ses_1", Subject: "x", BlockedBy: []string{"task_1"}}, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.CreateTask(t.Context(), tt.task)
			wantErrIs(t, "CreateTask", err, store.ErrInvalid)
			var de *store.DependencyError
			if isDep := errors.As(err, &de); isDep != (tt.problem != "") || (isDep && de.Problem != tt.problem) {
				t.Errorf("error %v: want a DependencyError with problem %q: %v", err, tt.problem, isDep)
			}
			for _, tenant := range []string{"", "acme", "globex"} {
				if _, err := s.GetTask(t.Context(), tenant, "ses_1", "task_x"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("refused task was written (tenant %q): %v", tenant, err)
				}
			}
		})
	}
}

func testTaskDuplicate(t *testing.T, s store.TaskStore) {
	mustCreateTask(t, s, newTestTask("task_1", "ses_1", "first", base))
	err := s.CreateTask(t.Context(), newTestTask("task_1", "ses_2", "second", base))
	wantErrIs(t, "CreateTask(duplicate id)", err, store.ErrConflict)
	if got := mustGetTask(t, s, "acme", "ses_1", "task_1"); got.Subject != "first" {
		t.Errorf("subject = %q after a refused duplicate", got.Subject)
	}
}

func testTaskScoping(t *testing.T, s store.TaskStore) {
	mustCreateTask(t, s, newTestTask("task_1", "ses_1", "mine", base))
	tests := []struct{ tenant, session string }{
		{"globex", "ses_1"}, // another tenant, same session id
		{"acme", "ses_2"},   // another session of the tenant
		{"", "ses_1"},
	}
	for _, tt := range tests {
		if got, err := s.GetTask(t.Context(), tt.tenant, tt.session, "task_1"); !errors.Is(err, store.ErrNotFound) || got != nil {
			t.Errorf("GetTask as %s/%s = %+v, %v; want ErrNotFound", tt.tenant, tt.session, got, err)
		}
		list, err := s.ListTasks(t.Context(), tt.tenant, tt.session, store.TaskFilter{})
		if err != nil || list == nil || len(list) != 0 {
			t.Errorf("ListTasks as %s/%s = %v, %v; want an empty list", tt.tenant, tt.session, taskIDs(list), err)
		}
		subject := "stolen"
		_, err = s.UpdateTask(t.Context(), tt.tenant, tt.session, "task_1", store.TaskPatch{Subject: &subject})
		wantErrIs(t, "UpdateTask as "+tt.tenant+"/"+tt.session, err, store.ErrNotFound)
	}
	if got := mustGetTask(t, s, "acme", "ses_1", "task_1"); got.Subject != "mine" {
		t.Errorf("subject = %q, changed through another scope", got.Subject)
	}
	_, err := s.UpdateTask(t.Context(), "acme", "ses_1", "task_missing", store.TaskPatch{})
	wantErrIs(t, "UpdateTask(unknown id)", err, store.ErrNotFound)
}

func testTaskList(t *testing.T, s store.TaskStore) {
	// Created out of order; two share a created_at (insertion order breaks the tie).
	mk := func(id string, created time.Time, status store.TaskStatus, owner string) {
		task := newTestTask(id, "ses_1", "subject "+id, created)
		task.Status, task.Owner = status, owner
		mustCreateTask(t, s, task)
	}
	mk("task_c", at(3*time.Second), store.TaskCompleted, "bob")
	mk("task_a", at(time.Second), store.TaskPending, "alice")
	mk("task_z", at(2*time.Second), store.TaskInProgress, "alice")
	mk("task_b", at(2*time.Second), store.TaskPending, "")
	mk("task_x", at(0), store.TaskCancelled, "bob")
	other := newTestTask("task_o", "ses_2", "other session", base)
	mustCreateTask(t, s, other)

	tests := []struct {
		name   string
		filter store.TaskFilter
		want   []string
	}{
		{"all", store.TaskFilter{}, []string{"task_x", "task_a", "task_z", "task_b", "task_c"}},
		{"pending", store.TaskFilter{Status: store.TaskPending}, []string{"task_a", "task_b"}},
		{"owner", store.TaskFilter{Owner: "alice"}, []string{"task_a", "task_z"}},
		{"status and owner", store.TaskFilter{Status: store.TaskCancelled, Owner: "bob"}, []string{"task_x"}},
		{"no match", store.TaskFilter{Status: store.TaskCompleted, Owner: "alice"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListTasks(t.Context(), "acme", "ses_1", tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if ids := taskIDs(got); !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListTasks(%+v) = %v, want %v", tt.filter, ids, tt.want)
			}
		})
	}
}

func testTaskUpdate(t *testing.T, s store.TaskStore) {
	task := newTestTask("task_1", "ses_1", "draft", base)
	task.Description, task.Owner = "first version", "alice"
	task.Metadata = json.RawMessage(`{"keep":1,"drop":true,"change":"a"}`)
	mustCreateTask(t, s, task)
	want := *task
	str := func(s string) *string { return &s }
	status := func(s store.TaskStatus) *store.TaskStatus { return &s }
	steps := []struct {
		name  string
		patch store.TaskPatch
		apply func(w *store.Task)
	}{
		{"status", store.TaskPatch{Status: status(store.TaskInProgress), UpdatedAt: at(time.Minute)},
			func(w *store.Task) { w.Status = store.TaskInProgress }},
		{"subject and description", store.TaskPatch{Subject: str("final"), Description: str(""), UpdatedAt: at(2 * time.Minute)},
			func(w *store.Task) { w.Subject, w.Description = "final", "" }},
		{"owner cleared", store.TaskPatch{Owner: str(""), UpdatedAt: at(3 * time.Minute)},
			func(w *store.Task) { w.Owner = "" }},
		{"metadata merged", store.TaskPatch{Metadata: json.RawMessage(`{"drop":null,"change":"b","add":[1]}`), UpdatedAt: at(4 * time.Minute)},
			func(w *store.Task) { w.Metadata = json.RawMessage(`{"keep":1,"change":"b","add":[1]}`) }},
		{"empty patch only touches updated_at", store.TaskPatch{UpdatedAt: at(5 * time.Minute)}, func(*store.Task) {}},
		{"metadata emptied", store.TaskPatch{Metadata: json.RawMessage(`{"keep":null,"change":null,"add":null}`), UpdatedAt: at(6 * time.Minute)},
			func(w *store.Task) { w.Metadata = nil }},
	}
	for _, st := range steps {
		got, err := s.UpdateTask(t.Context(), "acme", "ses_1", "task_1", st.patch)
		if err != nil {
			t.Fatalf("%s: UpdateTask: %v", st.name, err)
		}
		st.apply(&want)
		want.UpdatedAt = st.patch.UpdatedAt
		checkTaskEqual(t, got, &want)
		checkTaskEqual(t, mustGetTask(t, s, "acme", "ses_1", "task_1"), &want)
	}

	before := time.Now().Add(-time.Second)
	got, err := s.UpdateTask(t.Context(), "acme", "ses_1", "task_1", store.TaskPatch{Status: status(store.TaskCompleted)})
	if err != nil {
		t.Fatal(err)
	}
	if got.UpdatedAt.Before(before) || got.Status != store.TaskCompleted {
		t.Errorf("zero UpdatedAt became %s (status %s), want about now", got.UpdatedAt, got.Status)
	}
	checkTime(t, "CreatedAt after updates", got.CreatedAt, base)

	bad := []struct {
		name  string
		patch store.TaskPatch
	}{
		{"unknown status", store.TaskPatch{Status: status("done")}},
		{"blank subject", store.TaskPatch{Subject: str("  ")}},
		{"metadata not an object", store.TaskPatch{Metadata: json.RawMessage(`"x"`)}},
		{"NUL in owner", store.TaskPatch{Owner: str("a\x00")}},
	}
	for _, b := range bad {
		_, err := s.UpdateTask(t.Context(), "acme", "ses_1", "task_1", b.patch)
		wantErrIs(t, "UpdateTask("+b.name+")", err, store.ErrInvalid)
	}
	if final := mustGetTask(t, s, "acme", "ses_1", "task_1"); final.Status != store.TaskCompleted || final.Subject != "final" {
		t.Errorf("refused patches changed the task: %+v", final)
	}
}

func testTaskUpdateDependencies(t *testing.T, s store.TaskStore) {
	// c is blocked by b, b by a.
	mustCreateTask(t, s, newTestTask("task_a", "ses_1", "a", base))
	b := newTestTask("task_b", "ses_1", "b", at(time.Second))
	b.BlockedBy = []string{"task_a"}
	mustCreateTask(t, s, b)
	c := newTestTask("task_c", "ses_1", "c", at(2*time.Second))
	c.BlockedBy = []string{"task_b"}
	mustCreateTask(t, s, c)
	mustCreateTask(t, s, newTestTask("task_d", "ses_1", "d", at(3*time.Second)))
	mustCreateTask(t, s, newTestTask("task_elsewhere", "ses_2", "e", base))

	refused := []struct {
		name, id string
		blocked  []string
		problem  string
		path     []string
	}{
		{"itself", "task_a", []string{"task_d", "task_a"}, "self", nil},
		{"unknown", "task_a", []string{"task_nope"}, "unknown", nil},
		{"another session's task", "task_a", []string{"task_elsewhere"}, "unknown", nil},
		{"direct cycle", "task_b", []string{"task_c"}, "cycle", []string{"task_c", "task_b"}},
		{"transitive cycle", "task_a", []string{"task_d", "task_c"}, "cycle", []string{"task_c", "task_b", "task_a"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.UpdateTask(t.Context(), "acme", "ses_1", tt.id, store.TaskPatch{BlockedBy: tt.blocked, Subject: taskText("changed")})
			var de *store.DependencyError
			if !errors.As(err, &de) || !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("UpdateTask = %v, want a DependencyError that is ErrInvalid", err)
			}
			if de.Problem != tt.problem || de.Task != tt.id || (tt.path != nil && !reflect.DeepEqual(de.Path, tt.path)) {
				t.Errorf("DependencyError %+v, want problem %s task %s path %v", de, tt.problem, tt.id, tt.path)
			}
			if got := mustGetTask(t, s, "acme", "ses_1", tt.id); got.Subject == "changed" {
				t.Errorf("refused update was written: %+v", got)
			}
		})
	}

	// Allowed: d blocked by c (no path back), then a cleared list.
	got, err := s.UpdateTask(t.Context(), "acme", "ses_1", "task_d", store.TaskPatch{BlockedBy: []string{"task_c", "task_a", "task_c"}})
	if err != nil {
		t.Fatalf("UpdateTask(d blocked by c, a): %v", err)
	}
	if !reflect.DeepEqual(got.BlockedBy, []string{"task_c", "task_a"}) {
		t.Errorf("BlockedBy = %v, want [task_c task_a]", got.BlockedBy)
	}
	got, err = s.UpdateTask(t.Context(), "acme", "ses_1", "task_c", store.TaskPatch{SetBlockedBy: true})
	if err != nil || got.BlockedBy == nil || len(got.BlockedBy) != 0 {
		t.Fatalf("UpdateTask(clear c's list) = %+v, %v; want an empty list", got, err)
	}
	// With c no longer blocked by b, b may now wait for c.
	if _, err := s.UpdateTask(t.Context(), "acme", "ses_1", "task_b", store.TaskPatch{BlockedBy: []string{"task_c"}}); err != nil {
		t.Errorf("UpdateTask(b blocked by c) after the cycle was broken: %v", err)
	}
	// A patch without BlockedBy keeps the list.
	got, err = s.UpdateTask(t.Context(), "acme", "ses_1", "task_d", store.TaskPatch{Owner: taskText("x")})
	if err != nil || !reflect.DeepEqual(got.BlockedBy, []string{"task_c", "task_a"}) {
		t.Errorf("UpdateTask(owner only) = %v, %v; want BlockedBy kept", got.BlockedBy, err)
	}
}

func taskText(s string) *string { return &s }

// testTaskConcurrentCycle: two updates that would each close half of a cycle run at
// once; at most one may win, whatever the interleaving.
func testTaskConcurrentCycle(t *testing.T, s store.TaskStore) {
	mustCreateTask(t, s, newTestTask("task_a", "ses_1", "a", base))
	mustCreateTask(t, s, newTestTask("task_b", "ses_1", "b", base))
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, pair := range [][2]string{{"task_a", "task_b"}, {"task_b", "task_a"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.UpdateTask(t.Context(), "acme", "ses_1", pair[0], store.TaskPatch{BlockedBy: []string{pair[1]}})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrInvalid):
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d of two cycle-closing updates succeeded (%v), want exactly one", round, won, errs)
		}
		for _, id := range []string{"task_a", "task_b"} {
			if _, err := s.UpdateTask(t.Context(), "acme", "ses_1", id, store.TaskPatch{SetBlockedBy: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func testTaskContextCancelled(t *testing.T, s store.TaskStore) {
	mustCreateTask(t, s, newTestTask("task_1", "ses_1", "x", base))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"CreateTask": func() error { return s.CreateTask(ctx, newTestTask("task_new", "ses_1", "y", base)) },
		"GetTask":    func() error { _, err := s.GetTask(ctx, "acme", "ses_1", "task_1"); return err },
		"ListTasks":  func() error { _, err := s.ListTasks(ctx, "acme", "ses_1", store.TaskFilter{}); return err },
		"UpdateTask": func() error {
			_, err := s.UpdateTask(ctx, "acme", "ses_1", "task_1", store.TaskPatch{Subject: taskText("changed")})
			return err
		},
	}
	for name, call := range calls {
		wantErrIs(t, name+" with a cancelled context", call(), context.Canceled)
	}
	if _, err := s.GetTask(t.Context(), "acme", "ses_1", "task_new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("task from a cancelled CreateTask: %v", err)
	}
	if got := mustGetTask(t, s, "acme", "ses_1", "task_1"); got.Subject != "x" {
		t.Errorf("subject %q after a cancelled update", got.Subject)
	}
}

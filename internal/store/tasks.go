package store

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TaskStatus is where a task of a session's task list is.
type TaskStatus string

const (
	TaskPending    TaskStatus = "pending"
	TaskInProgress TaskStatus = "in_progress"
	TaskCompleted  TaskStatus = "completed"
	TaskCancelled  TaskStatus = "cancelled"
)

// TaskStatuses lists the valid statuses in their natural order.
var TaskStatuses = []TaskStatus{TaskPending, TaskInProgress, TaskCompleted, TaskCancelled}

// Valid reports whether s is a known status.
func (s TaskStatus) Valid() bool { return slices.Contains(TaskStatuses, s) }

// Done reports whether a task in status s no longer blocks the tasks it blocks.
func (s TaskStatus) Done() bool { return s == TaskCompleted || s == TaskCancelled }

// Task is one entry of a session's task list. Tasks are scoped to a tenant and a
// session: every read and update names both, and a task of another session or tenant
// is ErrNotFound.
type Task struct {
	ID          string // task_…; CreateTask generates one when empty
	Tenant      string
	SessionID   string
	Subject     string
	Description string
	Status      TaskStatus // CreateTask defaults an empty status to pending
	Owner       string     // free text: the agent or person working on it
	// BlockedBy are ids of tasks of the same session that must be done first. Never
	// nil when read back.
	BlockedBy []string
	// Metadata is a JSON object (or nil); the store keeps the bytes it was given until
	// an update merges into it.
	Metadata  json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TaskFilter selects tasks in ListTasks; zero fields match everything.
type TaskFilter struct {
	Status TaskStatus
	Owner  string
}

// TaskPatch is a change to a task; nil fields are left alone.
type TaskPatch struct {
	Subject     *string
	Description *string
	Status      *TaskStatus
	Owner       *string
	// BlockedBy replaces the whole list (an empty, non-nil slice clears it).
	BlockedBy []string
	// SetBlockedBy says BlockedBy is part of the patch (a nil BlockedBy then clears).
	SetBlockedBy bool
	// Metadata is merged into the task's metadata object: each member replaces the
	// member of that name, a null member removes it.
	Metadata json.RawMessage
	// UpdatedAt is the time of the change; zero means now.
	UpdatedAt time.Time
}

// TaskStore keeps session task lists. Every method honours ctx.
type TaskStore interface {
	// CreateTask inserts t, filling an empty ID, an empty Status and zero timestamps
	// in t. Every BlockedBy id must name a task of the same session and tenant
	// (*DependencyError otherwise).
	CreateTask(ctx context.Context, t *Task) error
	// GetTask returns ErrNotFound unless the task exists in that tenant and session.
	GetTask(ctx context.Context, tenant, sessionID, id string) (*Task, error)
	// ListTasks returns the session's tasks matching f, oldest first.
	ListTasks(ctx context.Context, tenant, sessionID string, f TaskFilter) ([]*Task, error)
	// UpdateTask applies p in one transaction and returns the task as it is now. A
	// new BlockedBy is checked there: unknown ids, the task itself and dependency
	// cycles are a *DependencyError, and nothing is written.
	UpdateTask(ctx context.Context, tenant, sessionID, id string, p TaskPatch) (*Task, error)
}

var (
	_ TaskStore = (*SQLite)(nil)
	_ TaskStore = (*Postgres)(nil)
)

// DependencyError.Problem values.
const (
	DependencyUnknown = "unknown" // the blocker is not a task of the session
	DependencySelf    = "self"    // a task cannot block itself
	DependencyCycle   = "cycle"   // the blocker already depends on the task
)

// DependencyError explains why a task's BlockedBy list was refused. It matches
// errors.Is(err, ErrInvalid).
type DependencyError struct {
	Task    string // the task being created or updated
	Blocker string // the offending id in BlockedBy
	// Problem is "unknown" (no such task in the session), "self" (a task cannot block
	// itself) or "cycle" (Blocker already depends on Task, through Path).
	Problem string
	// Path, for a cycle, is the chain Blocker → … → Task of existing blocked_by links.
	Path []string
}

func (e *DependencyError) Error() string {
	switch e.Problem {
	case DependencyUnknown:
		return fmt.Sprintf("blocked_by: %s is not a task of this session", e.Blocker)
	case DependencySelf:
		return fmt.Sprintf("blocked_by: task %s cannot block itself", e.Task)
	default:
		links := make([]string, 0, len(e.Path))
		for i := 0; i+1 < len(e.Path); i++ {
			links = append(links, e.Path[i]+" is blocked by "+e.Path[i+1])
		}
		return fmt.Sprintf("blocked_by: %s would make a dependency cycle, because %s", e.Blocker, strings.Join(links, ", "))
	}
}

// Is makes a DependencyError an ErrInvalid.
func (e *DependencyError) Is(target error) bool { return target == ErrInvalid }

var shortIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newShortID returns prefix and 80 random bits: short enough for a model to copy,
// far from colliding.
func newShortID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + shortIDEncoding.EncodeToString(b[:])
}

// cleanTaskIDs drops duplicates, keeping the first occurrence's order, and refuses empty ids.
func cleanTaskIDs(what string, ids []string) ([]string, error) {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("%s: empty task id: %w", what, ErrInvalid)
		}
		if err := checkStoredText(what, id); err != nil {
			return nil, err
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// prepareTask validates t and fills its defaults in place.
func prepareTask(t *Task) error {
	if t == nil {
		return fmt.Errorf("nil task: %w", ErrInvalid)
	}
	if t.ID == "" {
		t.ID = newShortID("task_")
	}
	if t.SessionID == "" {
		return fmt.Errorf("task %s: session id is empty: %w", t.ID, ErrInvalid)
	}
	if strings.TrimSpace(t.Subject) == "" {
		return fmt.Errorf("task %s: subject is empty: %w", t.ID, ErrInvalid)
	}
	for what, text := range map[string]string{"subject": t.Subject, "description": t.Description, "owner": t.Owner, "tenant": t.Tenant} {
		if err := checkStoredText("task "+t.ID+": "+what, text); err != nil {
			return err
		}
	}
	if t.Status == "" {
		t.Status = TaskPending
	}
	if !t.Status.Valid() {
		return fmt.Errorf("task %s: unknown status %q: %w", t.ID, t.Status, ErrInvalid)
	}
	if err := checkTaskMetadata("task "+t.ID+": metadata", t.Metadata); err != nil {
		return err
	}
	ids, err := cleanTaskIDs("task "+t.ID+": blocked_by", t.BlockedBy)
	if err != nil {
		return err
	}
	t.BlockedBy = ids
	if slices.Contains(ids, t.ID) {
		return &DependencyError{Task: t.ID, Blocker: t.ID, Problem: DependencySelf}
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	t.CreatedAt, t.UpdatedAt = utcMicro(t.CreatedAt), utcMicro(t.UpdatedAt)
	return nil
}

// checkTaskMetadata accepts nothing or a JSON object.
func checkTaskMetadata(what string, b json.RawMessage) error {
	if len(b) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return fmt.Errorf("%s is not a JSON object: %w", what, ErrInvalid)
	}
	return nil
}

// checkPatch validates p before a transaction is opened.
func checkPatch(id string, p *TaskPatch) error {
	for what, text := range map[string]*string{"subject": p.Subject, "description": p.Description, "owner": p.Owner} {
		if text == nil {
			continue
		}
		if err := checkStoredText("task "+id+": "+what, *text); err != nil {
			return err
		}
	}
	if p.Subject != nil && strings.TrimSpace(*p.Subject) == "" {
		return fmt.Errorf("task %s: subject is empty: %w", id, ErrInvalid)
	}
	if p.Status != nil && !p.Status.Valid() {
		return fmt.Errorf("task %s: unknown status %q: %w", id, *p.Status, ErrInvalid)
	}
	if err := checkTaskMetadata("task "+id+": metadata patch", p.Metadata); err != nil {
		return err
	}
	if p.BlockedBy != nil {
		p.SetBlockedBy = true
	}
	if p.SetBlockedBy {
		ids, err := cleanTaskIDs("task "+id+": blocked_by", p.BlockedBy)
		if err != nil {
			return err
		}
		p.BlockedBy = ids
		if slices.Contains(ids, id) {
			return &DependencyError{Task: id, Blocker: id, Problem: DependencySelf}
		}
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = now()
	}
	return nil
}

// applyPatch changes t as p says. p has passed checkPatch.
func applyPatch(t *Task, p TaskPatch) error {
	if p.Subject != nil {
		t.Subject = *p.Subject
	}
	if p.Description != nil {
		t.Description = *p.Description
	}
	if p.Status != nil {
		t.Status = *p.Status
	}
	if p.Owner != nil {
		t.Owner = *p.Owner
	}
	if p.SetBlockedBy {
		t.BlockedBy = append([]string{}, p.BlockedBy...)
	}
	if len(p.Metadata) > 0 {
		merged, err := mergeTaskMetadata(t.Metadata, p.Metadata)
		if err != nil {
			return fmt.Errorf("task %s: metadata: %w", t.ID, err)
		}
		t.Metadata = merged
	}
	t.UpdatedAt = utcMicro(p.UpdatedAt)
	return nil
}

// mergeTaskMetadata merges patch's members into base (both JSON objects; base may be
// empty): a member replaces the one of that name, a null member removes it. An
// object left empty becomes nil.
func mergeTaskMetadata(base, patch json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &m); err != nil {
			return nil, err
		}
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	for k, v := range p {
		if string(v) == "null" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	return b, err
}

// checkBlockers validates task id's new BlockedBy against the session's dependency
// graph (task id → its blocked_by), which must hold every task of the session.
func checkBlockers(id string, blockedBy []string, graph map[string][]string) error {
	for _, b := range blockedBy {
		if b == id {
			return &DependencyError{Task: id, Blocker: b, Problem: DependencySelf}
		}
		if _, ok := graph[b]; !ok {
			return &DependencyError{Task: id, Blocker: b, Problem: DependencyUnknown}
		}
	}
	for _, b := range blockedBy {
		if path := dependencyPath(b, id, graph); path != nil {
			return &DependencyError{Task: id, Blocker: b, Problem: DependencyCycle, Path: path}
		}
	}
	return nil
}

// dependencyPath returns a chain from → … → to following blocked_by links, or nil.
func dependencyPath(from, to string, graph map[string][]string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for n := cur; n != ""; n = prev[n] {
				path = append(path, n)
			}
			slices.Reverse(path)
			return path
		}
		for _, next := range graph[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// encodeTaskIDs is the JSON of a blocked_by list (never null).
func encodeTaskIDs(ids []string) string {
	if len(ids) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

func decodeTaskIDs(b []byte) ([]string, error) {
	ids := []string{}
	if len(b) == 0 {
		return ids, nil
	}
	if err := json.Unmarshal(b, &ids); err != nil {
		return nil, err
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

package builtin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

type taskCreate struct{ s TaskStore }

type taskCreateArgs struct {
	Subject     string          `json:"subject"`
	Description string          `json:"description"`
	Owner       string          `json:"owner"`
	BlockedBy   []string        `json:"blocked_by"`
	Metadata    json.RawMessage `json:"metadata"`
}

func (t *taskCreate) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:  "task_create",
		Label: "Create task",
		Description: "Add a task to this session's task list, to plan and track multi-step work. " +
			"Returns its id (task_…). New tasks are pending; list the ids of tasks that must be done first in blocked_by.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "subject": {"type": "string", "minLength": 1, "maxLength": %d, "description": "A short imperative title, e.g. \"Add tests for the parser\"."},
    "description": {"type": "string", "maxLength": %d, "description": "What to do and how to tell it is done."},
    "owner": {"type": "string", "maxLength": %d, "description": "Who works on it (an agent or person name). Default: nobody yet."},
    "blocked_by": {"type": "array", "items": %s, "maxItems": %d, "description": "Ids of tasks of this session that must be completed first."},
    "metadata": {"type": "object", "description": "Free-form JSON object kept with the task (at most %d bytes)."}
  },
  "required": ["subject"],
  "additionalProperties": false
}`, maxTaskSubject, maxTaskDescription, maxTaskOwner, taskIDSchema, maxTaskBlockers, maxTaskMetadata)),
		Documentation: taskCreateDoc,
		PromptHint: "For work with three or more steps, keep a task list: task_create for each step, task_update to set " +
			"in_progress when you start one and completed when it is done, task_list to see what is left. Keep one task in_progress at a time.",
	}, false)
}

func (t *taskCreate) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args taskCreateArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	args.Subject = strings.TrimSpace(args.Subject)
	if err := checkSubject(args.Subject); err != nil {
		return nil, err
	}
	if err := checkArgText("description", args.Description, 0, maxTaskDescription); err != nil {
		return nil, err
	}
	args.Owner = strings.TrimSpace(args.Owner)
	if err := checkArgText("owner", args.Owner, maxTaskOwner, 0); err != nil {
		return nil, err
	}
	blocked, err := checkBlockedBy(args.BlockedBy)
	if err != nil {
		return nil, err
	}
	if string(args.Metadata) == "null" {
		args.Metadata = nil
	}
	if err := checkMetadata(args.Metadata); err != nil {
		return nil, err
	}
	all, status, err := sessionTasks(ctx, t.s, sess)
	if err != nil {
		return nil, err
	}
	if len(all) >= maxTasksPerSession {
		return nil, tool.Errorf(tool.KindFailed, "this session has %d tasks, the most allowed; cancel or reuse existing tasks instead", len(all))
	}
	task := &store.Task{
		Tenant: sess.Tenant, SessionID: sess.ID, Subject: args.Subject, Description: args.Description,
		Status: store.TaskPending, Owner: args.Owner, BlockedBy: blocked, Metadata: args.Metadata,
	}
	if err := t.s.CreateTask(ctx, task); err != nil {
		return nil, storeFailure(ctx, err)
	}
	out := showTask(task, status)
	return fileResult(fmt.Sprintf("Created %s.", taskLine(out)), out, nil)
}

type taskGet struct{ s TaskStore }

func (t *taskGet) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:        "task_get",
		Label:       "Get task",
		Description: "Show one task of this session in full: subject, description, status, owner, what blocks it and what it blocks.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {"id": ` + taskIDSchema + `},
  "required": ["id"],
  "additionalProperties": false
}`),
		Documentation: taskGetDoc,
	}, true)
}

func (t *taskGet) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		ID string `json:"id"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(args.ID)
	task, err := t.s.GetTask(ctx, sess.Tenant, sess.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, taskNotFound(id)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	all, status, err := sessionTasks(ctx, t.s, sess)
	if err != nil {
		return nil, err
	}
	out := showTask(task, status)
	for _, other := range all {
		if slices.Contains(other.BlockedBy, task.ID) {
			out.Blocks = append(out.Blocks, other.ID)
		}
	}
	return fileResult(taskText(out), out, nil)
}

func taskNotFound(id string) error {
	return tool.Errorf(tool.KindNotFound, "no task %q in this session; task_list shows the session's tasks", id)
}

type taskList struct{ s TaskStore }

type taskListArgs struct {
	Status string `json:"status"`
	Owner  string `json:"owner"`
}

// taskListOutput is the structured result of task_list.
type taskListOutput struct {
	Tasks []taskOutput `json:"tasks"`
	// Counts are per status over the whole session, whatever the filter.
	Counts map[store.TaskStatus]int `json:"counts"`
	Total  int                      `json:"total"`
}

func (t *taskList) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:        "task_list",
		Label:       "List tasks",
		Description: "List this session's tasks, oldest first, with status, owner and open blockers; filter by status or owner.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"], "description": "Only tasks in this status."},
    "owner": {"type": "string", "description": "Only tasks of this owner (exact match)."}
  },
  "additionalProperties": false
}`),
		Documentation: taskListDoc,
	}, true)
}

func (t *taskList) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args taskListArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	var filter store.TaskFilter
	if args.Status != "" {
		if filter.Status, err = parseStatus(args.Status); err != nil {
			return nil, err
		}
	}
	filter.Owner = strings.TrimSpace(args.Owner)
	all, status, err := sessionTasks(ctx, t.s, sess)
	if err != nil {
		return nil, err
	}
	out := taskListOutput{Tasks: []taskOutput{}, Counts: map[store.TaskStatus]int{}, Total: len(all)}
	for _, st := range store.TaskStatuses {
		out.Counts[st] = 0
	}
	var lines []string
	for _, task := range all {
		out.Counts[task.Status]++
		if (filter.Status != "" && task.Status != filter.Status) || (filter.Owner != "" && task.Owner != filter.Owner) {
			continue
		}
		o := showTask(task, status)
		o.Description, o.Metadata = "", nil // task_get shows them
		out.Tasks = append(out.Tasks, o)
		lines = append(lines, taskLine(o))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d task%s in this session: %d pending, %d in_progress, %d completed, %d cancelled.", out.Total, pluralS(out.Total),
		out.Counts[store.TaskPending], out.Counts[store.TaskInProgress], out.Counts[store.TaskCompleted], out.Counts[store.TaskCancelled])
	switch {
	case out.Total == 0:
		b.Reset()
		b.WriteString("No tasks in this session yet; task_create adds one.")
	case filter != (store.TaskFilter{}):
		fmt.Fprintf(&b, " %d match the filter.", len(out.Tasks))
	}
	for _, l := range lines {
		b.WriteString("\n" + l)
	}
	return fileResult(b.String(), out, nil)
}

type taskUpdate struct{ s TaskStore }

type taskUpdateArgs struct {
	ID          string          `json:"id"`
	Status      *string         `json:"status"`
	Owner       *string         `json:"owner"`
	Subject     *string         `json:"subject"`
	Description *string         `json:"description"`
	BlockedBy   *[]string       `json:"blocked_by"`
	Metadata    json.RawMessage `json:"metadata"`
}

// taskUpdateOutput is the structured result of task_update.
type taskUpdateOutput struct {
	Task    taskOutput `json:"task"`
	Changed []string   `json:"changed"`
	// Unblocked are tasks whose last open blocker this update completed or cancelled.
	Unblocked []string `json:"unblocked,omitempty"`
}

func (t *taskUpdate) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:  "task_update",
		Label: "Update task",
		Description: "Change a task of this session: status (pending, in_progress, completed, cancelled), owner, subject, description, " +
			"blocked_by (replaces the list) or metadata (merged; a null member removes it). Give only what changes.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "id": %s,
    "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"], "description": "The new status."},
    "owner": {"type": "string", "maxLength": %d, "description": "The new owner; \"\" clears it."},
    "subject": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The new title."},
    "description": {"type": "string", "maxLength": %d, "description": "The new description (replaces the old one)."},
    "blocked_by": {"type": "array", "items": %s, "maxItems": %d, "description": "The new list of blocking task ids (replaces the old list; [] clears it)."},
    "metadata": {"type": "object", "description": "Members to merge into the task's metadata; a member set to null is removed."}
  },
  "required": ["id"],
  "additionalProperties": false
}`, taskIDSchema, maxTaskOwner, maxTaskSubject, maxTaskDescription, taskIDSchema, maxTaskBlockers)),
		Documentation: taskUpdateDoc,
	}, false)
}

func (t *taskUpdate) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args taskUpdateArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	patch, err := args.patch()
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(args.ID)
	before, err := t.s.GetTask(ctx, sess.Tenant, sess.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, taskNotFound(id)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	after, err := t.s.UpdateTask(ctx, sess.Tenant, sess.ID, id, patch)
	if errors.Is(err, store.ErrNotFound) {
		return nil, taskNotFound(id)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	all, status, err := sessionTasks(ctx, t.s, sess)
	if err != nil {
		return nil, err
	}
	out := taskUpdateOutput{Task: showTask(after, status), Changed: []string{}}
	var notes []string
	for _, c := range taskChanges(before, after) {
		out.Changed = append(out.Changed, c.field)
		notes = append(notes, c.text)
	}
	if after.Status.Done() && !before.Status.Done() {
		was := maps.Clone(status)
		was[after.ID] = before.Status
		for _, other := range all {
			if slices.Contains(other.BlockedBy, after.ID) && !other.Status.Done() &&
				len(showTask(other, status).OpenBlockers) == 0 && len(showTask(other, was).OpenBlockers) > 0 {
				out.Unblocked = append(out.Unblocked, other.ID)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Updated %s.", taskLine(out.Task))
	if len(notes) == 0 {
		b.WriteString("\nNothing changed: the task already had these values.")
	}
	for _, n := range notes {
		b.WriteString("\n- " + n)
	}
	if after.Status == store.TaskInProgress && len(out.Task.OpenBlockers) > 0 {
		fmt.Fprintf(&b, "\nNote: it is still blocked by open tasks: %s.", strings.Join(out.Task.OpenBlockers, ", "))
	}
	if len(out.Unblocked) > 0 {
		fmt.Fprintf(&b, "\nNo longer blocked: %s.", strings.Join(out.Unblocked, ", "))
	}
	return fileResult(b.String(), out, nil)
}

// patch validates the arguments and turns them into a store patch.
func (a *taskUpdateArgs) patch() (store.TaskPatch, error) {
	var p store.TaskPatch
	if a.Status == nil && a.Owner == nil && a.Subject == nil && a.Description == nil && a.BlockedBy == nil &&
		(len(a.Metadata) == 0 || string(a.Metadata) == "null") {
		return p, tool.Errorf(tool.KindInvalidArgs, "nothing to update: give at least one of status, owner, subject, description, blocked_by, metadata")
	}
	if a.Status != nil {
		st, err := parseStatus(*a.Status)
		if err != nil {
			return p, err
		}
		p.Status = &st
	}
	if a.Subject != nil {
		s := strings.TrimSpace(*a.Subject)
		if err := checkSubject(s); err != nil {
			return p, err
		}
		p.Subject = &s
	}
	if a.Description != nil {
		if err := checkArgText("description", *a.Description, 0, maxTaskDescription); err != nil {
			return p, err
		}
		p.Description = a.Description
	}
	if a.Owner != nil {
		o := strings.TrimSpace(*a.Owner)
		if err := checkArgText("owner", o, maxTaskOwner, 0); err != nil {
			return p, err
		}
		p.Owner = &o
	}
	if a.BlockedBy != nil {
		ids, err := checkBlockedBy(*a.BlockedBy)
		if err != nil {
			return p, err
		}
		p.BlockedBy, p.SetBlockedBy = ids, true
	}
	if len(a.Metadata) > 0 && string(a.Metadata) != "null" {
		if err := checkMetadata(a.Metadata); err != nil {
			return p, err
		}
		p.Metadata = a.Metadata
	}
	return p, nil
}

type taskChange struct{ field, text string }

// taskChanges describes what differs between two versions of a task.
func taskChanges(before, after *store.Task) []taskChange {
	var out []taskChange
	if before.Status != after.Status {
		out = append(out, taskChange{"status", fmt.Sprintf("status: %s → %s", before.Status, after.Status)})
	}
	if before.Owner != after.Owner {
		out = append(out, taskChange{"owner", fmt.Sprintf("owner: %q → %q", before.Owner, after.Owner)})
	}
	if before.Subject != after.Subject {
		out = append(out, taskChange{"subject", fmt.Sprintf("subject: %q → %q", before.Subject, after.Subject)})
	}
	if before.Description != after.Description {
		out = append(out, taskChange{"description", fmt.Sprintf("description replaced (%d → %d characters)",
			len([]rune(before.Description)), len([]rune(after.Description)))})
	}
	if !slices.Equal(before.BlockedBy, after.BlockedBy) {
		out = append(out, taskChange{"blocked_by", fmt.Sprintf("blocked_by: [%s] → [%s]",
			strings.Join(before.BlockedBy, ", "), strings.Join(after.BlockedBy, ", "))})
	}
	if string(before.Metadata) != string(after.Metadata) {
		out = append(out, taskChange{"metadata", fmt.Sprintf("metadata: %s", metadataText(after.Metadata))})
	}
	return out
}

func metadataText(b json.RawMessage) string {
	if len(b) == 0 {
		return "(none)"
	}
	return string(b)
}

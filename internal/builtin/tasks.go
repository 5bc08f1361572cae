// This file and tasks_*.go are the task tools: a task list per session (task_create,
// task_get, task_list, task_update) kept in the store, so it survives restarts and is
// shared by every agent working in the session.

package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TaskStore is what the task tools need from the store; *store.SQLite and
// *store.Postgres have it.
type TaskStore interface {
	CreateTask(ctx context.Context, t *store.Task) error
	GetTask(ctx context.Context, tenant, sessionID, id string) (*store.Task, error)
	ListTasks(ctx context.Context, tenant, sessionID string, f store.TaskFilter) ([]*store.Task, error)
	UpdateTask(ctx context.Context, tenant, sessionID, id string, p store.TaskPatch) (*store.Task, error)
}

// Limits of the task tools.
const (
	maxTaskSubject     = 300      // characters
	maxTaskDescription = 16 << 10 // bytes
	maxTaskOwner       = 128      // characters
	maxTaskBlockers    = 50
	maxTaskMetadata    = 8 << 10 // bytes of JSON
	maxTasksPerSession = 500
	storeToolTimeout   = 30 * time.Second
)

// TaskTools returns task_create, task_get, task_list and task_update, keeping each
// session's task list in s.
func TaskTools(s TaskStore) []tool.Tool {
	return []tool.Tool{&taskCreate{s}, &taskGet{s}, &taskList{s}, &taskUpdate{s}}
}

// storeToolSpec fills the fields the task, scratchpad and memory tools share: reads
// run in parallel and are safe, writes are low risk and serialized per session.
func storeToolSpec(s tool.Spec, readOnly bool) tool.Spec {
	s.Flags = tool.Flags{ReadOnly: readOnly, ConcurrencySafe: readOnly}
	s.Risk = tool.RiskLow
	if readOnly {
		s.Risk = tool.RiskSafe
	}
	s.Mode = tool.ModeDirect
	s.Timeout = storeToolTimeout
	s.Source = "builtin"
	return s
}

// sessionOf returns the call's session; the store tools need one.
func sessionOf(ctx *tool.Context) (*tool.Session, error) {
	if ctx.Session == nil || ctx.Session.ID == "" {
		return nil, tool.Errorf(tool.KindUnavailable, "%s needs a session; this call has none", ctx.ToolName)
	}
	return ctx.Session, nil
}

// storeFailure classifies a store error that is not the caller's to explain.
func storeFailure(ctx *tool.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return callEndError(ctx)
	}
	var de *store.DependencyError
	if errors.As(err, &de) {
		return tool.Errorf(tool.KindInvalidArgs, "%s", de.Error())
	}
	if errors.Is(err, store.ErrInvalid) {
		return tool.Errorf(tool.KindInvalidArgs, "%v", err)
	}
	return tool.Errorf(tool.KindFailed, "storage error: %v", err)
}

// checkArgText refuses text the model gave that a field cannot hold.
func checkArgText(field, s string, maxChars, maxBytes int) error {
	if strings.IndexByte(s, 0) >= 0 {
		return tool.Errorf(tool.KindInvalidArgs, "%s contains a NUL character", field)
	}
	if maxChars > 0 && utf8.RuneCountInString(s) > maxChars {
		return tool.Errorf(tool.KindInvalidArgs, "%s is %d characters long; the most is %d", field, utf8.RuneCountInString(s), maxChars)
	}
	if maxBytes > 0 && len(s) > maxBytes {
		return tool.Errorf(tool.KindInvalidArgs, "%s is %s; the most is %s", field, sizeText(int64(len(s))), sizeText(int64(maxBytes)))
	}
	return nil
}

// checkSubject validates a task subject.
func checkSubject(s string) error {
	if strings.TrimSpace(s) == "" {
		return tool.Errorf(tool.KindInvalidArgs, "subject is empty; give a short imperative title such as \"Add tests for the parser\"")
	}
	return checkArgText("subject", s, maxTaskSubject, 0)
}

// checkBlockedBy trims and validates blocked_by ids; the store checks that they exist.
func checkBlockedBy(ids []string) ([]string, error) {
	if len(ids) > maxTaskBlockers {
		return nil, tool.Errorf(tool.KindInvalidArgs, "blocked_by lists %d tasks; the most is %d", len(ids), maxTaskBlockers)
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, tool.Errorf(tool.KindInvalidArgs, "blocked_by contains an empty task id")
		}
		if err := checkArgText("blocked_by id", id, 128, 0); err != nil {
			return nil, err
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// checkMetadata accepts a JSON object of bounded size.
func checkMetadata(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return tool.Errorf(tool.KindInvalidArgs, "metadata must be a JSON object")
	}
	if len(raw) > maxTaskMetadata {
		return tool.Errorf(tool.KindInvalidArgs, "metadata is %s of JSON; the most is %s", sizeText(int64(len(raw))), sizeText(maxTaskMetadata))
	}
	if strings.Contains(string(raw), `\u0000`) {
		return tool.Errorf(tool.KindInvalidArgs, "metadata contains a NUL character")
	}
	return nil
}

// taskOutput is a task as the task tools show it.
type taskOutput struct {
	ID          string           `json:"id"`
	Subject     string           `json:"subject"`
	Description string           `json:"description,omitempty"`
	Status      store.TaskStatus `json:"status"`
	Owner       string           `json:"owner,omitempty"`
	BlockedBy   []string         `json:"blocked_by"`
	// OpenBlockers are the tasks of BlockedBy that are neither completed nor cancelled.
	OpenBlockers []string        `json:"open_blockers"`
	Blocks       []string        `json:"blocks,omitempty"` // tasks whose blocked_by names this one (task_get)
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
}

func storeTimeText(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// showTask builds the output of t; status maps the session's task ids to their
// status (nil: open blockers unknown, all listed as open).
func showTask(t *store.Task, status map[string]store.TaskStatus) taskOutput {
	out := taskOutput{
		ID: t.ID, Subject: t.Subject, Description: t.Description, Status: t.Status, Owner: t.Owner,
		BlockedBy: append([]string{}, t.BlockedBy...), OpenBlockers: []string{}, Metadata: t.Metadata,
		CreatedAt: storeTimeText(t.CreatedAt), UpdatedAt: storeTimeText(t.UpdatedAt),
	}
	for _, b := range t.BlockedBy {
		if st, ok := status[b]; !ok || !st.Done() {
			out.OpenBlockers = append(out.OpenBlockers, b)
		}
	}
	return out
}

// taskLine is a one-line summary: id, status, subject, owner, open blockers.
func taskLine(o taskOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] %s", o.ID, o.Status, o.Subject)
	if o.Owner != "" {
		fmt.Fprintf(&b, " (owner: %s)", o.Owner)
	}
	if len(o.OpenBlockers) > 0 {
		fmt.Fprintf(&b, " — blocked by %s", strings.Join(o.OpenBlockers, ", "))
	}
	return b.String()
}

// taskText is the full view of one task.
func taskText(o taskOutput) string {
	var b strings.Builder
	b.WriteString(taskLine(o))
	if o.Description != "" {
		b.WriteString("\n\n" + o.Description + "\n")
	}
	if len(o.BlockedBy) > 0 {
		fmt.Fprintf(&b, "\nblocked_by: %s", strings.Join(o.BlockedBy, ", "))
	}
	if len(o.Blocks) > 0 {
		fmt.Fprintf(&b, "\nblocks: %s", strings.Join(o.Blocks, ", "))
	}
	if len(o.Metadata) > 0 {
		fmt.Fprintf(&b, "\nmetadata: %s", o.Metadata)
	}
	fmt.Fprintf(&b, "\ncreated %s, updated %s", o.CreatedAt, o.UpdatedAt)
	return b.String()
}

// sessionTasks lists every task of the session with a map of their statuses.
func sessionTasks(ctx *tool.Context, s TaskStore, sess *tool.Session) ([]*store.Task, map[string]store.TaskStatus, error) {
	all, err := s.ListTasks(ctx, sess.Tenant, sess.ID, store.TaskFilter{})
	if err != nil {
		return nil, nil, storeFailure(ctx, err)
	}
	status := make(map[string]store.TaskStatus, len(all))
	for _, t := range all {
		status[t.ID] = t.Status
	}
	return all, status, nil
}

func parseStatus(s string) (store.TaskStatus, error) {
	st := store.TaskStatus(s)
	if !st.Valid() {
		return "", tool.Errorf(tool.KindInvalidArgs, "status %q is not one of pending, in_progress, completed, cancelled", s)
	}
	return st, nil
}

// taskIDSchema is the JSON Schema of a task id argument.
const taskIDSchema = `{"type": "string", "minLength": 1, "maxLength": 128, "description": "A task id (task_…) of this session, as task_create or task_list returned it."}`

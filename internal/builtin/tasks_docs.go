package builtin

// The manuals of the task tools, returned on demand (Spec.Documentation).

const taskCreateDoc = `task_create adds a task to the session's task list.

The task list belongs to the session: every agent working in the session sees and
changes the same list, it survives restarts of the server, and other sessions cannot
see it. Use it to plan work with several steps and to show progress.

Arguments
- subject (required): a short imperative title ("Add tests for the parser"), at most
  300 characters.
- description: what to do and how to tell it is done, at most 16 KiB.
- owner: who works on it, free text (an agent's or person's name), at most 128
  characters. Default: nobody.
- blocked_by: ids of tasks of this session that must be completed first, at most 50.
  Every id must exist in this session, or the call fails with kind invalid_args and
  nothing is created.
- metadata: a JSON object kept with the task (at most 8 KiB), for whatever the agents
  want to remember about it (links, file names, estimates).

A new task is pending. A session holds at most 500 tasks; cancel tasks instead of
deleting them (there is no delete).

Result
The text is one line: id, [status], subject, owner and open blockers. Structured content
is the task: {"id","subject","description","status","owner","blocked_by",
"open_blockers","metadata","created_at","updated_at"}; open_blockers are the tasks of
blocked_by that are neither completed nor cancelled. Times are RFC 3339 in UTC.`

const taskGetDoc = `task_get shows one task of the session in full.

Arguments
- id (required): the task's id (task_…).

Result
The text shows the id, status, subject, owner and open blockers on the first line,
then the description, blocked_by, blocks (the tasks that wait for this one),
metadata and times. Structured content is the task as task_create returns it plus
"blocks". An id that is not a task of this session is an error of kind not_found.`

const taskListDoc = `task_list lists the session's tasks, oldest first.

Arguments
- status: only tasks in this status: pending, in_progress, completed or cancelled.
- owner: only tasks of this owner (exact match).

Result
The first line counts the session's tasks per status (over all tasks, whatever the
filter). Then one line per matching task: id, [status], subject, owner, and the open
tasks blocking it. Descriptions and metadata are left out; task_get shows them.
Structured content: {"tasks":[…],"counts":{"pending":N,"in_progress":N,"completed":N,
"cancelled":N},"total":N}; each task is as task_create returns it without
description and metadata.

A task whose open_blockers list is empty can be started.`

const taskUpdateDoc = `task_update changes a task of the session. Give the id and only the fields that change.

Arguments
- id (required): the task's id.
- status: pending, in_progress, completed or cancelled. Any status may follow any
  other (reopen a task by setting it back to pending). Set in_progress when starting a
  task and completed as soon as it is done; cancelled for tasks no longer needed.
- owner: the new owner; "" clears it.
- subject: the new title (not empty).
- description: the new description; it replaces the old one.
- blocked_by: the new list of blocking task ids; it replaces the old list, [] clears
  it. Every id must be a task of this session, a task cannot block itself, and the
  list must not make a cycle (a task that, directly or through others, already waits
  for this one cannot block it). Any of these fails with kind invalid_args, the
  message naming the offending id and the chain of a cycle, and nothing is changed.
- metadata: members merged into the task's metadata object; a member set to null is
  removed.

An id that is not a task of this session is an error of kind not_found; an unknown
status, or no field to change, is invalid_args.

Result
The text shows the task's line and one line per changed field ("status: pending →
in_progress"), a note when a task set in_progress still has open blockers, and the
tasks a completion or cancellation unblocked. Structured content:
{"task":{…as task_get…},"changed":["status",…],"unblocked":["task_…"]}.`

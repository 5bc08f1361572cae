package builtin

// The manuals of the command tools, returned on demand (Spec.Documentation).

const executeDoc = `execute_command runs one bash command line (bash -c) in the session's sandbox.

Arguments
- command (required): the command line. Pipes, redirections, &&, ||, subshells and
  here-documents work. stdin is empty (/dev/null): interactive prompts get end-of-file,
  so pass flags such as -y or --no-pager where a tool would ask.
- cwd: the working directory, relative to the session's working directory (the
  default). Absolute paths must lie inside it; ".." or symlinks that lead outside it
  are refused.
- timeout_ms: how long the command may run. Foreground default: the server's default
  timeout; the schema states the maximum. When it passes, the command's whole process
  group gets SIGTERM, then SIGKILL after a short grace period, and the result has kind
  "timeout" with the output printed so far. A call given less time than that (the
  request's timeout_ms) stops the command the same way a little before its deadline
  (one slow to die is answered as still being killed, with its output so far).
- background: start the command as a background job. The call returns at once with
  {"job_id","status":"running"}; the job keeps running after the call (and after the
  client disconnects) until it exits, is killed with kill_job, hits its timeout_ms (if
  one was given), the session ends or the daemon stops (after a restart the job tools
  answer not_found for it, saying that jobs from before the restart have ended).

Result
The text shows the exit code, the duration, stdout and stderr. Long output is cut from
the start (the end is kept) and a note says how many bytes are missing and, when the
session has read_job_output, how to read them with it. Structured content:
  {"job_id","status","exit_code","stdout","stderr","duration_ms","truncated","reason"}
status is exited, timeout or killed; exit_code is null unless the shell exited by
itself. A non-zero exit code makes the result an error (kind "failed") that still
carries the output. If the call is cancelled the command is killed (kind "cancelled").

Environment
HOME and TMPDIR are private directories of the session, outside the working directory
(caches and dotfiles stay out of the project). Only PATH, LANG, LC_*, TERM, TZ, USER and
LOGNAME are inherited from the server, with what its operator adds.
Processes the command leaves running in its process group are killed when the shell
exits; use background:true for anything that must keep running.
Each stream keeps at most the server's output cap (64 MiB by default); beyond it bytes
are discarded, the command is not stopped, and the result says so.
Output that is not UTF-8 text (binary data) is shown with U+FFFD in place of the
invalid bytes; read_job_output with encoding "base64" returns the exact bytes.

In an isolated sandbox the rest of the file system is read-only, the network is off
unless the session allows it, and a pids limit may stop fork bombs.`

const awaitDoc = `await_job waits for a job started by execute_command with background:true.

Arguments
- job_id (required)
- timeout_ms: how long to wait at most (default 30000, at most 600000). 0 only looks.
  A call given less time than that (the request's timeout_ms) waits until a little
  before its deadline and answers with the job still running.

It returns when the job ends or the wait is over, whichever is first, with the job's
status (running, exited, timeout, killed), its exit code once it exited, and the
stdout and stderr printed since the previous await_job of the same job in this session
(the first await returns everything from the start). Output beyond the result budget
is cut from the start with a note on the bytes cut (and, when the session has
read_job_output, the offsets to read them with it).
Structured content: {"job_id","status","exit_code","stdout","stderr","duration_ms",
"truncated","reason","done","stdout_offset","stderr_offset"}.
A job that failed is reported, not an error of await_job. Cancelling await_job does
not stop the job. Jobs of other sessions cannot be seen. A session keeps its last 100
finished jobs (every command counts, foreground ones too): asked about an older one,
the job tools answer not_found saying it was dropped.`

const readDoc = `read_job_output reads a job's output log without waiting.

Arguments
- job_id (required)
- stream: "stdout" (default) or "stderr".
- offset: the byte offset to read from (default 0). Reading from next_offset each time
  returns every byte exactly once. An offset at or past the end returns no data.
- max_bytes: the most bytes to return (default 65536, at most 1048576).
- tail_lines: return the last N lines instead (at most 1 MiB); offset is where they start.
- encoding: "text" (default) or "base64". Text replaces bytes that are not UTF-8 with
  U+FFFD and never splits a character: next_offset then points at its first byte.
  base64 returns the exact bytes.

Structured content: {"job_id","stream","offset","next_offset","size","eof","status",
"exit_code","encoding","data","invalid_utf8_replaced"}. eof is true when the job has
ended and next_offset reached the end.`

const killDoc = `kill_job stops a job of this session: its whole process group (and every
process of its pids cgroup, where there is one) gets SIGTERM, then SIGKILL after the
server's grace period. It waits for the job to end (up to the grace period plus a few
seconds) and returns its final status. Killing a job that already ended is not an error.
The job's output stays readable with read_job_output and await_job.`

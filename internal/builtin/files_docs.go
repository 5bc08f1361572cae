package builtin

// The manuals of the file tools, returned on demand (Spec.Documentation).

const pathsDoc = `Paths
Paths are relative to the session's working directory; absolute paths must lie inside
it. A path that climbs above it with "..", contains a NUL byte, passes through a
symlink leading outside it, or loops through symlinks is refused (kind invalid_args).
A symlink that stays inside is followed.`

const guardDoc = `Read before write
A file that exists may only be replaced or edited when this session has read it
(read_file, json_read, or an earlier write_file / edit_file / multi_edit / json_write of
it) and it has not changed on disk since. Otherwise the call is refused with kind
"denied" and nothing is written: read the file (again) and redo the change against
what it holds now. "Changed" means a different size or, for the same size, different
content (SHA-256); a file touched without a content change still counts as unchanged.
Files above 64 MiB are compared by size and modification time only. A partial read
(offset/limit) counts as a read. New files need no read. After a successful write the
session may keep changing the file without reading it again.`

const readFileDoc = `read_file shows a text file with line numbers, or an image.

Arguments
- path (required): the file.
- offset: the first line to show, counting from 1 (default 1).
- limit: how many lines to show (default 2000, at most 100000).

Text
Each line is shown as in cat -n: the line number right-aligned in six columns, a tab,
then the line (without its line ending; a CR before the LF is not shown). Lines longer
than 2000 characters are cut with a note saying how many bytes were left out. At most
about 48 KiB of text is shown per call; when lines remain, a last line in brackets says
which lines were shown, how many the file has, and the offset to continue with. An
empty file is reported as such; an offset past the end is an error (invalid_args) that
says how many lines there are.
Files larger than 10 MiB must be read with offset and/or limit (without them the call
fails with invalid_args); for those the total line count is not reported.
Bytes that are not valid UTF-8 (and NUL bytes) are shown as U+FFFD with a note; edit
tools refuse such files.

Binary files and images
A file whose first 8 KiB contain a NUL byte or more than 10% bytes that are not UTF-8
is binary: the call fails (kind failed) with its size and detected MIME type. PNG,
JPEG, GIF and WebP files (recognized by their content, not their name) up to 5 MiB are
returned as an image block (base64) plus a line with the type, size and, except for
WebP, the dimensions; larger images fail (kind failed).

A successful read (also of an image) records the file for the read-before-write rule;
so does a read refused because the file is binary or an image too large to show (the
error told what the file is), which lets write_file replace such a file.
Details (for UIs, not sent to the model): {"path","size","mime_type","first_line",
"last_line","total_lines"}.

Errors: not_found (no such file), invalid_args (a directory, a device or pipe, a bad
path, offset/limit out of range, a large file without offset/limit), failed (binary,
image too large, I/O error).

` + pathsDoc

const writeFileDoc = `write_file creates a file or replaces its whole content.

Arguments
- path (required): the file. Missing parent directories are created (mode 0755).
- content (required): the complete new content ("" makes an empty file). It is written
  as given (no trailing newline added), except for line endings when it replaces a file
  whose lines all end in CRLF: that file keeps CRLF, the content's LF line endings are
  written as CRLF. A new file, or one with LF or mixed line endings, gets them as given.

The write is atomic: the content goes to a temporary file in the same directory, which
is synced and renamed over the target, so readers see the old or the new content and a
failed write leaves the old file as it was. An existing file keeps its permission bits
(owner and hard links are not kept: the file is a new inode); new files get 0644.
Writing through a symlink inside the working directory replaces the symlink's target,
not the link.

Result: "Created …" or "Overwrote …" with the line count and size (and "CRLF line
endings kept" when they were); structured content {"path","created","bytes","lines",
"kept_crlf"}.

Errors: denied (the read-before-write rule), invalid_args (a directory or other
non-file at the path, a parent path that is a file, a bad path), failed (I/O).

` + guardDoc + "\n\n" + pathsDoc

const editFileDoc = `edit_file replaces exact text in a file.

Arguments
- path (required): an existing file.
- old_string (required, not empty): the text to replace, byte for byte: indentation,
  tabs versus spaces and trailing spaces matter. Copy it from read_file's output
  without the line-number prefix (the six columns and the tab).
- new_string (required): the replacement; "" deletes old_string. Must differ from it.
- replace_all: replace every occurrence (default false).

old_string must occur exactly once, unless replace_all is set. When it occurs more than
once the call fails and says how many times and at which lines: add surrounding lines
to make it unique. When it does not occur the call fails and points at the line that
matches its first line apart from whitespace, or else the most similar line, if any;
when its lines begin with read_file's line-number prefixes it says so, and where the
text without them occurs.
If old_string spans lines and the file uses CRLF line endings, the match is retried
with CRLF in both old_string and new_string.

The file must be valid UTF-8 text of at most 10 MiB; a larger one is refused (failed)
with what to use instead: grep and read_file with offset and limit to find and read
the lines, execute_command with sed to change them (those the session has). It is
rewritten atomically with its permission bits kept (see write_file). After a successful
edit the session may edit the file again without reading it.

Result: the line of the replacement and the changed region with line numbers (for one
replacement), or the count and lines (for several). Structured content:
{"path","replacements","lines"} (lines: where each replacement started in the old text,
at most 50).

Errors: invalid_args (old_string not found, not unique, empty or equal to new_string,
a bad path or a directory), not_found (no such file: create it with write_file),
denied (the read-before-write rule), failed (not UTF-8, too large, I/O).
Nothing is written when an edit fails.

` + guardDoc + "\n\n" + pathsDoc

const multiEditDoc = `multi_edit applies several edit_file-style replacements to one file in one call.

Arguments
- path (required): an existing file.
- edits (required, 1 to 100): [{"old_string","new_string","replace_all"}], applied in
  order, each to the text the previous ones produced; each follows edit_file's rules
  (unique unless replace_all, not empty, different from new_string).
- mode: what a failing edit does.
  - strict: all or nothing. If any edit fails, nothing is written; every edit is still
    tried so the result lists all failures (the others are reported "rolled_back").
  - partial (default): apply edits in order until the first failure; the edits before it
    are written, the ones after it are "not_attempted".
  - best_effort: skip failing edits and apply the others.

The file is read once, changed in memory and written once, atomically. The result is an
error (kind invalid_args) only when nothing was written because edits failed (strict
mode with a failure, or no edit applicable); when some edits were written it is a
success that lists the failures. If the edits cancel out, nothing is written.

Result text: one line per edit (edits[i]: applied / failed: reason / not attempted /
rolled back). Structured content: {"path","mode","written","applied","failed",
"edits":[{"index","status","replacements","line","reason"}]} where status is applied,
failed, not_attempted or rolled_back and line is where the edit's first replacement
started in the text it was applied to.

The read-before-write rule, UTF-8 and size limits and the other errors are those of
edit_file.

` + guardDoc + "\n\n" + pathsDoc

const listDirDoc = `list_dir lists a directory.

Arguments
- path: the directory (default: the working directory).
- depth: how many levels to list (default 1, at most 5). Deeper entries are shown with
  their path relative to the listed directory, each directory followed by its content.
- show_hidden: include names starting with "." (default false; a note says how many
  were left out).

Entries are sorted by name (byte order). Directories end with "/", regular files are
followed by their size, other files by their kind ([a named pipe] …). Symlinks are shown
as "name -> target": a symlink to a file inside the working directory gets the
target's size; a symlink to a directory is marked and not descended into; a symlink
that leads outside the working directory, loops or dangles is marked and not followed.
.gitignore is not applied (use tree or glob for that); .git is listed with show_hidden
but never descended into. At most 1000 entries (and about 48 KiB) are shown; a note
says when the listing stopped.

Details (for UIs): {"path","entries","truncated"}.
Errors: not_found, invalid_args (a file instead of a directory, a bad path, depth out
of range).

` + pathsDoc

const treeDoc = `tree draws the directory tree below a path.

Arguments
- path: the directory (default: the working directory).
- depth: how many levels to show (default 3, at most 10).
- show_hidden: include names starting with "." (default false).

The drawing uses tree(1)'s box characters, entries sorted by name, directories ending
with "/". What .gitignore files exclude is left out: the .gitignore of each directory
walked applies to what is below it, together with those of its parent directories up
to the working directory (gitignore(5) patterns: *, ?, [..], **, leading / anchors,
trailing / for directories, ! re-includes; the last matching line wins). A directory
named in path (for glob, also the literal directories a pattern starts with) is walked
even if .gitignore excludes it, and so is one whose own .gitignore excludes all of it
("*": .skills, where opened skills are copied, a virtualenv, a cache); the .gitignore
files below it still apply. .git/info/exclude and global git excludes are not read. .git is never descended into. Symlinks are shown
with their target and not followed. At most 1000 entries are shown; notes say how many
entries were hidden or excluded.

Details (for UIs): {"path","entries","truncated"}.
Errors: as for list_dir.

` + pathsDoc

const globDoc = `glob finds files by path pattern.

Arguments
- pattern (required): a glob, matched against paths relative to path: * and ? match
  within one name, [abc] / [!abc] a character class, {a,b} alternatives, ** any number
  of directories (src/**/*.go, **/test_*.py). * does not cross "/": *.go only matches in
  the directory itself, **/*.go at every level. Names starting with "." are matched like
  any other. An absolute pattern must lie inside the working directory.
- path: the directory to search from (default: the working directory).

Only files are returned (including symlinks to files inside the working directory),
not directories. What .gitignore files exclude is skipped (see tree), and so is .git;
symlinked directories are not descended into. Results are paths relative to the working
directory (usable as read_file paths), most recently modified first, ties by name; at
most 200 are shown, with the total count. No match is not an error.

Details (for UIs): {"pattern","matches","shown","truncated"}.
Errors: invalid_args (an invalid pattern, a file as path, a bad path), not_found.

` + pathsDoc

const grepDoc = `grep searches file contents with a regular expression.

Arguments
- pattern (required): a Go RE2 regular expression, matched against each line (without
  its line ending). RE2 has no backreferences or lookaround; escape metacharacters
  (\. \( \[ …) to search for literal text. An invalid expression fails with
  invalid_args and the parser's message.
- path: a directory to search below, or one file (default: the working directory). A
  file or directory given explicitly is searched even if .gitignore excludes it (see
  tree).
- include / exclude: globs selecting files (same syntax as glob). A glob without "/"
  is matched against the file name (*.go, *_test.go, *.{ts,tsx}); one with "/" against
  the path relative to path (src/**/*.ts).
- case_insensitive: ignore case (default false).
- context: lines to show before and after each match (0 to 10, default 0).
- max_results: stop after this many matching lines (default 200, at most 1000).

Files are searched in path order. What .gitignore files exclude is skipped (see tree),
and so are .git, binary files (a NUL byte or mostly non-UTF-8 in the first 8 KiB),
files larger than 20 MiB (a file named in path is searched whatever its size) and
symlinks that lead outside the working directory;
symlinked directories are not descended into. Only the first 1 MiB of a very long line
is searched.

Output: one line per match, "path:line: text", paths relative to the working
directory; context lines are "path-line- text" and non-adjacent groups are separated by
"--". Lines are cut at 2000 characters. A last line counts the matches and files; notes
say when the search stopped early (max_results reached, about 48 KiB of output, or 30
seconds spent) and how many files were skipped. No match is not an error.

Details (for UIs): {"matches","files","files_searched","truncated"}.

` + pathsDoc

const jsonReadDoc = `json_read reads a JSON document or a part of it.

Arguments
- path (required): a JSON file (strict JSON, UTF-8, at most 10 MiB; a UTF-8 byte order
  mark is allowed). A larger file is refused (failed) with what to use instead (grep,
  read_file with offset and limit, execute_command with jq; those the session has);
  json_write refuses it the same way.
- pointer: an RFC 6901 JSON Pointer (default "": the whole document). Each "/token"
  descends into an object by key or into an array by index (0, 1, …; no leading zeros).
  In keys, "~1" stands for "/" and "~0" for "~": /paths/~1users names the key "/users".
  The URI fragment form (#/a%20b) is accepted too.

Result: the value pretty-printed (two-space indentation, object keys in document
order, numbers exactly as written). Structured content: {"path","pointer","type",
"value"}, type being object, array, string, number, boolean or null. A value larger
than about 48 KiB pretty-printed is shown in part, with a summary of its keys or
length, and "value" is left out ("omitted": true): read a part of it with a longer
pointer. Reading records the file for the read-before-write rule.

Errors: not_found when the pointer does not resolve; the message names the first token
that does not (a missing key, with the keys that exist; an index out of range, with the
array's length; a token below a string or number). invalid_args for a malformed pointer
(not starting with "/", a "~" not followed by 0 or 1). failed when the file is not
valid JSON (with line and column) or not UTF-8.

` + pathsDoc

const jsonWriteDoc = `json_write sets one value in a JSON document.

Arguments
- path (required): the JSON file.
- pointer (required): an RFC 6901 JSON Pointer (see json_read) to the place to set:
  - an object member: added if missing (at the end of the object), else replaced;
  - an array index below the length: that element is replaced;
  - an array index equal to the length, or "-": the value is appended;
  - "": the whole document is replaced (the old content need not be valid JSON).
- value (required): any JSON value (object, array, string, number, boolean, null).
- create_missing: create missing object members along the pointer as empty objects,
  and the file (holding {} before the set) when it does not exist (default false).
  Arrays are never created implicitly.

The rest of the document is kept: the order of keys, numbers as written, the
indentation unit (detected from the first indented line; a one-line document stays
compact), the trailing newline and a byte order mark. What is not kept: other
whitespace (the document is re-indented uniformly), duplicate keys (the last value
wins, at the first key's position) and escapes in strings (written as plain UTF-8).
The file is written atomically, keeping its permission bits.

Result: "Set … (added|replaced|appended)". Structured content: {"path","pointer",
"action","created_file"}.

Errors: denied (the read-before-write rule: read it with json_read first), not_found
(the file is missing without create_missing, or the pointer's parent does not resolve,
or an index is beyond the end), invalid_args (a malformed pointer or value, a bad path),
failed (the file is not valid JSON or UTF-8). Nothing is written on error.

` + guardDoc + "\n\n" + pathsDoc

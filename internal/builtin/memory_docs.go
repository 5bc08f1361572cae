package builtin

// The manuals of the memory and scratchpad tools, returned on demand (Spec.Documentation).

const memorySaveDoc = `memory_save stores a fact in long-term memory.

Memories belong to the tenant (the user or organisation the session runs for), not to
the session: every later session of the tenant can find them with memory_search, and
no other tenant can. Save what will still be true and useful later: preferences
("the user wants answers in British English"), project conventions, decisions and why
they were taken, fixes that took long to find. Write each memory so it makes sense on
its own, without this conversation. Do not save secrets, credentials or personal data
the user did not ask you to keep.

Arguments
- content (required): the fact, at most 16 KiB.
- key: an optional stable name, at most 128 characters (e.g. "user-editor-preference").
  Within the tenant a key names one memory: saving again with the same key replaces
  that memory's content and tags and keeps its id. Without a key every save adds a
  new memory.
- tags: up to 16 words to file the memory under (each at most 64 characters); they
  are searched along with the content and the key.

Result
"Saved memory mem_…" or "Replaced memory mem_… (key …)". Structured content:
{"id","key","tags","replaced","created_at","updated_at"} (times RFC 3339, UTC;
created_at is when the memory was first saved).`

const memorySearchDoc = `memory_search finds long-term memories of the tenant by the words they contain.

Arguments
- query (required): words to look for, at most 1000 characters. The query is plain
  text: letters and digits form words, everything else (quotes, *, :, parentheses,
  -) only separates them, and words such as OR or NOT are ordinary words. A memory
  matches when it contains any of the words, in its content, key or tags; case and
  word endings do not matter ("Migrations" finds "migration"). Common words such as
  "the" count for little or nothing.
- limit: how many memories to return, 1 to 50 (default 10).

Ranking
Best matches first: a memory containing more of the query's words ranks above one
containing fewer; matches in the key and tags weigh more than in the content; among
otherwise equal matches, the more recently saved comes first. Scores order the
results of one search and mean nothing across searches.

Result
A numbered list: id, score, when it was saved, key and tags, then the content. A
memory longer than 2000 characters is cut, with a note. Structured content:
{"query","results":[{"id","key","content","content_truncated","tags","created_at",
"updated_at","score"}]}. No match is not an error: the result says so.

Search before starting work that may have been done before, and when the user refers
to earlier sessions. Use several short searches with different words rather than one
long sentence.`

const memoryDeleteDoc = `memory_delete removes a long-term memory of the tenant.

Arguments
- id (required): the memory's id (mem_…), as memory_search or memory_save showed it.

Use it for memories that turned out to be wrong or no longer hold; to change a memory
that has a key, save it again with the same key instead. An id that is not a memory of
this tenant is an error of kind not_found. Deleting cannot be undone.`

const scratchpadDoc = `scratchpad is a key-value notepad of the session.

Every agent working in the session shares it, and it survives restarts of the server,
but other sessions cannot see it and it is not searched: use it for plans, intermediate
results, and notes one agent leaves for another. Use memory_save for facts later
sessions should find.

Arguments
- action (required): get, set, delete or list.
- key: required for get, set and delete. 1 to 128 characters, no control characters.
  Keys are exact: "Plan" and "plan" are two keys.
- value: required for set, the text to store (at most 64 KiB; "" is allowed). It
  replaces what the key held. Store JSON as text if you need structure.

A session holds at most 1000 keys; setting a new key beyond that fails (kind failed)
until keys are deleted. Replacing an existing key always works.

Results
- get: the text is the value itself. Structured: {"key","value","size","updated_at"}.
  A missing key is an error of kind not_found.
- set: "Stored" (new key) or "Replaced". Structured: {"key","created","size"}.
- delete: structured {"key","deleted":true}; a missing key is not_found.
- list: the keys in byte order with their sizes and times, values left out.
  Structured: {"keys":[{"key","size","updated_at"}],"count"}.
Sizes are in bytes; times are RFC 3339 in UTC.`

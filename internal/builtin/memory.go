// This file, memory_scratchpad.go and memory_docs.go are the memory tools: long-term
// memories of a tenant with full-text search (memory_save, memory_search,
// memory_delete), and the session's key-value scratchpad (scratchpad).

package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// MemoryStore is what the memory tools need from the store; *store.SQLite and
// *store.Postgres have it.
type MemoryStore interface {
	SaveMemory(ctx context.Context, m *store.Memory) (replaced bool, err error)
	SearchMemory(ctx context.Context, tenant, query string, limit int) ([]store.MemoryHit, error)
	DeleteMemory(ctx context.Context, tenant, id string) error
}

// Limits of the memory tools.
const (
	maxMemoryContent   = 16 << 10 // bytes
	maxMemoryKey       = 128      // characters
	maxMemoryTags      = 16
	maxMemoryTag       = 64 // characters
	maxMemoryQuery     = 1000
	defaultMemoryLimit = 10
	maxMemoryLimit     = 50
	// memoryShown is how many characters of a memory a search result shows.
	memoryShown = 2000
)

// MemoryTools returns memory_save, memory_search and memory_delete, keeping each
// tenant's memories in s.
func MemoryTools(s MemoryStore) []tool.Tool {
	return []tool.Tool{&memorySave{s}, &memorySearch{s}, &memoryDelete{s}}
}

type memorySave struct{ s MemoryStore }

type memorySaveArgs struct {
	Content string   `json:"content"`
	Key     string   `json:"key"`
	Tags    []string `json:"tags"`
}

// memorySaveOutput is the structured result of memory_save.
type memorySaveOutput struct {
	ID        string   `json:"id"`
	Key       string   `json:"key,omitempty"`
	Tags      []string `json:"tags"`
	Replaced  bool     `json:"replaced"`
	CreatedAt string   `json:"created_at"`
	UpdatedAt string   `json:"updated_at"`
}

func (t *memorySave) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:  "memory_save",
		Label: "Save memory",
		Description: "Save a fact to long-term memory, where later sessions find it with memory_search: user preferences, project " +
			"conventions, decisions and their reasons, hard-won fixes. One self-contained fact per memory. " +
			"With a key, saving again under the same key replaces that memory. Never save secrets.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "content": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The fact, written so it makes sense without this conversation."},
    "key": {"type": "string", "maxLength": %d, "description": "Optional stable name (e.g. \"user-editor-preference\"); saving again with it replaces the old memory."},
    "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": %d}, "maxItems": %d, "description": "Optional words to file it under; they are searched too."}
  },
  "required": ["content"],
  "additionalProperties": false
}`, maxMemoryContent, maxMemoryKey, maxMemoryTag, maxMemoryTags)),
		Documentation: memorySaveDoc,
		PromptHint: "Long-term memory outlives this session: search it with memory_search before work that may have been done before " +
			"or when the user refers to earlier work; save lasting facts with memory_save (never secrets).",
	}, false)
}

func (t *memorySave) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args memorySaveArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(args.Content) == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "content is empty; give the fact to remember")
	}
	if err := checkArgText("content", args.Content, 0, maxMemoryContent); err != nil {
		return nil, err
	}
	key := strings.TrimSpace(args.Key)
	if key != "" {
		if err := checkArgName("key", key, maxMemoryKey); err != nil {
			return nil, err
		}
	}
	tags, err := cleanTags(args.Tags)
	if err != nil {
		return nil, err
	}
	m := &store.Memory{Tenant: sess.Tenant, SessionID: sess.ID, Key: key, Content: args.Content, Tags: tags}
	replaced, err := t.s.SaveMemory(ctx, m)
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	out := memorySaveOutput{ID: m.ID, Key: m.Key, Tags: m.Tags, Replaced: replaced,
		CreatedAt: storeTimeText(m.CreatedAt), UpdatedAt: storeTimeText(m.UpdatedAt)}
	text := fmt.Sprintf("Saved memory %s.", m.ID)
	if replaced {
		text = fmt.Sprintf("Replaced memory %s (key %q) with the new content.", m.ID, m.Key)
	}
	return fileResult(text, out, nil)
}

// cleanTags trims tags, drops duplicates and refuses empty or oversized ones.
func cleanTags(tags []string) ([]string, error) {
	if len(tags) > maxMemoryTags {
		return nil, tool.Errorf(tool.KindInvalidArgs, "%d tags; the most is %d", len(tags), maxMemoryTags)
	}
	out := make([]string, 0, len(tags))
	for _, tag := range tags {
		tag = strings.TrimSpace(tag)
		if tag == "" {
			return nil, tool.Errorf(tool.KindInvalidArgs, "tags contains an empty tag")
		}
		if err := checkArgName("tag", tag, maxMemoryTag); err != nil {
			return nil, err
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out, nil
}

// checkArgName validates a name a model gave (scratchpad key, memory key, tag): not
// empty, not too long, no control characters.
func checkArgName(field, key string, maxChars int) error {
	if key == "" {
		return tool.Errorf(tool.KindInvalidArgs, "%s is empty", field)
	}
	if n := utf8.RuneCountInString(key); n > maxChars {
		return tool.Errorf(tool.KindInvalidArgs, "%s is %d characters long; the most is %d", field, n, maxChars)
	}
	if i := strings.IndexFunc(key, unicode.IsControl); i >= 0 {
		return tool.Errorf(tool.KindInvalidArgs, "%s %q contains a control character", field, key)
	}
	return nil
}

type memorySearch struct{ s MemoryStore }

type memorySearchArgs struct {
	Query string `json:"query"`
	Limit *int   `json:"limit"`
}

// memoryHitOutput is one result of memory_search.
type memoryHitOutput struct {
	ID      string `json:"id"`
	Key     string `json:"key,omitempty"`
	Content string `json:"content"`
	// ContentTruncated says Content is the start of a longer memory.
	ContentTruncated bool     `json:"content_truncated,omitempty"`
	Tags             []string `json:"tags"`
	CreatedAt        string   `json:"created_at"`
	UpdatedAt        string   `json:"updated_at"`
	Score            float64  `json:"score"`
}

// memorySearchOutput is the structured result of memory_search.
type memorySearchOutput struct {
	Query   string            `json:"query"`
	Results []memoryHitOutput `json:"results"`
}

func (t *memorySearch) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:  "memory_search",
		Label: "Search memory",
		Description: "Search long-term memory (facts saved with memory_save in this and earlier sessions) by words. " +
			"Best matches first: memories containing more of the words rank higher; word endings are ignored (\"migrations\" finds \"migration\").",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": %d, "description": "Words to look for, e.g. \"deploy staging database\". Plain words: no operators or quotes needed."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many memories to return at most (default %d)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`, maxMemoryQuery, maxMemoryLimit, defaultMemoryLimit)),
		Documentation: memorySearchDoc,
	}, true)
}

func (t *memorySearch) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args memorySearchArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(args.Query) == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "query is empty; give the words to look for")
	}
	if n := utf8.RuneCountInString(args.Query); n > maxMemoryQuery {
		return nil, tool.Errorf(tool.KindInvalidArgs, "query is %d characters long; the most is %d", n, maxMemoryQuery)
	}
	limit := defaultMemoryLimit
	if args.Limit != nil {
		if *args.Limit < 1 || *args.Limit > maxMemoryLimit {
			return nil, tool.Errorf(tool.KindInvalidArgs, "limit %d is out of range: 1 to %d", *args.Limit, maxMemoryLimit)
		}
		limit = *args.Limit
	}
	hits, err := t.s.SearchMemory(ctx, sess.Tenant, args.Query, limit)
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	out := memorySearchOutput{Query: args.Query, Results: make([]memoryHitOutput, 0, len(hits))}
	var b strings.Builder
	if len(hits) == 0 {
		fmt.Fprintf(&b, "No memories match %q. Try other or fewer words; memories are found by the words they contain.", args.Query)
	} else {
		if len(hits) == 1 {
			fmt.Fprintf(&b, "1 memory matches %q:", args.Query)
		} else {
			fmt.Fprintf(&b, "%d memories match %q, best first:", len(hits), args.Query)
		}
	}
	for i, h := range hits {
		content, cut := cutMemoryText(h.Content, memoryShown)
		o := memoryHitOutput{ID: h.ID, Key: h.Key, Content: content, ContentTruncated: cut, Tags: h.Tags,
			CreatedAt: storeTimeText(h.CreatedAt), UpdatedAt: storeTimeText(h.UpdatedAt), Score: roundScore(h.Score)}
		out.Results = append(out.Results, o)
		fmt.Fprintf(&b, "\n\n%d. %s (score %.3g, saved %s", i+1, o.ID, o.Score, o.UpdatedAt)
		if o.Key != "" {
			fmt.Fprintf(&b, ", key %q", o.Key)
		}
		if len(o.Tags) > 0 {
			fmt.Fprintf(&b, ", tags: %s", strings.Join(o.Tags, ", "))
		}
		b.WriteString(")\n" + content)
		if cut {
			fmt.Fprintf(&b, "\n[cut: the memory is %d characters long; the first %d are shown]", utf8.RuneCountInString(h.Content), memoryShown)
		}
	}
	return fileResult(b.String(), out, nil)
}

// roundScore keeps 4 significant digits: enough to order, short for the model.
func roundScore(f float64) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
	if err != nil {
		return f
	}
	return v
}

// cutMemoryText returns at most n characters of s, reporting whether it cut.
func cutMemoryText(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j], true
		}
		i++
	}
	return s, false
}

type memoryDelete struct{ s MemoryStore }

func (t *memoryDelete) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:        "memory_delete",
		Label:       "Delete memory",
		Description: "Delete a long-term memory by its id (mem_…, as memory_search shows it), e.g. one that turned out to be wrong or outdated.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 128, "description": "The memory's id (mem_…)."}},
  "required": ["id"],
  "additionalProperties": false
}`),
		Documentation: memoryDeleteDoc,
	}, false)
}

func (t *memoryDelete) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
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
	if id == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "id is empty")
	}
	err = t.s.DeleteMemory(ctx, sess.Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, tool.Errorf(tool.KindNotFound, "no memory %q; memory_search shows memories with their ids", id)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	return fileResult(fmt.Sprintf("Deleted memory %s.", id), map[string]any{"id": id, "deleted": true}, nil)
}

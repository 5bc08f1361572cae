package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Memory is a long-term note of a tenant: saved by one session, found by the tenant's
// later sessions through full-text search.
type Memory struct {
	ID        string // mem_…; SaveMemory generates one when empty
	Tenant    string
	SessionID string // the session that saved it
	// Key is optional. Within a tenant a key names one memory: saving with a key that
	// exists replaces that memory's content, tags and session, keeping its id.
	Key       string
	Content   string
	Tags      []string // never nil when read back
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MemoryHit is a search result. Score orders hits of one search, higher is better;
// it is not comparable across searches or backends.
type MemoryHit struct {
	Memory
	Score float64
}

// MemoryStore keeps long-term memories. Every method honours ctx.
type MemoryStore interface {
	// SaveMemory inserts m, or replaces the tenant's memory with the same non-empty
	// Key. It fills in m the ID (the existing one when replaced), CreatedAt (kept
	// when replaced) and UpdatedAt, and reports whether it replaced.
	SaveMemory(ctx context.Context, m *Memory) (replaced bool, err error)
	// SearchMemory returns the tenant's memories matching any word of query, best
	// first, at most limit (limit <= 0: DefaultMemorySearchLimit). The query is plain
	// text: words are matched (with stemming), any other character is a separator, so
	// no input is a syntax error. A query without words returns no hits.
	SearchMemory(ctx context.Context, tenant, query string, limit int) ([]MemoryHit, error)
	// DeleteMemory returns ErrNotFound unless the memory exists in that tenant.
	DeleteMemory(ctx context.Context, tenant, id string) error
}

// DefaultMemorySearchLimit is the number of hits SearchMemory returns when not told.
const DefaultMemorySearchLimit = 10

// maxSearchTerms bounds the words of one search; more only slow it down.
const maxSearchTerms = 32

var (
	_ MemoryStore = (*SQLite)(nil)
	_ MemoryStore = (*Postgres)(nil)
)

func prepareMemory(m *Memory) error {
	if m == nil {
		return fmt.Errorf("nil memory: %w", ErrInvalid)
	}
	if m.ID == "" {
		m.ID = newShortID("mem_")
	}
	if strings.TrimSpace(m.Content) == "" {
		return fmt.Errorf("memory %s: content is empty: %w", m.ID, ErrInvalid)
	}
	if m.SessionID == "" {
		return fmt.Errorf("memory %s: session id is empty: %w", m.ID, ErrInvalid)
	}
	for what, text := range map[string]string{"key": m.Key, "content": m.Content, "tenant": m.Tenant} {
		if err := checkStoredText("memory "+m.ID+": "+what, text); err != nil {
			return err
		}
	}
	for _, tag := range m.Tags {
		if strings.TrimSpace(tag) == "" {
			return fmt.Errorf("memory %s: empty tag: %w", m.ID, ErrInvalid)
		}
		if err := checkStoredText("memory "+m.ID+": tag", tag); err != nil {
			return err
		}
	}
	if m.Tags == nil {
		m.Tags = []string{}
	}
	if m.UpdatedAt.IsZero() {
		m.UpdatedAt = now()
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = m.UpdatedAt
	}
	m.CreatedAt = utcMicro(m.CreatedAt)
	m.UpdatedAt = utcMicro(m.UpdatedAt)
	return nil
}

func encodeTags(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags)
	return string(b)
}

func decodeTags(b []byte) ([]string, error) {
	tags := []string{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &tags); err != nil {
			return nil, err
		}
	}
	if tags == nil {
		tags = []string{}
	}
	return tags, nil
}

// nullKey is a memory key as a nullable column value: no key is NULL, which the
// partial unique index ignores.
func nullKey(k string) any {
	if k == "" {
		return nil
	}
	return k
}

// searchTerms splits a model's query into lower-case words (runs of letters and
// digits), without duplicates, at most maxSearchTerms. Everything else separates
// words, so quotes, *, :, parentheses, OR, NEAR and - carry no meaning to either
// full-text engine.
func searchTerms(query string) []string {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := make([]string, 0, min(len(words), maxSearchTerms))
	seen := map[string]bool{}
	for _, w := range words {
		if seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == maxSearchTerms {
			break
		}
	}
	return out
}

// fts5Query is an FTS5 MATCH expression matching any of terms: each term a quoted
// string (a term has no quote, but doubling is the FTS5 escape anyway), joined by OR.
func fts5Query(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// pgWebQuery is input for websearch_to_tsquery matching any of terms. That function
// never reports a syntax error; with terms made of letters and digits only, the one
// word it would read as an operator is "or", which is left out (it is a stop word).
func pgWebQuery(terms []string) string {
	kept := make([]string, 0, len(terms))
	for _, t := range terms {
		if t != "or" {
			kept = append(kept, t)
		}
	}
	return strings.Join(kept, " or ")
}

// ScratchpadEntry is one key of a session's scratchpad.
type ScratchpadEntry struct {
	Key       string
	Value     string
	UpdatedAt time.Time
}

// ScratchpadKey describes a key without its value.
type ScratchpadKey struct {
	Key       string
	Size      int // bytes of the value
	UpdatedAt time.Time
}

// ErrScratchpadFull is returned by ScratchpadSet for a new key when the session
// already has the most keys allowed. It matches errors.Is(err, ErrConflict).
var ErrScratchpadFull = fmt.Errorf("scratchpad is full: %w", ErrConflict)

// ScratchpadStore keeps per-session key-value scratchpads. Every method honours ctx.
type ScratchpadStore interface {
	// ScratchpadSet stores value under key, creating or replacing it, and reports
	// whether the key is new. A new key is refused with ErrScratchpadFull when the
	// session has maxKeys keys already (maxKeys <= 0: no limit); the count and the
	// insert are one atomic step.
	ScratchpadSet(ctx context.Context, sessionID, key, value string, maxKeys int) (created bool, err error)
	// ScratchpadGet returns ErrNotFound for a missing key.
	ScratchpadGet(ctx context.Context, sessionID, key string) (*ScratchpadEntry, error)
	// ScratchpadDelete returns ErrNotFound for a missing key.
	ScratchpadDelete(ctx context.Context, sessionID, key string) error
	// ScratchpadList returns the session's keys in key order (byte order).
	ScratchpadList(ctx context.Context, sessionID string) ([]ScratchpadKey, error)
}

var (
	_ ScratchpadStore = (*SQLite)(nil)
	_ ScratchpadStore = (*Postgres)(nil)
)

func checkScratchpadKey(sessionID, key string) error {
	if sessionID == "" {
		return fmt.Errorf("scratchpad: session id is empty: %w", ErrInvalid)
	}
	if key == "" {
		return fmt.Errorf("scratchpad: key is empty: %w", ErrInvalid)
	}
	return checkStoredText("scratchpad key", key)
}

// errScratchpadKeyMissing wraps ErrNotFound for a key.
func errScratchpadKeyMissing(key string) error {
	return fmt.Errorf("scratchpad key %q: %w", key, ErrNotFound)
}

// checkStoredText refuses text both databases cannot keep as it is: invalid UTF-8
// and NUL bytes (PostgreSQL rejects both in text and jsonb).
func checkStoredText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8: %w", what, ErrInvalid)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s contains a NUL byte: %w", what, ErrInvalid)
	}
	return nil
}

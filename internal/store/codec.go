package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// ErrInvalid is returned, before anything is written, for a record the store refuses:
// a missing id, an unknown status, JSON that does not parse.
var ErrInvalid = errors.New("invalid record")

// sqliteTimeLayout is how SQLite stores timestamps: UTC, microseconds, fixed width, so
// that text order is time order.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// utcMicro is the precision both stores keep.
func utcMicro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func utcMicroPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := utcMicro(*t)
	return &u
}

func now() time.Time { return utcMicro(time.Now()) }

// rawJSON returns b as a value for a nullable JSON column: nil (SQL NULL) when empty.
func rawJSON(b json.RawMessage) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// encodeResult is the JSON kept in the result column. HTML escaping is off so that
// text with <, > and & stays readable in the database.
func encodeResult(r *tool.Result) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if !utf8.Valid(b) {
		// Only a tool's raw structured or details JSON can hold such bytes (inside its
		// strings); PostgreSQL refuses them, so every store keeps U+FFFD instead.
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return b, nil
}

func decodeResult(b []byte) (*tool.Result, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var r tool.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func resultErrorKind(r *tool.Result) tool.ErrorKind {
	if r == nil {
		return ""
	}
	return r.ErrorKind
}

func validStatus(s CallStatus) bool {
	switch s {
	case CallPending, CallRunning, CallWaiting, CallSucceeded, CallFailed:
		return true
	}
	return false
}

func checkJSON(what string, b json.RawMessage) error {
	if len(b) > 0 && !json.Valid(b) {
		return fmt.Errorf("%s is not valid JSON: %w", what, ErrInvalid)
	}
	return nil
}

func checkResult(r *tool.Result) error {
	if r == nil {
		return nil
	}
	if err := checkJSON("result structured", r.Structured); err != nil {
		return err
	}
	return checkJSON("result details", r.Details)
}

// prepareSession validates s and fills zero timestamps with the current time
// (UpdatedAt defaults to CreatedAt), writing them back into s.
func prepareSession(s *Session) error {
	if s == nil {
		return fmt.Errorf("nil session: %w", ErrInvalid)
	}
	if s.ID == "" {
		return fmt.Errorf("session id is empty: %w", ErrInvalid)
	}
	if err := checkJSON("spec", s.Spec); err != nil {
		return err
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now()
	}
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = s.CreatedAt
	}
	return nil
}

// prepareCall validates c and fills a zero CreatedAt with the current time, writing it
// back into c.
func prepareCall(c *Call) error {
	if c == nil {
		return fmt.Errorf("nil call: %w", ErrInvalid)
	}
	if c.ID == "" {
		return fmt.Errorf("call id is empty: %w", ErrInvalid)
	}
	if c.SessionID == "" {
		return fmt.Errorf("call %s: session id is empty: %w", c.ID, ErrInvalid)
	}
	if c.Name == "" {
		return fmt.Errorf("call %s: name is empty: %w", c.ID, ErrInvalid)
	}
	// The error's "call <id>: " prefix is added on failure only: building it for
	// every field of every call was a dozen allocations per recorded call.
	for _, f := range [...]struct{ what, s string }{{"session id", c.SessionID}, {"tenant", c.Tenant},
		{"tool_call_id", c.ToolCallID}, {"name", c.Name}, {"owner", c.Owner}} {
		if err := checkStoredText(f.what, f.s); err != nil {
			return fmt.Errorf("call %s: %w", c.ID, err)
		}
	}
	if !utf8.Valid(c.Arguments) {
		return fmt.Errorf("call %s: arguments are not valid UTF-8: %w", c.ID, ErrInvalid)
	}
	if !validStatus(c.Status) {
		return fmt.Errorf("call %s: unknown status %q: %w", c.ID, c.Status, ErrInvalid)
	}
	if err := checkJSON("arguments", c.Arguments); err != nil {
		return fmt.Errorf("call %s: %w", c.ID, err)
	}
	if err := checkResult(c.Result); err != nil {
		return fmt.Errorf("call %s: %w", c.ID, err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now()
	}
	return nil
}

// NotStartedResult is the result AbandonCalls gives a call that was still pending: its
// process stopped before the call started, so, unlike a running one, it did not run.
func NotStartedResult() *tool.Result {
	return tool.ErrorResult(tool.KindFailed, "the daemon stopped before this call started; it was not run")
}

// sortAbandoned orders AbandonCalls' answer oldest first (ties: by id).
func sortAbandoned(calls []AbandonedCall) {
	slices.SortFunc(calls, func(a, b AbandonedCall) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// prepareFinish validates f and fills a zero FinishedAt with the current time.
func prepareFinish(f *CallFinish) error {
	if f.ID == "" {
		return fmt.Errorf("finish: call id is empty: %w", ErrInvalid)
	}
	if !f.Status.Terminal() {
		return fmt.Errorf("finish call %s: status %q is not terminal: %w", f.ID, f.Status, ErrInvalid)
	}
	if err := checkResult(f.Result); err != nil {
		return fmt.Errorf("finish call %s: %w", f.ID, err)
	}
	if f.FinishedAt.IsZero() {
		f.FinishedAt = now()
	}
	return nil
}

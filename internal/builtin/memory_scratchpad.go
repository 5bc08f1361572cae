package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// ScratchpadStore is what the scratchpad tool needs from the store; *store.SQLite and
// *store.Postgres have it.
type ScratchpadStore interface {
	ScratchpadSet(ctx context.Context, sessionID, key, value string, maxKeys int) (created bool, err error)
	ScratchpadGet(ctx context.Context, sessionID, key string) (*store.ScratchpadEntry, error)
	ScratchpadDelete(ctx context.Context, sessionID, key string) error
	ScratchpadList(ctx context.Context, sessionID string) ([]store.ScratchpadKey, error)
}

// Limits of the scratchpad.
const (
	maxScratchpadKey   = 128      // characters
	maxScratchpadValue = 64 << 10 // bytes
	maxScratchpadKeys  = 1000     // per session
)

// ScratchpadTools returns the scratchpad tool, keeping each session's keys in s.
func ScratchpadTools(s ScratchpadStore) []tool.Tool { return []tool.Tool{&scratchpad{s}} }

type scratchpad struct{ s ScratchpadStore }

type scratchpadArgs struct {
	Action string  `json:"action"`
	Key    string  `json:"key"`
	Value  *string `json:"value"`
}

// Structured results of the scratchpad tool, one per action.
type (
	scratchpadGetOutput struct {
		Key       string `json:"key"`
		Value     string `json:"value"`
		Size      int    `json:"size"` // bytes
		UpdatedAt string `json:"updated_at"`
	}
	scratchpadSetOutput struct {
		Key     string `json:"key"`
		Created bool   `json:"created"` // the key is new
		Size    int    `json:"size"`
	}
	scratchpadDeleteOutput struct {
		Key     string `json:"key"`
		Deleted bool   `json:"deleted"`
	}
	scratchpadListOutput struct {
		Keys  []scratchpadKeyOutput `json:"keys"`
		Count int                   `json:"count"`
	}
)

type scratchpadKeyOutput struct {
	Key       string `json:"key"`
	Size      int    `json:"size"`
	UpdatedAt string `json:"updated_at"`
}

func (t *scratchpad) Spec() tool.Spec {
	return storeToolSpec(tool.Spec{
		Name:  "scratchpad",
		Label: "Scratchpad",
		Description: "A key-value notepad for this session, shared by every agent in it and kept across restarts: " +
			"set, get, delete or list keys. For plans, intermediate results and hand-offs; memory_save is for what later sessions need.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["get", "set", "delete", "list"], "description": "get, set or delete one key, or list the keys."},
    "key": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The key (required except for list)."},
    "value": {"type": "string", "maxLength": %d, "description": "The text to store (set only); replaces what the key held."}
  },
  "required": ["action"],
  "additionalProperties": false
}`, maxScratchpadKey, maxScratchpadValue)),
		Documentation: scratchpadDoc,
		PromptHint: "The scratchpad tool keeps notes for this session (plans, findings, hand-offs between agents); " +
			"list it when you join a session to see what others left.",
	}, false)
}

func (t *scratchpad) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args scratchpadArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	switch args.Action {
	case "list":
		if args.Key != "" || args.Value != nil {
			return nil, tool.Errorf(tool.KindInvalidArgs, "list takes no key and no value")
		}
		return t.list(ctx, sess)
	case "get", "set", "delete":
	default:
		return nil, tool.Errorf(tool.KindInvalidArgs, "action %q is not one of get, set, delete, list", args.Action)
	}
	if args.Key == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "%s needs a key", args.Action)
	}
	if err := checkArgName("key", args.Key, maxScratchpadKey); err != nil {
		return nil, err
	}
	if args.Action != "set" && args.Value != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "value is only for set; %s takes a key alone", args.Action)
	}
	switch args.Action {
	case "get":
		return t.get(ctx, sess, args.Key)
	case "delete":
		return t.delete(ctx, sess, args.Key)
	}
	if args.Value == nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "set needs a value (\"\" stores an empty text)")
	}
	return t.set(ctx, sess, args.Key, *args.Value)
}

func scratchpadKeyMissing(key string) error {
	return tool.Errorf(tool.KindNotFound, "the scratchpad has no key %q; action list shows its keys", key)
}

func (t *scratchpad) get(ctx *tool.Context, sess *tool.Session, key string) (*tool.Result, error) {
	e, err := t.s.ScratchpadGet(ctx, sess.ID, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, scratchpadKeyMissing(key)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	out := scratchpadGetOutput{Key: key, Value: e.Value, Size: len(e.Value), UpdatedAt: storeTimeText(e.UpdatedAt)}
	text := e.Value
	if text == "" {
		text = fmt.Sprintf("(key %q holds an empty text)", key)
	}
	return fileResult(text, out, nil)
}

func (t *scratchpad) set(ctx *tool.Context, sess *tool.Session, key, value string) (*tool.Result, error) {
	if err := checkArgText("value", value, 0, maxScratchpadValue); err != nil {
		return nil, err
	}
	created, err := t.s.ScratchpadSet(ctx, sess.ID, key, value, maxScratchpadKeys)
	if errors.Is(err, store.ErrScratchpadFull) {
		return nil, tool.Errorf(tool.KindFailed, "the scratchpad already holds %d keys, the most allowed; delete keys you no longer need or reuse one", maxScratchpadKeys)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	size := len(value)
	out := scratchpadSetOutput{Key: key, Created: created, Size: size}
	verb := "Replaced"
	if created {
		verb = "Stored"
	}
	return fileResult(fmt.Sprintf("%s %q (%s).", verb, key, sizeText(int64(size))), out, nil)
}

func (t *scratchpad) delete(ctx *tool.Context, sess *tool.Session, key string) (*tool.Result, error) {
	err := t.s.ScratchpadDelete(ctx, sess.ID, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, scratchpadKeyMissing(key)
	}
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	return fileResult(fmt.Sprintf("Deleted %q.", key), scratchpadDeleteOutput{Key: key, Deleted: true}, nil)
}

func (t *scratchpad) list(ctx *tool.Context, sess *tool.Session) (*tool.Result, error) {
	keys, err := t.s.ScratchpadList(ctx, sess.ID)
	if err != nil {
		return nil, storeFailure(ctx, err)
	}
	n := len(keys)
	out := scratchpadListOutput{Keys: make([]scratchpadKeyOutput, 0, n), Count: n}
	var b strings.Builder
	if n == 0 {
		b.WriteString("The scratchpad is empty.")
	} else {
		fmt.Fprintf(&b, "%d key%s (get one to read its value):", n, pluralS(n))
	}
	for _, k := range keys {
		ko := scratchpadKeyOutput{Key: k.Key, Size: k.Size, UpdatedAt: storeTimeText(k.UpdatedAt)}
		out.Keys = append(out.Keys, ko)
		fmt.Fprintf(&b, "\n%q (%s, updated %s)", ko.Key, sizeText(int64(ko.Size)), ko.UpdatedAt)
	}
	return fileResult(b.String(), out, nil)
}

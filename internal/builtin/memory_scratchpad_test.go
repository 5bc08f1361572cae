package builtin

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

type scratchListOut struct {
	Keys []struct {
		Key       string `json:"key"`
		Size      int    `json:"size"`
		UpdatedAt string `json:"updated_at"`
	} `json:"keys"`
	Count int `json:"count"`
}

func TestScratchpad(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	pad := func(args map[string]any) *tool.Result { return e.ok(t, sess, "scratchpad", args) }

	res := pad(map[string]any{"action": "list"})
	if out := decode[scratchListOut](t, res); out.Count != 0 || out.Keys == nil || res.Text() != "The scratchpad is empty." {
		t.Errorf("empty list: %q %s", res.Text(), res.Structured)
	}
	res = pad(map[string]any{"action": "set", "key": "plan", "value": "1. read\n2. write ü"})
	type setOut struct {
		Key     string `json:"key"`
		Created bool   `json:"created"`
		Size    int    `json:"size"`
	}
	if out := decode[setOut](t, res); !out.Created || out.Size != 19 || !strings.HasPrefix(res.Text(), `Stored "plan"`) {
		t.Errorf("set: %q %+v", res.Text(), out)
	}
	res = pad(map[string]any{"action": "get", "key": "plan"})
	type getOut struct {
		Key       string `json:"key"`
		Value     string `json:"value"`
		Size      int    `json:"size"`
		UpdatedAt string `json:"updated_at"`
	}
	if out := decode[getOut](t, res); res.Text() != "1. read\n2. write ü" || out.Value != "1. read\n2. write ü" || out.Size != 19 ||
		out.Key != "plan" || !strings.HasSuffix(out.UpdatedAt, "Z") {
		t.Errorf("get: %q %+v", res.Text(), out)
	}
	res = pad(map[string]any{"action": "set", "key": "plan", "value": ""})
	if out := decode[setOut](t, res); out.Created || !strings.HasPrefix(res.Text(), `Replaced "plan"`) {
		t.Errorf("replace: %q %+v", res.Text(), out)
	}
	if res := pad(map[string]any{"action": "get", "key": "plan"}); !strings.Contains(res.Text(), "empty text") {
		t.Errorf("get empty value: %q", res.Text())
	}
	pad(map[string]any{"action": "set", "key": "Z", "value": "zz"})
	res = pad(map[string]any{"action": "list"})
	out := decode[scratchListOut](t, res)
	if out.Count != 2 || out.Keys[0].Key != "Z" || out.Keys[0].Size != 2 || out.Keys[1].Key != "plan" || out.Keys[1].Size != 0 {
		t.Errorf("list: %+v", out)
	}
	if !strings.Contains(res.Text(), `"Z" (2 bytes, updated `) {
		t.Errorf("list text %q", res.Text())
	}
	if res := pad(map[string]any{"action": "delete", "key": "plan"}); !strings.Contains(res.Text(), `Deleted "plan"`) {
		t.Errorf("delete: %q", res.Text())
	}
	if res := pad(map[string]any{"action": "list"}); !strings.HasPrefix(res.Text(), "1 key (get one") {
		t.Errorf("list of one key: %q", res.Text())
	}
	e.fails(t, sess, "scratchpad", map[string]any{"action": "get", "key": "plan"}, tool.KindNotFound, `no key "plan"`)
}

func TestScratchpadBadInput(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	tests := []struct {
		name string
		args any
		kind tool.ErrorKind
		want string
	}{
		{"no action", map[string]any{}, tool.KindInvalidArgs, `action ""`},
		{"unknown action", map[string]any{"action": "put", "key": "k"}, tool.KindInvalidArgs, `"put"`},
		{"get without key", map[string]any{"action": "get"}, tool.KindInvalidArgs, "get needs a key"},
		{"set without key", map[string]any{"action": "set", "value": "v"}, tool.KindInvalidArgs, "set needs a key"},
		{"set without value", map[string]any{"action": "set", "key": "k"}, tool.KindInvalidArgs, "set needs a value"},
		{"get with value", map[string]any{"action": "get", "key": "k", "value": "v"}, tool.KindInvalidArgs, "value is only for set"},
		{"list with key", map[string]any{"action": "list", "key": "k"}, tool.KindInvalidArgs, "list takes no key"},
		{"key too long", map[string]any{"action": "set", "key": strings.Repeat("k", maxScratchpadKey+1), "value": ""}, tool.KindInvalidArgs, "129 characters"},
		{"key with control character", map[string]any{"action": "get", "key": "a\tb"}, tool.KindInvalidArgs, "control character"},
		{"value too big", map[string]any{"action": "set", "key": "k", "value": strings.Repeat("v", maxScratchpadValue+1)}, tool.KindInvalidArgs, "64.0 KiB"},
		{"NUL in value", map[string]any{"action": "set", "key": "k", "value": "a\u0000"}, tool.KindInvalidArgs, "NUL"},
		{"delete missing", map[string]any{"action": "delete", "key": "ghost"}, tool.KindNotFound, `"ghost"`},
		{"value not a string", `{"action":"set","key":"k","value":3}`, tool.KindInvalidArgs, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fails(t, sess, "scratchpad", tt.args, tt.kind, tt.want)
		})
	}
	if keys, err := e.st.ScratchpadList(t.Context(), "ses_1"); err != nil || len(keys) != 0 {
		t.Errorf("refused calls stored %v (%v)", keys, err)
	}
	// The largest value allowed fits.
	e.ok(t, sess, "scratchpad", map[string]any{"action": "set", "key": "k", "value": strings.Repeat("v", maxScratchpadValue)})
}

func TestScratchpadKeyLimit(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	for i := range maxScratchpadKeys {
		if _, err := e.st.ScratchpadSet(t.Context(), "ses_1", fmt.Sprintf("k%04d", i), "v", 0); err != nil {
			t.Fatal(err)
		}
	}
	e.fails(t, sess, "scratchpad", map[string]any{"action": "set", "key": "one-more", "value": "v"}, tool.KindFailed, "1000 keys")
	e.ok(t, sess, "scratchpad", map[string]any{"action": "set", "key": "k0001", "value": "replacing is fine"})
	e.ok(t, sess, "scratchpad", map[string]any{"action": "delete", "key": "k0002"})
	e.ok(t, sess, "scratchpad", map[string]any{"action": "set", "key": "one-more", "value": "room again"})
}

func TestScratchpadIsolation(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	a, b := storeSession("acme", "ses_a"), storeSession("acme", "ses_b")
	e.ok(t, a, "scratchpad", map[string]any{"action": "set", "key": "note", "value": "from a"})
	e.fails(t, b, "scratchpad", map[string]any{"action": "get", "key": "note"}, tool.KindNotFound)
	e.fails(t, b, "scratchpad", map[string]any{"action": "delete", "key": "note"}, tool.KindNotFound)
	if out := decode[scratchListOut](t, e.ok(t, b, "scratchpad", map[string]any{"action": "list"})); out.Count != 0 {
		t.Errorf("session b lists %+v", out)
	}
	e.ok(t, b, "scratchpad", map[string]any{"action": "set", "key": "note", "value": "from b"})
	if got := e.ok(t, a, "scratchpad", map[string]any{"action": "get", "key": "note"}).Text(); got != "from a" {
		t.Errorf("a's note = %q after b set its own", got)
	}
	var keys []string
	for _, k := range decode[scratchListOut](t, e.ok(t, a, "scratchpad", map[string]any{"action": "list"})).Keys {
		keys = append(keys, k.Key)
	}
	if !reflect.DeepEqual(keys, []string{"note"}) {
		t.Errorf("a's keys %v", keys)
	}
	if res := e.run(t, t.Context(), &tool.Session{Tenant: "acme"}, "scratchpad", map[string]any{"action": "list"}); res.ErrorKind != tool.KindUnavailable {
		t.Errorf("a session without id: %s %s", res.ErrorKind, res.Text())
	}
}

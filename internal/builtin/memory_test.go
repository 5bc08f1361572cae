package builtin

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

type memorySaveOut struct {
	ID       string   `json:"id"`
	Key      string   `json:"key"`
	Tags     []string `json:"tags"`
	Replaced bool     `json:"replaced"`
}

type memorySearchOut struct {
	Query   string `json:"query"`
	Results []struct {
		ID        string   `json:"id"`
		Key       string   `json:"key"`
		Content   string   `json:"content"`
		Truncated bool     `json:"content_truncated"`
		Tags      []string `json:"tags"`
		CreatedAt string   `json:"created_at"`
		Score     float64  `json:"score"`
	} `json:"results"`
}

func (o memorySearchOut) ids() []string {
	ids := []string{}
	for _, r := range o.Results {
		ids = append(ids, r.ID)
	}
	return ids
}

func (e *storeEnv) save(t *testing.T, sess *tool.Session, args map[string]any) memorySaveOut {
	t.Helper()
	return decode[memorySaveOut](t, e.ok(t, sess, "memory_save", args))
}

func (e *storeEnv) search(t *testing.T, sess *tool.Session, args map[string]any) (memorySearchOut, string) {
	t.Helper()
	res := e.ok(t, sess, "memory_search", args)
	return decode[memorySearchOut](t, res), res.Text()
}

func TestMemorySaveSearch(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	m1 := e.save(t, sess, map[string]any{"content": "Deploys to staging need the VPN.", "tags": []string{" ops ", "ops", "deploy"}})
	if !strings.HasPrefix(m1.ID, "mem_") || m1.Replaced || !reflect.DeepEqual(m1.Tags, []string{"ops", "deploy"}) {
		t.Errorf("save = %+v", m1)
	}
	m2 := e.save(t, sess, map[string]any{"content": "The staging database is postgres 15.", "key": "staging-db"})
	e.save(t, sess, map[string]any{"content": "Lunch is at noon."})

	out, text := e.search(t, storeSession("acme", "ses_later"), map[string]any{"query": "staging deploy"})
	if got := out.ids(); !reflect.DeepEqual(got, []string{m1.ID, m2.ID}) {
		t.Errorf("search ids %v, want [%s %s] (more words first, no lunch)", got, m1.ID, m2.ID)
	}
	r := out.Results[0]
	if r.Content != "Deploys to staging need the VPN." || !reflect.DeepEqual(r.Tags, []string{"ops", "deploy"}) ||
		r.Score <= out.Results[1].Score || r.Truncated || r.CreatedAt == "" {
		t.Errorf("first hit %+v", r)
	}
	for _, want := range []string{`2 memories match "staging deploy"`, "1. " + m1.ID, "tags: ops, deploy", "2. " + m2.ID, `key "staging-db"`, "postgres 15"} {
		if !strings.Contains(text, want) {
			t.Errorf("search text lacks %q:\n%s", want, text)
		}
	}
	if out, text := e.search(t, sess, map[string]any{"query": "kubernetes"}); len(out.Results) != 0 || !strings.Contains(text, "No memories match") {
		t.Errorf("no-match search: %v %q", out.ids(), text)
	}
	if out, _ := e.search(t, sess, map[string]any{"query": "noon staging", "limit": 1}); len(out.Results) != 1 {
		t.Errorf("limit 1 returned %v", out.ids())
	}
	if _, text := e.search(t, sess, map[string]any{"query": "lunch"}); !strings.HasPrefix(text, `1 memory matches "lunch":`) {
		t.Errorf("one-hit search text %q", text)
	}

	// Saving under the same key replaces.
	again := e.save(t, sess, map[string]any{"content": "The staging database is postgres 16 now.", "key": "staging-db"})
	if again.ID != m2.ID || !again.Replaced {
		t.Errorf("save with an existing key = %+v, want replaced %s", again, m2.ID)
	}
	if out, _ := e.search(t, sess, map[string]any{"query": "postgres"}); len(out.Results) != 1 || !strings.Contains(out.Results[0].Content, "16") {
		t.Errorf("after replace: %+v", out.Results)
	}
}

func TestMemorySearchCutsLongContent(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	long := "zebra " + strings.Repeat("é", memoryShown+500)
	e.save(t, sess, map[string]any{"content": long})
	out, text := e.search(t, sess, map[string]any{"query": "zebra"})
	if len(out.Results) != 1 || !out.Results[0].Truncated || len([]rune(out.Results[0].Content)) != memoryShown {
		t.Fatalf("long memory: %d results, truncated %v, %d characters", len(out.Results), out.Results[0].Truncated, len([]rune(out.Results[0].Content)))
	}
	if !strings.Contains(text, "[cut: the memory is 2506 characters long; the first 2000 are shown]") {
		t.Errorf("no cut note in %q", text[len(text)-200:])
	}
}

func TestMemoryHostileQueries(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	m := e.save(t, sess, map[string]any{"content": "the banana protocol"})
	for _, q := range []string{`"banana`, `banana*`, `banana OR`, `content:banana`, `(banana))`, `NEAR(banana`, `banana' --`, `-banana`} {
		out, _ := e.search(t, sess, map[string]any{"query": q})
		if !reflect.DeepEqual(out.ids(), []string{m.ID}) {
			t.Errorf("query %q found %v", q, out.ids())
		}
	}
	for _, q := range []string{`"`, `*`, `OR`, `:`, `()`} {
		e.ok(t, sess, "memory_search", map[string]any{"query": q})
	}
}

func TestMemoryBadInput(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	tags := make([]string, maxMemoryTags+1)
	for i := range tags {
		tags[i] = "t" + strings.Repeat("x", i)
	}
	tests := []struct {
		name, tool string
		args       any
		kind       tool.ErrorKind
		want       string
	}{
		{"save: no content", "memory_save", map[string]any{}, tool.KindInvalidArgs, "content is empty"},
		{"save: blank content", "memory_save", map[string]any{"content": "  \n"}, tool.KindInvalidArgs, "content is empty"},
		{"save: content too big", "memory_save", map[string]any{"content": strings.Repeat("a", maxMemoryContent+1)}, tool.KindInvalidArgs, "content is"},
		{"save: NUL", "memory_save", map[string]any{"content": "a\u0000"}, tool.KindInvalidArgs, "NUL"},
		{"save: key too long", "memory_save", map[string]any{"content": "x", "key": strings.Repeat("k", maxMemoryKey+1)}, tool.KindInvalidArgs, "key is 129 characters"},
		{"save: key with newline", "memory_save", map[string]any{"content": "x", "key": "a\nb"}, tool.KindInvalidArgs, "control character"},
		{"save: empty tag", "memory_save", map[string]any{"content": "x", "tags": []string{"ok", " "}}, tool.KindInvalidArgs, "empty tag"},
		{"save: too many tags", "memory_save", map[string]any{"content": "x", "tags": tags}, tool.KindInvalidArgs, "17 tags"},
		{"save: tags not strings", "memory_save", `{"content":"x","tags":[1]}`, tool.KindInvalidArgs, "arguments"},
		{"search: no query", "memory_search", map[string]any{}, tool.KindInvalidArgs, "query is empty"},
		{"search: blank query", "memory_search", map[string]any{"query": "   "}, tool.KindInvalidArgs, "query is empty"},
		{"search: query too long", "memory_search", map[string]any{"query": strings.Repeat("q", maxMemoryQuery+1)}, tool.KindInvalidArgs, "1001 characters"},
		{"search: limit 0", "memory_search", map[string]any{"query": "x", "limit": 0}, tool.KindInvalidArgs, "limit 0"},
		{"search: limit too big", "memory_search", map[string]any{"query": "x", "limit": maxMemoryLimit + 1}, tool.KindInvalidArgs, "limit 51"},
		{"delete: unknown id", "memory_delete", map[string]any{"id": "mem_nope"}, tool.KindNotFound, "mem_nope"},
		{"delete: no id", "memory_delete", map[string]any{"id": " "}, tool.KindInvalidArgs, "id is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fails(t, sess, tt.tool, tt.args, tt.kind, tt.want)
		})
	}
	if hits, err := e.st.SearchMemory(t.Context(), "acme", "x a", 50); err != nil || len(hits) != 0 {
		t.Errorf("refused saves wrote %d memories (%v)", len(hits), err)
	}
}

func TestMemoryTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	acme, globex := storeSession("acme", "ses_1"), storeSession("globex", "ses_2")
	m := e.save(t, acme, map[string]any{"content": "acme's secret recipe uses cardamom", "key": "recipe"})
	if out, _ := e.search(t, globex, map[string]any{"query": "cardamom recipe secret"}); len(out.Results) != 0 {
		t.Errorf("globex finds acme's memory: %v", out.ids())
	}
	e.fails(t, globex, "memory_delete", map[string]any{"id": m.ID}, tool.KindNotFound)
	// The same key in another tenant is another memory, not a replacement.
	g := e.save(t, globex, map[string]any{"content": "globex recipe uses cumin", "key": "recipe"})
	if g.Replaced || g.ID == m.ID {
		t.Errorf("globex's save replaced acme's memory: %+v", g)
	}
	if out, _ := e.search(t, storeSession("acme", "ses_9"), map[string]any{"query": "recipe"}); !reflect.DeepEqual(out.ids(), []string{m.ID}) {
		t.Errorf("acme (another session) finds %v, want [%s]", out.ids(), m.ID)
	}
	res := e.ok(t, acme, "memory_delete", map[string]any{"id": m.ID})
	if !strings.Contains(res.Text(), "Deleted memory "+m.ID) {
		t.Errorf("delete text %q", res.Text())
	}
	if out, _ := e.search(t, acme, map[string]any{"query": "cardamom"}); len(out.Results) != 0 {
		t.Errorf("deleted memory still found: %v", out.ids())
	}
	e.fails(t, acme, "memory_delete", map[string]any{"id": m.ID}, tool.KindNotFound)
}

func TestMemoryCancelled(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	sess := storeSession("acme", "ses_1")
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	for name, args := range map[string]any{
		"memory_save": map[string]any{"content": "x"}, "memory_search": map[string]any{"query": "x"},
		"memory_delete": map[string]any{"id": "mem_x"}, "scratchpad": map[string]any{"action": "list"},
	} {
		if res := e.run(t, ctx, sess, name, args); res.ErrorKind != tool.KindTimeout {
			t.Errorf("%s past its deadline: %s %s", name, res.ErrorKind, res.Text())
		}
	}
}

// TestStoreToolSpecs checks names, flags, documentation and that every schema
// compiles and accepts and refuses what it should.
func TestStoreToolSpecs(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	tests := []struct {
		name      string
		readOnly  bool
		good, bad []string
	}{
		{"task_create", false, []string{`{"subject":"x"}`, `{"subject":"x","description":"","owner":"a","blocked_by":["task_a"],"metadata":{"k":1}}`},
			[]string{`{}`, `{"subject":""}`, `{"subject":"x","blocked_by":"task_a"}`, `{"subject":"x","metadata":[]}`, `{"subject":"x","id":"task_a"}`}},
		{"task_get", true, []string{`{"id":"task_a"}`}, []string{`{}`, `{"id":""}`}},
		{"task_list", true, []string{`{}`, `{"status":"in_progress","owner":"a"}`}, []string{`{"status":"done"}`}},
		{"task_update", false, []string{`{"id":"task_a","status":"completed"}`, `{"id":"task_a","blocked_by":[]}`},
			[]string{`{"status":"completed"}`, `{"id":"task_a","status":"done"}`, `{"id":"task_a","subject":""}`}},
		{"scratchpad", false, []string{`{"action":"list"}`, `{"action":"set","key":"k","value":""}`},
			[]string{`{}`, `{"action":"put","key":"k"}`, `{"action":"get","key":""}`, `{"action":"set","key":"k","value":1}`}},
		{"memory_save", false, []string{`{"content":"x","key":"k","tags":["a"]}`}, []string{`{}`, `{"content":""}`, `{"content":"x","tags":[""]}`}},
		{"memory_search", true, []string{`{"query":"x","limit":50}`}, []string{`{}`, `{"query":""}`, `{"query":"x","limit":0}`, `{"query":"x","limit":51}`}},
		{"memory_delete", false, []string{`{"id":"mem_a"}`}, []string{`{}`}},
	}
	if len(e.tools) != len(tests) {
		t.Fatalf("%d tools, want %d", len(e.tools), len(tests))
	}
	for _, tt := range tests {
		spec := e.tools[tt.name].Spec()
		wantRisk := tool.RiskLow
		if tt.readOnly {
			wantRisk = tool.RiskSafe
		}
		if spec.Name != tt.name || spec.Label == "" || spec.Description == "" || len(spec.Documentation) < 200 ||
			spec.Risk != wantRisk || spec.ReadOnly != tt.readOnly || spec.ConcurrencySafe != tt.readOnly ||
			spec.Mode != tool.ModeDirect || spec.Timeout <= 0 || spec.Source != "builtin" {
			t.Errorf("%s: spec %+v", tt.name, spec)
		}
		checkArguments(t, tt.name, spec.Parameters, tt.good, tt.bad)
	}
}

// TestStoreToolsDispatch runs the tools through a ToolManager: registration works and
// schema validation stops bad arguments before Run.
func TestStoreToolsDispatch(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t)
	m := toolmgr.New()
	if err := m.Register(append(append(TaskTools(e.st), MemoryTools(e.st)...), ScratchpadTools(e.st)...)...); err != nil {
		t.Fatal(err)
	}
	sess := storeSession("acme", "ses_1")
	call := func(name, args string) *tool.Result {
		entry, ok := m.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		tctx := &tool.Context{Context: t.Context(), CallID: "tc_x", ToolName: name, Session: sess, Progress: tool.NoProgress}
		return m.Run(entry, toolmgr.Invocation{Ctx: tctx, Args: json.RawMessage(args), Timeout: 10 * time.Second})
	}
	if res := call("task_update", `{"id":"task_a","status":"done"}`); res.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("bad status passed validation: %s", res.Text())
	}
	if res := call("task_create", `{"subject":"via dispatch"}`); res.IsError {
		t.Fatalf("task_create: %s", res.Text())
	}
	if res := call("task_list", `{}`); res.IsError || !strings.Contains(res.Text(), "via dispatch") {
		t.Errorf("task_list: %s", res.Text())
	}
	if res := call("scratchpad", `{"action":"set","key":"k","value":"v"}`); res.IsError {
		t.Errorf("scratchpad set: %s", res.Text())
	}
	if res := call("memory_search", `{"query":"x","limit":500}`); res.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("limit 500 passed validation: %s", res.Text())
	}
}

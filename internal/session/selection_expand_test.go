package session

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

type described struct{ name, desc string }

func (d described) Spec() tool.Spec {
	return tool.Spec{Name: d.name, Description: d.desc, Source: "builtin"}
}
func (d described) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult(d.name), nil
}

// expandResult is tool_expand_tools' structured result.
type expandResult struct {
	Success     bool              `json:"success"`
	Expanded    []string          `json:"expanded_tools"`
	Invalid     []string          `json:"invalid_tools"`
	SwitchedOff map[string]string `json:"switched_off_tools"`
	Already     []string          `json:"already_selected_tools"`
	Available   []string          `json:"available_expandable_tools"`
	More        int               `json:"more_expandable_tools"`
	Note        string            `json:"note"`
}

func runExpand(t *testing.T, sess *Session, args string) (expandResult, string) {
	t.Helper()
	res, err := expandTool{}.Run(&tool.Context{Context: context.Background(), ToolName: ExpandToolName, Session: sess.Info}, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s: %v", args, err)
	}
	var out expandResult
	if err := json.Unmarshal(res.Structured, &out); err != nil {
		t.Fatalf("%s: %v", args, err)
	}
	return out, res.Content[0].Text
}

// groupedSession is a session over n generic tools, extra ones and memory_save, which
// the switched-off group "memory" hides, with the turn's tool list narrowed to a few.
func groupedSession(t *testing.T, n int, extra ...tool.Tool) (*Manager, *Session) {
	t.Helper()
	tm := toolmgr.New()
	for i := range n {
		tm.MustRegister(described{fmt.Sprintf("tool_%03d", i), fmt.Sprintf("Generic tool number %d.", i)})
	}
	tm.MustRegister(append(extra, described{"memory_save", "Save a durable fact to long-term memory."})...)
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws"),
		Groups: []Group{{Name: "memory", Description: "Long-term memory.", Tools: []string{"memory_*"}}}},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	sess, _, err := m.Create(context.Background(), "t1", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Suggest(sess, "generic tool number 7", 5); len(got) > 8 {
		t.Fatalf("not narrowed: %d tools", len(got))
	}
	return m, sess
}

// TestExpandResultIsBounded: in a session with hundreds of tools, every
// tool_expand_tools result used to list every name the session could still expand
// (~8 KB each time). It lists a bounded number, says how many more there are and how
// to search them (a query ranks them); a name of a switched-off group's tool is
// answered with the group and the reset_tools call that switches it on, not as
// invalid.
func TestExpandResultIsBounded(t *testing.T) {
	t.Parallel()
	m, sess := groupedSession(t, 400, described{"invoice_create", "Create an invoice for a customer in the billing system."})

	out, text := runExpand(t, sess, `{"tool_names":["tool_123","memory_save","no_such_tool"]}`)
	if !out.Success || !slices.Equal(out.Expanded, []string{"tool_123"}) || !slices.Equal(out.Invalid, []string{"no_such_tool"}) {
		t.Fatalf("expand: %s", text)
	}
	if len(text) > 2000 || len(out.Available) > expandListed {
		t.Fatalf("result of %d bytes lists %d names: %s", len(text), len(out.Available), text)
	}
	expandable := 401 - 6 // every callable tool but the 5 ranked and tool_123
	if len(out.Available)+out.More != expandable || !strings.Contains(out.Note, `"query"`) {
		t.Fatalf("listed %d + %d more, want %d in all, and how to search: %s", len(out.Available), out.More, expandable, text)
	}
	if hint := out.SwitchedOff["memory_save"]; !strings.Contains(hint, `tool group "memory"`) || !strings.Contains(hint, `reset_tools with {"memory":true}`) {
		t.Fatalf("switched-off tool: %s", text)
	}

	// Once the group is on, the tool is callable without another expansion, as the
	// hint says.
	if _, err := m.setGroups(context.Background(), sess, []string{"memory"}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := sess.Tools.Resolve("memory_save"); !ok || !sess.Selected("memory_save") {
		t.Fatal("memory_save not callable after its group was switched on")
	}

	// A query ranks the expandable tools; it expands nothing by itself, and that is
	// no failure (success false read to a model as "the search failed").
	out, text = runExpand(t, sess, `{"query":"bill a customer"}`)
	if !out.Success || len(out.Expanded) != 0 || len(out.Available) == 0 || out.Available[0] != "invoice_create" {
		t.Fatalf("query: %s", text)
	}
	if len(out.Available) == 1 && !strings.HasPrefix(out.Note, "the 1 tool you could load") {
		t.Fatalf("query matching one tool: note %q", out.Note)
	}
	if !sess.Selected("tool_123") || sess.Selected("invoice_create") {
		t.Fatal("selection after expand and query")
	}
	// Names all loaded already: nothing failed. A name the session lacks: failed.
	if out, text = runExpand(t, sess, `{"tool_names":["tool_123"]}`); !out.Success || !slices.Equal(out.Already, []string{"tool_123"}) {
		t.Fatalf("expand of a loaded tool: %s", text)
	}
	if out, text = runExpand(t, sess, `{"tool_names":["no_such_tool"]}`); out.Success {
		t.Fatalf("expand of an unknown tool: %s", text)
	}
	if _, err := (expandTool{}).Run(&tool.Context{Context: context.Background(), ToolName: ExpandToolName, Session: sess.Info}, json.RawMessage(`{}`)); err == nil {
		t.Fatal("neither tool_names nor query: no error")
	}
}

// TestSwitchOnHintOfADirectCall: a call of a tool that a switched-off group hides,
// in a turn whose tool list is narrowed, is answered with the reset_tools call that
// switches the group on; after that call, the tool runs as the hint says, without
// being expanded first.
func TestSwitchOnHintOfADirectCall(t *testing.T) {
	t.Parallel()
	m, sess := groupedSession(t, 40)
	x := NewExecutor(ExecConfig{Owner: "test"}, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p, err := x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "memory_save", Arguments: json.RawMessage(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Calls[0].preset; r == nil || !strings.Contains(r.Text(), `reset_tools with {"memory":true}`) {
		t.Fatalf("answer to the hidden tool's call: %v", r)
	}
	if _, err := m.setGroups(context.Background(), sess, []string{"memory"}); err != nil {
		t.Fatal(err)
	}
	if !sess.Selected("memory_save") {
		t.Fatal("after switching the group on as told, memory_save is still to be expanded first")
	}
}

// TestResetToolsShowsOnlyGivenInstructions: switching on a group without
// instructions used to answer with an empty "## name" heading, which tells the model
// there should be instructions it was not given. Only groups with instructions get
// a section; the answer still names every active group.
func TestResetToolsShowsOnlyGivenInstructions(t *testing.T) {
	t.Parallel()
	tm := toolmgr.New()
	tm.MustRegister(described{"memory_save", "Save a fact."}, described{"db_query", "Run a query."})
	groups := []Group{
		{Name: "memory", Description: "Long-term memory.", Tools: []string{"memory_*"}},
		{Name: "database", Description: "Databases.", Instructions: "Read before you write.", Tools: []string{"db_*"}},
	}
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws"), Groups: groups},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	sess, _, err := m.Create(context.Background(), "t1", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := resetTool{groups: groups}.Run(&tool.Context{Context: context.Background(), ToolName: ResetToolName, Session: sess.Info},
		json.RawMessage(`{"memory":true,"database":true}`))
	if err != nil {
		t.Fatal(err)
	}
	text := res.Text()
	if !strings.HasPrefix(text, "Active groups: basic, memory, database") || !strings.Contains(text, "## database\nRead before you write.") {
		t.Fatalf("answer: %q", text)
	}
	if strings.Contains(text, "## memory") {
		t.Fatalf("a group without instructions got a section: %q", text)
	}
}

// TestSwitchOnInTheSameRequest: a model told to call reset_tools and then the tool
// often sends both in one request. The request's calls are checked before any runs,
// so the tool's call is still refused; it used to be answered as if nothing had been
// done ("switched off in this session; call reset_tools with …"), which the model had
// just done. It is now told that this request switches the group on and to call the
// tool again.
func TestSwitchOnInTheSameRequest(t *testing.T) {
	t.Parallel()
	_, sess := groupedSession(t, 40)
	x := NewExecutor(ExecConfig{Owner: "test"}, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p, err := x.Plan(sess, Batch{Calls: []CallRequest{
		{ToolCallID: "c1", Name: ResetToolName, Arguments: json.RawMessage(`{"memory":true}`)},
		{ToolCallID: "c2", Name: "memory_save", Arguments: json.RawMessage(`{}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Calls[1].preset
	if r == nil || r.ErrorKind != tool.KindNotFound {
		t.Fatalf("answer to the hidden tool's call: %v", r)
	}
	if text := r.Text(); !strings.Contains(text, "this request switches on") || strings.Contains(text, "call reset_tools with") {
		t.Fatalf("answer to the hidden tool's call beside the reset_tools that switches its group on: %s", text)
	}

	// A reset_tools call that leaves the group off still gets the usual hint.
	p, err = x.Plan(sess, Batch{Calls: []CallRequest{
		{ToolCallID: "c3", Name: ResetToolName, Arguments: json.RawMessage(`{"memory":false}`)},
		{ToolCallID: "c4", Name: "memory_save", Arguments: json.RawMessage(`{}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Calls[1].preset; r == nil || !strings.Contains(r.Text(), `reset_tools with {"memory":true}`) {
		t.Fatalf("answer beside a reset_tools that leaves the group off: %v", r)
	}
}

// TestWhitelistOfSwitchedOffGroupWarns: a backend whose whitelist names tools that
// only a switched-off group holds got a session without them and "warnings": [], so
// nothing told it why the tools it asked for were missing. It is now warned, with
// the group and how to switch it on; a name in a group it switches on at creation,
// or in no group, is not warned of, nor is an unknown one twice.
func TestWhitelistOfSwitchedOffGroupWarns(t *testing.T) {
	t.Parallel()
	tm := toolmgr.New()
	tm.MustRegister(described{"memory_save", "Save a fact."}, described{"memory_recall", "Recall a fact."},
		described{"db_query", "Run a query."}, described{"read_file", "Read a file."})
	groups := []Group{
		{Name: "memory", Description: "Long-term memory.", Tools: []string{"memory_*"}},
		{Name: "database", Description: "Databases.", Tools: []string{"db_*"}},
	}
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws"), Groups: groups},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	sess, warnings, err := m.Create(context.Background(), "t1", Spec{
		AvailableTools: []string{"read_file", "memory_*", "db_query", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`unknown tool: nope`,
		`tools matching memory_* are in tool group "memory", which is off in this session: name it in active_groups, or the model switches it on with reset_tools`,
		`tool db_query is in tool group "database", which is off in this session: name it in active_groups, or the model switches it on with reset_tools`,
	}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings:\n got %q\nwant %q", warnings, want)
	}
	if got := sess.Tools.Names(); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("tools = %q", got)
	}
	_, warnings, err = m.Create(context.Background(), "t1", Spec{
		AvailableTools: []string{"read_file", "memory_*", "db_query"}, ActiveGroups: []string{"memory", "database"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings with the groups on: %q", warnings)
	}
	_, _, err = m.Create(context.Background(), "t1", Spec{ActiveGroups: []string{"nosuch"}})
	if err == nil || !strings.Contains(err.Error(), `unknown group "nosuch"; the tool groups are memory, database`) {
		t.Errorf("unknown active group: %v", err)
	}
}

// TestWhitelistOfProtocolTools: reset_tools and tool_expand_tools are in the
// listings a backend gets, and a backend that builds its whitelist from a listing
// names them; they were warned of as "unknown tool", though the session offers them
// whenever it needs them. They are known names now; without groups, reset_tools is
// not one.
func TestWhitelistOfProtocolTools(t *testing.T) {
	t.Parallel()
	tm := toolmgr.New()
	tm.MustRegister(described{"memory_save", "Save a fact."}, described{"read_file", "Read a file."})
	for _, tc := range []struct {
		groups []Group
		want   []string
	}{
		{[]Group{{Name: "memory", Description: "Long-term memory.", Tools: []string{"memory_*"}}}, nil},
		{nil, []string{"unknown tool: reset_tools"}},
	} {
		m, err := NewManager(Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws"), Groups: tc.groups},
			&memStore{m: map[string]*store.Session{}}, tm)
		if err != nil {
			t.Fatal(err)
		}
		_, warnings, err := m.Create(context.Background(), "t1", Spec{
			AvailableTools: []string{"read_file", ResetToolName, ExpandToolName}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(warnings, tc.want) {
			t.Errorf("groups %v: warnings %q, want %q", tc.groups, warnings, tc.want)
		}
	}
}

// TestSwitchedOffWarningsPerGroup: a backend that whitelists its 400 tools by name
// got one warning per tool of a switched-off group (73 lines for two groups of 35),
// which buried the warnings that matter, such as an unknown name. The names a group
// that is off holds are warned of in one line per group, with their count and the
// first few.
func TestSwitchedOffWarningsPerGroup(t *testing.T) {
	t.Parallel()
	tm := toolmgr.New()
	var whitelist []string
	for i := range 40 {
		tm.MustRegister(described{fmt.Sprintf("db_tool_%02d", i), "A database tool."})
		whitelist = append(whitelist, fmt.Sprintf("db_tool_%02d", i))
	}
	tm.MustRegister(described{"web_fetch", "Fetch a page."}, described{"read_file", "Read a file."})
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws"), Groups: []Group{
		{Name: "database", Description: "Databases.", Tools: []string{"db_*"}},
		{Name: "web", Description: "The web.", Tools: []string{"web_*"}}}},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := m.Create(context.Background(), "t1", Spec{AvailableTools: append(whitelist, "read_file", "web_fetch", "nope")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`unknown tool: nope`,
		`40 tools (db_tool_00, db_tool_01, db_tool_02, …) are in tool group "database", which is off in this session: name it in active_groups, or the model switches it on with reset_tools`,
		`tool web_fetch is in tool group "web", which is off in this session: name it in active_groups, or the model switches it on with reset_tools`,
	}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings:\n got %q\nwant %q", warnings, want)
	}
}

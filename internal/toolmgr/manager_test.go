package toolmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

type fnTool struct {
	spec tool.Spec
	run  func(ctx *tool.Context, args json.RawMessage) (*tool.Result, error)
}

func (f *fnTool) Spec() tool.Spec { return f.spec }
func (f *fnTool) Run(ctx *tool.Context, args json.RawMessage) (*tool.Result, error) {
	return f.run(ctx, args)
}

const personSchema = `{"type":"object","properties":{
  "name":{"type":"string","minLength":1},
  "age":{"type":"integer","minimum":0},
  "tags":{"type":"array","items":{"type":"string"}}},
  "required":["name","age"],"additionalProperties":false}`

func echoTool(name string) *fnTool {
	return &fnTool{
		spec: tool.Spec{Name: name, Description: "echo", Parameters: json.RawMessage(personSchema)},
		run: func(_ *tool.Context, args json.RawMessage) (*tool.Result, error) {
			return tool.TextResult(string(args)), nil
		},
	}
}

func newCtx(t *testing.T) *tool.Context {
	return &tool.Context{Context: context.Background(), CallID: "tc_1", ToolCallID: "c1", Session: &tool.Session{ID: "s", State: tool.NewState()}}
}

func TestRegisterRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		spec tool.Spec
		want string
	}{
		{"bad name", tool.Spec{Name: "has space"}, "must match"},
		{"empty name", tool.Spec{Name: ""}, "must match"},
		{"not json", tool.Spec{Name: "x", Parameters: json.RawMessage(`{`)}, "not JSON"},
		{"not object schema", tool.Spec{Name: "x", Parameters: json.RawMessage(`{"type":"string"}`)}, "type object"},
		{"bad schema", tool.Spec{Name: "x", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"nope"}}}`)}, "does not compile"},
		{"remote ref", tool.Spec{Name: "x", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/x.json"}}}`)}, "not fetched"},
		{"bad risk", tool.Spec{Name: "x", Risk: "extreme"}, "unknown risk"},
		{"output schema not an object schema", tool.Spec{Name: "x", OutputSchema: json.RawMessage(`{"type":"array"}`)}, `type must be "object"`},
		{"output schema without type", tool.Spec{Name: "x", OutputSchema: json.RawMessage(`{"properties":{}}`)}, `type must be "object"`},
		{"output schema property not an object", tool.Spec{Name: "x", OutputSchema: json.RawMessage(`{"type":"object","properties":{"a":true}}`)}, `property "a"`},
		{"output schema does not compile", tool.Spec{Name: "x", OutputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"pattern":"("}}}`)}, "does not compile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := New()
			err := m.Register(&fnTool{spec: c.spec})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Register error = %v, want it to contain %q", err, c.want)
			}
			if len(m.Names()) != 0 {
				t.Fatalf("a rejected tool was registered: %v", m.Names())
			}
		})
	}
	m := New()
	if err := m.Register(echoTool("a")); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(echoTool("b"), echoTool("a")); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if got := m.Names(); len(got) != 1 {
		t.Fatalf("a failed batch registered some tools: %v", got)
	}
}

func TestRunValidation(t *testing.T) {
	t.Parallel()
	m := New()
	m.MustRegister(echoTool("person"))
	e, _ := m.Lookup("person")
	cases := []struct {
		name      string
		args      string
		wantKind  tool.ErrorKind
		wantLines []string
	}{
		{"ok", `{"name":"ada","age":36}`, "", nil},
		{"missing both", `{}`, tool.KindInvalidArgs, []string{"/: missing properties"}},
		{"every path listed", `{"name":"","age":-1,"tags":[1,"x",true]}`, tool.KindInvalidArgs,
			[]string{"/age:", "/name:", "/tags/0:", "/tags/2:"}},
		{"extra property", `{"name":"a","age":1,"evil":1}`, tool.KindInvalidArgs, []string{"evil"}},
		{"array not object", `[1,2]`, tool.KindInvalidArgs, []string{"must be a JSON object, got an array"}},
		{"malformed", `{"name":`, tool.KindInvalidArgs, []string{"not valid JSON"}},
		{"wrong type", `{"name":"a","age":"36"}`, tool.KindInvalidArgs, []string{"/age:", "integer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(c.args)})
			if c.wantKind == "" {
				if res.IsError {
					t.Fatalf("unexpected error: %s", res.Text())
				}
				return
			}
			if !res.IsError || res.ErrorKind != c.wantKind {
				t.Fatalf("got is_error=%v kind=%q text=%q", res.IsError, res.ErrorKind, res.Text())
			}
			for _, l := range c.wantLines {
				if !strings.Contains(res.Text(), l) {
					t.Errorf("message lacks %q:\n%s", l, res.Text())
				}
			}
		})
	}
}

func TestIdentityFieldsStripped(t *testing.T) {
	t.Parallel()
	m := New()
	m.MustRegister(&fnTool{
		spec: tool.Spec{Name: "open", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		run:  func(_ *tool.Context, a json.RawMessage) (*tool.Result, error) { return tool.TextResult(string(a)), nil },
	}, &fnTool{
		spec: tool.Spec{Name: "declares", Parameters: json.RawMessage(`{"type":"object","properties":{"user_id":{"type":"string"}}}`)},
		run:  func(_ *tool.Context, a json.RawMessage) (*tool.Result, error) { return tool.TextResult(string(a)), nil },
	})
	e, _ := m.Lookup("open")
	res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"q":"x","session_id":"other","user_id":"root","_agent_state":{}}`)})
	var got map[string]any
	if err := json.Unmarshal([]byte(res.Text()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["q"] != "x" {
		t.Fatalf("identity fields reached the tool: %v", got)
	}
	e, _ = m.Lookup("declares")
	res = m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"user_id":"u1"}`)})
	if !strings.Contains(res.Text(), `"u1"`) {
		t.Fatalf("a declared parameter was stripped: %s", res.Text())
	}
}

// zodUnionRefs is what zod-to-json-schema 3 writes for
// z.union([z.object({email, tenant}), z.object({id})]) given the two as definitions.
const zodUnionRefs = `{"anyOf":[{"$ref":"#/definitions/ByEmail"},{"$ref":"#/definitions/ById"}],"definitions":{"ByEmail":{"type":"object","properties":{"email":{"type":"string"},"tenant":{"type":"string"}},"required":["email","tenant"],"additionalProperties":false},"ById":{"type":"object","properties":{"id":{"type":"number"}},"required":["id"],"additionalProperties":false}},"$schema":"http://json-schema.org/draft-07/schema#"}`

// TestIdentityFieldsInRootAlternatives: a parameter declared only in an
// alternative of a root anyOf, oneOf or allOf (an MCP server's zod union) is the
// tool's own and reaches it; identity fields no alternative declares, and those
// under a root not (a forbidden shape, not a parameter), are still stripped.
func TestIdentityFieldsInRootAlternatives(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, schema, args, want string
	}{
		{"anyOf", `{"type":"object","anyOf":[{"properties":{"q":{"type":"string"}},"required":["q"]},{"properties":{"tenant":{"type":"string"}},"required":["tenant"]}]}`,
			`{"tenant":"acme","session_id":"other"}`, `{"tenant":"acme"}`},
		{"oneOf", `{"type":"object","properties":{"q":{"type":"string"}},"oneOf":[{"properties":{"user_id":{"type":"string"}},"required":["user_id"]},{"properties":{"tenant_id":{"type":"string"}},"required":["tenant_id"]}]}`,
			`{"q":"x","user_id":"u1","_user":"root"}`, `{"q":"x","user_id":"u1"}`},
		{"allOf", `{"type":"object","allOf":[{"properties":{"session_id":{"type":"string"}}}]}`,
			`{"session_id":"s1","tenant":"evil"}`, `{"session_id":"s1"}`},
		{"not", `{"type":"object","properties":{"q":{"type":"string"}},"not":{"properties":{"tenant":{"const":"x"}},"required":["tenant"]}}`,
			`{"q":"x","tenant":"y"}`, `{"q":"x"}`},
		// zod-to-json-schema's output for z.union([ByEmail, ById]) with named
		// definitions: the alternatives are $refs (draft-07 "definitions", 2019-09 "$defs").
		{"anyOf $ref definitions", zodUnionRefs, `{"email":"a@b","tenant":"acme","session_id":"other"}`, `{"email":"a@b","tenant":"acme"}`},
		{"anyOf $ref $defs", strings.ReplaceAll(strings.ReplaceAll(zodUnionRefs, "definitions", "$defs"), "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema#"),
			`{"email":"a@b","tenant":"acme","user_id":"u"}`, `{"email":"a@b","tenant":"acme"}`},
		// A $ref to a $ref, and one to a schema that declares nothing.
		{"anyOf $ref chain", `{"type":"object","anyOf":[{"$ref":"#/$defs/A"},{"$ref":"#/$defs/C"}],"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"properties":{"tenant_id":{"type":"string"}}},"C":{"type":"object"}}}`,
			`{"tenant_id":"t","tenant":"x"}`, `{"tenant_id":"t"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := New()
			m.MustRegister(&fnTool{
				spec: tool.Spec{Name: "union", Parameters: json.RawMessage(c.schema)},
				run:  func(_ *tool.Context, a json.RawMessage) (*tool.Result, error) { return tool.TextResult(string(a)), nil },
			})
			e, _ := m.Lookup("union")
			res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(c.args)})
			if res.IsError {
				t.Fatalf("call failed: %s", res.Text())
			}
			var got, want map[string]any
			if err := json.Unmarshal([]byte(res.Text()), &got); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(c.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the tool got %v, want %v", got, want)
			}
		})
	}
}

func TestHooks(t *testing.T) {
	t.Parallel()
	m := New()
	m.MustRegister(echoTool("person"))
	var after []string
	m.AddBeforeHook(func(ctx *tool.Context, s tool.Spec, args json.RawMessage) error {
		if strings.Contains(string(args), "mallory") {
			return errors.New("mallory is not allowed")
		}
		return nil
	})
	m.AddAfterHook(func(ctx *tool.Context, s tool.Spec, r *tool.Result, d time.Duration) {
		after = append(after, s.Name+":"+string(r.ErrorKind))
	})
	e, _ := m.Lookup("person")
	res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"name":"mallory","age":1}`)})
	if res.ErrorKind != tool.KindDenied || !strings.Contains(res.Text(), "mallory is not allowed") {
		t.Fatalf("veto not applied: %+v", res)
	}
	res = m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"name":"ada","age":1}`)})
	if res.IsError {
		t.Fatal(res.Text())
	}
	if len(after) != 1 || after[0] != "person:" {
		t.Fatalf("after hooks = %v, want one call after the allowed run only", after)
	}
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	m := New()
	m.MustRegister(
		&fnTool{spec: tool.Spec{Name: "panics"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) { panic("boom") }},
		&fnTool{spec: tool.Spec{Name: "errs"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) {
			return nil, tool.Errorf(tool.KindUnavailable, "upstream down")
		}},
		&fnTool{spec: tool.Spec{Name: "plainerr"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) {
			return nil, errors.New("disk on fire")
		}},
		&fnTool{spec: tool.Spec{Name: "deaf"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) {
			<-block // ignores its context
			return tool.TextResult("late"), nil
		}},
		&fnTool{spec: tool.Spec{Name: "polite"}, run: func(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		&fnTool{spec: tool.Spec{Name: "nilres"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }},
	)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		tool    string
		ctx     context.Context
		timeout time.Duration
		kind    tool.ErrorKind
		text    string
	}{
		{"panics", context.Background(), 0, tool.KindFailed, "internal error"},
		{"errs", context.Background(), 0, tool.KindUnavailable, "upstream down"},
		{"plainerr", context.Background(), 0, tool.KindFailed, "disk on fire"},
		{"deaf", context.Background(), 20 * time.Millisecond, tool.KindTimeout, "did not finish within 20ms"},
		{"polite", context.Background(), 20 * time.Millisecond, tool.KindTimeout, "did not finish"},
		{"polite", cancelled, time.Second, tool.KindCancelled, "cancelled"},
		{"nilres", context.Background(), 0, "", ""},
	}
	for _, c := range cases {
		t.Run(c.tool+"/"+string(c.kind), func(t *testing.T) {
			e, _ := m.Lookup(c.tool)
			tc := newCtx(t)
			tc.Context = c.ctx
			res := m.Run(e, Invocation{Ctx: tc, Timeout: c.timeout})
			if res.ErrorKind != c.kind || res.IsError != (c.kind != "") || !strings.Contains(res.Text(), c.text) {
				t.Fatalf("got kind=%q is_error=%v text=%q; want kind %q containing %q", res.ErrorKind, res.IsError, res.Text(), c.kind, c.text)
			}
		})
	}
	e, _ := m.Lookup("panics")
	res := m.Run(e, Invocation{Ctx: newCtx(t)})
	if !strings.Contains(string(res.Details), "boom") {
		t.Fatalf("panic value not kept in details: %s", res.Details)
	}
}

func TestSpecsSortedAndUnregister(t *testing.T) {
	t.Parallel()
	m := New()
	m.MustRegister(echoTool("zeta"), echoTool("alpha"), echoTool("mid"))
	v := m.Version()
	var names []string
	for _, s := range m.Specs() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "alpha,mid,zeta" {
		t.Fatalf("specs not sorted: %v", names)
	}
	if n := m.Unregister("mid", "nope"); n != 1 {
		t.Fatalf("Unregister removed %d", n)
	}
	if m.Version() == v {
		t.Fatal("version unchanged after unregister")
	}
	if _, ok := m.Lookup("mid"); ok {
		t.Fatal("mid still registered")
	}
}

func TestSwap(t *testing.T) {
	m := New()
	m.MustRegister(echoTool("keep"), echoTool("old"), echoTool("taken"))
	v := m.Version()
	failed := m.Swap([]string{"old", "absent"}, []tool.Tool{echoTool("old"), echoTool("new"), echoTool("bad name"), echoTool("taken")})
	if got := m.Names(); !slices.Equal(got, []string{"keep", "new", "old", "taken"}) {
		t.Errorf("names = %v", got)
	}
	if len(failed) != 2 || failed["bad name"] == nil || failed["taken"] == nil {
		t.Errorf("failed = %v, want the invalid name and the taken one", failed)
	}
	if got := m.Version(); got != v+1 {
		t.Errorf("version %d → %d, want one change", v, got)
	}
	if failed := m.Swap(nil, nil); failed != nil || m.Version() != v+1 {
		t.Errorf("an empty swap changed something: %v, version %d", failed, m.Version())
	}
}

// TestOnChange: the hook hears of the tools that come and go, not of one replaced
// within a Swap (its users see the same tool), nor of a failed registration.
func TestOnChange(t *testing.T) {
	m := New()
	var heard []string
	m.OnChange(func(removed, added []string) {
		heard = append(heard, fmt.Sprintf("-%v +%v", removed, added))
	})
	m.MustRegister(echoTool("keep"), echoTool("old"), echoTool("gone"))
	m.Swap([]string{"old", "gone"}, []tool.Tool{echoTool("old"), echoTool("new"), echoTool("keep")})
	m.Unregister("new", "absent")
	m.Swap(nil, []tool.Tool{echoTool("keep")})
	want := []string{"-[] +[keep old gone]", "-[gone] +[new]", "-[new] +[]"}
	if !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

// TestCancelledToolAnswersItself: a cancelled call takes its tool's own answer when
// the tool gives one at once (what it had so far), and is answered for when the tool
// ignores its context; a tool that sets a longer CancelGrace gets it.
func TestCancelledToolAnswersItself(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	started := make(chan struct{}, 3)
	m := New()
	m.MustRegister(
		&fnTool{spec: tool.Spec{Name: "partial"}, run: func(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
			started <- struct{}{}
			<-ctx.Done()
			return tool.ErrorResult(tool.KindCancelled, "cancelled; the output so far: line 1"), nil
		}},
		&fnTool{spec: tool.Spec{Name: "deaf"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) {
			started <- struct{}{}
			<-block
			return tool.TextResult("late"), nil
		}},
		&fnTool{spec: tool.Spec{Name: "slow", CancelGrace: time.Minute}, run: func(ctx *tool.Context, _ json.RawMessage) (*tool.Result, error) {
			started <- struct{}{}
			<-ctx.Done()
			time.Sleep(2 * cancelGrace)
			return tool.ErrorResult(tool.KindCancelled, "stopped; the trace so far: step 1"), nil
		}},
	)
	for _, c := range []struct{ name, want string }{
		{"partial", "the output so far: line 1"},
		{"deaf", "deaf was cancelled before it finished"},
		{"slow", "the trace so far: step 1"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-started; cancel() }()
		e, _ := m.Lookup(c.name)
		tc := newCtx(t)
		tc.Context = ctx
		res := m.Run(e, Invocation{Ctx: tc, Timeout: time.Minute})
		if res.ErrorKind != tool.KindCancelled || !strings.Contains(res.Text(), c.want) {
			t.Errorf("%s: kind %q text %q; want cancelled with %q", c.name, res.ErrorKind, res.Text(), c.want)
		}
		cancel()
	}
}

// TestDeepStructuredOutputBecomesText: an MCP server's structuredContent or an API's
// JSON body nested hundreds of levels deep was sent as is in the call's message and
// record, which Python's json module (the usual agent backend's) cannot decode past
// about 1,000 levels: the backend's stream broke on the line. Structured output deeper
// than tool.MaxStructuredDepth is now left out with a note, its JSON given as text when the
// result has no text of its own; output at the bound, and brackets inside strings, are
// kept.
func TestDeepStructuredOutputBecomesText(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	deep, atBound := nest(tool.MaxStructuredDepth+1), nest(tool.MaxStructuredDepth)
	inStrings := `{"a":"` + strings.Repeat("[{", 2*tool.MaxStructuredDepth) + `"}`
	m := New()
	for name, r := range map[string]*tool.Result{
		"deep_alone":     {Structured: json.RawMessage(deep)},
		"deep_with_text": {Content: []tool.Content{{Type: tool.ContentText, Text: "summary"}}, Structured: json.RawMessage(deep)},
		"at_bound":       {Structured: json.RawMessage(atBound)},
		"in_strings":     {Structured: json.RawMessage(inStrings)},
	} {
		m.MustRegister(&fnTool{spec: tool.Spec{Name: name}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) { return r, nil }})
	}
	run := func(name string) *tool.Result {
		e, _ := m.Lookup(name)
		return m.Run(e, Invocation{Ctx: newCtx(t)})
	}
	if r := run("deep_alone"); r.Structured != nil || r.IsError || len(r.Content) != 2 || r.Content[0].Text != deep ||
		!strings.Contains(r.Content[1].Text, "more than 256 levels deep") || !strings.Contains(r.Content[1].Text, "its JSON is given as text") {
		t.Fatalf("deep structured output alone: structured %d bytes, content %.300v", len(r.Structured), r.Content)
	}
	if r := run("deep_with_text"); r.Structured != nil || len(r.Content) != 2 || r.Content[0].Text != "summary" ||
		!strings.Contains(r.Content[1].Text, "left out; the text is the tool's own") {
		t.Fatalf("deep structured output beside text: structured %d bytes, content %.300v", len(r.Structured), r.Content)
	}
	for name, want := range map[string]string{"at_bound": atBound, "in_strings": inStrings} {
		if r := run(name); string(r.Structured) != want || len(r.Content) != 0 {
			t.Fatalf("%s: structured output changed: content %.300v", name, r.Content)
		}
	}
}

// The sorted names and specs are kept per version: every change shows in the next
// listing (a spec replaced within a Swap too), and a caller's copy is its own.
func TestListingsFollowChanges(t *testing.T) {
	t.Parallel()
	m := New()
	names := func() string { return strings.Join(m.Names(), ",") }
	if got := m.Names(); got == nil || len(got) != 0 {
		t.Fatalf("empty registry: %#v", got)
	}
	m.MustRegister(echoTool("b"), echoTool("a"))
	if got := names(); got != "a,b" {
		t.Fatalf("after register: %s", got)
	}
	mine := m.Names()
	mine[0] = "changed"
	m.Specs()[0].Name = "changed"
	if got := names(); got != "a,b" || m.Specs()[0].Name != "a" || m.SortedSpecs()[0].Name != "a" {
		t.Fatalf("a caller's copy changed the listing: %s", got)
	}
	m.MustRegister(echoTool("c"))
	m.Unregister("a")
	if got := names(); got != "b,c" || len(m.Specs()) != 2 {
		t.Fatalf("after register and unregister: %s", got)
	}
	desc := &fnTool{spec: tool.Spec{Name: "b", Description: "new"}, run: func(*tool.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }}
	m.Swap([]string{"b"}, []tool.Tool{desc})
	if sp := m.Specs()[0]; sp.Name != "b" || sp.Description != "new" || m.SortedSpecs()[0].Description != "new" {
		t.Fatalf("after a swap the listing has %+v", sp)
	}
	if got := strings.Join(m.SortedNames(), ","); got != "b,c" {
		t.Fatalf("sorted names: %s", got)
	}
}

// Package toolmgr holds the registry of tools: registration with schema compilation,
// argument validation, schema export per provider, dispatch with hooks, timeouts and
// panic recovery, and truncation of results to a token budget.
package toolmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// validName is what every provider accepts as a function name.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Entry is a registered tool with its compiled argument schema.
type Entry struct {
	Tool   tool.Tool
	Spec   tool.Spec
	schema *jsonschema.Schema
	// declared holds the root property names of the schema (rootDeclared).
	declared map[string]bool
	index    *schemaIndex
}

// BeforeHook runs before a call; a non-nil error vetoes it and its message reaches the
// model as a denied result.
type BeforeHook func(ctx *tool.Context, spec tool.Spec, args json.RawMessage) error

// AfterHook runs after a call with its result.
type AfterHook func(ctx *tool.Context, spec tool.Spec, res *tool.Result, elapsed time.Duration)

// Manager is the registry of tools. It is safe for concurrent use; tools may be added
// and removed while calls run (MCP servers come and go).
type Manager struct {
	mu     sync.RWMutex
	tools  map[string]*Entry
	before []BeforeHook
	after  []AfterHook
	// version increases on every change, so callers can cache derived views.
	version uint64
	// changed is told of each change (see OnChange).
	changed func(removed, added []string)
	// sorted is the names and specs sorted by name, as of a version: sorting 2,000
	// specs on every listing (every call of an unknown tool) cost milliseconds.
	sorted atomic.Pointer[sortedView]
}

// sortedView is a Manager's tools sorted by name at one version.
type sortedView struct {
	version uint64
	names   []string
	specs   []tool.Spec
}

// view returns the tools sorted by name, built once per version; callers must not
// modify it.
func (m *Manager) view() *sortedView {
	m.mu.RLock()
	if v := m.sorted.Load(); v != nil && v.version == m.version {
		m.mu.RUnlock()
		return v
	}
	v := &sortedView{version: m.version, names: make([]string, 0, len(m.tools)), specs: make([]tool.Spec, 0, len(m.tools))}
	for n, e := range m.tools {
		v.names = append(v.names, n)
		v.specs = append(v.specs, e.Spec)
	}
	m.mu.RUnlock()
	sort.Strings(v.names)
	slices.SortFunc(v.specs, func(a, b tool.Spec) int { return strings.Compare(a.Name, b.Name) })
	m.sorted.Store(v) // one built at the same version by another call is as good
	return v
}

// OnChange sets f to be told, under the Manager's lock, of each change to the set of
// tools: the names removed and those added. A tool replaced within one Swap (its spec
// changed) is in neither. It is for state kept per tool elsewhere (metrics series)
// that must not outlive its tool; f must not call the Manager.
func (m *Manager) OnChange(f func(removed, added []string)) {
	m.mu.Lock()
	m.changed = f
	m.mu.Unlock()
}

// New returns an empty Manager.
func New() *Manager { return &Manager{tools: map[string]*Entry{}} }

// Register adds tools. It fails, registering none of them, when a name is invalid or
// taken, or a parameters schema does not compile.
// ErrAlreadyRegistered is Register's error for a name that is taken; any other error
// is about one of the tools itself (its schema, its risk).
var ErrAlreadyRegistered = errors.New("is already registered")

func (m *Manager) Register(tools ...tool.Tool) error {
	entries := make([]*Entry, 0, len(tools))
	for _, t := range tools {
		e, err := newEntry(t)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range entries {
		if _, dup := m.tools[e.Spec.Name]; dup || seen[e.Spec.Name] {
			return fmt.Errorf("toolmgr: tool %q %w", e.Spec.Name, ErrAlreadyRegistered)
		}
		seen[e.Spec.Name] = true
	}
	added := make([]string, 0, len(entries))
	for _, e := range entries {
		m.tools[e.Spec.Name] = e
		added = append(added, e.Spec.Name)
	}
	m.version++
	if m.changed != nil {
		m.changed(nil, added)
	}
	return nil
}

// MustRegister is Register for tools built into the binary, where a failure is a bug.
func (m *Manager) MustRegister(tools ...tool.Tool) {
	if err := m.Register(tools...); err != nil {
		panic(err)
	}
}

// Unregister removes tools by name and reports how many were removed.
func (m *Manager) Unregister(names ...string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var removed []string
	for _, name := range names {
		if _, ok := m.tools[name]; ok {
			delete(m.tools, name)
			removed = append(removed, name)
		}
	}
	if len(removed) > 0 {
		m.version++
		if m.changed != nil {
			m.changed(removed, nil)
		}
	}
	return len(removed)
}

// Swap removes the tools named in drop and adds the tools in add as one change: a
// reader sees either the set before or the set after, never a part of either (an
// MCP server's tools appear and are replaced together). A tool of add that cannot be
// registered (invalid name or schema, a name taken by a tool not in drop) is left
// out, with its error in the returned map under the name it asked for; the rest are
// added.
func (m *Manager) Swap(drop []string, add []tool.Tool) map[string]error {
	var failed map[string]error
	fail := func(name string, err error) {
		if failed == nil {
			failed = map[string]error{}
		}
		failed[name] = err
	}
	entries := make([]*Entry, 0, len(add))
	for _, t := range add {
		e, err := newEntry(t)
		if err != nil {
			fail(t.Spec().Name, err)
			continue
		}
		entries = append(entries, e)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	dropped := map[string]bool{}
	for _, name := range drop {
		if _, ok := m.tools[name]; ok {
			delete(m.tools, name)
			dropped[name] = true
			changed = true
		}
	}
	var added []string
	for _, e := range entries {
		if _, dup := m.tools[e.Spec.Name]; dup {
			fail(e.Spec.Name, fmt.Errorf("toolmgr: tool %q is already registered", e.Spec.Name))
			continue
		}
		m.tools[e.Spec.Name] = e
		changed = true
		if dropped[e.Spec.Name] {
			delete(dropped, e.Spec.Name) // replaced: the same tool to its users
		} else {
			added = append(added, e.Spec.Name)
		}
	}
	if changed {
		m.version++
	}
	if m.changed != nil && (len(dropped) > 0 || len(added) > 0) {
		removed := make([]string, 0, len(dropped))
		for name := range dropped {
			removed = append(removed, name)
		}
		sort.Strings(removed)
		m.changed(removed, added)
	}
	return failed
}

// Version changes whenever the set of tools does.
func (m *Manager) Version() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.version
}

// Lookup returns the entry of a tool.
func (m *Manager) Lookup(name string) (*Entry, bool) {
	m.mu.RLock()
	e, ok := m.tools[name]
	m.mu.RUnlock()
	return e, ok
}

// Names returns every registered name, sorted.
func (m *Manager) Names() []string { return slices.Clone(m.view().names) }

// Specs returns every tool's spec, sorted by name.
func (m *Manager) Specs() []tool.Spec { return slices.Clone(m.view().specs) }

// SortedNames is Names without the copy: the caller must not modify the slice.
func (m *Manager) SortedNames() []string { return m.view().names }

// SortedSpecs is Specs without the copy: the caller must not modify the slice.
func (m *Manager) SortedSpecs() []tool.Spec { return m.view().specs }

// AddBeforeHook adds a hook that runs before every call, in the order added.
func (m *Manager) AddBeforeHook(h BeforeHook) {
	m.mu.Lock()
	m.before = append(m.before, h)
	m.mu.Unlock()
}

// AddAfterHook adds a hook that runs after every call, in the order added.
func (m *Manager) AddAfterHook(h AfterHook) {
	m.mu.Lock()
	m.after = append(m.after, h)
	m.mu.Unlock()
}

func (m *Manager) hooks() ([]BeforeHook, []AfterHook) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.before, m.after
}

func newEntry(t tool.Tool) (*Entry, error) {
	spec := t.Spec()
	if !validName.MatchString(spec.Name) {
		return nil, fmt.Errorf("toolmgr: tool name %q must match %s", spec.Name, validName)
	}
	if spec.Risk == "" {
		spec.Risk = tool.RiskMedium
	}
	if !spec.Risk.Valid() {
		return nil, fmt.Errorf("toolmgr: tool %q: unknown risk %q", spec.Name, spec.Risk)
	}
	if spec.Mode == "" {
		spec.Mode = tool.ModeDirect
	}
	if spec.Source == "" {
		spec.Source = "local"
	}
	if len(spec.Parameters) == 0 {
		spec.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	schema, declared, err := compileSchema(spec.Name, spec.Parameters)
	if err != nil {
		return nil, err
	}
	if spec.Parameters, err = objectSchema(spec.Parameters); err != nil {
		return nil, fmt.Errorf("toolmgr: tool %q: %w", spec.Name, err)
	}
	if len(spec.OutputSchema) > 0 {
		if err := CheckOutputSchema(spec.OutputSchema); err != nil {
			return nil, fmt.Errorf("toolmgr: tool %q: output schema refused: %w", spec.Name, err)
		}
	}
	return &Entry{Tool: t, Spec: spec, schema: schema, declared: declared, index: &schemaIndex{root: schema}}, nil
}

// Invocation is one call to dispatch.
type Invocation struct {
	Ctx  *tool.Context
	Args json.RawMessage
	// Timeout bounds the call; zero means no deadline beyond Ctx's own.
	Timeout time.Duration
	// Prepared says Args are what Entry.Prepare returned for this call already (the
	// executor prepares when it plans): Run does not validate them again.
	Prepared bool
	// Log receives a line, at error level with the stack, when the tool panics (the
	// call fails either way); written with Ctx, so it carries the call's ids. Nil:
	// the panic is only in the result's details.
	Log *slog.Logger
}

// Run validates and executes a call of the entry's tool: identity fields stripped,
// arguments checked, before hooks (which may veto), the tool under a deadline with panic
// recovery, after hooks. It always returns a result; failures are is_error results.
func (m *Manager) Run(e *Entry, inv Invocation) *tool.Result {
	start := time.Now()
	args, res := inv.Args, (*tool.Result)(nil)
	if !inv.Prepared {
		if args, res = e.Prepare(inv.Args); res != nil {
			return res
		}
	}
	before, after := m.hooks()
	for _, h := range before {
		if err := h(inv.Ctx, e.Spec, args); err != nil {
			return tool.ErrorResult(tool.KindDenied, "call of %s was stopped before it ran: %v", e.Spec.Name, err)
		}
	}
	res = execute(e, inv, args)
	for _, h := range after {
		h(inv.Ctx, e.Spec, res, time.Since(start))
	}
	return res
}

// Prepare strips identity fields the model could use to spoof another session or user
// and validates what remains. It returns the arguments to run with, or an invalid_args
// result.
func (e *Entry) Prepare(raw json.RawMessage) (json.RawMessage, *tool.Result) {
	args, err := decodeArgs(raw)
	if err != nil {
		return nil, tool.ErrorResult(tool.KindInvalidArgs, "invalid arguments for %s: %v", e.Spec.Name, err)
	}
	if stripIdentity(args, e.declared) {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, tool.ErrorResult(tool.KindInvalidArgs, "invalid arguments for %s: %v", e.Spec.Name, err)
		}
		raw = b
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	if err := e.schema.Validate(args); err != nil {
		return nil, tool.ErrorResult(tool.KindInvalidArgs, "%s", describeValidation(e.Spec.Name, e.index, args, err))
	}
	return raw, nil
}

func execute(e *Entry, inv Invocation, args json.RawMessage) *tool.Result {
	parent := inv.Ctx.Context
	ctx, cancel := parent, context.CancelFunc(func() {})
	if inv.Timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, inv.Timeout)
	}
	defer cancel()
	tc := *inv.Ctx
	tc.Context = ctx

	done := make(chan *tool.Result, 1)
	go func() {
		done <- runGuarded(e, &tc, args, inv.Log)
	}()
	settle := func(res *tool.Result) *tool.Result {
		// A tool that returned an error because its deadline passed, or because it was
		// cancelled, gets the right kind.
		if res.IsError && res.ErrorKind == tool.KindFailed && ctx.Err() != nil {
			return interrupted(e.Spec.Name, ctx, parent, inv.Timeout)
		}
		return res
	}
	select {
	case res := <-done:
		return settle(res)
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// Cancelled: a tool that heeds it answers at once with what it had (a
		// command's output so far, an answer still arriving), which the call's record
		// keeps. Tools answer their own deadline before it passes.
		select {
		case res := <-done:
			return settle(res)
		case <-time.After(graceOf(e.Spec)):
		}
	}
	// The tool ignores its context; answer now. Its goroutine ends when it returns,
	// and its result (buffered channel) is discarded.
	return interrupted(e.Spec.Name, ctx, parent, inv.Timeout)
}

// cancelGrace is how long a cancelled call waits for its tool's own answer, unless
// the tool sets its own (tool.Spec.CancelGrace).
const cancelGrace = 500 * time.Millisecond

func graceOf(s tool.Spec) time.Duration {
	if s.CancelGrace > 0 {
		return s.CancelGrace
	}
	return cancelGrace
}

func interrupted(name string, ctx, parent context.Context, timeout time.Duration) *tool.Result {
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return tool.ErrorResult(tool.KindTimeout, "%s did not finish within %s and was stopped", name, timeout)
	}
	if errors.Is(parent.Err(), context.DeadlineExceeded) {
		return tool.ErrorResult(tool.KindTimeout, "%s did not finish before the deadline and was stopped", name)
	}
	return tool.ErrorResult(tool.KindCancelled, "%s was cancelled before it finished", name)
}

func runGuarded(e *Entry, ctx *tool.Context, args json.RawMessage, log *slog.Logger) (res *tool.Result) {
	defer func() {
		if p := recover(); p != nil {
			stack := string(debug.Stack())
			res = tool.ErrorResult(tool.KindFailed, "%s failed with an internal error; the call did not complete", e.Spec.Name)
			res.Details, _ = json.Marshal(map[string]string{"panic": fmt.Sprint(p), "stack": stack})
			if log != nil {
				attrs := []any{"tool", e.Spec.Name, "panic", fmt.Sprint(p), "stack", stack}
				if ctx.CallID != "" {
					attrs = append(attrs, "call_id", ctx.CallID)
				}
				log.ErrorContext(ctx.Context, "tool panicked", attrs...)
			}
		}
	}()
	r, err := e.Tool.Run(ctx, args)
	switch {
	case err != nil:
		return tool.FromError(err)
	case r == nil:
		return &tool.Result{Content: []tool.Content{}}
	}
	if r.Content == nil {
		r.Content = []tool.Content{}
	}
	if r.IsError && r.ErrorKind == "" {
		r.ErrorKind = tool.KindFailed
	}
	boundStructured(e.Spec.Name, r)
	return r
}

// boundStructured replaces structured output nested deeper than tool.MaxStructuredDepth (an
// MCP server's structuredContent, an API's JSON body) by a note, and by its JSON as
// text when the result has no text of its own: the model still reads it all, and no
// client has to decode it.
func boundStructured(name string, r *tool.Result) {
	if len(r.Structured) <= 2*tool.MaxStructuredDepth || !jsontext.Deeper(r.Structured, tool.MaxStructuredDepth) {
		return
	}
	what := "it was left out; the text is the tool's own"
	if !slices.ContainsFunc(r.Content, func(c tool.Content) bool { return c.Type == tool.ContentText && c.Text != "" }) {
		r.Content = append(r.Content, tool.Content{Type: tool.ContentText, Text: string(r.Structured)})
		what = "its JSON is given as text above"
	}
	r.Structured = nil
	r.Content = append(r.Content, tool.Content{Type: tool.ContentText, Text: fmt.Sprintf(
		"[toolserverd: %s's structured output nests arrays and objects more than %d levels deep, more than clients can decode: %s]",
		name, tool.MaxStructuredDepth, what)})
}

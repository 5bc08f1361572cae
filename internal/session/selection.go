package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/toolserverd/toolserverd/internal/rank"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// Protocol tools: every session may call them; they act on the session itself.
const (
	// ExpandToolName adds tools to the narrowed list of a turn (seed contract §3.1).
	ExpandToolName = "tool_expand_tools"
	// ResetToolName switches tool groups on and off.
	ResetToolName = "reset_tools"
)

// SmallToolset is the size up to which a ranked listing returns every tool.
const SmallToolset = 15

// Group is a named bundle of tools (name patterns and MCP servers) that a session
// switches on and off with reset_tools. Tools in no group are always available.
type Group struct {
	Name         string
	Description  string
	Instructions string   // returned when the group is switched on
	Tools        []string // tool name patterns
	MCPServers   []string // every tool of these servers
	Skills       []string // skill name patterns
}

func (g Group) hasSkill(name string) bool {
	for _, p := range g.Skills {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// switchOnHint is the answer to a call of a tool that an inactive tool group hides:
// which group holds it, and the reset_tools arguments that switch that group on and
// keep the active ones on (reset_tools sets the whole set). "" when no inactive group
// hides the tool.
//
// switching is what a reset_tools call of the same request switches on
// (switchedOnBy): a group in it gets told so instead, since the model did what the
// hint would say and only has to call the tool again.
func (s *Session) switchOnHint(name string, switching map[string]bool) string {
	spec, ok := s.Tools.Gated(name)
	if !ok {
		return ""
	}
	if _, _, ok := s.Tools.Resolve(ResetToolName); !ok {
		return ""
	}
	s.mu.Lock()
	args := map[string]bool{}
	for g, on := range s.groups {
		if on {
			args[g] = true
		}
	}
	var holding []string
	for _, g := range s.manager.cfg.Groups {
		if g.contains(spec) {
			holding = append(holding, fmt.Sprintf("%q", g.Name))
			if len(holding) == 1 {
				args[g.Name] = true
			}
		}
	}
	s.mu.Unlock()
	if len(holding) == 0 {
		return ""
	}
	for _, g := range s.manager.cfg.Groups {
		if switching[g.Name] && g.contains(spec) {
			return fmt.Sprintf("tool %q is in the tool group %q, which the %s call of this request switches on; the calls of a request "+
				"are checked before any of them runs, so this one was not run: call %s again", name, g.Name, ResetToolName, name)
		}
	}
	b, _ := json.Marshal(args) // keys sorted
	which := "tool group " + holding[0] + ", which is"
	if len(holding) > 1 {
		which = "tool groups " + strings.Join(holding, ", ") + ", which are"
	}
	return fmt.Sprintf("tool %q is in the %s switched off in this session; call %s with %s to switch it on (the call sets every group: "+
		"those left out go off), then call %s again", name, which, ResetToolName, b, name)
}

// selectHidden marks a tool that a switched-off group hides as selected for the
// turn, so that the call its switch-on hint names works once the group is on
// (without it, that call would be told to expand the tool first).
func (s *Session) selectHidden(name string) {
	s.sel.mu.Lock()
	s.selectLocked(name)
	s.sel.mu.Unlock()
}

func (s *Session) selectLocked(name string) {
	if s.sel.narrowed != nil {
		s.sel.narrowed[name] = true
	}
}

// skillGroupAllows reports whether a skill is in no group, or in an active one.
func (s *Session) skillGroupAllows(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	inSome := false
	for _, g := range s.manager.cfg.Groups {
		if g.hasSkill(name) {
			if s.groups[g.Name] {
				return true
			}
			inSome = true
		}
	}
	return !inSome
}

func (g Group) contains(spec tool.Spec) bool {
	for _, p := range g.Tools {
		if ok, _ := path.Match(p, spec.Name); ok {
			return true
		}
	}
	return g.holdsSource(spec)
}

// holdsSource reports whether the group holds every tool of spec's MCP server.
func (g *Group) holdsSource(spec tool.Spec) bool {
	return slices.Contains(g.MCPServers, strings.TrimPrefix(spec.Source, "mcp:")) && strings.HasPrefix(spec.Source, "mcp:")
}

// selection is a session's narrowed list for the current turn: nil means every
// allowed tool may be called.
type selection struct {
	mu       sync.Mutex
	narrowed map[string]bool
}

// Narrow restricts the tools the model may call to names (plus tool_expand_tools)
// until it expands them; nil lifts the restriction.
func (s *Session) Narrow(names []string) {
	s.sel.mu.Lock()
	defer s.sel.mu.Unlock()
	if names == nil {
		s.sel.narrowed = nil
		return
	}
	s.sel.narrowed = map[string]bool{ExpandToolName: true}
	for _, n := range names {
		s.sel.narrowed[n] = true
	}
}

// Selected reports whether name is in the current turn's list.
func (s *Session) Selected(name string) bool {
	s.sel.mu.Lock()
	defer s.sel.mu.Unlock()
	return s.sel.narrowed == nil || s.sel.narrowed[name] || name == ResetToolName
}

// expandListed caps the names a tool_expand_tools result lists: with hundreds of
// tools, listing every expandable one in every result cost thousands of tokens. The
// result says how many more there are and how to search them (a query).
const expandListed = 25

// expand applies tool_expand_tools: exact names, validated against the session's
// allowed set (never the global registry), partial success. A name of a tool that a
// switched-off group hides is answered with how to switch it on. The expandable tools
// are listed up to expandListed: the best matches for query, or the first by name.
func (s *Session) expand(names []string, query string) map[string]any {
	allowed := s.Tools.Names()
	isAllowed := map[string]bool{}
	for _, n := range allowed {
		isAllowed[n] = true
	}
	// Hints first: switchOnHint takes s.mu, never held with s.sel.mu.
	switchedOff := map[string]string{}
	for _, raw := range names {
		if n := strings.TrimSpace(raw); n != "" && !isAllowed[n] {
			if hint := s.switchOnHint(n, nil); hint != "" {
				switchedOff[n] = hint
			}
		}
	}
	s.sel.mu.Lock()
	expanded, invalid, already := []string{}, []string{}, []string{}
	seen := map[string]bool{}
	for _, raw := range names {
		n := strings.TrimSpace(raw)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		switch {
		case switchedOff[n] != "":
			s.selectLocked(n)
		case !isAllowed[n]:
			invalid = append(invalid, n)
		case s.sel.narrowed == nil || s.sel.narrowed[n]:
			already = append(already, n)
		default:
			s.sel.narrowed[n] = true
			expanded = append(expanded, n)
		}
	}
	available := []string{}
	for _, n := range allowed {
		if s.sel.narrowed != nil && !s.sel.narrowed[n] {
			available = append(available, n)
		}
	}
	s.sel.mu.Unlock()
	// Success (partial): a name asked for can be called now, loaded by this call or
	// before; a query alone succeeds too (false read to a model as "the search
	// failed"). Names the session lacks, or that a switched-off group hides, are
	// listed with what to do.
	shownInvalid := make([]string, len(invalid))
	for i, n := range invalid {
		shownInvalid[i] = shownName(n)
	}
	out := map[string]any{"success": len(expanded)+len(already) > 0 || len(seen) == 0, "expanded_tools": expanded, "invalid_tools": shownInvalid,
		"already_selected_tools": already}
	if len(switchedOff) > 0 {
		out["switched_off_tools"] = switchedOff
	}
	if len(invalid) > 0 {
		near := map[string][]string{}
		for _, n := range invalid {
			if names := s.nearNames(n); len(names) > 0 {
				near[shownName(n)] = names
			}
		}
		if len(near) > 0 {
			out["did_you_mean"] = near
		}
	}
	total := len(available)
	searchHint := fmt.Sprintf(`call %s with {"query": "what the tool should do"} to search them by name and description`, ExpandToolName)
	if q := strings.TrimSpace(query); q != "" {
		expandable := make(map[string]bool, total)
		for _, n := range available {
			expandable[n] = true
		}
		available = available[:0]
		for _, r := range s.manager.index().RankFiltered(q, expandListed, func(name string) bool { return expandable[name] }) {
			available = append(available, r.Name)
		}
		if len(available) == 0 {
			out["note"] = fmt.Sprintf("no tool you could load matches %q; %d could be loaded: try other words", q, total)
		} else {
			out["note"] = fmt.Sprintf("the %s you could load that best match %q, best first; %d could be loaded in all", toolCount(len(available)), q, total)
		}
	} else if total > expandListed {
		available = available[:expandListed]
		out["note"] = fmt.Sprintf("%s more could be loaded, not listed here; %s", toolCount(total-expandListed), searchHint)
	}
	out["available_expandable_tools"] = available
	if more := total - len(available); more > 0 {
		out["more_expandable_tools"] = more
	}
	return out
}

// Suggest ranks the session's allowed tools against the turn's text and narrows the
// session to the best limit of them. With SmallToolset tools or fewer, every tool is
// returned and nothing is narrowed. The specs are sorted by name (prompt caching);
// tool_expand_tools is included whenever the list is narrowed. noMatch reports a
// query that matched no tool: the list is then the turn before's selection (see
// carriedOver), still at most limit tools.
func (m *Manager) Suggest(sess *Session, query string, limit int) (specs []tool.Spec, noMatch bool) {
	// Only tools a call could use now: the whitelist's, and the active skill's.
	specs = slices.DeleteFunc(sess.Tools.Specs(), func(sp tool.Spec) bool { return !sess.skillAllows(sp.Name) })
	// The whole set, no narrowing; with reset_tools, as the unranked listing has it.
	whole := func() []tool.Spec {
		sess.Narrow(nil)
		if e, ok := m.protocol.Lookup(ResetToolName); ok {
			specs = append(specs, e.Spec)
		}
		return specs
	}
	if len(specs) <= SmallToolset || strings.TrimSpace(query) == "" {
		return whole(), false
	}
	if limit <= 0 {
		limit = 12
	}
	if limit >= len(specs) {
		return whole(), false // the best limit are all of them
	}
	// Ranked among the tools listed (whitelist, active groups, active skill), so that
	// a tool that cannot be called now takes no place.
	listed := make(map[string]bool, len(specs))
	for _, sp := range specs {
		listed[sp.Name] = true
	}
	var names []string
	for _, r := range m.index().RankFiltered(query, limit, func(name string) bool { return listed[name] }) {
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		noMatch = true
		names = sess.carriedOver(listed, limit)
	}
	sess.Narrow(names)
	byName := map[string]tool.Spec{}
	for _, sp := range specs {
		byName[sp.Name] = sp
	}
	out := make([]tool.Spec, 0, len(names)+2)
	for _, n := range names {
		if sp, ok := byName[n]; ok {
			out = append(out, sp)
		}
	}
	for _, name := range []string{ExpandToolName, ResetToolName} {
		if e, ok := m.protocol.Lookup(name); ok {
			out = append(out, e.Spec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, noMatch
}

// carriedOver is what a turn whose text matches no tool ("thanks!", "yes, do it",
// another language) is offered: the tools the turn before offered and expanded,
// those listed now, at most limit, by name. A reply to the last turn most often goes
// on with its tools. On a first turn there are none: only tool_expand_tools, whose
// query searches every tool. Listing every tool instead (111 KB with 400) or a
// dozen unrelated ones would spend the model's context on nothing it asked for.
func (s *Session) carriedOver(listed map[string]bool, limit int) []string {
	s.sel.mu.Lock()
	defer s.sel.mu.Unlock()
	names := []string{}
	for n := range s.sel.narrowed {
		if listed[n] && n != ExpandToolName && n != ResetToolName {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > limit {
		names = names[:limit]
	}
	return names
}

// index is the ranking index over every registered tool, rebuilt when a registry
// changes (an MCP server comes or goes).
func (m *Manager) index() *rank.Index {
	var sum uint64
	for _, tm := range m.managers {
		sum = sum*31 + tm.Version()
	}
	m.idxMu.Lock()
	defer m.idxMu.Unlock()
	if m.idx != nil && m.idxVersion == sum {
		return m.idx
	}
	var docs []rank.Doc
	for _, tm := range m.managers {
		for _, sp := range tm.Specs() {
			docs = append(docs, rank.Doc{Name: sp.Name, Description: sp.Description, Params: paramNames(sp.Parameters)})
		}
	}
	m.idx, m.idxVersion = rank.NewIndex(docs), sum
	return m.idx
}

func paramNames(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sessionKey is where a session keeps itself in its tool.State, for protocol tools.
const sessionKey = "session.self"

func sessionOf(ctx *tool.Context) (*Session, error) {
	if ctx.Session == nil || ctx.Session.State == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "%s works only in a session", ctx.ToolName)
	}
	s, _ := ctx.Session.State.LoadOrStore(sessionKey, func() any { return (*Session)(nil) }).(*Session)
	if s == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "%s works only in a session", ctx.ToolName)
	}
	return s, nil
}

type expandTool struct{}

func (expandTool) Spec() tool.Spec {
	return tool.Spec{
		Name: ExpandToolName, Label: "Load more tools",
		Description: "Load tools that are available to you but were not offered this turn. Give their exact names; " +
			"the result says which were loaded, which names are invalid (with the nearest names, in did_you_mean) or in a switched-off tool group, and lists some " +
			"of the others you could load. To find one, give a query instead: the result lists the best matches.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
  "tool_names":{"anyOf":[{"type":"array","items":{"type":"string"},"maxItems":100},{"type":"string"}],"description":"Exact tool names (a list, or one string)."},
  "query":{"type":"string","description":"What you need a tool for: lists the loadable tools that best match, loading none."}}}`),
		Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe,
	}
}

func (expandTool) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	names, ok := expandNames(raw)
	if !ok {
		return nil, tool.Errorf(tool.KindInvalidArgs, "tool_names must be a list of tool names")
	}
	var args struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(raw, &args)
	if len(names) == 0 && strings.TrimSpace(args.Query) == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "give tool_names (the exact names to load), or a query to search the tools you could load")
	}
	return tool.JSONResult(sess.expand(names, args.Query))
}

// expandNames reads tool_expand_tools' arguments: one name or a list. Tool names
// hold neither commas nor spaces, so a string that does ("a, b", as models write
// several names) is read as the names it lists.
func expandNames(raw json.RawMessage) ([]string, bool) {
	var args struct {
		ToolNames json.RawMessage `json:"tool_names"`
	}
	_ = json.Unmarshal(raw, &args)
	var list []string
	var one string
	if args.ToolNames == nil {
		return []string{}, true // a query alone
	}
	if json.Unmarshal(args.ToolNames, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(args.ToolNames, &list); err != nil {
		return nil, false
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		names = append(names, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })...)
	}
	return names, true
}

// switchedOnBy is the groups the batch's last reset_tools call switches on, if its
// arguments are what reset_tools takes (one boolean per configured group); nil
// otherwise.
func switchedOnBy(calls []CallRequest, groups []Group) map[string]bool {
	var out map[string]bool
	for _, c := range calls {
		if c.Name != ResetToolName {
			continue
		}
		var want map[string]bool
		if json.Unmarshal(c.Arguments, &want) != nil {
			out = nil
			continue
		}
		out = map[string]bool{}
		for name, on := range want {
			if !slices.ContainsFunc(groups, func(g Group) bool { return g.Name == name }) {
				out = nil // refused as a whole: it switches nothing
				break
			}
			if on {
				out[name] = true
			}
		}
	}
	return out
}

// expandedBy is what the batch's tool_expand_tools calls expand: the batch's other
// calls of those tools are offered (a model often sends an expansion and its call
// together, and the turn's selection is checked when the batch is planned).
func expandedBy(calls []CallRequest) map[string]bool {
	var out map[string]bool
	for _, c := range calls {
		if c.Name != ExpandToolName {
			continue
		}
		names, _ := expandNames(c.Arguments)
		for _, n := range names {
			if out == nil {
				out = map[string]bool{}
			}
			out[strings.TrimSpace(n)] = true
		}
	}
	return out
}

type resetTool struct{ groups []Group }

func (t resetTool) Spec() tool.Spec {
	props := map[string]any{}
	var lines []string
	for _, g := range t.groups {
		props[g.Name] = map[string]any{"type": "boolean", "description": g.Description}
		lines = append(lines, "- "+g.Name+": "+g.Description)
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "additionalProperties": false, "properties": props})
	return tool.Spec{
		Name: ResetToolName, Label: "Switch tool groups",
		Description: "Choose which groups of tools are active; the call sets the whole set (groups you leave out or set " +
			"false are switched off). Groups:\n" + strings.Join(lines, "\n"),
		// Read-only like tool_expand_tools: it changes the session's own tool list and
		// nothing outside it, so explore mode runs it (refused, it left a model told
		// by a switched-off tool's answer to call it nowhere to go).
		Parameters: schema, Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe,
	}
}

func (t resetTool) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	sess, err := sessionOf(ctx)
	if err != nil {
		return nil, err
	}
	var want map[string]bool
	if err := json.Unmarshal(raw, &want); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "give one boolean per group")
	}
	var active []string
	for _, g := range t.groups {
		if want[g.Name] {
			active = append(active, g.Name)
		}
	}
	newly, err := sess.manager.setGroups(ctx, sess, active)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Active groups: basic")
	for _, a := range active {
		b.WriteString(", " + a)
	}
	for _, g := range newly {
		if g.Instructions != "" { // an empty heading would promise instructions
			fmt.Fprintf(&b, "\n\n## %s\n%s", g.Name, g.Instructions)
		}
	}
	res := tool.TextResult(b.String())
	res.Structured, _ = json.Marshal(map[string]any{"active_groups": append([]string{"basic"}, active...)})
	return res, nil
}

// unknownGroups words a reset_tools call refused for its arguments: when they name a
// group there is not, it says which and lists the session's groups (the schema's
// "additional properties not allowed" did neither); otherwise bad stands.
func (s *Session) unknownGroups(raw json.RawMessage, bad *tool.Result) *tool.Result {
	var want map[string]json.RawMessage
	if json.Unmarshal(raw, &want) != nil {
		return bad
	}
	var unknown []string
	for name := range want {
		if !s.manager.hasGroup(name) {
			unknown = append(unknown, strconv.Quote(name))
		}
	}
	if len(unknown) == 0 {
		return bad
	}
	slices.Sort(unknown)
	s.mu.Lock()
	active := maps.Clone(s.groups)
	s.mu.Unlock()
	var groups []string
	for _, g := range s.manager.cfg.Groups {
		state := "off"
		if active[g.Name] {
			state = "on"
		}
		groups = append(groups, fmt.Sprintf("%s (%s)", g.Name, state))
	}
	word := "group"
	if len(unknown) > 1 {
		word = "groups"
	}
	return tool.ErrorResult(tool.KindInvalidArgs,
		"%s: unknown %s %s; this session's tool groups are %s (basic is always on). Give one boolean per group; groups left out are switched off. Nothing was changed.",
		ResetToolName, word, strings.Join(unknown, ", "), strings.Join(groups, ", "))
}

// protocolTools builds the registry of protocol tools for the configured groups.
func protocolTools(groups []Group) *toolmgr.Manager {
	m := toolmgr.New()
	m.MustRegister(expandTool{})
	if len(groups) > 0 {
		m.MustRegister(resetTool{groups: groups})
	}
	return m
}

// SelectedSpecs are the allowed tools the turn's selection offers, sorted by name:
// with the list narrowed, the ranked and expanded ones plus tool_expand_tools; with
// reset_tools when groups exist. A listing of more would offer tools whose calls are
// refused.
func (s *Session) SelectedSpecs() []tool.Spec {
	specs := s.Tools.Specs()
	narrowed := false
	specs = slices.DeleteFunc(specs, func(sp tool.Spec) bool {
		hide := !s.Selected(sp.Name)
		narrowed = narrowed || hide
		return hide
	})
	for _, name := range []string{ExpandToolName, ResetToolName} {
		if name == ExpandToolName && !narrowed {
			continue
		}
		if e, ok := s.manager.protocol.Lookup(name); ok {
			specs = append(specs, e.Spec)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// GroupsConfigured reports whether tool groups exist (then reset_tools is offered).
func (s *Session) GroupsConfigured() bool { return len(s.manager.cfg.Groups) > 0 }

// ResetToolSpec is the spec of reset_tools for the configured groups.
func (s *Session) ResetToolSpec() tool.Spec {
	e, _ := s.manager.protocol.Lookup(ResetToolName)
	return e.Spec
}

// metaTools stay callable whatever a skill allows.
var metaTools = map[string]bool{ExpandToolName: true, ResetToolName: true, "skill": true, "info": true}

func (s *Session) activeSkill() *skills.Active {
	a, _ := s.Info.State.LoadOrStore(skills.ActiveStateKey, func() any { return &skills.Active{} }).(*skills.Active)
	return a
}

// skillAllows applies the active skill's allowed tools.
func (s *Session) skillAllows(name string) bool {
	if metaTools[name] {
		return true
	}
	ok, _, _ := s.activeSkill().Allows(name)
	return ok
}

// toolCount is n with the noun that agrees with it: "1 tool", "3 tools".
func toolCount(n int) string {
	if n == 1 {
		return "1 tool"
	}
	return fmt.Sprintf("%d tools", n)
}

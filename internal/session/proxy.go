package session

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/toolserverd/toolserverd/internal/globset"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// ToolProxy is a session's view of the tool registries: an ordered list of managers
// (the first that has a name wins) filtered by a whitelist of exact names and glob
// patterns (`mcp__github__*`). Patterns are evaluated at lookup time, so tools of an
// MCP server that comes up later are covered.
type ToolProxy struct {
	managers []*toolmgr.Manager
	all      bool
	exact    map[string]bool
	patterns []string
	// matcher answers for patterns (a whitelist of 2,000 `mcp__x__*` patterns checked
	// each against each tool: 0.2 s a listing).
	matcher globset.Set
	// protocol tools (tool_expand_tools, reset_tools) resolve in every session.
	protocol *toolmgr.Manager
	// gate hides tools of inactive groups; nil hides nothing.
	gate func(tool.Spec) bool
}

// PendingSources describes the declared tool sources not connected now (an MCP server
// starting, or down since it was declared) whose tools a whitelist entry may name
// (pattern: the entry is a glob), one phrase each ("mcp server ev is connecting");
// none when the entry names no such source. The daemon passes the MCP proxy's; a nil
// one knows of none.
type PendingSources func(entry string, pattern bool) []string

func (f PendingSources) of(entry string, pattern bool) []string {
	if f == nil {
		return nil
	}
	return f(entry, pattern)
}

// pendingTool says why a tool the session's whitelist allows is in no registry, when
// its source is declared but not connected yet; "" otherwise.
func (s *Session) pendingTool(name string) string {
	if !s.Tools.Allows(name) {
		return ""
	}
	return strings.Join(s.manager.pending.of(name, false), "; ")
}

// NewToolProxy builds a proxy. A nil whitelist allows every tool; an empty one allows
// none. Exact names no manager knows, and empty names, are dropped and reported as
// warnings; patterns are kept, with a warning when they match nothing yet.
func NewToolProxy(managers []*toolmgr.Manager, whitelist []string) (*ToolProxy, []string) {
	return newToolProxy(managers, whitelist, nil, nil)
}

// newToolProxy is NewToolProxy that also keeps the exact names of pending sources'
// tools: they are registered when the source connects, and the session has them
// then, as it has a tool of an MCP server that was removed and added again.
func newToolProxy(managers []*toolmgr.Manager, whitelist []string, pending PendingSources, protocol *toolmgr.Manager) (*ToolProxy, []string) {
	p := &ToolProxy{managers: managers, all: whitelist == nil, exact: map[string]bool{}, protocol: protocol}
	var warnings []string
	seen := map[string]bool{}
	empty := false
	for _, raw := range whitelist {
		name := strings.TrimSpace(raw)
		if name == "" && !empty {
			empty = true
			warnings = append(warnings, "empty tool name (\"\" or null) dropped")
		}
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if isPattern(name) {
			if _, err := path.Match(name, ""); err != nil {
				warnings = append(warnings, "invalid tool pattern: "+name)
				continue
			}
			p.patterns = append(p.patterns, name)
			if !anyMatch(p.managers, name) {
				w := "tool pattern matches no tool yet: " + name
				if why := pending.of(name, true); len(why) > 0 {
					w += " (" + strings.Join(why, "; ") + ")"
				}
				warnings = append(warnings, w)
			}
			continue
		}
		if _, _, ok := p.lookup(name); !ok {
			if p.protocol != nil {
				// tool_expand_tools, reset_tools: the session offers them whenever it
				// needs them, whitelisted or not.
				if _, ok := p.protocol.Lookup(name); ok {
					continue
				}
			}
			why := pending.of(name, false)
			// A source registers its tools before it reports itself connected: one that
			// connected since the lookup has the name by now.
			if _, _, ok := p.lookup(name); len(why) == 0 && !ok {
				warnings = append(warnings, "unknown tool: "+name)
				continue
			}
			if len(why) > 0 {
				warnings = append(warnings, fmt.Sprintf("tool %s is not available yet: %s; it is kept and appears in the session when its source is up",
					name, strings.Join(why, "; ")))
			}
		}
		p.exact[name] = true
	}
	p.matcher = globset.New(p.patterns)
	return p, warnings
}

func isPattern(s string) bool { return globset.IsPattern(s) }

// anyMatch reports whether a tool of managers matches pattern.
func anyMatch(managers []*toolmgr.Manager, pattern string) bool {
	for _, m := range managers {
		if globset.AnyMatch(m.SortedNames(), pattern) {
			return true
		}
	}
	return false
}

// Allows reports whether the whitelist covers name (whether or not the tool exists).
func (p *ToolProxy) Allows(name string) bool {
	return p.all || p.exact[name] || p.matcher.Match(name)
}

func (p *ToolProxy) lookup(name string) (*toolmgr.Manager, *toolmgr.Entry, bool) {
	for _, m := range p.managers {
		if e, ok := m.Lookup(name); ok {
			return m, e, true
		}
	}
	return nil, nil, false
}

// Resolve finds an allowed tool by name, in manager priority order.
func (p *ToolProxy) Resolve(name string) (*toolmgr.Manager, *toolmgr.Entry, bool) {
	if p.protocol != nil {
		if e, ok := p.protocol.Lookup(name); ok {
			return p.protocol, e, true
		}
	}
	if !p.Allows(name) {
		return nil, nil, false
	}
	m, e, ok := p.lookup(name)
	if ok && p.gate != nil && !p.gate(e.Spec) {
		return nil, nil, false
	}
	return m, e, ok
}

// Gated returns the spec of a tool the whitelist allows but an inactive tool group
// hides: the session could call it once the group is switched on.
func (p *ToolProxy) Gated(name string) (tool.Spec, bool) {
	if p.gate == nil || !p.Allows(name) {
		return tool.Spec{}, false
	}
	_, e, ok := p.lookup(name)
	if !ok || p.gate(e.Spec) {
		return tool.Spec{}, false
	}
	return e.Spec, true
}

// Specs returns the allowed tools' specs sorted by name; on a name clash the
// higher-priority manager's tool is the one listed.
func (p *ToolProxy) Specs() []tool.Spec {
	var out []tool.Spec
	p.allowed(func(s *tool.Spec) { out = append(out, *s) })
	// Each manager's are sorted: one manager's need no sorting.
	if len(p.managers) > 1 {
		slices.SortFunc(out, func(a, b tool.Spec) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// Names returns the allowed tools' names, sorted.
func (p *ToolProxy) Names() []string {
	names := []string{}
	p.allowed(func(s *tool.Spec) { names = append(names, s.Name) })
	if len(p.managers) > 1 {
		slices.Sort(names)
	}
	return names
}

// countNames returns how many tools are allowed and, when at most upTo, their names
// sorted (else nil): an answer that names every tool of a small session and counts
// those of a large one, without listing thousands.
func (p *ToolProxy) countNames(upTo int) (int, []string) {
	n, names := 0, []string{}
	p.allowed(func(s *tool.Spec) {
		if n++; n <= upTo {
			names = append(names, s.Name)
		}
	})
	if n > upTo {
		return n, nil
	}
	if len(p.managers) > 1 {
		slices.Sort(names)
	}
	return n, names
}

// allowed calls f with each allowed tool's spec, each manager's in name order; on a
// name clash, only with the higher-priority manager's.
func (p *ToolProxy) allowed(f func(*tool.Spec)) {
	var seen map[string]bool
	if len(p.managers) > 1 {
		seen = map[string]bool{}
	}
	for _, m := range p.managers {
		specs := m.SortedSpecs()
		for i := range specs {
			s := &specs[i]
			if seen[s.Name] || !p.Allows(s.Name) || (p.gate != nil && !p.gate(*s)) {
				continue
			}
			if seen != nil {
				seen[s.Name] = true
			}
			f(s)
		}
	}
}

// Lookup implements tool.Catalog: the spec of an allowed tool.
func (p *ToolProxy) Lookup(name string) (tool.Spec, bool) {
	_, e, ok := p.Resolve(name)
	if !ok {
		return tool.Spec{}, false
	}
	return e.Spec, true
}

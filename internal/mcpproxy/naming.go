package mcpproxy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

var validToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// serverTools is what naming needs to know about one server.
type serverTools struct {
	server string
	prefix string
	tools  []string // upstream tool names
}

// placement says which upstream tool a registry name stands for.
type placement struct {
	server string
	tool   string
}

// assignNames maps every upstream tool to a registry name under mode. It is a pure
// function of its input: servers in name order, tools in name order, first come
// first served, so the same servers and tools always get the same names whatever
// order they connected in. reserved reports names other tool sources hold. notes
// holds, per server, every collision and refusal, in words for an operator.
func assignNames(mode string, servers []serverTools, reserved func(string) bool) (names map[string]placement, notes map[string][]string) {
	names = map[string]placement{}
	notes = map[string][]string{}
	sorted := append([]serverTools(nil), servers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].server < sorted[j].server })

	// A name that starts with another server's prefix is in that server's name
	// space: the names, whitelists and permission rules written for that server
	// (mcp__github__*) would cover a tool of another. It is so even when the name
	// starts with its own server's prefix too: servers whose prefixes overlap are
	// refused (namespaceClash), and were two to meet all the same, neither would
	// take names from the other.
	namespace := func(s serverTools, name string) (string, bool) {
		for _, o := range sorted {
			if o.server != s.server && strings.HasPrefix(name, o.prefix) {
				return o.server, true
			}
		}
		return "", false
	}
	takenBy := func(s serverTools, name string) (string, bool) {
		if p, ok := names[name]; ok {
			return fmt.Sprintf("tool %q of mcp server %s", p.tool, p.server), true
		}
		if reserved != nil && reserved(name) {
			return "another tool source", true
		}
		if o, ok := namespace(s, name); ok {
			return "the name space of mcp server " + o, true
		}
		return "", false
	}
	for _, s := range sorted {
		tools := append([]string(nil), s.tools...)
		sort.Strings(tools)
		for i, t := range tools {
			if i > 0 && tools[i-1] == t {
				notes[s.server] = append(notes[s.server], fmt.Sprintf("tool %q is listed twice; the second is ignored", t))
				continue
			}
			if t == "" {
				notes[s.server] = append(notes[s.server], "a tool with an empty name is ignored")
				continue
			}
			bare := toolmgr.CapName(toolmgr.SanitizeName(t))
			prefixed := toolmgr.CapName(toolmgr.SanitizeName(s.prefix + t))
			var candidates []string
			switch mode {
			case PrefixNever:
				candidates = []string{bare}
			case PrefixOnCollision:
				candidates = []string{bare, prefixed}
			default:
				candidates = []string{prefixed}
			}
			chosen, firstOwner := "", ""
			for i, c := range candidates {
				owner, taken := takenBy(s, c)
				if i == 0 {
					firstOwner = owner
				}
				if !taken {
					chosen = c
					break
				}
			}
			if chosen == "" && mode != PrefixNever {
				// Two upstream names that sanitize or cut to the same name: the later
				// one (in sort order) gets a hash of its own name.
				alt := toolmgr.WithSuffix(candidates[len(candidates)-1], "_"+toolmgr.ShortHash(s.server+"/"+t))
				if _, taken := takenBy(s, alt); !taken {
					chosen = alt
				}
			}
			if chosen == "" {
				notes[s.server] = append(notes[s.server],
					fmt.Sprintf("tool %q is not registered: the name %q is taken by %s", t, candidates[0], firstOwner))
				continue
			}
			if chosen != candidates[0] {
				notes[s.server] = append(notes[s.server],
					fmt.Sprintf("tool %q is registered as %q: %q is taken by %s", t, chosen, candidates[0], firstOwner))
			}
			names[chosen] = placement{server: s.server, tool: t}
		}
	}
	return names, notes
}

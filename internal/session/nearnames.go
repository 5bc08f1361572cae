package session

import (
	"fmt"
	"slices"
	"strings"
)

// nearListed is how many names an answer to an unknown tool name suggests.
const nearListed = 3

// wholeListed is the size up to which the answer to a call of an unknown tool lists
// every tool of the session; with more, it names the nearest and how to search.
const wholeListed = 30

// nearNames returns up to nearListed tools of the session (allowed, or hidden by a
// switched-off tool group, whose call then says how to switch it on) that a model
// may have meant by name: first those that are name with its mcp__server__ prefix
// dropped, another server's prefix, another case or _ for - ("get_sum" for
// "mcp__everything__get-sum"), then the best ranked by the name's words. With
// hundreds of tools, a list of the first names in alphabetical order never held the
// one meant.
func (s *Session) nearNames(name string) []string {
	known := map[string]bool{}
	for _, m := range s.Tools.managers {
		for _, n := range m.Names() {
			if _, _, ok := s.Tools.Resolve(n); ok {
				known[n] = true
			} else if _, gated := s.Tools.Gated(n); gated {
				known[n] = true
			}
		}
	}
	fold := func(x string) string { return strings.ReplaceAll(strings.ToLower(x), "-", "_") }
	base := func(x string) string {
		if i := strings.LastIndex(x, "__"); i >= 0 {
			return x[i+2:]
		}
		return x
	}
	want, wantBase := fold(name), fold(base(name))
	var out []string
	for n := range known {
		if f := fold(n); f == want || f == wantBase || base(f) == wantBase {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if len(out) > nearListed {
		return out[:nearListed]
	}
	for _, r := range s.manager.index().RankFiltered(name, nearListed, func(n string) bool { return known[n] && !slices.Contains(out, n) }) {
		if len(out) == nearListed {
			break
		}
		out = append(out, r.Name)
	}
	return out
}

// unknownToolText answers a call of a tool the session does not have: the nearest
// names, and every name when the session has few tools, else how to search them.
func (s *Session) unknownToolText(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool %q is not available in this session", name)
	if near := s.nearNames(name); len(near) > 0 {
		fmt.Fprintf(&b, "; did you mean %s?", strings.Join(near, ", or "))
	}
	names := s.Tools.Names()
	if len(names) <= wholeListed {
		fmt.Fprintf(&b, " Available tools: %s", summarize(names))
	} else {
		fmt.Fprintf(&b, " The session has %d tools: call %s with {\"query\": \"what the tool should do\"} to find one", len(names), ExpandToolName)
	}
	return b.String()
}

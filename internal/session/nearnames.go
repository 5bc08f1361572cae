package session

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// nearListed is how many names an answer to an unknown tool name suggests.
const nearListed = 3

// wholeListed is the size up to which the answer to a call of an unknown tool lists
// every tool of the session; with more, it names the nearest and how to search.
const wholeListed = 30

// nearRanked caps the part of an unknown name that is ranked for near names: tool
// names are at most toolmgr.MaxNameLen bytes, and ranking every word of a 100 KB
// name a model (or a client) sent cost 10 ms a call, and a batch holds up to 256.
const nearRanked = 256

// rankedPart is name cut to nearRanked bytes, at the start of a character.
func rankedPart(name string) string {
	if len(name) <= nearRanked {
		return name
	}
	i := nearRanked
	for i > 0 && !utf8.RuneStart(name[i]) {
		i--
	}
	return name[:i]
}

// nearNames returns up to nearListed tools of the session (allowed, or hidden by a
// switched-off tool group, whose call then says how to switch it on) that a model
// may have meant by name: first those that are name with its mcp__server__ prefix
// dropped, another server's prefix, another case or _ for - ("get_sum" for
// "mcp__everything__get-sum"), then the best ranked by the name's words. With
// hundreds of tools, a list of the first names in alphabetical order never held the
// one meant.
func (s *Session) nearNames(name string) []string {
	// A tool is known when the whitelist allows it: then it resolves, or a switched-off
	// group hides it (Resolve or Gated), unless a protocol tool has its name, which
	// resolves whatever the whitelist says. Asked of each name, with the group checks
	// of both, it was a third of the cost of a call of an unknown name.
	p := s.Tools
	isKnown := func(n string) bool {
		if p.protocol != nil {
			if _, ok := p.protocol.Lookup(n); ok {
				return true
			}
		}
		return p.Allows(n)
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
	for _, m := range p.managers {
		for _, n := range m.SortedNames() {
			// fold(n) == want || fold(n) == wantBase || base(fold(n)) == wantBase, without
			// folding every name of the registry for each unknown one.
			if (foldedEqual(n, want) || foldedEqual(n, wantBase) || foldedEndsWith(n, wantBase) && foldedEqual(foldedBase(n), wantBase)) &&
				!slices.Contains(out, n) && isKnown(n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	if len(out) > nearListed {
		return out[:nearListed]
	}
	for _, r := range s.manager.index().RankFiltered(rankedPart(name), nearListed, func(n string) bool {
		_, _, registered := p.lookup(n)
		return registered && isKnown(n) && !slices.Contains(out, n)
	}) {
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
	fmt.Fprintf(&b, "tool %q is not available in this session", shownName(name))
	if near := s.nearNames(name); len(near) > 0 {
		fmt.Fprintf(&b, "; did you mean %s?", strings.Join(near, ", or "))
	}
	count, names := s.Tools.countNames(wholeListed)
	if count <= wholeListed {
		fmt.Fprintf(&b, " Available tools: %s", summarize(names))
	} else {
		fmt.Fprintf(&b, " The session has %d tools: call %s with {\"query\": \"what the tool should do\"} to find one", count, ExpandToolName)
	}
	return b.String()
}

// shownNameMax is how much of a tool name the session does not know its answers quote:
// providers take names of 64 to 128 characters, and a longer one (a runaway model, a
// broken backend) was quoted whole, 100 KB of it in the model's next turn.
const shownNameMax = 128

// shownName is name as an answer quotes it: whole up to shownNameMax bytes, else its
// start, cut at a character boundary, with its length.
func shownName(name string) string {
	if len(name) <= shownNameMax {
		return name
	}
	cut := shownNameMax
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", name[:cut], len(name))
}

// Tool names are ASCII letters, digits, '_' and '-' (toolmgr checks them), so a tool
// name folds (lower case, '-' as '_') byte by byte, by foldTable.
var foldTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = byte(c) + 'a' - 'A'
	}
	t['-'] = '_'
	return t
}()

// foldedEqual reports whether the tool name n, folded, is f. It compares from the
// end: the names of one server differ there.
func foldedEqual(n, f string) bool {
	if len(n) != len(f) {
		return false
	}
	for i := len(n) - 1; i >= 0; i-- {
		if foldTable[n[i]] != f[i] {
			return false
		}
	}
	return true
}

// foldedEndsWith reports whether the tool name n, folded, ends with f.
func foldedEndsWith(n, f string) bool {
	return len(n) >= len(f) && foldedEqual(n[len(n)-len(f):], f)
}

// foldedBase is the part of the tool name n after the last "__" of n folded (n
// whole when it has none), unfolded.
func foldedBase(n string) string {
	for i := len(n) - 2; i >= 0; i-- {
		if foldTable[n[i]] == '_' && foldTable[n[i+1]] == '_' {
			return n[i+2:]
		}
	}
	return n
}

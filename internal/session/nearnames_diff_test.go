package session

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// sourced is a tool with a source, so that a group's mcp_servers can hold it.
type sourced struct{ name, desc, source string }

func (d sourced) Spec() tool.Spec {
	return tool.Spec{Name: d.name, Description: d.desc, Source: d.source}
}
func (d sourced) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult(d.name), nil
}

// The answers to an unknown tool name as they were computed before they were made
// cheaper (the walk of every name with the group checks per tool, and the ranking
// filtered by a look-up of every candidate), kept to compare with.

func referenceGate(s *Session, spec tool.Spec) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	inSome := false
	for _, g := range s.manager.cfg.Groups {
		if g.contains(spec) {
			if s.groups[g.Name] {
				return true
			}
			inSome = true
		}
	}
	return !inSome
}

func referenceNames(s *Session) []string {
	p := s.Tools
	names := []string{}
	seen := map[string]bool{}
	for _, m := range p.managers {
		for _, sp := range m.Specs() {
			if seen[sp.Name] || !p.Allows(sp.Name) || (len(s.manager.cfg.Groups) > 0 && !referenceGate(s, sp)) {
				continue
			}
			seen[sp.Name] = true
			names = append(names, sp.Name)
		}
	}
	slices.Sort(names)
	return names
}

func referenceNearNames(s *Session, name string) []string {
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
		for _, n := range m.Names() {
			if f := fold(n); (f == want || f == wantBase || base(f) == wantBase) && !slices.Contains(out, n) && isKnown(n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	if len(out) > nearListed {
		return out[:nearListed]
	}
	ix := s.manager.index()
	for _, r := range ix.Rank(rankedPart(name), ix.Len()) {
		if len(out) == nearListed {
			break
		}
		if _, _, registered := p.lookup(r.Name); registered && isKnown(r.Name) && !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	return out
}

func referenceUnknownToolText(s *Session, name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool %q is not available in this session", shownName(name))
	if near := referenceNearNames(s, name); len(near) > 0 {
		fmt.Fprintf(&b, "; did you mean %s?", strings.Join(near, ", or "))
	}
	names := referenceNames(s)
	if len(names) <= wholeListed {
		fmt.Fprintf(&b, " Available tools: %s", summarize(names))
	} else {
		fmt.Fprintf(&b, " The session has %d tools: call %s with {\"query\": \"what the tool should do\"} to find one", len(names), ExpandToolName)
	}
	return b.String()
}

// TestUnknownNameAnswersAsBefore compares the answers to unknown tool names (the
// near names, the whole not-available text and the session's names) with those
// computed the way they were before they were made cheaper, over two registries
// (names with '-', capitals, "__" in the tool part, a name in both),
// whitelists of names, prefix and other patterns, tool groups by pattern and by MCP
// server on and off, and names made from the tools' names (another case, '-' for
// '_', prefix dropped or changed, cut, extended) and others (non-ASCII among them:
// the Kelvin sign and 'İ' lower-case to ASCII letters).
func TestUnknownNameAnswersAsBefore(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	verbs := []string{"get", "list", "create", "delete", "search", "update", "send"}
	objs := []string{"issue", "pull-request", "file", "Message", "event", "user_profile", "sum"}
	tm1, tm2 := toolmgr.New(), toolmgr.New()
	var all []string
	for i := range 300 {
		srv := fmt.Sprintf("s%d", i%6)
		n := fmt.Sprintf("mcp__%s__%s_%s", srv, verbs[rng.IntN(len(verbs))], objs[rng.IntN(len(objs))])
		if i%17 == 0 {
			n += fmt.Sprint(i)
		}
		if slices.Contains(all, n) {
			continue
		}
		all = append(all, n)
		tm1.MustRegister(sourced{n, "Does " + strings.ReplaceAll(n, "_", " ") + ".", "mcp:" + srv})
	}
	extra := []string{"read_file", "Read-File", "mcp__x__get__issue", "mcp__x__get-_issue", "key", "mcp__k__Key-i", "mcp__s1__get_issue", "a__", "__", "-_-"}
	for _, n := range extra {
		tm2.MustRegister(sourced{n, "Another tool, " + n + ".", "local"})
		all = append(all, n)
	}
	tm2.MustRegister(sourced{all[0], "A tool of both registries.", "local"})
	groups := []Group{
		{Name: "g1", Tools: []string{"mcp__s1__*"}},
		{Name: "g2", Tools: []string{"*_issue", "read?file"}},
		{Name: "g3", MCPServers: []string{"s2"}},
	}
	var names []string
	for i, n := range all {
		if i%8 != 0 && i < len(all)-len(extra)-1 {
			continue // every eighth of the first registry's, all of the second's
		}
		names = append(names, n, strings.ToUpper(n), strings.ReplaceAll(n, "_", "-"), n[strings.LastIndex(n, "__")+2:],
			"mcp__zz__"+n[strings.LastIndex(n, "__")+2:], n[:len(n)/2], n+"s", strings.ReplaceAll(n, "-", "_"))
	}
	names = append(names, "", "_", "__", "a__", "mcp__", "mcp__s1__", "get issue", "List the PR files", "K", "\u212a", "İ", "\u212aEY", "mcp__k__\u212aey-İ", "mcp__q__\u212aey_\u0130",
		"get_issue "+strings.Repeat("é", 1<<10), strings.Repeat("get_sum_", 1<<10), "no_such_tool", "mcp__s1__get__issue")
	for _, withGroups := range []bool{false, true} {
		cfg := Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws")}
		if withGroups {
			cfg.Groups = groups
		}
		m, err := NewManager(cfg, &memStore{m: map[string]*store.Session{}}, tm1, tm2)
		if err != nil {
			t.Fatal(err)
		}
		whitelists := [][]string{nil, {}, {"mcp__s1__*", "mcp__s2__*", "read_file", "key"}, {"*_issue", "mcp__s[34]__*", "Read-File", "a__"}, all[:20]}
		actives := [][]string{nil}
		if withGroups {
			actives = [][]string{nil, {"g1"}, {"g2", "g3"}, {"g1", "g2", "g3"}}
		}
		for wi, wl := range whitelists {
			for _, active := range actives {
				sess, _, err := m.Create(context.Background(), "t1", Spec{AvailableTools: wl, ActiveGroups: active})
				if err != nil {
					t.Fatal(err)
				}
				if got, want := sess.Tools.Names(), referenceNames(sess); !slices.Equal(got, want) {
					t.Fatalf("whitelist %d, groups %v: Names() has %d names, want %d; first %q, want %q", wi, active, len(got), len(want), got[:min(len(got), 5)], want[:min(len(want), 5)])
				}
				for _, n := range names {
					if got, want := sess.unknownToolText(n), referenceUnknownToolText(sess, n); got != want {
						t.Fatalf("whitelist %d, groups %v, name %.60q:\n got %s\nwant %s", wi, active, n, got, want)
					}
				}
			}
		}
	}
}

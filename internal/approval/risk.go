package approval

import (
	"path"
	"sort"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// DefaultRiskPolicy allows safe and low risk calls and asks for the rest. Deny is
// left to rules: a risk level says how careful to be, not that a call is wrong.
func DefaultRiskPolicy() map[tool.Risk]Outcome {
	return map[tool.Risk]Outcome{
		tool.RiskSafe: Allow, tool.RiskLow: Allow,
		tool.RiskMedium: Ask, tool.RiskHigh: Ask, tool.RiskCritical: Ask,
	}
}

// maxRisk returns the higher of two risks; "" counts as no risk at all.
func maxRisk(a, b tool.Risk) tool.Risk {
	switch {
	case b == "":
		return a
	case a == "":
		return b
	case b.Rank() > a.Rank():
		return b
	}
	return a
}

// normalRisk maps an unknown or empty risk to medium, as tool.Risk.Rank does.
func normalRisk(r tool.Risk) tool.Risk {
	if r.Valid() {
		return r
	}
	return tool.RiskMedium
}

// globTable looks up tool names in a table whose keys may be globs
// (mcp__github__*). An exact key wins; among globs the longest, then the first in
// byte order, so the answer never depends on map iteration order.
type globTable[V any] struct {
	exact map[string]V
	globs []string
	vals  map[string]V
}

func newGlobTable[V any](m map[string]V) globTable[V] {
	t := globTable[V]{exact: map[string]V{}, vals: map[string]V{}}
	for k, v := range m {
		if isGlob(k) {
			t.globs = append(t.globs, k)
			t.vals[k] = v
		} else {
			t.exact[k] = v
		}
	}
	sort.Slice(t.globs, func(i, j int) bool {
		if len(t.globs[i]) != len(t.globs[j]) {
			return len(t.globs[i]) > len(t.globs[j])
		}
		return t.globs[i] < t.globs[j]
	})
	return t
}

func (t globTable[V]) lookup(name string) (V, bool) {
	if v, ok := t.exact[name]; ok {
		return v, true
	}
	for _, g := range t.globs {
		if ok, _ := path.Match(g, name); ok {
			return t.vals[g], true
		}
	}
	var zero V
	return zero, false
}

func isGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}

// nameMatch matches a tool name against a rule's tool, which may be a glob.
func nameMatch(pattern, name string) bool {
	if pattern == name {
		return true
	}
	if !isGlob(pattern) {
		return false
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

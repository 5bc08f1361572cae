package approval

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func TestMaxRisk(t *testing.T) {
	t.Parallel()
	cases := []struct{ a, b, want tool.Risk }{
		{tool.RiskSafe, tool.RiskHigh, tool.RiskHigh},
		{tool.RiskCritical, tool.RiskLow, tool.RiskCritical},
		{tool.RiskMedium, "", tool.RiskMedium},
		{"", tool.RiskLow, tool.RiskLow},
		{tool.RiskHigh, tool.RiskHigh, tool.RiskHigh},
		{tool.RiskSafe, tool.RiskSafe, tool.RiskSafe},
	}
	for _, c := range cases {
		if got := maxRisk(c.a, c.b); got != c.want {
			t.Errorf("maxRisk(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

func TestNormalRisk(t *testing.T) {
	t.Parallel()
	for _, r := range []tool.Risk{tool.RiskSafe, tool.RiskLow, tool.RiskMedium, tool.RiskHigh, tool.RiskCritical} {
		if normalRisk(r) != r {
			t.Errorf("normalRisk(%q) changed it", r)
		}
	}
	for _, r := range []tool.Risk{"", "extreme", "HIGH"} {
		if normalRisk(r) != tool.RiskMedium {
			t.Errorf("normalRisk(%q) = %q, want medium", r, normalRisk(r))
		}
	}
}

func TestDefaultRiskPolicy(t *testing.T) {
	t.Parallel()
	want := map[tool.Risk]Outcome{tool.RiskSafe: Allow, tool.RiskLow: Allow, tool.RiskMedium: Ask, tool.RiskHigh: Ask, tool.RiskCritical: Ask}
	got := DefaultRiskPolicy()
	if len(got) != len(want) {
		t.Fatalf("policy %v", got)
	}
	for r, o := range want {
		if got[r] != o {
			t.Errorf("%s → %s, want %s", r, got[r], o)
		}
	}
}

func TestGlobTable(t *testing.T) {
	t.Parallel()
	tab := newGlobTable(map[string]tool.Risk{
		"mcp__github__create_issue": tool.RiskLow,
		"mcp__github__*":            tool.RiskHigh,
		"mcp__*":                    tool.RiskMedium,
		"mcp__*__delete_*":          tool.RiskCritical,
		"*_job":                     tool.RiskSafe,
		"[ab]_tool":                 tool.RiskLow,
	})
	cases := []struct {
		name string
		want tool.Risk
		ok   bool
	}{
		{"mcp__github__create_issue", tool.RiskLow, true},     // exact beats globs
		{"mcp__github__get_issue", tool.RiskHigh, true},       // longest glob wins
		{"mcp__github__delete_repo", tool.RiskCritical, true}, // longer than mcp__github__*
		{"mcp__slack__post", tool.RiskMedium, true},
		{"kill_job", tool.RiskSafe, true},
		{"a_tool", tool.RiskLow, true},
		{"c_tool", "", false},
		{"execute_command", "", false},
	}
	for range 20 { // the answer must not depend on map order
		for _, c := range cases {
			got, ok := tab.lookup(c.name)
			if got != c.want || ok != c.ok {
				t.Fatalf("lookup(%q) = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
			}
		}
	}
}

func TestNameMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"execute_command", "execute_command", true},
		{"execute_command", "execute_commands", false},
		{"mcp__github__*", "mcp__github__create_issue", true},
		{"mcp__github__*", "mcp__gitlab__x", false},
		{"mcp__*__delete_*", "mcp__github__delete_repo", true},
		{"*", "anything", true},
		{"read_?ile", "read_file", true},
		{"[", "[", true},
	}
	for _, c := range cases {
		if got := nameMatch(c.pattern, c.name); got != c.want {
			t.Errorf("nameMatch(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

package session

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestAddRulesOnce: two approvals "for session" with the same suggestion leave the
// rule once in the stored spec, next to the rules it had.
func TestAddRulesOnce(t *testing.T) {
	t.Parallel()
	add, err := AddRules([]string{"execute_command(touch:*)"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(storedSpec{Spec: Spec{Rules: &RuleSet{Allow: []string{"read_file"}}}})
	for range 2 {
		if raw, err = add(raw); err != nil {
			t.Fatal(err)
		}
	}
	var st storedSpec
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Spec.Rules.Allow; !slices.Equal(got, []string{"read_file", "execute_command(touch:*)"}) {
		t.Fatalf("allow rules %q, want each once", got)
	}
}

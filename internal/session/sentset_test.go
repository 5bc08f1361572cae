package session

import (
	"fmt"
	"testing"
)

// TestSentSetBounded: the ids a session's streams were sent are remembered (a second
// add is refused), the newest sentSetMax of them only, so a stream open for days
// does not grow the set without end.
func TestSentSetBounded(t *testing.T) {
	var s sentSet
	for i := range sentSetMax + 10 {
		if !s.add(fmt.Sprint("tc_", i)) {
			t.Fatalf("id %d refused the first time", i)
		}
	}
	if len(s.ids) != sentSetMax || len(s.order) != sentSetMax {
		t.Fatalf("holds %d ids (%d in order), want %d", len(s.ids), len(s.order), sentSetMax)
	}
	if s.add(fmt.Sprint("tc_", sentSetMax+9)) || s.add("tc_10") {
		t.Error("an id among the newest was taken again")
	}
	if !s.add("tc_0") {
		t.Error("the oldest id, past the bound, is still remembered")
	}
}

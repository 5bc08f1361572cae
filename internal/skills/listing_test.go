package skills_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// BenchmarkListing measures what the prompt route spends on the skills part of a
// library of 1,000 skills at the default budget, against listing them whole (a budget
// that holds everything): the cut listing counts only the budget's worth of text.
func BenchmarkListing(b *testing.B) {
	var list []skills.Skill
	for i := range 1000 {
		list = append(list, skills.Skill{Name: fmt.Sprintf("field-tool-%03d", i),
			Description: strings.Repeat(fmt.Sprintf("Analyze data set %d with a library and write results as CSV. ", i), 1+i%5)})
	}
	toolmgr.CountTokens("warm")
	for _, budget := range []int{skills.DefaultPromptBudgetTokens, 1 << 30} {
		b.Run(fmt.Sprint("budget=", budget), func(b *testing.B) {
			for b.Loop() {
				if l := skills.Listing(list, budget, toolmgr.CountTokens); l.Tokens > budget {
					b.Fatalf("%d tokens", l.Tokens)
				}
			}
		})
	}
}

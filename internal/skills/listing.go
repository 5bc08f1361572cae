package skills

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultPromptBudgetTokens is the default budget of the skills part of a session's
// prompt fragment. A library of a thousand skills listed whole is some 40,000 tokens
// (K-Dense's 964 scientific skills: 162 KB), paid on every turn; 4,000 lists about a
// hundred with their descriptions.
const DefaultPromptBudgetTokens = 4000

// MinPromptBudgetTokens is the smallest budget allowed: the heading and the closing
// line need about a hundred tokens.
const MinPromptBudgetTokens = 200

// PromptDescriptionChars is the most of a description the prompt fragment shows: the
// format allows 1024 characters, whose first sentences say what a skill does and
// when to use it; longer ones end with "…" there (the skill tool shows them whole).
const PromptDescriptionChars = 250

// PromptHeading opens the skills part of a session's prompt fragment.
const PromptHeading = "## Skills\nOpen a skill with the skill tool before a task it covers.\n"

// PromptListing is the skills part of a session's prompt fragment, cut to a budget.
type PromptListing struct {
	// Text is the part itself, "" when there is no skill to offer.
	Text string
	// Described are the skills listed with their descriptions, NamedOnly those named
	// after them without, both in name order.
	Described, NamedOnly []string
	// LeftOut counts the skills the text does not name at all.
	LeftOut int
	// Tokens is what Text costs, as count measured it.
	Tokens int
}

// Cut reports whether the listing left anything out: a description or a skill.
func (l PromptListing) Cut() bool { return len(l.NamedOnly) > 0 || l.LeftOut > 0 }

// Listing writes the skills of list that the model may pick (not ManualOnly) for the
// prompt fragment within budget tokens, as count measures text: in name order (the
// same skills give the same text, so the prompt caches), the first with their
// descriptions (each at most PromptDescriptionChars), then the others by name only
// while that fits, then a closing line saying how many are left out and how to find
// them (the skill tool's query). Descriptions take what naming every other skill
// leaves, or, when not every skill can be named, half the budget. A budget below
// MinPromptBudgetTokens counts as that.
func Listing(list []Skill, budget int, count func(string) int) PromptListing {
	budget = max(budget, MinPromptBudgetTokens)
	var names, lines []string
	for _, sk := range list {
		if sk.ManualOnly {
			continue // for a person to ask for, not for the model to pick
		}
		names = append(names, sk.Name)
	}
	if len(names) == 0 {
		return PromptListing{}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	descs := map[string]string{}
	for _, sk := range list {
		descs[sk.Name] = sk.Description
	}
	for _, n := range names {
		lines = append(lines, "- "+n+": "+PromptDescription(descs[n])+"\n")
	}

	// Everything, when everything fits; counted line by line, so a large library
	// costs only the budget's worth of counting.
	used := count(PromptHeading)
	all := true
	for _, l := range lines {
		if used += count(l); used > budget {
			all = false
			break
		}
	}
	if all {
		text := PromptHeading + strings.Join(lines, "")
		return PromptListing{Text: text, Described: names, Tokens: count(text)}
	}

	// Cut: descriptions, then names, within what the heading and closing line leave.
	// When every skill can be named, the first get descriptions while the rest still
	// fit by name; when not, descriptions take at most half the room, so that the
	// names list more of the library than a few more descriptions would.
	room := budget - count(PromptHeading) - count(closingLine(len(names), len(names))) - count(namesIntro) - 2
	nameCost := make([]int, len(names)+1) // nameCost[k]: naming names[k:]
	for k := len(names) - 1; k >= 0; k-- {
		nameCost[k] = nameCost[k+1] + count(", "+names[k])
	}
	descRoom := room / 2
	if nameCost[0] <= room {
		descRoom = room
	}
	described, used := 0, 0
	for _, l := range lines {
		c := count(l)
		if used+c > descRoom || nameCost[0] <= room && used+c+nameCost[described+1] > room {
			break
		}
		used += c
		described++
	}
	named := 0
	for _, n := range names[described:] {
		c := count(", " + n)
		if used+c > room {
			break
		}
		used += c
		named++
	}
	// The pieces were counted apart; the text is counted whole, and shortened in the
	// rare case that joining them cost more.
	for {
		l := buildListing(names, lines, described, named)
		if l.Tokens = count(l.Text); l.Tokens <= budget || described+named == 0 {
			return l
		}
		if named > 0 {
			named--
		} else {
			described--
		}
	}
}

// namesIntro starts the line of the skills named without their descriptions.
const namesIntro = "Also (by name only): "

func buildListing(names, lines []string, described, named int) PromptListing {
	var b strings.Builder
	b.WriteString(PromptHeading)
	for _, l := range lines[:described] {
		b.WriteString(l)
	}
	if named > 0 {
		b.WriteString(namesIntro + strings.Join(names[described:described+named], ", ") + "\n")
	}
	left := len(names) - described - named
	b.WriteString(closingLine(left, named))
	return PromptListing{Text: b.String(), Described: names[:described:described],
		NamedOnly: names[described : described+named : described+named], LeftOut: left}
}

// closingLine ends a listing that was cut: how many skills it does not name, and how
// to find them and the descriptions it left out.
func closingLine(left, namedOnly int) string {
	var b strings.Builder
	b.WriteString("[This list is cut to fit the prompt")
	if left > 0 {
		fmt.Fprintf(&b, ": %d more skills are not named here", left)
	}
	b.WriteString(". Find skills for a task with the skill tool's query argument (words for the task), which shows their descriptions")
	if namedOnly > 0 {
		b.WriteString(", or open one named above")
	}
	b.WriteString(".]\n")
	return b.String()
}

// PromptDescription is a description as the prompt fragment shows it: at most
// PromptDescriptionChars characters, a longer one cut at a word break with "…".
func PromptDescription(d string) string {
	if utf8.RuneCountInString(d) <= PromptDescriptionChars {
		return d
	}
	cut, n := d, 0
	for i := range d {
		if n == PromptDescriptionChars-1 {
			cut = d[:i]
			break
		}
		n++
	}
	if sp := strings.LastIndexByte(cut, ' '); sp > len(cut)/2 {
		cut = cut[:sp]
	}
	return strings.TrimRight(cut, " ,;:.-") + "…"
}

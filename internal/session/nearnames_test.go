package session

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// The near names are the session's tools: those its whitelist allows, with those a
// switched-off group hides, never one outside the whitelist; a very long name is
// ranked by its beginning.
func TestNearNamesOfTheSession(t *testing.T) {
	t.Parallel()
	tm := toolmgr.New()
	for _, n := range []string{"mcp__gh__get_issue", "mcp__gh__list_prs", "mcp__gl__get_issue", "mcp__docs__search"} {
		tm.MustRegister(described{n, "A tool."})
	}
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(t.TempDir(), "ws"), Groups: []Group{{Name: "g", Tools: []string{"mcp__gh__*"}}}},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	sess, _, err := m.Create(context.Background(), "t1", Spec{AvailableTools: []string{"mcp__gh__*", "mcp__docs__search"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"get_issue":          {"mcp__gh__get_issue"}, // hidden by the group, not mcp__gl__'s
		"mcp__gl__list-prs":  {"mcp__gh__list_prs"},
		"search":             {"mcp__docs__search"},
		"MCP__DOCS__SEARCH":  {"mcp__docs__search"},
		"mcp__gl__get_issue": {"mcp__gh__get_issue"},
		"get_issue " + strings.Repeat("é", 100<<10): {"mcp__gh__get_issue"},
		"list prs " + strings.Repeat("x ", 100<<10): {"mcp__gh__list_prs"},
	} {
		// Up to nearListed: the first is the one meant.
		if got := sess.nearNames(name); len(got) == 0 || got[0] != want[0] || slices.Contains(got, "mcp__gl__get_issue") {
			t.Errorf("nearNames(%.40q) = %q, want %q first and never a tool outside the whitelist", name, got, want[0])
		}
	}
	long := strings.Repeat("a", nearRanked-1) + "éé"
	if got := rankedPart(long); !utf8.ValidString(got) || len(got) != nearRanked-1 {
		t.Errorf("rankedPart cut a character: %q", got[nearRanked-4:])
	}
	if got := rankedPart("short"); got != "short" {
		t.Errorf("rankedPart(short) = %q", got)
	}
}

// TestLongUnknownNamesAreQuotedShort: a name no provider would send (a runaway model,
// a broken backend) is quoted by its start and its length in the answers a model
// reads, not whole: 100 KB of it went into the next turn.
func TestLongUnknownNamesAreQuotedShort(t *testing.T) {
	t.Parallel()
	_, sess := groupedSession(t, 40)
	long := strings.Repeat("é", 50000) // 100,000 bytes, two per character
	text := sess.unknownToolText(long)
	if len(text) > 2000 || !strings.Contains(text, "(100000 bytes)") || !utf8.ValidString(text) {
		t.Fatalf("unknown tool answer: %d bytes: %.300s", len(text), text)
	}
	out, res := runExpand(t, sess, `{"tool_names":["`+long+`","tool_001"]}`)
	if len(res) > 4000 || len(out.Invalid) != 1 || !strings.HasSuffix(out.Invalid[0], "… (100000 bytes)") || !utf8.ValidString(out.Invalid[0]) {
		t.Fatalf("expand answer: %d bytes, invalid %q", len(res), out.Invalid)
	}
	if short := sess.unknownToolText("no_such_tool"); !strings.Contains(short, `"no_such_tool"`) {
		t.Fatalf("a short name is quoted whole: %s", short)
	}
}

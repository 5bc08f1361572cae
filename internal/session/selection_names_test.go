package session

import (
	"encoding/json"
	"slices"
	"testing"
)

// Models also write several names as one string ("a, b") or in one list item.
func TestExpandNames(t *testing.T) {
	t.Parallel()
	for args, want := range map[string][]string{
		`{"tool_names":"echo"}`:                      {"echo"},
		`{"tool_names":"echo, read_file"}`:           {"echo", "read_file"},
		`{"tool_names":" echo  read_file,,glob "}`:   {"echo", "read_file", "glob"},
		`{"tool_names":["echo","mcp__gh__x, glob"]}`: {"echo", "mcp__gh__x", "glob"},
		`{"tool_names":[]}`:                          {},
		`{"query":"send mail"}`:                      {}, // a query alone: tool_expand_tools refuses neither
	} {
		got, ok := expandNames(json.RawMessage(args))
		if !ok || !slices.Equal(got, want) {
			t.Errorf("expandNames(%s) = %q, %v; want %q", args, got, ok, want)
		}
	}
	for _, bad := range []string{`{"tool_names":3}`, `{"tool_names":[1]}`} {
		if got, ok := expandNames(json.RawMessage(bad)); ok {
			t.Errorf("expandNames(%s) = %q, ok", bad, got)
		}
	}
}

package openapi

import (
	"path/filepath"
	"testing"
)

// TestHTMLDescriptionsBecomeMarkdown: the HTML in an operation's, a parameter's and a
// schema's description becomes Markdown (links keep their URLs, code stays code,
// lists stay lists, <br> is a line break) while the Markdown around it keeps its
// bytes: no escaped `*`, `_` or backticks, no joined lines. A description without
// HTML tags, and <words> that are no HTML element (<image>, <key>), are left as
// they are, as is HTML in code.
func TestHTMLDescriptionsBecomeMarkdown(t *testing.T) {
	t.Parallel()
	_, m := load(t, Config{Name: "h", Spec: filepath.Join("testdata", "htmldesc30.yaml")})
	e, ok := m.Lookup("h__getGoal")
	if !ok {
		t.Fatalf("no tool; have %v", m.Names())
	}
	want := "Get a goal\n\n" +
		"**Required scope:** `goals:read`\n\n" +
		"| Field | Required Scope |\n|---|---|\n| `time_period` | `time_periods:read` |\n\n" +
		"Returns the *complete* goal record; see [the guide](https://developers.asana.com/docs/goals) and `opt_fields`.\n" +
		"Pass `<image>:<tag>`, not `snake_case`.\nSteps:\n\n" +
		"- list_item with `a_b`\n- __second__ item\n\n" +
		"> **Note**: the `<b>` tag here is code.\n\n" +
		"(GET /goals/{goal_gid} on the h API)"
	if e.Spec.Description != want {
		t.Errorf("tool description:\n%s\nwant:\n%s", e.Spec.Description, want)
	}
	s := schemaOf(t, m, "h__getGoal")
	for _, c := range []struct{ arg, want string }{
		{"goal_gid", "Globally unique identifier for the goal. CPU quota in units of 10^-9 CPUs. (path)"},
		{"opt_fields", "Pure *Markdown* with `snake_case` and [a link](https://example.com/a_b)  \nkept as it is. (query)"},
	} {
		if got := prop(s, c.arg)["description"]; got != c.want {
			t.Errorf("%s: %q, want %q", c.arg, got, c.want)
		}
	}
	s = schemaOf(t, m, "h__createGoal")
	for _, c := range []struct{ arg, want string }{
		{"notes", "Free-form text.\n\n- one *item*\n- two, with <key> in it"},
		{"description", "The goal's *own* description_field."},
	} {
		if got := prop(s, c.arg)["description"]; got != c.want {
			t.Errorf("%s: %q, want %q", c.arg, got, c.want)
		}
	}
}

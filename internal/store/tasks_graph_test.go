package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCheckBlockers(t *testing.T) {
	t.Parallel()
	// d → c → b → a (each blocked by the next), e alone.
	graph := map[string][]string{"a": {}, "b": {"a"}, "c": {"b"}, "d": {"c", "b"}, "e": {}}
	tests := []struct {
		name, id string
		blocked  []string
		problem  string
		path     []string
	}{
		{"none", "a", nil, "", nil},
		{"independent", "e", []string{"d", "a"}, "", nil},
		{"self", "b", []string{"a", "b"}, "self", nil},
		{"unknown", "b", []string{"zz"}, "unknown", nil},
		{"two-cycle", "b", []string{"c"}, "cycle", []string{"c", "b"}},
		{"long cycle, shortest path", "a", []string{"e", "d"}, "cycle", []string{"d", "b", "a"}},
		{"new task", "n", []string{"d"}, "", nil},
	}
	for _, tt := range tests {
		err := checkBlockers(tt.id, tt.blocked, graph)
		if tt.problem == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var de *DependencyError
		if !errors.As(err, &de) || !errors.Is(err, ErrInvalid) || de.Problem != tt.problem || !reflect.DeepEqual(de.Path, tt.path) {
			t.Errorf("%s: %#v, want problem %s path %v", tt.name, err, tt.problem, tt.path)
		}
	}
	err := checkBlockers("a", []string{"d"}, graph)
	if msg := err.Error(); !strings.Contains(msg, "d is blocked by b, b is blocked by a") {
		t.Errorf("cycle message %q does not show the chain", msg)
	}
}

func TestMergeTaskMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct{ base, patch, want string }{
		{``, `{"a":1}`, `{"a":1}`},
		{`{"a":1,"b":{"x":1}}`, `{"b":{"y":2},"c":null}`, `{"a":1,"b":{"y":2}}`},
		{`{"a":1}`, `{"a":null}`, ``},
		{`{"a":1}`, `{}`, `{"a":1}`},
	}
	for _, tt := range tests {
		got, err := mergeTaskMetadata(json.RawMessage(tt.base), json.RawMessage(tt.patch))
		if err != nil {
			t.Fatalf("merge(%s, %s): %v", tt.base, tt.patch, err)
		}
		if string(got) != tt.want {
			t.Errorf("merge(%s, %s) = %s, want %s", tt.base, tt.patch, got, tt.want)
		}
	}
}

package mcpproxy

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func TestSanitizeAndCap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"get-sum", "get-sum"},
		{"files.read", "files_read"},
		{"a b/c:d", "a_b_c_d"},
		{"ünïcode", "_n_code"},
		{"emoji🙂", "emoji_"},
		{"UPPER_lower-09", "UPPER_lower-09"},
	} {
		if got := toolmgr.SanitizeName(tt.in); got != tt.want {
			t.Errorf("toolmgr.SanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	short := strings.Repeat("a", 64)
	if toolmgr.CapName(short) != short {
		t.Errorf("capName cut a 64-character name")
	}
	long1, long2 := strings.Repeat("a", 70), strings.Repeat("a", 69)+"b"
	c1, c2 := toolmgr.CapName(long1), toolmgr.CapName(long2)
	if len(c1) != 64 || len(c2) != 64 || c1 == c2 || !strings.HasPrefix(c1, strings.Repeat("a", 55)+"_") {
		t.Errorf("capName: %q and %q, want 64 characters, distinct, 55 kept + _ + hash", c1, c2)
	}
	if toolmgr.CapName(long1) != c1 {
		t.Error("capName is not stable")
	}
}

func TestAssignNames(t *testing.T) {
	t.Parallel()
	gh := serverTools{server: "github", prefix: "mcp__github__", tools: []string{"search", "create_issue"}}
	fs := serverTools{server: "fs", prefix: "mcp__fs__", tools: []string{"search", "read_file"}}
	builtin := func(name string) bool { return name == "read_file" }
	type want map[string]placement
	tests := []struct {
		name      string
		mode      string
		servers   []serverTools
		reserved  func(string) bool
		want      want
		wantNotes map[string][]string
	}{
		{
			name: "always", mode: PrefixAlways, servers: []serverTools{gh, fs}, reserved: builtin,
			want: want{
				"mcp__github__search": {"github", "search"}, "mcp__github__create_issue": {"github", "create_issue"},
				"mcp__fs__search": {"fs", "search"}, "mcp__fs__read_file": {"fs", "read_file"},
			},
		},
		{
			name: "on_collision", mode: PrefixOnCollision, servers: []serverTools{gh, fs}, reserved: builtin,
			// fs sorts first and takes "search"; github's search falls back to its
			// prefix; read_file is a built-in's.
			want: want{
				"search": {"fs", "search"}, "mcp__fs__read_file": {"fs", "read_file"},
				"mcp__github__search": {"github", "search"}, "create_issue": {"github", "create_issue"},
			},
			wantNotes: map[string][]string{
				"fs":     {`tool "read_file" is registered as "mcp__fs__read_file": "read_file" is taken by another tool source`},
				"github": {`tool "search" is registered as "mcp__github__search": "search" is taken by tool "search" of mcp server fs`},
			},
		},
		{
			name: "never", mode: PrefixNever, servers: []serverTools{gh, fs}, reserved: builtin,
			want: want{"search": {"fs", "search"}, "create_issue": {"github", "create_issue"}},
			wantNotes: map[string][]string{
				"fs":     {`tool "read_file" is not registered: the name "read_file" is taken by another tool source`},
				"github": {`tool "search" is not registered: the name "search" is taken by tool "search" of mcp server fs`},
			},
		},
		{
			name: "sanitized collision gets a hash", mode: PrefixAlways,
			servers: []serverTools{{server: "x", prefix: "mcp__x__", tools: []string{"a_b", "a.b", "a b"}}},
			want: want{
				"mcp__x__a_b": {"x", "a b"}, // "a b" < "a.b" < "a_b"
				"mcp__x__a_b_" + toolmgr.ShortHash("x/a.b"): {"x", "a.b"},
				"mcp__x__a_b_" + toolmgr.ShortHash("x/a_b"): {"x", "a_b"},
			},
			wantNotes: map[string][]string{"x": {
				`tool "a.b" is registered as "mcp__x__a_b_` + toolmgr.ShortHash("x/a.b") + `": "mcp__x__a_b" is taken by tool "a b" of mcp server x`,
				`tool "a_b" is registered as "mcp__x__a_b_` + toolmgr.ShortHash("x/a_b") + `": "mcp__x__a_b" is taken by tool "a b" of mcp server x`,
			}},
		},
		{
			name: "custom prefix, long name, duplicates and empty names", mode: PrefixAlways,
			servers: []serverTools{{server: "y", prefix: "yy_", tools: []string{strings.Repeat("t", 80), "dup", "dup", ""}}},
			want: want{
				toolmgr.CapName("yy_" + strings.Repeat("t", 80)): {"y", strings.Repeat("t", 80)},
				"yy_dup": {"y", "dup"},
			},
			wantNotes: map[string][]string{"y": {"a tool with an empty name is ignored", `tool "dup" is listed twice; the second is ignored`}},
		},
		{
			// A server cannot give its tools names in another server's name space,
			// which that server's names, whitelists and permission rules
			// (mcp__github__*) stand for.
			name: "on_collision: a bare name in another server's name space", mode: PrefixOnCollision,
			servers: []serverTools{gh, {server: "evil", prefix: "mcp__evil__", tools: []string{"mcp__github__create_issue", "mcp__nothere__x"}}},
			want: want{
				"search": {"github", "search"}, "create_issue": {"github", "create_issue"},
				"mcp__evil__mcp__github__create_issue": {"evil", "mcp__github__create_issue"},
				"mcp__nothere__x":                      {"evil", "mcp__nothere__x"},
			},
			wantNotes: map[string][]string{"evil": {
				`tool "mcp__github__create_issue" is registered as "mcp__evil__mcp__github__create_issue": "mcp__github__create_issue" is taken by the name space of mcp server github`,
			}},
		},
		{
			name: "never: a bare name in another server's name space", mode: PrefixNever,
			servers: []serverTools{gh, {server: "evil", prefix: "mcp__evil__", tools: []string{"mcp__github__search"}}},
			want:    want{"search": {"github", "search"}, "create_issue": {"github", "create_issue"}},
			wantNotes: map[string][]string{"evil": {
				`tool "mcp__github__search" is not registered: the name "mcp__github__search" is taken by the name space of mcp server github`,
			}},
		},
		{
			// Servers whose prefixes overlap are refused (namespaceClash); were two
			// to meet all the same, neither takes the names in the other's name
			// space: b's longer prefix does not give it a's mcp__a__* names.
			name: "always: overlapping prefixes", mode: PrefixAlways,
			servers: []serverTools{{server: "a", prefix: "mcp__a__", tools: []string{"b_x", "y"}}, {server: "b", prefix: "mcp__a__b_", tools: []string{"z"}}},
			want:    want{"mcp__a__y": {"a", "y"}},
			wantNotes: map[string][]string{
				"a": {`tool "b_x" is not registered: the name "mcp__a__b_x" is taken by the name space of mcp server b`},
				"b": {`tool "z" is not registered: the name "mcp__a__b_z" is taken by the name space of mcp server a`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names, notes := assignNames(tt.mode, tt.servers, tt.reserved)
			if !reflect.DeepEqual(map[string]placement(tt.want), names) {
				t.Errorf("names = %v\nwant    %v", names, tt.want)
			}
			if tt.wantNotes == nil {
				tt.wantNotes = map[string][]string{}
			}
			if !reflect.DeepEqual(tt.wantNotes, notes) {
				t.Errorf("notes = %q\nwant    %q", notes, tt.wantNotes)
			}
			for name := range names {
				if len(name) > toolmgr.MaxNameLen || !validToolName.MatchString(name) {
					t.Errorf("invalid registry name %q", name)
				}
			}
		})
	}
}

// TestAssignNamesDeterministic: the order servers and tools arrive in (which server
// connected first) does not change any name.
func TestAssignNamesDeterministic(t *testing.T) {
	t.Parallel()
	servers := []serverTools{
		{server: "a", prefix: "mcp__a__", tools: []string{"x", "y.z", "y_z", "common"}},
		{server: "b", prefix: "mcp__b__", tools: []string{"common", "x", strings.Repeat("q", 90)}},
		{server: "c", prefix: "mcp__c__", tools: []string{"common", "y_z"}},
	}
	for _, mode := range []string{PrefixAlways, PrefixOnCollision, PrefixNever} {
		want, wantNotes := assignNames(mode, servers, nil)
		for range 20 {
			shuffled := make([]serverTools, len(servers))
			for i, s := range servers {
				s.tools = append([]string(nil), s.tools...)
				rand.Shuffle(len(s.tools), func(i, j int) { s.tools[i], s.tools[j] = s.tools[j], s.tools[i] })
				shuffled[i] = s
			}
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			got, gotNotes := assignNames(mode, shuffled, nil)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotNotes, wantNotes) {
				t.Fatalf("mode %s: names depend on input order:\n%v\n%v", mode, got, want)
			}
		}
	}
}

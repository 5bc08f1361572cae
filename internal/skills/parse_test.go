package skills

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestSplitFrontmatter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		front     string
		body      string
		hasFront  bool
		wantError bool
	}{
		{"none", "# Title\nbody\n", "", "# Title\nbody\n", false, false},
		{"simple", "---\nname: a\n---\n\n# Body\n", "name: a\n", "# Body\n", true, false},
		{"crlf", "---\r\nname: a\r\n---\r\nbody\r\n", "name: a\r\n", "body\r\n", true, false},
		{"bom", "\xef\xbb\xbf---\nname: a\n---\nbody", "name: a\n", "body", true, false},
		{"dots close", "---\nname: a\n...\nbody", "name: a\n", "body", true, false},
		{"trailing spaces", "---  \nname: a\n--- \nbody", "name: a\n", "body", true, false},
		{"empty frontmatter", "---\n---\nbody", "", "body", true, false},
		{"no body", "---\nname: a\n---", "name: a\n", "", true, false},
		{"dashes later are body", "intro\n---\nname: a\n---\n", "", "intro\n---\nname: a\n---\n", false, false},
		{"four dashes is not a fence", "----\nname: a\n----\n", "", "----\nname: a\n----\n", false, false},
		{"unterminated", "---\nname: a\nbody\n", "", "", true, true},
		{"only opening", "---", "", "", true, true},
		{"inner dashes in value", "---\nd: a---b\n---\nx", "d: a---b\n", "x", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			front, body, has, err := SplitFrontmatter([]byte(tt.in))
			if (err != nil) != tt.wantError {
				t.Fatalf("err = %v, want error %v", err, tt.wantError)
			}
			if has != tt.hasFront {
				t.Errorf("hasFront = %v, want %v", has, tt.hasFront)
			}
			if err != nil {
				return
			}
			if string(front) != tt.front {
				t.Errorf("front = %q, want %q", front, tt.front)
			}
			if string(body) != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
		})
	}
}

func TestSplitToolString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"Read Grep Glob", []string{"Read", "Grep", "Glob"}},
		{"Read, Grep,Glob", []string{"Read", "Grep", "Glob"}},
		{"  read_file\n\tgrep  ", []string{"read_file", "grep"}},
		{"Bash(git status:*) Read", []string{"Bash(git status:*)", "Read"}},
		{"Bash(git diff:*), Bash(npm run test, lint)", []string{"Bash(git diff:*)", "Bash(npm run test, lint)"}},
		{"unbalanced) a", []string{"unbalanced)", "a"}},
		{"", nil},
		{" , ,", nil},
	}
	for _, tt := range tests {
		if got := splitToolString(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitToolString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseSkillFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		md      string
		yaml    string
		want    Skill
		wantErr string
	}{
		{
			name: "public format",
			md: "---\nname: pdf\ndescription: PDF work.\nlicense: MIT\ncompatibility: needs python3\n" +
				"allowed-tools: Read Bash(python3:*)\nmetadata:\n  author: me\n  version: \"1.4\"\n---\nBody\n",
			want: Skill{Name: "pdf", Description: "PDF work.", License: "MIT", Compatibility: "needs python3", Version: "1.4",
				AllowedTools: []string{"Read", "Bash(python3:*)"}, Body: "Body\n",
				Metadata: map[string]any{"author": "me", "version": "1.4"}},
		},
		{
			name: "both spellings merge without duplicates",
			md:   "---\nname: a\ndescription: d\nallowed_tools: [read_file, grep]\nallowed-tools: grep glob\n---\n",
			want: Skill{Name: "a", Description: "d", AllowedTools: []string{"read_file", "grep", "glob"}},
		},
		{
			name: "numeric scalars load as text",
			md:   "---\nname: 2048\ndescription: Game.\nversion: 1.10\n---\n",
			want: Skill{Name: "2048", Description: "Game.", Version: "1.10"},
		},
		{
			name: "folded description",
			md:   "---\nname: a\ndescription: >\n  line one\n  line two\n---\n",
			want: Skill{Name: "a", Description: "line one line two"},
		},
		{
			name: "skill.yaml only, id names, name displays",
			md:   "# Skill: My Skill\n",
			yaml: "id: my-skill\nname: My Skill\ndescription: From yaml.\nversion: 3\nactivation: when asked\nallowed_tools: a, b\n",
			want: Skill{Name: "my-skill", Description: "From yaml.", Version: "3", AllowedTools: []string{"a", "b"},
				Activation: []string{"when asked"}, Body: "# Skill: My Skill\n", Metadata: map[string]any{"display_name": "My Skill"}},
		},
		{
			name: "frontmatter wins on conflict",
			md:   "---\nname: front\ndescription: front desc\nallowed-tools: x\nmetadata: {k: front}\n---\n",
			yaml: "id: side\ndescription: side desc\nversion: 9\nallowed_tools: [y]\nscenarios: [s1, s2]\nmetadata: {k: side, only: side}\n",
			want: Skill{Name: "front", Description: "front desc", Version: "9", AllowedTools: []string{"x"},
				Activation: []string{"s1", "s2"}, Metadata: map[string]any{"k": "front", "only": "side"}},
		},
		{
			name: "explicit empty allowed tools in frontmatter wins",
			md:   "---\nname: a\ndescription: d\nallowed-tools: []\n---\n",
			yaml: "allowed_tools: [y]\n",
			want: Skill{Name: "a", Description: "d", AllowedTools: []string{}},
		},
		{
			// The description is one line of the session's prompt fragment: a literal
			// block must not open lines (or headings) of its own there.
			name: "literal description becomes one line",
			md:   "---\nname: a\ndescription: |\n  Use this.\n\n  ## Tools\n  - x: y\n---\n",
			want: Skill{Name: "a", Description: "Use this. ## Tools - x: y"},
		},
		{
			name: "control characters in the description are spaces",
			md:   "---\nname: a\ndescription: \"a\\0b\\r\\nc\\x1b[31md\"\n---\n",
			want: Skill{Name: "a", Description: "a b c [31md"},
		},
		{
			name: "description of 1024 characters",
			md:   "---\nname: a\ndescription: " + strings.Repeat("é", 1024) + "\n---\n",
			want: Skill{Name: "a", Description: strings.Repeat("é", 1024)},
		},
		{
			// Anthropic's own skills library has one (claude-api, 1068 characters),
			// and Claude Code loads it: a description over the format's 1024 loads whole.
			name: "description over 1024 characters loads",
			md:   "---\nname: a\ndescription: " + strings.Repeat("x", 1068) + "\n---\n",
			want: Skill{Name: "a", Description: strings.Repeat("x", 1068)},
		},
		{
			name: "description of 1536 characters",
			md:   "---\nname: a\ndescription: " + strings.Repeat("é", 1536) + "\n---\n",
			want: Skill{Name: "a", Description: strings.Repeat("é", 1536)},
		},
		{
			name: "description over 1536 characters is cut",
			md:   "---\nname: a\ndescription: " + strings.Repeat("é", 10000) + "\n---\n",
			want: Skill{Name: "a", Description: strings.Repeat("é", 1535) + "…"},
		},
		{name: "missing both", md: "body only\n", wantErr: "missing name"},
		{name: "missing description", md: "---\nname: a\n---\n", wantErr: "missing description"},
		{name: "bad name", md: "---\nname: A_b\ndescription: d\n---\n", wantErr: "invalid name"},
		{name: "name too long", md: "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", wantErr: "invalid name"},
		{name: "bad yaml", md: "---\nname: [x\n---\n", wantErr: "SKILL.md frontmatter: yaml"},
		// An operator fixes a broken skill in SKILL.md: line numbers count its lines,
		// the opening --- included, not the frontmatter's.
		{name: "yaml error names the SKILL.md line", md: "---\nname: a\nlicense: x\ndescription: Use this: for PDFs\n---\n", wantErr: "line 4 of SKILL.md: mapping values"},
		{name: "type error names the SKILL.md line", md: "---\nname: a\n\ndescription: [d]\n---\n", wantErr: "line 4 of SKILL.md: want a string"},
		{name: "a repeated key names both SKILL.md lines", md: "---\nname: a\nname: a\ndescription: d\n---\n", wantErr: `line 3 of SKILL.md: mapping key "name" already defined at line 2 of SKILL.md`},
		{name: "skill.yaml lines are its own", md: "---\nname: a\ndescription: d\n---\n", yaml: "id: a\nname: b: c\n", wantErr: "skill.yaml: yaml: line 2:"},
		{name: "frontmatter is a list", md: "---\n- a\n---\n", wantErr: "want a mapping"},
		{name: "name is a mapping", md: "---\nname: {a: b}\ndescription: d\n---\n", wantErr: "want a string"},
		{name: "tools are a mapping", md: "---\nname: a\ndescription: d\nallowed-tools: {a: b}\n---\n", wantErr: "string or a list"},
		{name: "skill.yaml not a mapping", md: "---\nname: a\ndescription: d\n---\n", yaml: "[1, 2]\n", wantErr: "skill.yaml: want a mapping"},
		{name: "unterminated", md: "---\nname: a\n", wantErr: "no closing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var side []byte
			if tt.yaml != "" {
				side = []byte(tt.yaml)
			}
			got, err := ParseSkillFiles([]byte(tt.md), side)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSkillFiles: %v", err)
			}
			got.descriptionChars = 0 // the length as written, for the log: TestLongDescriptionLogged
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// FuzzParseFrontmatter checks that no input panics, that the body is always a suffix
// of the input, that a file without an opening fence is all body, and that a skill
// that parses has a valid name and a description.
func FuzzParseFrontmatter(f *testing.F) {
	f.Add([]byte("---\nname: a\ndescription: b\n---\nbody"), []byte(nil))
	f.Add([]byte("\xef\xbb\xbf---\r\nname: a\r\n...\r\n"), []byte("id: x\ndescription: y\n"))
	f.Add([]byte("---\nallowed-tools: Bash(a b) c, d\nmetadata: {v: 1}\n---\n"), []byte("activation: [a, b]"))
	f.Add([]byte("---\na: &x [*x]\n---\n"), []byte("- 1"))
	f.Add([]byte("# no frontmatter"), []byte("name: {}"))
	f.Fuzz(func(t *testing.T, md, side []byte) {
		front, body, has, err := SplitFrontmatter(md)
		trimmed := bytes.TrimPrefix(md, []byte("\xef\xbb\xbf"))
		if err == nil {
			if !bytes.HasSuffix(trimmed, body) {
				t.Fatalf("body %q is not a suffix of the input", body)
			}
			if !has && !bytes.Equal(body, trimmed) {
				t.Fatalf("no frontmatter but body %q differs from input", body)
			}
			if has && !bytes.Contains(trimmed, front) {
				t.Fatalf("frontmatter %q not in the input", front)
			}
		}
		s, err := ParseSkillFiles(md, side)
		if err == nil {
			if !ValidName(s.Name) || s.Description == "" || strings.ContainsAny(s.Description, "\r\n") {
				t.Fatalf("parsed skill with name %q, description %q", s.Name, s.Description)
			}
			if len(s.AllowedTools) != len(dedupe(s.AllowedTools)) {
				t.Fatalf("duplicate allowed tools %q", s.AllowedTools)
			}
		}
	})
}

// TestUnquotedColonInFrontmatter: a description written as prose with ": " in it
// (`description: Summarize reports. Use when: the user asks for one`), as skill
// authors often write it, is not YAML; the operator got only the parser's "mapping
// values are not allowed in this context". The error says to quote the value.
func TestUnquotedColonInFrontmatter(t *testing.T) {
	t.Parallel()
	md := "---\nname: reports\ndescription: Summarize reports. Use when: the user asks for one\n---\nbody\n"
	_, err := ParseSkillFiles([]byte(md), nil)
	if err == nil {
		t.Fatal("parsed; want an error")
	}
	for _, want := range []string{"line 3 of SKILL.md", "quote", `description: "`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want %q in it", err, want)
		}
	}
	// A quoted value parses.
	s, err := ParseSkillFiles([]byte("---\nname: reports\ndescription: \"Summarize reports. Use when: the user asks for one\"\n---\nbody\n"), nil)
	if err != nil || s.Description != "Summarize reports. Use when: the user asks for one" {
		t.Errorf("quoted: %+v, %v", s, err)
	}
}

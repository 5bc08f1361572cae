package skills

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/jsontext"
)

// MaxDescriptionChars is the longest description the public Agent Skills format
// allows. A longer one still loads (Anthropic's own skills library has one, and
// Claude Code loads it) and is logged; past KeptDescriptionChars it is cut.
const MaxDescriptionChars = 1024

// KeptDescriptionChars is the most of a description kept: what Claude Code shows a
// model of one. The prompt fragment shows at most 250 of them; the skill tool's
// query answer and GET /v1/skills show it whole, so a 60 KiB description would
// otherwise grow those.
const KeptDescriptionChars = 1536

// maxFrontmatterBytes bounds the YAML parsed from SKILL.md or skill.yaml; both hold a
// few fields, and the bound keeps a hostile file from costing much.
const maxFrontmatterBytes = 64 << 10

// SplitFrontmatter separates SKILL.md into its YAML frontmatter and its body. The
// frontmatter opens with a first line of "---" (after an optional UTF-8 byte order
// mark) and closes with the next line that is "---" or "..."; trailing spaces and CRLF
// line ends are accepted. A file whose first line is not "---" has no frontmatter and
// is all body. An opening line without a closing one is an error. The body is returned
// without the blank lines that separate it from the frontmatter.
func SplitFrontmatter(src []byte) (front, body []byte, hasFront bool, err error) {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	line, rest, _ := cutLine(src)
	if !isFence(line, false) {
		return nil, src, false, nil
	}
	start := len(src) - len(rest)
	for pos := start; pos < len(src); {
		l, r, _ := cutLine(src[pos:])
		if isFence(l, true) {
			return src[start:pos], bytes.TrimLeft(r, "\r\n"), true, nil
		}
		pos = len(src) - len(r)
	}
	return nil, nil, true, errors.New("SKILL.md frontmatter: no closing --- line")
}

func cutLine(b []byte) (line, rest []byte, found bool) {
	line, rest, found = bytes.Cut(b, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), rest, found
}

func isFence(line []byte, closing bool) bool {
	l := bytes.TrimRight(line, " \t")
	return string(l) == "---" || closing && string(l) == "..."
}

// meta is what SKILL.md frontmatter and skill.yaml may say. Fields are pointers or
// nil-able so that "not given" differs from "given empty" when the two are merged.
type meta struct {
	ID            *scalar        `yaml:"id"`
	Name          *scalar        `yaml:"name"`
	Description   *scalar        `yaml:"description"`
	Version       *scalar        `yaml:"version"`
	License       *scalar        `yaml:"license"`
	Compatibility *scalar        `yaml:"compatibility"`
	AllowedTools  *toolList      `yaml:"allowed_tools"`
	AllowedTools2 *toolList      `yaml:"allowed-tools"`
	Activation    *textList      `yaml:"activation"`
	Scenarios     *textList      `yaml:"scenarios"`
	Metadata      map[string]any `yaml:"metadata"`
	// ManualOnly is Claude Code's disable-model-invocation.
	ManualOnly *scalar `yaml:"disable-model-invocation"`
}

// scalar accepts any YAML scalar as text, so `version: 1.0` or `name: 2048` load
// rather than fail on a type mismatch.
type scalar string

func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a string", n.Line)
	}
	if n.Tag == "!!null" {
		*s = ""
		return nil
	}
	*s = scalar(strings.TrimSpace(n.Value))
	return nil
}

func (s *scalar) String() string {
	if s == nil {
		return ""
	}
	return string(*s)
}

// toolList is a list of names written either as a YAML sequence or as one string
// separated by spaces and/or commas (the public format's "Read Grep" or Claude
// Code's "Read, Grep"). Parentheses group: "Bash(git status:*) Read" is two entries.
type toolList []string

func (t *toolList) UnmarshalYAML(n *yaml.Node) error {
	var out []string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!null" {
			out = splitToolString(n.Value)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: list items must be strings", item.Line)
			}
			if v := strings.TrimSpace(item.Value); v != "" {
				out = append(out, v)
			}
		}
	default:
		return fmt.Errorf("line %d: want a string or a list of strings", n.Line)
	}
	*t = dedupe(out)
	return nil
}

// textList is a list of sentences: a YAML sequence, or one string as one item.
type textList []string

func (t *textList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*t = nil
		if v := strings.TrimSpace(n.Value); v != "" && n.Tag != "!!null" {
			*t = textList{v}
		}
		return nil
	}
	var l toolList
	if err := l.UnmarshalYAML(n); err != nil {
		return err
	}
	*t = textList(l)
	return nil
}

// splitToolString splits on whitespace and commas outside parentheses.
func splitToolString(s string) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if v := strings.TrimSpace(cur.String()); v != "" {
			out = append(out, v)
		}
		cur.Reset()
	}
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			flush()
			continue
		}
		cur.WriteRune(r)
	}
	flush()
	return out
}

func dedupe(in []string) []string {
	out := in[:0:0]
	seen := make(map[string]bool, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// parseMeta decodes one YAML mapping (frontmatter or skill.yaml). Empty input is an
// empty mapping; unknown keys are ignored so skills written for other tools load.
func parseMeta(src []byte, what string) (meta, error) {
	var m meta
	if len(src) > maxFrontmatterBytes {
		return m, fmt.Errorf("%s: more than %d bytes of YAML", what, maxFrontmatterBytes)
	}
	if len(bytes.TrimSpace(src)) == 0 {
		return m, nil
	}
	if err := notUTF8(src); err != nil {
		return m, fmt.Errorf("%s: %w", what, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return m, fmt.Errorf("%s: %w", what, err)
	}
	if len(doc.Content) == 0 {
		return m, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return m, nil
	}
	if root.Kind != yaml.MappingNode {
		return m, fmt.Errorf("%s: want a mapping of fields, got %s", what, kindName(root.Kind))
	}
	if err := root.Decode(&m); err != nil {
		return m, fmt.Errorf("%s: %w", what, err)
	}
	return m, nil
}

// notUTF8 says where src stops being UTF-8 text (a file saved as Latin-1 or
// Windows-1252 by an editor): the line, the byte and what comes before it on that
// line. The YAML parser says only "invalid trailing UTF-8 octet". nil for UTF-8.
func notUTF8(src []byte) error {
	if utf8.Valid(src) {
		return nil
	}
	at := 0
	for at < len(src) {
		r, size := utf8.DecodeRune(src[at:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		at += size
	}
	line := bytes.Count(src[:at], []byte("\n")) + 1
	before := src[bytes.LastIndexByte(src[:at], '\n')+1 : at]
	if n := utf8.RuneCount(before); n > 40 {
		before = []byte(string([]rune(string(before))[n-40:]))
	}
	return fmt.Errorf("line %d: not UTF-8 text (byte 0x%02x after %q): save the file as UTF-8", line, src[at], before)
}

// utf16Text names the encoding of a file that starts with a UTF-16 byte order mark
// (what Windows editors write as "Unicode"), "" for any other.
func utf16Text(src []byte) string {
	switch {
	case bytes.HasPrefix(src, []byte{0xff, 0xfe}):
		return "UTF-16 (little-endian)"
	case bytes.HasPrefix(src, []byte{0xfe, 0xff}):
		return "UTF-16 (big-endian)"
	}
	return ""
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	default:
		return "something else"
	}
}

// tools returns the allowed tools a file gives under either spelling, nil if none.
func (m meta) tools() []string {
	if m.AllowedTools == nil && m.AllowedTools2 == nil {
		return nil
	}
	var all []string
	if m.AllowedTools != nil {
		all = append(all, *m.AllowedTools...)
	}
	if m.AllowedTools2 != nil {
		all = append(all, *m.AllowedTools2...)
	}
	if all = dedupe(all); all == nil {
		return []string{} // given, and empty: the skill expects no tools
	}
	return all
}

func (m meta) activation() []string {
	var all []string
	if m.Activation != nil {
		all = append(all, *m.Activation...)
	}
	if m.Scenarios != nil {
		all = append(all, *m.Scenarios...)
	}
	return dedupe(all)
}

// identity returns the name a file gives the skill and, for skill.yaml, a display
// name: id names the skill when present, name is then only for display.
func (m meta) identity() (name, display string) {
	if id := m.ID.String(); id != "" {
		return id, m.Name.String()
	}
	return m.Name.String(), ""
}

// buildSkill merges the SKILL.md frontmatter (front) over skill.yaml (side) and
// validates the result. side is the zero meta when there is no skill.yaml. folder is
// the name of the skill's folder ("" when unknown): a name written as a display name
// of it ("Cloudinary Automation" in cloudinary-automation/, see displayOf) names the
// skill by the folder's name and is kept as its display name.
func buildSkill(front, side meta, body []byte, folder string) (Skill, error) {
	var s Skill
	name, _ := front.identity()
	sideName, display := side.identity()
	if name == "" {
		name = sideName
	}
	if displayOf(name, folder) {
		if display == "" {
			display = name
		}
		name = folder
	}
	s.Name = name
	s.Description = oneLine(firstNonEmpty(front.Description.String(), side.Description.String()))
	s.Version = firstNonEmpty(front.Version.String(), metaString(front.Metadata, "version"),
		side.Version.String(), metaString(side.Metadata, "version"))
	s.License = firstNonEmpty(front.License.String(), side.License.String())
	s.Compatibility = firstNonEmpty(front.Compatibility.String(), side.Compatibility.String())
	if t := front.tools(); t != nil {
		s.AllowedTools = t
	} else {
		s.AllowedTools = side.tools()
	}
	// Only a true value counts: a skill whose flag cannot be read is listed, as
	// without it, rather than not loaded over an optional field.
	s.ManualOnly, _ = strconv.ParseBool(firstNonEmpty(front.ManualOnly.String(), side.ManualOnly.String()))
	s.Activation = front.activation()
	if len(s.Activation) == 0 {
		s.Activation = side.activation()
	}
	if len(s.Activation) == 0 {
		s.Activation = nil
	}
	if len(front.Metadata)+len(side.Metadata) > 0 || display != "" {
		s.Metadata = map[string]any{}
		for k, v := range side.Metadata {
			s.Metadata[k] = jsontext.FromYAML(v)
		}
		if display != "" && display != s.Name {
			s.Metadata["display_name"] = display
		}
		for k, v := range front.Metadata {
			s.Metadata[k] = jsontext.FromYAML(v)
		}
	}
	s.Body = string(body)

	var errs []error
	switch {
	case s.Name == "":
		errs = append(errs, errors.New("missing name (SKILL.md frontmatter name, or skill.yaml id or name)"))
	case !ValidName(s.Name):
		errs = append(errs, fmt.Errorf("invalid name %q: want 1 to 64 of a-z, 0-9 and -, with no - first, last or next to another", s.Name))
	}
	s.descriptionChars = utf8.RuneCountInString(s.Description)
	if s.Description == "" {
		errs = append(errs, errors.New("missing description"))
	} else if s.descriptionChars > KeptDescriptionChars {
		r := []rune(s.Description)[:KeptDescriptionChars-1]
		s.Description = strings.TrimRight(string(r), " ") + "…"
	}
	return s, errors.Join(errs...)
}

// displayOf reports whether name, not itself the folder's name, is a display name
// of it: the same letters and digits, but for case, spaces and punctuation
// ("Dynamics 365 Automation" of dynamics365-automation). Skill libraries write such
// names where the Agent Skills format wants the folder's; the folder's name, unique
// in its directory, then names the skill, and no other skill's name can take its
// place (pdf-old/ naming itself pdf is still refused).
func displayOf(name, folder string) bool {
	if name == folder || !ValidName(folder) {
		return false
	}
	key := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
				return r
			case r >= 'A' && r <= 'Z':
				return r + 'a' - 'A'
			}
			return -1
		}, s)
	}
	k := key(name)
	return k != "" && k == key(folder)
}

// oneLine joins s's words with single spaces: line breaks, tabs and control characters
// become word breaks, so a description stays one line of the prompt fragment.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

func metaString(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return strings.TrimSpace(v)
	case int, int64, float64:
		return fmt.Sprint(v)
	}
	return ""
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// yamlLineRE finds the line numbers of YAML errors ("yaml: line 3: …", "  line 3:
// cannot unmarshal …") and of the decoders here ("line 3: want a string").
var yamlLineRE = regexp.MustCompile(`(^|[\s:])line (\d+):`)

// skillMDLines makes the line numbers of an error in the frontmatter count SKILL.md's
// lines, which start one earlier (the opening ---), so that the line an operator is
// sent to is the one to fix.
func skillMDLines(msg string) string {
	msg = yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		sub := yamlLineRE.FindStringSubmatch(m)
		n, err := strconv.Atoi(sub[2])
		if err != nil {
			return m
		}
		return fmt.Sprintf("%sline %d of SKILL.md:", sub[1], n+1)
	})
	// A repeated key names its first line too ("already defined at line 1").
	return yamlAtLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(yamlAtLineRE.FindStringSubmatch(m)[1])
		if err != nil {
			return m
		}
		return fmt.Sprintf("at line %d of SKILL.md", n+1)
	})
}

var yamlAtLineRE = regexp.MustCompile(`\bat line (\d+)\b`)

// yamlFieldRE is a top-level field of the frontmatter whose plain value holds ": ".
var yamlFieldRE = regexp.MustCompile(`^([A-Za-z0-9_-]+):\s+\S.*:\s`)

// quoteHint explains YAML's "mapping values are not allowed" when the line it names
// is a field whose value is prose with ": " in it (`description: … Use when: …`), as
// skill authors often write it: such a value must be quoted. "" otherwise.
func quoteHint(msg string, front []byte) string {
	if !strings.Contains(msg, "mapping values are not allowed") {
		return ""
	}
	sub := yamlLineRE.FindStringSubmatch(msg)
	if sub == nil {
		return ""
	}
	n, err := strconv.Atoi(sub[2])
	lines := strings.Split(string(front), "\n")
	if err != nil || n < 1 || n > len(lines) {
		return ""
	}
	f := yamlFieldRE.FindStringSubmatch(strings.TrimRight(lines[n-1], "\r"))
	if f == nil {
		return ""
	}
	return fmt.Sprintf(" (the value of %s holds \": \"; quote it: %s: \"…\")", f[1], f[1])
}

// ParseSkillFiles parses SKILL.md (and skill.yaml, which may be nil) into a Skill
// without any file information. The Manager does the same for every folder, knowing
// the folder's name (parseSkillFiles).
func ParseSkillFiles(skillMD, skillYAML []byte) (Skill, error) {
	return parseSkillFiles(skillMD, skillYAML, "")
}

func parseSkillFiles(skillMD, skillYAML []byte, folder string) (Skill, error) {
	for _, f := range []struct {
		name string
		src  []byte
	}{{"SKILL.md", skillMD}, {"skill.yaml", skillYAML}} {
		if enc := utf16Text(f.src); enc != "" {
			return Skill{}, fmt.Errorf("%s is %s text (it starts with a UTF-16 byte order mark); the Agent Skills format wants UTF-8: save it as UTF-8", f.name, enc)
		}
	}
	if skillYAML == nil && len(bytes.TrimSpace(bytes.TrimPrefix(skillMD, []byte("\xef\xbb\xbf")))) == 0 {
		return Skill{}, errors.New("SKILL.md is empty: it starts with a frontmatter that gives the skill's name and description (a --- line, name: …, description: …, a --- line), then its instructions")
	}
	frontSrc, body, hasFront, err := SplitFrontmatter(skillMD)
	if err != nil {
		return Skill{}, err
	}
	front, err := parseMeta(frontSrc, "SKILL.md frontmatter")
	if err != nil {
		return Skill{}, errors.New(skillMDLines(err.Error()) + quoteHint(err.Error(), frontSrc))
	}
	var side meta
	if skillYAML != nil {
		if side, err = parseMeta(skillYAML, "skill.yaml"); err != nil {
			return Skill{}, err
		}
	}
	sk, err := buildSkill(front, side, body, folder)
	if err != nil && !hasFront && skillYAML == nil {
		// Nothing named the skill: say that SKILL.md has no frontmatter, where an
		// author who wrote one after a blank line or a heading would look for it.
		first, _, _ := cutLine(bytes.TrimPrefix(skillMD, []byte("\xef\xbb\xbf")))
		if n := utf8.RuneCount(first); n > 60 {
			first = []byte(string([]rune(string(first))[:60]) + "…")
		}
		err = fmt.Errorf("SKILL.md has no frontmatter: its first line is %q, not ---; the file starts with a --- line, name: and description:, and a --- line: %w", first, err)
	}
	return sk, err
}

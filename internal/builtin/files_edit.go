package builtin

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

type editFile struct{ fileDeps }

// editSpec is one replacement, as edit_file and each entry of multi_edit take it.
type editSpec struct {
	OldString  string  `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

type editFileArgs struct {
	Path string `json:"path"`
	editSpec
}

// editOutput is the structured result of edit_file.
type editOutput struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Lines        []int  `json:"lines"`
}

const editSchemaProps = `"old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace, including whitespace and indentation. It must occur exactly once unless replace_all is set; include surrounding lines to make it unique."},
    "new_string": {"type": "string", "description": "The text to put in its place (may be empty to delete)."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence of old_string (default false)."}`

func (t *editFile) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "edit_file",
		Label: "Edit file",
		Description: "Replace an exact string in a file. old_string must match exactly once (or set replace_all). " +
			"The file must have been read in this session (read_file) and be unchanged since; after an edit you may edit again without re-reading.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file, relative to the working directory (absolute paths must lie inside it)."},
    ` + editSchemaProps + `
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`),
		Documentation: editFileDoc,
		PromptHint: "Change files with edit_file (one exact replacement) or multi_edit (several in one file); " +
			"copy old_string exactly from read_file output, without the line-number prefix.",
		Timeout: time.Minute,
	}, false)
}

// Precheck refuses, before anyone is asked to approve it, an edit of a file that is
// missing, not text, or not read as it is now, and one that cannot apply (old_string
// not found, or found more than once without replace_all) (tool.Prechecker).
func (t *editFile) Precheck(ctx *tool.Context, raw json.RawMessage) error {
	var args editFileArgs
	if err := decodeArgs(raw, &args); err != nil || args.editSpec.invalid() != "" {
		return nil // Run says what is wrong with the arguments
	}
	return precheckFile(t.fileDeps, ctx, args.Path, func(w *fileRoot, tg fileTarget, guard *fileGuard) error {
		data, _, err := w.loadForEdit(tg, guard, "edit_file")
		if err != nil {
			return err
		}
		if _, reason := applyEdit(string(data), args.editSpec); reason != "" {
			return tool.Errorf(tool.KindInvalidArgs, "%s: %s Nothing was written.", tg.show(), reason)
		}
		return nil
	})
}

func (t *editFile) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args editFileArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	if reason := args.editSpec.invalid(); reason != "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "%s", reason)
	}
	w, tg, guard, err := openFile(t.fileDeps, ctx, args.Path)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	data, fi, err := w.loadForEdit(tg, guard, "edit_file")
	if err != nil {
		return nil, err
	}
	out, reason := applyEdit(string(data), args.editSpec)
	if reason != "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "%s: %s Nothing was written.", tg.show(), reason)
	}
	if err := w.commit(ctx, guard, tg, []byte(out.text), fi.Mode(), false); err != nil {
		return nil, err
	}
	var b strings.Builder
	if out.count == 1 {
		fmt.Fprintf(&b, "Edited %s: replaced 1 occurrence at line %d.", tg.show(), out.lines[0])
		if snip := editSnippet(out.text, out.lines[0], out.lines[0]+strings.Count(out.newText, "\n")); snip != "" {
			b.WriteString(" The changed region now reads:\n" + snip)
		}
	} else {
		fmt.Fprintf(&b, "Edited %s: replaced %d occurrences (at lines %s of the old text).", tg.show(), out.count, listLines(out.spots, out.more))
	}
	return fileResult(strings.TrimRight(b.String(), "\n"), editOutput{Path: tg.show(), Replacements: out.count, Lines: out.lines}, nil)
}

// invalid says what is wrong with an edit on its own, "" when nothing is.
func (e editSpec) invalid() string {
	switch {
	case e.NewString == nil:
		return "new_string is required (use \"\" to delete old_string)"
	case e.OldString == "":
		return "old_string is empty; to create or overwrite a whole file use write_file, to insert text include a neighbouring line in both old_string and new_string"
	case e.OldString == *e.NewString:
		return "old_string and new_string are identical; there is nothing to change"
	}
	return ""
}

// editResult is what applying one edit to a text produced.
type editResult struct {
	text    string // the text after the edit
	count   int    // replacements made
	lines   []int  // the line (from 1) where each replacement starts, in the text before (at most maxListedLines)
	spots   []lineMatches
	more    int    // lines with replacements beyond spots
	newText string // new_string as inserted (line endings adapted)
}

// maxListedLines bounds the line numbers kept per edit.
const maxListedLines = 50

// applyEdit replaces e.OldString in text. It fails (reason != "") when old_string occurs
// never, or more than once without replace_all. When old_string spans lines written
// with "\n" and the text uses "\r\n", the edit is retried with "\r\n" line endings in
// both strings, so models need not reproduce carriage returns they cannot see.
func applyEdit(text string, e editSpec) (editResult, string) {
	oldS, newS := e.OldString, *e.NewString
	n := strings.Count(text, oldS)
	if n == 0 && strings.Contains(oldS, "\n") && !strings.Contains(oldS, "\r") && strings.Contains(text, "\r\n") {
		crlf := strings.ReplaceAll(oldS, "\n", "\r\n")
		if c := strings.Count(text, crlf); c > 0 {
			oldS, newS, n = crlf, strings.ReplaceAll(newS, "\n", "\r\n"), c
		}
	}
	if n == 0 {
		return editResult{}, notFoundReason(text, e.OldString)
	}
	lines, spots, more := matchSpots(text, oldS)
	if n > 1 && !e.ReplaceAll {
		return editResult{}, fmt.Sprintf("old_string matches %d times (at lines %s); include more of the surrounding text to make it unique, or set replace_all to replace every occurrence.",
			n, listLines(spots, more))
	}
	// Checked before building it: replace_all of one character, or edits that each
	// double the text, would otherwise grow it beyond the daemon's memory.
	if size := int64(len(text)) + int64(n)*int64(len(newS)-len(oldS)); size > maxTextFile {
		return editResult{}, fmt.Sprintf("the result would be %s, larger than the %s this tool handles.", overText(size, maxTextFile), sizeText(maxTextFile))
	}
	return editResult{text: strings.Replace(text, oldS, newS, n), count: n, lines: lines, spots: spots, more: more, newText: newS}, ""
}

// lineMatches is how many occurrences start on one line.
type lineMatches struct{ line, n int }

// maxSpotLines bounds the lines a message lists occurrences on.
const maxSpotLines = 10

// matchSpots is where the (non-overlapping) occurrences of s in text start: lines,
// the line of each, at most maxListedLines of them (for the structured output);
// spots, the first maxSpotLines distinct lines with how many start on each; and
// more, how many other lines have some. A minified file may hold thousands on one
// line, which a list of one number per occurrence showed as "1, 1, 1, …".
func matchSpots(text, s string) (lines []int, spots []lineMatches, more int) {
	line, pos := 1, 0
	last := 0
	for {
		i := strings.Index(text[pos:], s)
		if i < 0 {
			break
		}
		line += strings.Count(text[pos:pos+i], "\n")
		if len(lines) < maxListedLines {
			lines = append(lines, line)
		}
		switch {
		case line == last && more == 0:
			spots[len(spots)-1].n++
		case line == last:
		case len(spots) < maxSpotLines:
			spots = append(spots, lineMatches{line: line, n: 1})
		default:
			more++
		}
		last = line
		line += strings.Count(s, "\n")
		pos += i + len(s)
	}
	return lines, spots, more
}

// listLines words spots and more (matchSpots): "1 (2000 times), 3 (2 times)",
// "1, 2, 3 and 20 more lines".
func listLines(spots []lineMatches, more int) string {
	parts := make([]string, 0, len(spots))
	for _, sp := range spots {
		if sp.n == 1 {
			parts = append(parts, fmt.Sprint(sp.line))
		} else {
			parts = append(parts, fmt.Sprintf("%d (%d times)", sp.line, sp.n))
		}
	}
	text := strings.Join(parts, ", ")
	if more > 0 {
		text += " and " + countOf(more, "more line", "more lines")
	}
	return text
}

// notFoundReason explains a missing old_string and points at the line that looks most
// like its first non-blank line.
func notFoundReason(text, old string) string {
	msg := "old_string was not found in the file."
	if bare, prefix, ok := withoutLineNumbers(old, strings.Count(text, "\n")+1); ok {
		// Copied from read_file's output with its numbers: saying which line looks
		// alike would send the model to read the file again and copy it the same way.
		msg += fmt.Sprintf(" Its lines begin with read_file's line-number prefix (%q), which is not part of the file; leave the prefixes out of old_string and new_string.", prefix)
		find := bare
		if !strings.Contains(text, find) && strings.Contains(text, "\r\n") {
			find = strings.ReplaceAll(bare, "\n", "\r\n") // as applyEdit retries it
		}
		_, spots, more := matchSpots(text, find)
		switch n := strings.Count(text, find); {
		case n == 1:
			return msg + fmt.Sprintf(" Without them it occurs once, at line %d.", spots[0].line)
		case n > 1:
			return msg + fmt.Sprintf(" Without them it occurs %d times (at lines %s).", n, listLines(spots, more))
		}
		return notFoundHint(msg, text, bare)
	}
	return notFoundHint(msg, text, old)
}

// readFileNumber is the line-number prefix read_file puts before each line: the
// number right-aligned in six columns, then a tab.
var readFileNumber = regexp.MustCompile(`^(?: {5}[0-9]| {4}[0-9]{2}| {3}[0-9]{3}| {2}[0-9]{4}| [0-9]{5}|[0-9]{6,})\t`)

// withoutLineNumbers is old without read_file's line-number prefixes, and the first
// of them, when its lines begin with such prefixes numbered one after the other (an
// empty line may have lost its prefix) within the file's lines (1 to last); text
// that merely starts with a number and a tab, as a TSV row does (ids of six digits
// and more read as the numbers of far lines), is left alone.
func withoutLineNumbers(old string, last int) (bare, prefix string, ok bool) {
	lines := strings.Split(old, "\n")
	next := -1
	for i, l := range lines {
		if l == "" && next >= 0 {
			next++
			continue
		}
		loc := readFileNumber.FindStringIndex(l)
		if loc == nil {
			return "", "", false
		}
		n, err := strconv.Atoi(strings.TrimSpace(l[:loc[1]-1]))
		if err != nil || n < 1 || n > last || (next >= 0 && n != next) {
			return "", "", false
		}
		if prefix == "" {
			prefix = l[:loc[1]]
		}
		lines[i], next = l[loc[1]:], n+1
	}
	return strings.Join(lines, "\n"), prefix, prefix != ""
}

// notFoundHint adds to msg the line of text that looks most like old's first line.
func notFoundHint(msg, text, old string) string {
	var first string
	for _, l := range strings.Split(old, "\n") {
		if first = strings.TrimSpace(l); first != "" {
			break
		}
	}
	if first == "" {
		return msg + " It contains only whitespace; include some visible text."
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == first {
			return msg + fmt.Sprintf(" Line %d matches its first line apart from whitespace: %q. Copy the text exactly (indentation, tabs versus spaces, trailing spaces), without read_file's line-number prefix.",
				i+1, clipText(l, 200))
		}
	}
	best, score := -1, 0.0
	want := bigrams(first)
	for i, l := range lines {
		if i >= 200000 {
			break
		}
		l = strings.TrimSpace(l)
		if len(l) < len(first)/3 || len(l) > 3*len(first)+10 {
			continue
		}
		if s := dice(want, l); s > score {
			best, score = i, s
		}
	}
	if best >= 0 && score >= 0.5 {
		return msg + fmt.Sprintf(" The most similar line is %d: %q. Read the file again if it may have changed.", best+1, clipText(lines[best], 200))
	}
	return msg + " No line resembles its first line; read the file again to see its current content."
}

// bigrams counts the character pairs of s.
func bigrams(s string) map[[2]rune]int {
	m := map[[2]rune]int{}
	r := []rune(s)
	for i := 0; i+1 < len(r); i++ {
		m[[2]rune{r[i], r[i+1]}]++
	}
	return m
}

// dice is the Sørensen–Dice similarity of the bigrams of a text (want) and s.
func dice(want map[[2]rune]int, s string) float64 {
	have := bigrams(s)
	total, common := 0, 0
	for _, n := range want {
		total += n
	}
	for k, n := range have {
		total += n
		common += min(n, want[k])
	}
	if total == 0 {
		return 0
	}
	return 2 * float64(common) / float64(total)
}

// clip shortens s to n bytes (at a character boundary) with an ellipsis.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// snippet renders lines [from-3, to+3] of text in read_file's style, at most 40 lines.
func editSnippet(text string, from, to int) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	start, end := max(1, from-3), min(len(lines), to+3, from+36)
	var b strings.Builder
	for n := start; n <= end; n++ {
		line, _ := cutLine([]byte(strings.TrimSuffix(lines[n-1], "\r")), len(strings.TrimSuffix(lines[n-1], "\r")))
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
	}
	return b.String()
}

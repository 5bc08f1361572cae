package builtin

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// asTerminalShows is command output as a terminal would leave it on screen, for the
// model: escape sequences (colours, cursor moves, erased lines, hyperlinks) removed, a
// line rewritten with carriage returns (a progress bar, a spinner) shown as its last
// rewrite, and a backspace taking back the character before it (man's overstrike).
// Output without ESC, CR or BS is returned as is. Byte offsets into the output
// (read_job_output) stay those of the raw bytes.
func asTerminalShows(s string) string {
	if !strings.ContainsAny(s, "\x1b\r\b") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for s != "" {
		line, rest, nl := strings.Cut(s, "\n")
		s = rest
		if strings.IndexByte(line, 0x1b) >= 0 {
			// Line by line: a sequence left open (an OSC without its end, in binary
			// output) takes the rest of its line at most, not the rest of the output.
			line = ansi.Strip(lineMoves.Replace(line))
		}
		b.WriteString(lastRewrite(line))
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// lineMoves turns the escape sequences progress bars rewrite a line with into what
// lastRewrite reads: moving the cursor to the first column (Node's cursorTo(0),
// ESC [ G) into a CR, and erasing to the line's end (ESC [ K) into a NUL, which
// output holds no more of (sanitize replaced them), so that a line erased after its
// last CR shows empty. Erasing the whole line, or up to the cursor (ESC [ 2 K, ESC [ 1
// K: a spinner's stop), takes what was written before it: a CR and a NUL.
var lineMoves = strings.NewReplacer("\x1b[G", "\r", "\x1b[0G", "\r", "\x1b[1G", "\r",
	"\x1b[K", "\x00", "\x1b[0K", "\x00", "\x1b[1K", "\r\x00", "\x1b[2K", "\r\x00")

// lastRewrite is what a line rewritten with CR shows at its end: the text after its
// last CR, or after the last CR that is followed by text (a line ending in CR, or CRLF,
// keeps its text; one followed by an erased line, a NUL here, shows nothing), with
// each BS taking back the character before it.
func lastRewrite(line string) string {
	if i := strings.LastIndexByte(strings.TrimRight(line, "\r"), '\r'); i >= 0 {
		line = line[i+1:]
	}
	line = strings.TrimRight(line, "\r")
	if strings.IndexByte(line, 0) >= 0 {
		line = strings.ReplaceAll(line, "\x00", "")
	}
	if strings.IndexByte(line, '\b') < 0 {
		return line
	}
	out := make([]rune, 0, len(line))
	for _, r := range line {
		if r == '\b' {
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			continue
		}
		out = append(out, r)
	}
	return string(out)
}

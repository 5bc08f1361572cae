package builtin

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/sandbox"
)

func TestAsTerminalShows(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\ntext\n", "plain\ntext\n"},
		{"\x1b[1;31merror\x1b[0m: bad\n", "error: bad\n"},
		{"Downloading  10%\rDownloading  55%\rDownloading 100%\ndone\n", "Downloading 100%\ndone\n"},
		{"Downloading 100%\x1b[2K\rDone\n", "Done\n"},
		{"windows\r\nline\r\n", "windows\nline\n"},
		{"ends in cr\r", "ends in cr"},
		{"a\r\r\n", "a\n"},
		{"spinner |\rspinner /\rspinner -", "spinner -"},
		{"N\bNA\bAM\bME\bE _\bb_\bo_\bl_\bd\n", "NAME bold\n"},
		{"\bstart\n", "start\n"},
		{"\x1b]8;;https://example.com\x07link\x1b]8;;\x07\n", "link\n"},
		{"héllo 世界\r世界 héllo\n", "世界 héllo\n"},
		{"tab\tkept\n", "tab\tkept\n"},
		{"cut escape \x1b[", "cut escape "},
		{"a\x1b]0;title never ended\nline2\nline3\n", "a\nline2\nline3\n"},
		{"a\x1bPdcs\nline2\n", "a\nline2\n"},
		{"a\x1b[12\nline2\n", "a\nline2\n"},
		{"frame1\x1b[2K\x1b[1Gframe2\x1b[2K\x1b[1Gframe3\n", "frame3\n"},
		{"spinner\x1b[G\x1b[Kdone\n", "done\n"},
		{"Downloading 100%\r\x1b[K\nnext\n", "\nnext\n"},
		{"kept\x1b[K\n", "kept\n"},
		// A spinner stopped (ora's stop(): ESC [ 2 K, then ESC [ G) leaves the line empty.
		{"\u280b Loading\x1b[2K\x1b[G\nnext\n", "\nnext\n"},
		{"frame\x1b[2K\n", "\n"},
		{"old\x1b[1K\n", "\n"},
	} {
		if got := asTerminalShows(tc.in); got != tc.want {
			t.Errorf("asTerminalShows(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzAsTerminalShows(f *testing.F) {
	f.Add("a\x1b[31mb\rc\bd\n")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // output is made valid UTF-8 first (sanitize)
		}
		got := asTerminalShows(s)
		if len(got) > len(s) || strings.Count(got, "\n") != strings.Count(s, "\n") || strings.ContainsAny(got, "\x1b\r\b") && !strings.ContainsAny(s, "\x1b") {
			t.Fatalf("asTerminalShows(%q) = %q", s, got)
		}
	})
}

// TestErasedOutputIsNotNoOutput: output whose part shown leaves nothing on a
// terminal's screen (a progress bar's CRs filling the window, a line erased) is not
// reported as no output: the model is told that something was written and erased.
func TestErasedOutputIsNotNoOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sandbox.Config{})
	sess := newSession("s1", t.TempDir())
	for _, cmd := range []string{
		`echo important; head -c 100000 /dev/zero | tr '\0' '\r'`,
		`printf 'x\033[2K'`,
	} {
		res, _ := e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": cmd})
		text := res.Text()
		if strings.Contains(text, "(no output)") || !strings.Contains(text, "(nothing visible:") {
			t.Errorf("%s:\n%s\nwant no \"(no output)\", and \"(nothing visible:\"", cmd, text)
		}
	}
	res, _ := e.call(t, context.Background(), sess, "execute_command", map[string]any{"command": "true"})
	if !strings.Contains(res.Text(), "(no output)") {
		t.Errorf("true:\n%s\nwant \"(no output)\"", res.Text())
	}
}

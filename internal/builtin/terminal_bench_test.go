package builtin

import (
	"strings"
	"testing"
)

// benchOutputs are 30000 bytes (resultBudget) of output of the kinds a command
// writes: plain lines, coloured lines, CRLF lines, and a progress bar rewritten with
// CR. BenchmarkShowRendering compares asTerminalShows with sanitize, which every
// result already pays.
func benchOutputs() map[string]string {
	fill := func(line string) string {
		return strings.Repeat(line, resultBudget/len(line))
	}
	return map[string]string{
		"plain":    fill("ok  \tgithub.com/example/pkg/sub\t0.123s\n"),
		"colour":   fill("\x1b[1;32mPASS\x1b[0m TestSomething \x1b[2m(0.01s)\x1b[0m\n"),
		"crlf":     fill("line of a windows tool's output\r\n"),
		"progress": fill("\rDownloading  42% |█████     | 4.2/10 MB"),
	}
}

func BenchmarkShowRendering(b *testing.B) {
	for name, out := range benchOutputs() {
		raw := []byte(out)
		b.Run(name+"/sanitize", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				sanitize(raw)
			}
		})
		b.Run(name+"/sanitize+asTerminalShows", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				s, _ := sanitize(raw)
				asTerminalShows(s)
			}
		})
	}
}

package tool

import (
	"math"
	"slices"
	"testing"
)

type textOnly struct{ lines []string }

func (p *textOnly) Emit(stream, text string) { p.lines = append(p.lines, stream+":"+text) }
func (p *textOnly) Close()                   {}

type numeric struct {
	textOnly
	reports [][3]any
}

func (p *numeric) Report(progress, total float64, message string) {
	p.reports = append(p.reports, [3]any{progress, total, message})
}

func TestProgressLine(t *testing.T) {
	tests := []struct {
		progress, total float64
		msg, want       string
	}{
		{1, 3, "", "1/3\n"},
		{2.5, 0, "", "2.5\n"},
		{1, 3, "copying", "copying (1/3)\n"},
		{7, 0, "copying", "copying\n"},
		{0, 0, "", "0\n"},
	}
	for _, tt := range tests {
		if got := ProgressLine(tt.progress, tt.total, tt.msg); got != tt.want {
			t.Errorf("ProgressLine(%v, %v, %q) = %q, want %q", tt.progress, tt.total, tt.msg, got, tt.want)
		}
	}
}

func TestContextReport(t *testing.T) {
	// A text-only emitter gets the line on info; bad numbers keep only the message.
	var txt textOnly
	c := &Context{Progress: &txt}
	c.Report(1, 4, "step")
	c.Report(math.NaN(), 4, "nan")
	c.Report(2, math.Inf(1), "")
	c.Report(-1, 0, "negative")
	if want := []string{"info:step (1/4)\n", "info:nan\n", "info:negative\n"}; !slices.Equal(txt.lines, want) {
		t.Fatalf("text-only emitter got %q, want %q", txt.lines, want)
	}

	// A Reporter gets the numbers (and writes its own line); bad numbers never reach it.
	var num numeric
	c = &Context{Progress: &num}
	c.Report(3, 10, "m")
	c.Report(math.Inf(-1), 0, "x")
	if len(num.reports) != 1 || num.reports[0] != [3]any{3.0, 10.0, "m"} {
		t.Fatalf("reporter got %v", num.reports)
	}
	if want := []string{"info:x\n"}; !slices.Equal(num.lines, want) {
		t.Fatalf("reporter's emitter got %q, want %q", num.lines, want)
	}

	(&Context{}).Report(1, 2, "no emitter") // must not panic
}

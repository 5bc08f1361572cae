package builtin

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/toolserverd/toolserverd/internal/sandbox"
)

const (
	// resultBudget is how many output bytes a result shows, shared by both streams;
	// the dispatcher's token budget (12000 by default) then has room for the rest.
	resultBudget = 30000
	// pumpChunk is the most bytes one progress event carries.
	pumpChunk = 32 << 10
	// pumpInterval batches output that arrives in many small writes.
	pumpInterval = 20 * time.Millisecond
)

var streams = [2]string{sandbox.Stdout, sandbox.Stderr}

// sanitize makes output safe to put in a message: invalid UTF-8 and NUL bytes (which
// some stores reject) become U+FFFD. It reports whether anything was replaced.
func sanitize(b []byte) (string, bool) {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return string(b), false
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), true
}

// incompleteTail is the length of a UTF-8 sequence cut off at the end of b (0 if none).
func incompleteTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}

// pump streams a job's new output as progress, reading the logs by byte offset so
// that nothing is lost or repeated; a UTF-8 sequence split between two reads is held
// back until it is whole.
type pump struct {
	job   *sandbox.Job
	off   [2]int64
	carry [2][]byte
	emit  func(stream, text string)
}

// follow emits output until the job is over (then everything it wrote has been
// emitted) or ctx ends.
func (p *pump) follow(ctx context.Context) {
	timer := time.NewTimer(pumpInterval)
	defer timer.Stop()
	for {
		changed := p.job.Changed()
		p.drain()
		select {
		case <-p.job.Done():
			p.drain()
			p.flush()
			return
		default:
		}
		select {
		case <-changed:
		case <-p.job.Done():
			continue
		case <-ctx.Done():
			return
		}
		timer.Reset(pumpInterval)
		select {
		case <-timer.C:
		case <-p.job.Done():
		case <-ctx.Done():
			return
		}
	}
}

func (p *pump) drain() {
	for i, stream := range streams {
		for {
			data, next, err := p.job.ReadOutputRange(stream, p.off[i], pumpChunk)
			if err != nil || len(data) == 0 {
				break
			}
			p.off[i] = next
			data = append(p.carry[i], data...)
			cut := incompleteTail(data)
			p.carry[i] = append([]byte(nil), data[len(data)-cut:]...)
			// Progress carries the exact bytes (the wire layer encodes what is not
			// UTF-8); holding back a split character keeps chunks readable as text.
			if n := len(data) - cut; n > 0 {
				p.emit(stream, string(data[:n]))
			}
		}
	}
}

// flush emits held-back bytes once no more can complete them.
func (p *pump) flush() {
	for i, stream := range streams {
		if len(p.carry[i]) > 0 {
			p.emit(stream, string(p.carry[i]))
			p.carry[i] = nil
		}
	}
}

// shown is the part of one stream a result shows.
type shown struct {
	text    string // as a terminal shows it (asTerminalShows), for the model
	raw     string // the bytes as written (made valid UTF-8), for the structured output
	from    int64  // the first byte the caller asked for
	start   int64  // the first byte shown
	end     int64  // the byte after the last one shown
	invalid bool   // bytes were replaced by U+FFFD
}

// showStream reads stream [from, end) keeping only the last budget bytes, cut at a
// line start (or at least a character start) when it has to cut: as written, and as
// a terminal shows them (asTerminalShows). The model reads the terminal's view; the
// structured output, which code reads as data (a tool_chain script splitting CRLF
// rows, a file with CR line ends), keeps the bytes.
func showStream(job *sandbox.Job, stream string, from, end int64, budget int) (shown, error) {
	s := shown{from: from, start: max(from, end-int64(budget)), end: end}
	if s.start >= end {
		s.start = end
		return s, nil
	}
	data, _, err := job.ReadOutputRange(stream, s.start, int(end-s.start))
	if err != nil {
		return s, err
	}
	if s.start > from {
		skip := 0
		for skip < 3 && skip < len(data) && !utf8.RuneStart(data[skip]) {
			skip++
		}
		if nl := bytes.IndexByte(data[:min(len(data), 512)], '\n'); nl >= 0 {
			skip = nl + 1
		}
		data = data[skip:]
		s.start += int64(skip)
	}
	s.raw, s.invalid = sanitize(data)
	s.text = asTerminalShows(s.raw)
	return s, nil
}

// splitBudget shares total between two streams of sizes a and b: each gets half,
// and what one does not need goes to the other.
func splitBudget(a, b int64, total int) (int, int) {
	half := int64(total / 2)
	switch {
	case a <= half:
		return int(a), total - int(a)
	case b <= half:
		return total - int(b), int(b)
	default:
		return int(half), int(half)
	}
}

// showOutput renders both streams of a job from the given offsets to their current
// ends, within resultBudget.
func showOutput(job *sandbox.Job, from [2]int64) ([2]shown, error) {
	var end [2]int64
	for i, stream := range streams {
		end[i] = job.Size(stream)
	}
	ba, bb := splitBudget(end[0]-from[0], end[1]-from[1], resultBudget)
	var out [2]shown
	var err error
	for i, budget := range []int{ba, bb} {
		if out[i], err = showStream(job, streams[i], from[i], end[i], budget); err != nil {
			return out, err
		}
	}
	return out, nil
}

// writeOutput appends the streams and notes on what was cut, dropped or replaced.
// canRead: the session may call read_job_output, which the note on a cut names
// only then (a call of a tool the session has not is refused as not available).
func writeOutput(w *strings.Builder, jobID string, out [2]shown, info sandbox.JobInfo, canRead bool) {
	if out[0].text == "" && out[1].text == "" {
		if out[0].raw == "" && out[1].raw == "" {
			w.WriteString("(no output)\n")
		} else {
			// Written, then erased as a terminal would: not "no output".
			w.WriteString("(nothing visible: the output shown is erased by its own carriage returns, backspaces or escape sequences)\n")
		}
	}
	for i, s := range out {
		if s.text == "" {
			continue
		}
		fmt.Fprintf(w, "%s:\n%s", streams[i], s.text)
		if !strings.HasSuffix(s.text, "\n") {
			w.WriteString("\n")
		}
	}
	for i, s := range out {
		switch {
		case s.start > s.from && canRead:
			fmt.Fprintf(w, "[%s: %d earlier bytes are not shown; read them with read_job_output {\"job_id\":%q,\"stream\":%q,\"offset\":%d}]\n",
				streams[i], s.start-s.from, jobID, streams[i], s.from)
		case s.start > s.from:
			fmt.Fprintf(w, "[%s: %d earlier bytes are not shown]\n", streams[i], s.start-s.from)
		}
	}
	for i, lost := range []int64{info.StdoutLost, info.StderrLost} {
		if lost == 0 {
			continue
		}
		fmt.Fprintf(w, "[%s: %d bytes of output were lost: the daemon could not save them (%s)", streams[i], lost, []string{info.StdoutError, info.StderrError}[i])
		tail := []string{info.StdoutLostTail, info.StderrLostTail}[i]
		if tail == "" {
			w.WriteString("]\n")
			continue
		}
		if int64(len(tail)) < lost {
			fmt.Fprintf(w, "; their last %d bytes, kept in memory:]\n", len(tail))
		} else {
			w.WriteString("; kept in memory, they were:]\n")
		}
		w.WriteString(strings.ToValidUTF8(tail, "\uFFFD"))
		if !strings.HasSuffix(tail, "\n") {
			w.WriteString("\n")
		}
	}
	for i, dropped := range []int64{info.StdoutDropped, info.StderrDropped} {
		if dropped > 0 {
			fmt.Fprintf(w, "[%s: the output cap was reached; %d later bytes were discarded]\n", streams[i], dropped)
		}
	}
	if out[0].invalid || out[1].invalid {
		w.WriteString("[the output contains bytes that are not UTF-8 text (binary data?); they are shown as U+FFFD]\n")
	}
}

// describe is a one-line account of a job's state.
func describe(info sandbox.JobInfo) string {
	s := describeStatus(info)
	if info.OOMKills > 0 && !strings.HasPrefix(info.Reason, "out of memory") {
		s += fmt.Sprintf(" Out of memory: the kernel killed %d of its processes when they reached the command's memory limit of %s together.",
			info.OOMKills, humanize.IBytes(uint64(info.MemoryLimit)))
	}
	// A command held at its memory limit is not always killed: the kernel may keep
	// reclaiming the page cache its processes run from, and they stall until their
	// timeout (a go build under 256 MiB did). Say so, or the model asks for more time.
	stopped := info.Status == sandbox.StatusTimeout || (info.Status == sandbox.StatusKilled && !strings.HasPrefix(info.Reason, "out of memory"))
	if stopped && info.OOMKills == 0 && info.MemoryLimit > 0 && info.MemoryPeak >= info.MemoryLimit {
		s += fmt.Sprintf(" Its processes had reached their memory limit of %s together, where they can stall instead of being killed:"+
			" it may need less memory (fewer processes at once, smaller inputs) rather than more time.", humanize.IBytes(uint64(info.MemoryLimit)))
	}
	return s
}

func describeStatus(info sandbox.JobInfo) string {
	d := info.Duration.Round(time.Millisecond)
	switch info.Status {
	case sandbox.StatusRunning:
		return fmt.Sprintf("Job %s is still running (for %s).", info.ID, d)
	case sandbox.StatusTimeout:
		return fmt.Sprintf("Timed out after %s: %s and its process group was killed.", d, info.Reason)
	case sandbox.StatusKilled:
		return fmt.Sprintf("Killed after %s: %s.", d, info.Reason)
	}
	if info.ExitCode != nil {
		return fmt.Sprintf("Exit code %d after %s.", *info.ExitCode, d)
	}
	return fmt.Sprintf("Ended after %s (%s).", d, info.Signal)
}

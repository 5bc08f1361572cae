package mcpproxy

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/time/rate"
)

// strayLines keeps what a stdio server wrote on stdout after the connection was up
// that cannot be JSON-RPC: mcp-go skips such lines without a word, so a call whose
// answer was lost in one (a log line before it, a prefix on it) would end in a
// plain timeout. A call notes where the count stood when it began (mark) and, if
// it times out, quotes the first line kept since (since).
//
// Each line is also logged (add), at most strayLogBurst at once and then
// strayLogsPerSec, so that a server writing its logs on stdout cannot flood the
// daemon's log: the lines over the bound are counted in the next one logged.
type strayLines struct {
	mu    sync.Mutex
	n     int64        // lines seen since the connection was up
	kept  [4]strayLine // the newest, by n modulo 4
	first strayLine    // the first since the connection was up

	lim      *rate.Limiter // made on the first line
	unlogged int           // lines over the log's bound since the last one logged
}

// Bounds of the log lines a server's stray stdout lines cost.
const (
	strayLogsPerSec = 1
	strayLogBurst   = 10
)

type strayLine struct {
	n    int64
	text string
}

// add counts and keeps a stray line seen after the connection was up, and logs it.
func (s *strayLines) add(log *slog.Logger, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	l := strayLine{s.n, text}
	if s.first.n == 0 {
		s.first = l
	}
	s.kept[s.n%int64(len(s.kept))] = l
	s.logLocked(log, text)
}

// logStray logs a stray line seen while connecting (the first one is also quoted in
// the connection's error), within the same bound as add.
func (s *strayLines) logStray(log *slog.Logger, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLocked(log, text)
}

func (s *strayLines) logLocked(log *slog.Logger, text string) {
	if log == nil {
		return
	}
	if s.lim == nil {
		s.lim = rate.NewLimiter(strayLogsPerSec, strayLogBurst)
	}
	if !s.lim.Allow() {
		s.unlogged++
		return
	}
	attrs := []slog.Attr{slog.String("line", text)}
	if s.unlogged > 0 {
		attrs = append(attrs, slog.Int("unlogged_before", s.unlogged))
		s.unlogged = 0
	}
	log.LogAttrs(context.Background(), slog.LevelWarn, "mcp server wrote a line on stdout that is not JSON-RPC; it was skipped "+
		"(a stdio MCP server may write only JSON-RPC messages there, its logs go to stderr)", attrs...)
}

func (s *strayLines) mark() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// since is the first line kept that came after mark, and how many came after it.
func (s *strayLines) since(mark int64) (string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n <= mark {
		return "", 0
	}
	if s.first.n > mark {
		return s.first.text, s.n - mark
	}
	var best strayLine
	for _, l := range s.kept {
		if l.n > mark && (best.n == 0 || l.n < best.n) {
			best = l
		}
	}
	return best.text, s.n - mark
}

// strayNote is what a call that timed out says of the lines its server wrote on
// stdout since it began that are not JSON-RPC (its answer may have been one of
// them, or been cut by one), or "" when there were none.
func (c *conn) strayNote(trace *callTrace) string {
	line, n := c.strays.since(trace.strayAt)
	if n == 0 {
		return ""
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more)", n-1)
	}
	return fmt.Sprintf("; meanwhile the server wrote on stdout a line that is not JSON-RPC, which was skipped: %q%s, and its answer may have been lost in it; a stdio MCP server may write only JSON-RPC messages there, its logs go to stderr", line, more)
}

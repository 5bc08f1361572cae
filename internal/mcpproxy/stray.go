package mcpproxy

import (
	"fmt"
	"sync"
)

// strayLines keeps what a stdio server wrote on stdout after the connection was up
// that cannot be JSON-RPC: mcp-go skips such lines without a word, so a call whose
// answer was lost in one (a log line before it, a prefix on it) would end in a
// plain timeout. A call notes where the count stood when it began (mark) and, if
// it times out, quotes the first line kept since (since).
type strayLines struct {
	mu    sync.Mutex
	n     int64        // lines seen since the connection was up
	kept  [4]strayLine // the newest, by n modulo 4
	first strayLine    // the first since the connection was up
}

type strayLine struct {
	n    int64
	text string
}

func (s *strayLines) add(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	l := strayLine{s.n, text}
	if s.first.n == 0 {
		s.first = l
	}
	s.kept[s.n%int64(len(s.kept))] = l
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

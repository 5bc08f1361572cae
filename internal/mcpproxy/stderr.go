package mcpproxy

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Bounds of what a stdio server's stderr may cost.
const (
	stderrMaxLine     = 2048 // longer lines are cut
	stderrLinesPerSec = 50   // more are counted, not logged
)

// stderrLog turns a stdio server's stderr into log lines, bounded in line length and
// rate. (The last words of a server that died reach its status through the exit
// watcher, see conn.watchExit.)
type stderrLog struct {
	log *slog.Logger

	mu          sync.Mutex
	partial     []byte
	windowStart time.Time
	inWindow    int
	dropped     int
}

func newStderrLog(log *slog.Logger) *stderrLog { return &stderrLog{log: log} }

// Write never fails and never blocks on anything but the logger: mcp-go drains the
// child's stderr through it and must keep up.
func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			room := stderrMaxLine - len(s.partial)
			if room > 0 {
				s.partial = append(s.partial, data[:min(room, len(data))]...)
			}
			break
		}
		room := stderrMaxLine - len(s.partial)
		if room > 0 {
			s.partial = append(s.partial, data[:min(room, i)]...)
		}
		s.line(string(s.partial))
		s.partial = s.partial[:0]
		data = data[i+1:]
	}
	return len(p), nil
}

func (s *stderrLog) line(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.TrimSpace(l) == "" {
		return
	}
	now := time.Now()
	if now.Sub(s.windowStart) >= time.Second {
		if s.dropped > 0 {
			s.log.Warn("mcp server stderr: lines dropped (rate limit)", "dropped", s.dropped)
		}
		s.windowStart, s.inWindow, s.dropped = now, 0, 0
	}
	if s.inWindow >= stderrLinesPerSec {
		s.dropped++
		return
	}
	s.inWindow++
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "mcp server stderr", slog.String("line", l))
}

package mcpproxy

import (
	"sort"
	"strings"
)

// Pending describes the declared servers, enabled and not connected now, whose tools
// a session's whitelist entry may name (pattern: entry is a glob), one phrase each
// ("mcp server ev is connecting"); none when the entry names no such server.
//
// A server's tools are in the registry from its first connection on, and stay there
// while it is down (they answer unavailable), so this matters for servers that have
// not connected yet: starting, or failing since they were declared. A session keeps
// such an entry instead of dropping it as unknown, and has the tools when the server
// connects.
//
// An entry is attributed by the server's prefix (mcp__{server}__, or its own), the
// longest one it starts with, as naming assigns name spaces; a pattern also covers
// every server whose prefix it can match. That is only sound in prefix mode always:
// in modes on_collision and never a tool has its bare name, which nothing tells
// apart from a typo before the server lists its tools.
func (m *Manager) Pending(entry string, pattern bool) []string {
	if m.cfg.PrefixMode != PrefixAlways {
		return nil
	}
	lead := entry
	if pattern {
		// What any name the pattern matches starts with.
		lead = entry[:strings.IndexAny(entry, `*?[\`)]
	} else if !validToolName.MatchString(entry) {
		return nil // no upstream tool is registered under such a name
	}
	var owner *server
	var covered []*server
	for _, s := range m.serverList() {
		if !s.cfg.Enabled {
			continue
		}
		p := s.cfg.prefix()
		switch {
		case strings.HasPrefix(lead, p):
			if owner == nil || len(p) > len(owner.cfg.prefix()) {
				owner = s
			}
		case pattern && strings.HasPrefix(p, lead):
			covered = append(covered, s)
		}
	}
	if owner != nil {
		covered = append(covered, owner)
	}
	var out []string
	for _, s := range covered {
		if why, ok := s.pending(); ok {
			out = append(out, why)
		}
	}
	sort.Strings(out) // by server name: the owner was put last
	return out
}

// pending says, when the server is not connected, that it is not and why.
func (s *server) pending() (string, bool) {
	st := s.status() // a dead connection counts as down, as for calls
	switch st.State {
	case StateReady, StateDisabled:
		return "", false
	case StateConnecting:
		return "mcp server " + s.cfg.Name + " is connecting", true
	default:
		return "mcp server " + s.cfg.Name + " is down (" + string(st.State) + ") and is retried", true
	}
}

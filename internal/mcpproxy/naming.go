package mcpproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// maxNameLen is the longest function name the model providers accept.
const maxNameLen = 64

var validToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// sanitizeName replaces every character a provider rejects (anything outside
// [a-zA-Z0-9_-]) with '_'.
func sanitizeName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// shortHash is a stable 8-hex-digit digest of s.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// capName cuts a name longer than maxNameLen and appends a hash of the whole name,
// so that two long names sharing their first 55 characters stay distinct.
func capName(s string) string {
	if len(s) <= maxNameLen {
		return s
	}
	return withSuffix(s, "_"+shortHash(s))
}

// withSuffix appends suffix, cutting s so that the result fits maxNameLen.
func withSuffix(s, suffix string) string {
	if len(s)+len(suffix) > maxNameLen {
		s = s[:maxNameLen-len(suffix)]
	}
	return s + suffix
}

// serverTools is what naming needs to know about one server.
type serverTools struct {
	server string
	prefix string
	tools  []string // upstream tool names
}

// placement says which upstream tool a registry name stands for.
type placement struct {
	server string
	tool   string
}

// assignNames maps every upstream tool to a registry name under mode. It is a pure
// function of its input: servers in name order, tools in name order, first come
// first served, so the same servers and tools always get the same names whatever
// order they connected in. reserved reports names other tool sources hold. notes
// holds, per server, every collision and refusal, in words for an operator.
func assignNames(mode string, servers []serverTools, reserved func(string) bool) (names map[string]placement, notes map[string][]string) {
	names = map[string]placement{}
	notes = map[string][]string{}
	sorted := append([]serverTools(nil), servers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].server < sorted[j].server })

	takenBy := func(name string) (string, bool) {
		if p, ok := names[name]; ok {
			return fmt.Sprintf("tool %q of mcp server %s", p.tool, p.server), true
		}
		if reserved != nil && reserved(name) {
			return "another tool source", true
		}
		return "", false
	}
	for _, s := range sorted {
		tools := append([]string(nil), s.tools...)
		sort.Strings(tools)
		for i, t := range tools {
			if i > 0 && tools[i-1] == t {
				notes[s.server] = append(notes[s.server], fmt.Sprintf("tool %q is listed twice; the second is ignored", t))
				continue
			}
			if t == "" {
				notes[s.server] = append(notes[s.server], "a tool with an empty name is ignored")
				continue
			}
			bare := capName(sanitizeName(t))
			prefixed := capName(sanitizeName(s.prefix + t))
			var candidates []string
			switch mode {
			case PrefixNever:
				candidates = []string{bare}
			case PrefixOnCollision:
				candidates = []string{bare, prefixed}
			default:
				candidates = []string{prefixed}
			}
			chosen, firstOwner := "", ""
			for i, c := range candidates {
				owner, taken := takenBy(c)
				if i == 0 {
					firstOwner = owner
				}
				if !taken {
					chosen = c
					break
				}
			}
			if chosen == "" && mode != PrefixNever {
				// Two upstream names that sanitize or cut to the same name: the later
				// one (in sort order) gets a hash of its own name.
				alt := withSuffix(candidates[len(candidates)-1], "_"+shortHash(s.server+"/"+t))
				if _, taken := takenBy(alt); !taken {
					chosen = alt
				}
			}
			if chosen == "" {
				notes[s.server] = append(notes[s.server],
					fmt.Sprintf("tool %q is not registered: the name %q is taken by %s", t, candidates[0], firstOwner))
				continue
			}
			if chosen != candidates[0] {
				notes[s.server] = append(notes[s.server],
					fmt.Sprintf("tool %q is registered as %q: %q is taken by %s", t, chosen, candidates[0], firstOwner))
			}
			names[chosen] = placement{server: s.server, tool: t}
		}
	}
	return names, notes
}

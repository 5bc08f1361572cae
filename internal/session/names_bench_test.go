package session

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// benchManager is a Manager over 2,000 tools of ten MCP-style servers, with one group
// holding one server's tools.
func benchManager(b *testing.B) *Manager {
	b.Helper()
	tm := toolmgr.New()
	for i := range 2000 {
		tm.MustRegister(described{fmt.Sprintf("mcp__s%d__tool_%04d", i%10, i), "A tool that does thing number " + fmt.Sprint(i) + "."})
	}
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(b.TempDir(), "ws"), Groups: []Group{{Name: "g", Tools: []string{"mcp__s1__*"}}}},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkUnknownTool2000 answers a call of an unknown name in a session of 2,000
// tools (the whole registry, one group on): the near names and the count.
func BenchmarkUnknownTool2000(b *testing.B) {
	for _, c := range []struct{ what, name string }{
		{"short", "mcp__s3__tool_9999"},
		{"100KB", strings.Repeat("get_sum_", 100<<10/8)},
	} {
		b.Run(c.what, func(b *testing.B) {
			m := benchManager(b)
			sess, _, err := m.Create(context.Background(), "t1", Spec{ActiveGroups: []string{"g"}})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if !strings.Contains(sess.unknownToolText(c.name), "is not available") {
					b.Fatal("no answer")
				}
			}
		})
	}
}

// BenchmarkCreatePatterns2000 creates a session whose whitelist holds 2,000 patterns
// (mcp__server__* style, each a prefix), with one group on.
func BenchmarkCreatePatterns2000(b *testing.B) {
	m := benchManager(b)
	var wl []string
	for i := range 2000 {
		wl = append(wl, fmt.Sprintf("mcp__s%d__tool_%04d*", i%10, i))
	}
	b.ResetTimer()
	for range b.N {
		if _, _, err := m.Create(context.Background(), "t1", Spec{AvailableTools: wl, ActiveGroups: []string{"g"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpecsPatterns2000 lists the tools of a session whose whitelist holds 2,000
// patterns: every listing checked every tool against every pattern.
func BenchmarkSpecsPatterns2000(b *testing.B) {
	m := benchManager(b)
	var wl []string
	for i := range 2000 {
		wl = append(wl, fmt.Sprintf("mcp__s%d__tool_%04d*", i%10, i))
	}
	sess, _, err := m.Create(context.Background(), "t1", Spec{AvailableTools: wl, ActiveGroups: []string{"g"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if len(sess.Tools.Specs()) != 2000 {
			b.Fatal("not every tool")
		}
	}
}

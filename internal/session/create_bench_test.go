package session

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// BenchmarkCreateWhitelist2000 creates a session whose whitelist names 2,000 tools
// one by one, as a backend that builds it from its own list does (with one group, on).
// The warnings of switched-off groups matched every name against every tool: 681 ms
// a session on the probe's 2-core machine; looked up by name, 14 ms.
func BenchmarkCreateWhitelist2000(b *testing.B) {
	tm := toolmgr.New()
	var wl []string
	for i := range 2000 {
		n := fmt.Sprintf("mcp__s%d__tool_%04d", i%10, i)
		tm.MustRegister(described{n, "A tool."})
		wl = append(wl, n)
	}
	m, err := NewManager(Config{WorkspaceDir: filepath.Join(b.TempDir(), "ws"), Groups: []Group{{Name: "g", Tools: []string{"mcp__s1__*"}}}},
		&memStore{m: map[string]*store.Session{}}, tm)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, _, err := m.Create(context.Background(), "t1", Spec{AvailableTools: wl, ActiveGroups: []string{"g"}}); err != nil {
			b.Fatal(err)
		}
	}
}

package sandbox

import (
	"context"
	"testing"
)

// BenchmarkStart measures starting a command and waiting for its end ("true", in
// the local backend) with and without job cgroups, so that what the pids and memory
// cgroups cost per command shows as a ratio to the run without them.
func BenchmarkStart(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"no-cgroups", Config{PidsLimit: -1, MemoryLimit: -1}},
		{"pids", Config{MemoryLimit: -1}},
		{"pids+memory", Config{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.StateDir = b.TempDir()
			m, err := NewManager(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Shutdown(context.Background()) //nolint:errcheck
			sb, err := m.New(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				j, err := sb.Start(ctx, Cmd{Command: "true"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := j.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

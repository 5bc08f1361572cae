package server_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store"
)

// TestEvictedArtifactNotFoundEverywhere: a session on replica A stores more artifacts
// than chain.artifact_bytes_per_session holds, so the oldest is evicted. Its row in
// the shared store goes with it (it stayed until the session was deleted), so
// artifact_read of it is not_found through A and through B, also once A has stopped
// (B had forwarded to A while the row named A, and answered unavailable once A was
// gone); the newer artifact still reads through B.
func TestEvictedArtifactNotFoundEverywhere(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Chain.MaxInlineResultBytes = 1024
		c.Chain.ArtifactBytesPerSession = 3000
	})
	sess := a.createSession(map[string]any{"available_tools": []string{"tool_chain", "artifact_read", "echo"}})["id"].(string)
	chainArtifact := func(letter string) string {
		t.Helper()
		m := keyedCall(t, a, "", sess, "tool_chain", fmt.Sprintf(`{"script":%q}`, `result = echo(text="`+letter+`" * 2000)`))
		res, _ := structuredOf(t, m)["result"].(map[string]any)
		ref, _ := res["artifact"].(string)
		if !strings.HasPrefix(ref, "art_") {
			t.Fatalf("the chain's result is no artifact: %s", m.raw)
		}
		return ref
	}
	old := chainArtifact("a")
	kept := chainArtifact("b") // evicts old: two do not fit in 3000 bytes
	read := func(d *daemon, ref string) event {
		t.Helper()
		return keyedCall(t, d, "", sess, "artifact_read", fmt.Sprintf(`{"ref":%q}`, ref))
	}
	if s := structuredOf(t, read(b, kept)); !strings.Contains(s["text"].(string), "bbbb") {
		t.Fatalf("the kept artifact through B: %v", s)
	}
	artifacts := b.app.Store.(store.ArtifactStore)
	if got, err := artifacts.GetArtifact(t.Context(), old); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the evicted artifact's row: %+v, %v; want it deleted", got, err)
	}
	if _, err := artifacts.GetArtifact(t.Context(), kept); err != nil {
		t.Errorf("the kept artifact's row: %v", err)
	}
	notFound := func(d *daemon, when string) {
		t.Helper()
		if m := read(d, old); m.m["is_error"] != true || m.m["error_kind"] != "not_found" {
			t.Errorf("artifact_read of the evicted artifact through %s %s: %s; want not_found", d.url, when, m.raw)
		}
	}
	notFound(a, "")
	notFound(b, "")
	a.stop()
	notFound(b, "with A stopped")
}

// TestSweptArtifactNotFoundEverywhere: a session's artifacts unused for
// chain.artifact_retention are swept on replica A, their rows with them, so
// artifact_read of one through B is not_found, also once A has stopped.
func TestSweptArtifactNotFoundEverywhere(t *testing.T) {
	t.Parallel()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Chain.MaxInlineResultBytes = 1024
		c.Chain.ArtifactRetention = 2 * time.Second
	})
	sess := a.createSession(map[string]any{"available_tools": []string{"tool_chain", "artifact_read", "echo"}})["id"].(string)
	m := keyedCall(t, a, "", sess, "tool_chain", fmt.Sprintf(`{"script":%q}`, `result = echo(text="a" * 2000)`))
	res, _ := structuredOf(t, m)["result"].(map[string]any)
	ref, _ := res["artifact"].(string)
	if !strings.HasPrefix(ref, "art_") {
		t.Fatalf("the chain's result is no artifact: %s", m.raw)
	}
	artifacts := b.app.Store.(store.ArtifactStore)
	waitFor(t, 30*time.Second, "the swept artifact's row to be deleted", func() bool {
		_, err := artifacts.GetArtifact(t.Context(), ref)
		return errors.Is(err, store.ErrNotFound)
	})
	a.stop()
	if m := keyedCall(t, b, "", sess, "artifact_read", fmt.Sprintf(`{"ref":%q}`, ref)); m.m["is_error"] != true || m.m["error_kind"] != "not_found" {
		t.Errorf("artifact_read of the swept artifact through B with A stopped: %s; want not_found", m.raw)
	}
}

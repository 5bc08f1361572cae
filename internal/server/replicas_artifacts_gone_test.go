package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestArtifactOfStoppedReplicaAfterItIsForgotten: a tool_chain on replica A stores an
// artifact (a file in A's data_dir); A stops cleanly (a redeploy) and B's sweep then
// forgets A's row. artifact_read through B must still say that the artifact is A's and
// out of reach while A is away, not that the session has no such artifact; and once A
// is back under its id with its data_dir, B reads it from A again.
func TestArtifactOfStoppedReplicaAfterItIsForgotten(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	opts := func(replica string) daemonOpts {
		return daemonOpts{store: url, mutate: func(c *config.Config) {
			c.ReplicaID = replica
			c.Cluster.Lease = 3 * time.Second
			c.Chain.MaxInlineResultBytes = 1024
		}}
	}
	aOpts := opts("replica-a")
	aOpts.dataDir = t.TempDir()
	a, b := startDaemon(t, aOpts), startDaemon(t, opts("replica-b"))
	id := a.createSession(map[string]any{"available_tools": []string{"tool_chain", "artifact_read", "echo"}})["id"].(string)
	call := func(d *daemon, name, args string) event { t.Helper(); return keyedCall(t, d, "", id, name, args) }
	script := `result = echo(text="\n".join(["row %d" % i for i in range(500)]))`
	s := structuredOf(t, call(a, "tool_chain", fmt.Sprintf(`{"script":%q}`, script)))
	res, _ := s["result"].(map[string]any)
	ref, _ := res["artifact"].(string)
	if !strings.HasPrefix(ref, "art_") {
		t.Fatalf("the chain's result is no artifact: %v", s)
	}
	read := fmt.Sprintf(`{"ref":%q,"limit":64}`, ref)
	a.stop()

	waitForgotten(t, url, "replica-a")
	if m := call(b, "artifact_read", read); m.m["is_error"] != true || m.m["error_kind"] != "unavailable" || !strings.Contains(string(m.raw), "replica-a") {
		t.Fatalf("artifact_read through B of an artifact of the forgotten replica A: %s; want unavailable, naming replica-a", m.raw)
	}
	a = startDaemon(t, aOpts)
	for _, d := range []*daemon{a, b} {
		m := call(d, "artifact_read", read)
		if m.m["is_error"] == true || !strings.Contains(string(m.raw), "row 0") {
			t.Fatalf("artifact_read through %s with A back: %s; want the artifact", d.url, m.raw)
		}
	}
}

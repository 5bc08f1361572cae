package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/config"
)

// TestArtifactsReadThroughAnotherReplica: two daemons with API keys on one
// PostgreSQL serve one session. A tool_chain on replica A stores a large result as an
// artifact (a file in A's data_dir); artifact_read through replica B reads it from A
// (B forwards the call with the caller's key), the same bytes page by page; another
// session cannot read it through B; and once A is gone B answers unavailable,
// naming A.
func TestArtifactsReadThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	key, hash := auth.NewKey()
	a, b := twoReplicas(t, func(c *config.Config) {
		c.Auth.Unauthenticated = false
		c.Auth.Keys = []config.AuthKeyConfig{{Name: "agent", Tenant: "t1", Roles: []string{auth.RoleAgent}, SHA256: hash}}
		c.Chain.MaxInlineResultBytes = 1024
	})
	newSession := func() string {
		t.Helper()
		code, _, body := keyed(t, a, key, "POST", "/v1/sessions", `{"available_tools":["tool_chain","artifact_read","echo"]}`)
		if code != 201 {
			t.Fatalf("create session: %d %s", code, body)
		}
		var sess struct{ ID string }
		_ = json.Unmarshal(body, &sess)
		return sess.ID
	}
	sess := newSession()
	call := func(d *daemon, sess, name, args string) event {
		t.Helper()
		return keyedCall(t, d, key, sess, name, args)
	}
	structured := func(m event) map[string]any { t.Helper(); return structuredOf(t, m) }

	// Two-byte characters, so that pages end on character boundaries.
	var want strings.Builder
	for i := range 1500 {
		if i > 0 {
			want.WriteByte('\n')
		}
		fmt.Fprintf(&want, "row %d é", i)
	}
	script := `result = echo(text="\n".join(["row %d é" % i for i in range(1500)]))`
	s := structured(call(a, sess, "tool_chain", fmt.Sprintf(`{"script":%q}`, script)))
	res, _ := s["result"].(map[string]any)
	ref, _ := res["artifact"].(string)
	if !strings.HasPrefix(ref, "art_") {
		t.Fatalf("the chain's result is no artifact: %v", s)
	}

	// readAll reads the artifact through d in pages of 4096 bytes.
	readAll := func(d *daemon) (string, int) {
		t.Helper()
		var got strings.Builder
		pages := 0
		for offset := 0.0; ; pages++ {
			if pages > 20 {
				t.Fatal("artifact_read does not reach the end")
			}
			p := structured(call(d, sess, "artifact_read", fmt.Sprintf(`{"ref":%q,"offset":%d,"limit":4096}`, ref, int(offset))))
			got.WriteString(p["text"].(string))
			next, ok := p["next_offset"].(float64)
			if !ok {
				return got.String(), pages + 1
			}
			offset = next
		}
	}
	start := time.Now()
	onA, pagesA := readAll(a)
	local := time.Since(start)
	start = time.Now()
	onB, pagesB := readAll(b)
	t.Logf("%d pages read through A in %s, through B (forwarded to A) in %s", pagesB, local.Round(time.Microsecond), time.Since(start).Round(time.Microsecond))
	if onB != onA || pagesB != pagesA || pagesB < 5 {
		t.Fatalf("read through B: %d bytes in %d pages; through A: %d bytes in %d pages", len(onB), pagesB, len(onA), pagesA)
	}
	var stored struct{ Echo string }
	if err := json.Unmarshal([]byte(onB), &stored); err != nil || stored.Echo != want.String() {
		t.Fatalf("the artifact read through B is not the echoed text (%v): %.200s", err, onB)
	}

	// Another session of the same tenant cannot read it, through either replica.
	other := newSession()
	for _, d := range []*daemon{b, a} {
		if m := call(d, other, "artifact_read", fmt.Sprintf(`{"ref":%q}`, ref)); m.m["is_error"] != true || m.m["error_kind"] != "not_found" {
			t.Fatalf("another session's read through %s: %s", d.url, m.raw)
		}
	}

	// With A gone, B says where the artifact is and that it is out of reach.
	a.stop()
	m := call(b, sess, "artifact_read", fmt.Sprintf(`{"ref":%q}`, ref))
	if m.m["is_error"] != true || m.m["error_kind"] != "unavailable" || !strings.Contains(string(m.raw), "replica-a") {
		t.Fatalf("an artifact of a stopped replica through B: %s", m.raw)
	}
}

package mcpproxy

import (
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestUntrustedAnnotations: a server configured with trust_annotations false does not
// get its readOnlyHint tools onto the no-approval path (they are registered as not
// read-only, not concurrency-safe, medium risk), while its destructiveHint still
// raises risk; the default trusts them. The setting is kept with a server added at
// run time and comes back with it from the store.
func TestUntrustedAnnotations(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	g := newGoServer(t)

	h := newHarness(t, Config{Servers: []ServerConfig{stdioEverything(t, "trusted")}}, WithStore(db))
	h.start(t)
	untrusted := stdioEverything(t, "untrusted")
	untrusted.TrustAnnotations = ptr(false)
	if err := h.m.Add(t.Context(), untrusted); err != nil {
		t.Fatalf("Add: %v", err)
	}
	goCfg := ServerConfig{Name: "gountrusted", Transport: TransportStreamableHTTP, URL: g.url, Enabled: true, TrustAnnotations: ptr(false)}
	if err := h.m.Add(t.Context(), goCfg); err != nil {
		t.Fatalf("Add: %v", err)
	}
	for name, trust := range map[string]bool{"trusted": true, "untrusted": false, "gountrusted": false} {
		if st := h.waitState(t, name, StateReady, 30*time.Second); st.TrustAnnotations != trust {
			t.Errorf("%s: status trust_annotations %v, want %v", name, st.TrustAnnotations, trust)
		}
	}

	spec := func(h *harness, name string) tool.Spec {
		t.Helper()
		e, ok := h.tools.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered; have %v", name, h.tools.Names())
		}
		return e.Spec
	}
	// server-everything's echo says readOnlyHint: true.
	if s := spec(h, "mcp__trusted__echo"); !s.ReadOnly || !s.ConcurrencySafe || s.Risk != tool.RiskLow ||
		!strings.Contains(s.Documentation, "Annotations: read-only: true") {
		t.Errorf("trusted echo: read_only %v concurrency_safe %v risk %q doc %q; want read-only, low risk", s.ReadOnly, s.ConcurrencySafe, s.Risk, s.Documentation)
	}
	// It also says idempotentHint: true and openWorldHint: false.
	if s := spec(h, "mcp__trusted__echo"); !s.Idempotent || s.OpenWorld == nil || *s.OpenWorld {
		t.Errorf("trusted echo: idempotent %v open_world %v; want idempotent, not open-world", s.Idempotent, s.OpenWorld)
	}
	checkUntrusted := func(h *harness) {
		t.Helper()
		s := spec(h, "mcp__untrusted__echo")
		if s.ReadOnly || s.ConcurrencySafe || s.Risk != tool.RiskMedium || s.Idempotent {
			t.Errorf("untrusted echo: read_only %v concurrency_safe %v risk %q idempotent %v; want none, medium risk", s.ReadOnly, s.ConcurrencySafe, s.Risk, s.Idempotent)
		}
		if !strings.Contains(s.Documentation, "not trusted") || !strings.Contains(s.Documentation, "read-only: true") {
			t.Errorf("untrusted echo documentation %q: want the annotations shown and said to be untrusted", s.Documentation)
		}
	}
	checkUntrusted(h)
	// The go server's danger says destructiveHint: true: an untrusted server's warning is still heeded.
	if s := spec(h, "mcp__gountrusted__danger"); s.ReadOnly || s.Risk != tool.RiskHigh {
		t.Errorf("untrusted danger: read_only %v risk %q; want high risk", s.ReadOnly, s.Risk)
	}
	wantText(t, h.call(t.Context(), t, "mcp__untrusted__echo", `{"message":"still works"}`, nil), "Echo: still works")

	// The daemon restarts: the server added at run time comes back untrusted.
	h.m.Stop()
	h2 := newHarness(t, Config{}, WithStore(db))
	h2.start(t)
	if st := h2.waitState(t, "untrusted", StateReady, 30*time.Second); st.TrustAnnotations || !st.Persisted {
		t.Errorf("untrusted after restart: %+v, want persisted and trust_annotations false", st)
	}
	checkUntrusted(h2)
}

package mcpproxy

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestDownSinceSpansTheOutage: a server down at 3 a.m. and still down in the
// morning used to be reported "failed since" its latest connection attempt (each
// attempt moves it from failed to connecting and back), to the model in the call's
// answer and to the operator in its status: nothing said how long it had been down.
// Both now say since when it has been down, which stays put over the attempts of one
// outage and is cleared once it is back.
func TestDownSinceSpansTheOutage(t *testing.T) {
	t.Parallel()
	up := newRestartableServer(t)
	h := newHarness(t, Config{HealthInterval: time.Hour, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Servers: []ServerConfig{{Name: "web", Transport: TransportStreamableHTTP, URL: up.url(), Enabled: true}}})
	h.start(t)
	h.waitState(t, "web", StateReady, 10*time.Second)

	wentDown := time.Now()
	up.down()
	h.failWith(t, "web")
	var st ServerStatus
	if !eventually(20*time.Second, func() bool { st = h.status(t, "web"); return st.Restarts >= 4 && st.State == StateFailed }) {
		t.Fatalf("restarts %d, state %s; want several failed attempts", st.Restarts, st.State)
	}
	// Attempts go on past the second the server went down in.
	time.Sleep(time.Until(wentDown.Truncate(time.Second).Add(1100 * time.Millisecond)))

	res := h.call(context.Background(), t, "mcp__web__echo", `{"message":"x"}`, nil)
	wantKind(t, res, tool.KindUnavailable)
	m := regexp.MustCompile(`down since (\S+?)\)`).FindStringSubmatch(res.Text())
	if m == nil {
		t.Fatalf("the answer does not say since when the server is down: %s", res.Text())
	}
	since, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		t.Fatal(err)
	}
	if since.After(wentDown) || since.Before(wentDown.Add(-time.Second)) {
		t.Fatalf("down since %s, want the second it went down (%s): %s", since, wentDown.UTC().Format(time.RFC3339), res.Text())
	}
	st = h.status(t, "web")
	if st.DownSince.Before(wentDown) || st.DownSince.After(wentDown.Add(5*time.Second)) || !st.Since.After(st.DownSince) {
		t.Fatalf("status: down since %s, since %s; want the outage's start (%s) and a later state change", st.DownSince, st.Since, wentDown)
	}

	up.up()
	st = h.waitState(t, "web", StateReady, 20*time.Second)
	if !st.DownSince.IsZero() {
		t.Fatalf("ready, yet down since %s", st.DownSince)
	}
}

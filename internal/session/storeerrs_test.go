package session

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolserverd/toolserverd/internal/telemetry"
)

// TestStoreOutageLogsBounded: while the store refuses writes (here: its database is
// closed under the daemon), every call fails to be recorded, and each logged an
// ERROR line: at a few hundred calls a second, a few hundred lines a second for the
// whole outage (seen by the operations probe on PostgreSQL). The lines are bounded
// now, and the next one logged says how many were not; each call is still answered.
func TestStoreOutageLogsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newExecEnv(t, Config{}, envOpts{})
	var logs syncBuffer
	e.x = NewExecutor(ExecConfig{Owner: "test"}, e.commits, nil, nil, nil,
		slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	t.Cleanup(e.x.Close)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"echo", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Close(); err != nil { // the database goes away
		t.Fatal(err)
	}
	const n = 300
	answered := 0
	for i := range n {
		p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: fmt.Sprint("c", i), Name: "other"}}})
		if err != nil {
			t.Fatal(err)
		}
		e.x.Execute(ctx, p, func(ev Event) {
			if ev.Type == EventMessage && ev.Result != nil && ev.Result.IsError {
				answered++
			}
		})
	}
	if answered != n {
		t.Fatalf("%d of %d calls answered with an error while the store was closed", answered, n)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "recording call") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 || len(lines) > n/2 {
		t.Fatalf("%d log lines for %d calls the store refused, want some but far fewer than one a call", len(lines), n)
	}
}

// TestStoreErrLogSaysWhatItLeftOut: the first line logged after some were left out
// says how many.
func TestStoreErrLogSaysWhatItLeftOut(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	l := storeErrLog{lim: rate.NewLimiter(rate.Every(time.Hour), 1)}
	for range 3 {
		l.log(context.Background(), log, "recording call failed")
	}
	l.lim.SetLimit(rate.Inf) // time enough has passed
	l.log(context.Background(), log, "recording call failed")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "unlogged_before") || !strings.Contains(lines[1], `"unlogged_before":2`) {
		t.Fatalf("lines logged:\n%s", logs.String())
	}
}

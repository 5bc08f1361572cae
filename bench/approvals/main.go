// Command approvals measures human-approval latency through real daemons: the round
// trip from a call that asks (request persisted, approval_required on the stream) to
// its result on the stream after the decision, on one replica, and — with a
// PostgreSQL URL — with the stream on replica A and the decision on replica B
// (LISTEN/NOTIFY wake-up). It reports p50 and p99; the decision itself is made as
// soon as the approval_required event arrives.
//
//	go run ./bench/approvals [-n 200] [-postgres postgres://…]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

func main() {
	n := flag.Int("n", 200, "approvals per scenario")
	pg := flag.String("postgres", os.Getenv("TOOLSERVER_TEST_POSTGRES_URL"), "PostgreSQL URL for the two-replica scenario (empty: skip it)")
	flag.Parse()
	ctx := context.Background()
	single, err := Scenario(ctx, *n, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "approvals:", err)
		os.Exit(1)
	}
	single.Print(os.Stdout, "one replica (SQLite)")
	if *pg == "" {
		fmt.Println("two replicas: skipped (give -postgres or TOOLSERVER_TEST_POSTGRES_URL)")
		return
	}
	two, err := Scenario(ctx, *n, *pg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "approvals:", err)
		os.Exit(1)
	}
	two.Print(os.Stdout, "stream on replica A, decision on replica B (PostgreSQL)")
}

// Result holds the measured latencies.
type Result struct {
	// Ask: from sending the call to approval_required (request persisted).
	// Decide: from approval_required to the decision's HTTP answer.
	// Result: from the decision's answer to the message on the stream (wake-up,
	// claim, execution, record).
	Ask, Decide, Result []time.Duration
}

// Print writes p50/p99 of each phase.
func (r Result) Print(w io.Writer, title string) {
	fmt.Fprintf(w, "%s, %d approvals:\n", title, len(r.Result))
	for _, p := range []struct {
		name string
		d    []time.Duration
	}{{"call → approval_required (ask persisted)", r.Ask}, {"decision request", r.Decide}, {"decision → result on the stream", r.Result}} {
		fmt.Fprintf(w, "  %-42s p50 %8s  p99 %8s\n", p.name, pct(p.d, 50), pct(p.d, 99))
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}

// Scenario runs n approvals. With pgURL it starts two replicas on it and decides on
// the second; otherwise one replica on SQLite.
func Scenario(ctx context.Context, n int, pgURL string) (Result, error) {
	var res Result
	shared, err := os.MkdirTemp("", "toolserverd-approvals-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(shared)
	a, stopA, err := start(ctx, pgURL, "replica-a", shared)
	if err != nil {
		return res, err
	}
	defer stopA()
	b := a
	if pgURL != "" {
		var stopB func()
		if b, stopB, err = start(ctx, pgURL, "replica-b", shared); err != nil {
			return res, err
		}
		defer stopB()
	}
	sess, err := a.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"execute_command"}, Workdir: shared})
	if err != nil {
		return res, err
	}
	for i := range n {
		t0 := time.Now()
		var tAsk, tDecided time.Time
		err := a.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: "c", Name: "execute_command",
			Arguments: json.RawMessage(fmt.Sprintf(`{"command":"touch f%d"}`, i))}}}, func(ev client.Event) error {
			switch ev.Type {
			case "approval_required":
				tAsk = time.Now()
				var apr struct{ ID string }
				_ = json.Unmarshal(ev.Approval, &apr)
				if _, err := b.Decide(ctx, apr.ID, client.Decision{Decision: "approve"}); err != nil {
					return err
				}
				tDecided = time.Now()
			case "message":
				if ev.IsError {
					return errors.New("call failed: " + ev.Content())
				}
				if tAsk.IsZero() {
					return errors.New("the call ran without asking")
				}
				res.Ask = append(res.Ask, tAsk.Sub(t0))
				res.Decide = append(res.Decide, tDecided.Sub(tAsk))
				res.Result = append(res.Result, time.Since(tDecided))
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func start(ctx context.Context, pgURL, replica, shared string) (*client.Client, func(), error) {
	dir, err := os.MkdirTemp("", "toolserverd-replica-")
	if err != nil {
		return nil, nil, err
	}
	cfg := config.Defaults()
	cfg.Auth.Unauthenticated = true // loopback only; the measured path is the same
	cfg.DataDir, cfg.Store, cfg.ReplicaID = dir, pgURL, replica
	cfg.Sessions.WorkdirRoots = []string{shared}
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Serve(sctx, ln) }()
	return client.New("http://" + ln.Addr().String()), func() { cancel(); <-done; a.Close(); os.RemoveAll(dir) }, nil
}

// Package testdaemon starts a real toolserverd (app.New: real store, sandbox, tools)
// on a loopback port for tests outside the server package.
package testdaemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

// Daemon is a running daemon.
type Daemon struct {
	App *app.App
	URL string
}

// Start runs a daemon with the default configuration changed by mutate; it stops when
// the test ends.
func Start(t testing.TB, mutate func(*config.Config)) *Daemon {
	t.Helper()
	return StartWithLog(t, mutate, nil)
}

// StartWithLog is Start with the daemon's logs going to log (nil: discarded).
func StartWithLog(t testing.TB, mutate func(*config.Config), log *slog.Logger) *Daemon {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := config.Defaults()
	cfg.Addr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.ReplicaID = "test"
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Auth.Unauthenticated = true // tests that need keys turn it off
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("app.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		a.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		a.Close()
	})
	return &Daemon{App: a, URL: "http://" + ln.Addr().String()}
}

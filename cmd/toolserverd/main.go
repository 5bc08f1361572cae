// Command toolserverd is the tool-execution daemon: it serves the HTTP API that runs
// LLM agents' tool calls. With no configuration it listens on 127.0.0.1:8080 and keeps
// its state in an embedded SQLite database under ./data.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

// defaultGCPercent replaces Go's GOGC=100 when the environment sets no GOGC. The
// daemon's live heap is small (tens of MB with 10,000 idle sessions) and most of what
// it allocates per call dies within the call, so at 100 it collects every few MB and GC
// took a sixth of its CPU under load. At 400 the heap may grow to five times the live
// heap before a collection; GOMEMLIMIT (set in deploy/kubernetes) still makes the GC
// work harder near a memory limit.
const defaultGCPercent = 400

// gcPercent is the GOGC the daemon sets, and false when the environment sets its own.
func gcPercent(environ []string) (int, bool) {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GOGC=") {
			return 0, false
		}
	}
	return defaultGCPercent, true
}

func main() {
	if pct, ok := gcPercent(os.Environ()); ok {
		debug.SetGCPercent(pct)
	}
	ctx, hurry, stop := stopSignals()
	defer stop()
	if err := run(ctx, hurry, os.Args[1:], os.Environ(), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "toolserverd:", err)
		os.Exit(1)
	}
}

// stopSignals turns SIGTERM and SIGINT into the daemon's stops: the first ends ctx (the
// daemon drains: in-flight calls may finish within shutdown_timeout), the second closes
// hurry (the drain ends at once: the calls still running are cancelled and recorded as
// at the drain deadline), and a third exits the process without waiting for anything;
// the next start's recovery then marks the calls it left running as failed.
func stopSignals() (ctx context.Context, hurry <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	h := make(chan struct{})
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			switch n {
			case 1:
				cancel()
			case 2:
				close(h)
			default:
				fmt.Fprintln(os.Stderr, "toolserverd: stop signal a third time: exiting now; the next start marks the calls left running as failed")
				os.Exit(1)
			}
		}
	}()
	return ctx, h, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// run serves until ctx ends, then drains; hurry, closed during the drain, ends it.
// With "migrate" as the first argument it migrates the store and returns instead.
func run(ctx context.Context, hurry <-chan struct{}, args, environ []string, logOut io.Writer) error {
	migrating := len(args) > 0 && args[0] == "migrate"
	if migrating {
		args = args[1:]
	}
	cfg, err := config.Load(args, environ)
	if errors.Is(err, config.ErrHelp) {
		_, err = fmt.Fprint(logOut, config.Usage())
		return err
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, logOut)
	for _, w := range cfg.Warnings {
		log.Warn("configuration", "warning", w)
	}
	if migrating {
		return migrate(ctx, cfg, log)
	}
	a, err := app.New(ctx, cfg, log)
	if errors.Is(err, app.ErrStopped) {
		// Asked to stop before the store could be reached: a clean stop, as when
		// serving.
		log.Info("stopped before starting", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer a.Close()
	a.Hurry = hurry
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	return a.Serve(ctx, ln)
}

// migrate applies the store's pending migrations and returns: a release's schema change
// can be made before its replicas roll out (a Kubernetes Job, a deploy step), so that
// no replica's start waits for it. It reads the same flags, file and environment as
// the daemon; only the store's keys matter. A stop while waiting for the store is a
// failure here: nothing was migrated.
func migrate(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if _, err := app.Migrate(ctx, cfg, log); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func newLogger(c config.LogConfig, out io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(out, opts))
	}
	return slog.New(slog.NewJSONHandler(out, opts))
}

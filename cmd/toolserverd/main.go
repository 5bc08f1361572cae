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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "toolserverd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args, environ []string, logOut io.Writer) error {
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
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	return a.Serve(ctx, ln)
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

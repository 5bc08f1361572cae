// Command profdaemon is toolserverd (the same config.Load → app.New → Serve as
// cmd/toolserverd) with a CPU profiler the mcpcompare benchmark switches on and off
// around its measured window: SIGUSR1 starts a profile into $MCPCOMPARE_CPUPROFILE,
// SIGUSR2 stops it and prints "cpuprofile written" on stderr. The daemon has no
// pprof endpoint of its own, and the benchmark must profile it as a separate process.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go profileOnSignal(os.Getenv("MCPCOMPARE_CPUPROFILE"))
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "profdaemon:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load(os.Args[1:], os.Environ())
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	return a.Serve(ctx, ln)
}

func profileOnSignal(path string) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	var f *os.File
	for s := range sig {
		switch {
		case s == syscall.SIGUSR1 && f == nil && path != "":
			var err error
			if f, err = os.Create(path); err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "profdaemon: cpuprofile:", err)
			}
		case s == syscall.SIGUSR2 && f != nil:
			pprof.StopCPUProfile()
			f.Close()
			f = nil
			fmt.Fprintln(os.Stderr, "cpuprofile written")
		}
	}
}

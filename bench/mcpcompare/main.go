// Command mcpcompare is the comparative benchmark of toolserverd's MCP proxy (issue
// #5). In one run, for each of two stdio upstreams — a minimal Go MCP server
// (./echoserver, an echo tool that costs next to nothing) and the npm
// @modelcontextprotocol/server-everything — it loads the upstream's echo tool with
// 32 concurrent callers through:
//
//   - direct: an mcp-go stdio client of the upstream, no proxy;
//   - toolserverd: the real daemon binary (separate process, loopback, temp data dir,
//     the upstream in mcp_servers), one session per caller, POST
//     /v1/sessions/{id}/tool-calls, every call durably recorded;
//   - mcp-proxy (punkpeye) and supergateway --stateful: the npm proxies pinned in
//     ./package.json, each fronting the same upstream, called by one mcp-go
//     streamable-HTTP client (one shared session).
//
// Each configuration runs alone, warms up, then is measured until either its call
// count or its time is spent. It prints calls/s, p50, p99 and CPU-seconds per 1,000
// calls of the proxy process, of the upstream and of the benchmark (client) process,
// then the targets with PASS or MISS.
//
//	(cd bench/mcpcompare && npm ci)   # and testdata/npm, as scripts/test.sh does
//	go run ./bench/mcpcompare [-clients 32] [-calls 40000] [-duration 10s] [-warmup 2s]
//	    [-upstreams go,everything] [-targets direct,toolserverd,mcp-proxy,supergateway]
//	    [-daemon-cpuprofile /tmp/ts]   # also writes /tmp/ts-go.prof, /tmp/ts-everything.prof
//
// See README.md beside this file for the last figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	var o Options
	flag.IntVar(&o.Clients, "clients", 32, "concurrent callers")
	flag.IntVar(&o.Calls, "calls", 40000, "measured calls per configuration, at most")
	flag.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time per configuration, at most")
	flag.IntVar(&o.WarmupCalls, "warmup-calls", 5000, "unmeasured warm-up calls per configuration, at most")
	flag.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured warm-up time per configuration, at most")
	flag.IntVar(&o.SerialCalls, "serial-calls", 2000, "calls of the one-caller latency pass (at most 2 s; 0: none)")
	upstreams := flag.String("upstreams", "go,everything", "upstreams to front, in order")
	targets := flag.String("targets", strings.Join(allTargets, ","), "targets to measure, in order")
	flag.BoolVar(&o.NPMSessionless, "npm-sessionless", false, "let mcp-go negotiate the sessionless 2026-07-28 protocol with mcp-proxy (default: one 2025-11-25 session)")
	flag.StringVar(&o.Toolserverd, "toolserverd", "", "toolserverd binary (default: go build ./cmd/toolserverd)")
	flag.StringVar(&o.DaemonCPUProfile, "daemon-cpuprofile", "", "write CPU profiles of the daemon's measured windows to PREFIX-<upstream>.prof")
	flag.Parse()
	o.Upstreams = strings.Split(*upstreams, ",")
	o.Targets = strings.Split(*targets, ",")
	o.Progress = os.Stderr
	if err := o.Prerequisites(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpcompare:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := Run(ctx, o)
	if res != nil && len(res.Rows) > 0 {
		res.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpcompare:", err)
		os.Exit(1)
	}
}

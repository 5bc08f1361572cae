package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Options of a run.
type Options struct {
	Clients     int           // concurrent callers
	Calls       int           // measured calls per configuration, at most
	Duration    time.Duration // measured time per configuration, at most
	WarmupCalls int           // unmeasured calls before measuring, at most
	Warmup      time.Duration // unmeasured time before measuring, at most
	// SerialCalls, when positive, adds a pass with one caller after the measured
	// one (at most SerialCalls calls or 2 s): the latency a call has with no queue.
	SerialCalls int
	Upstreams   []string // "go", "everything"
	Targets     []string // "direct", "toolserverd", "mcp-proxy", "supergateway"
	// NPMSessionless lets mcp-go negotiate protocol 2026-07-28 (no session) with
	// mcp-proxy, which offers it; by default both npm proxies are spoken to on
	// 2025-11-25 with one session, their faster mode (supergateway --stateful
	// always: it keys its upstream child on the session).
	NPMSessionless bool

	Root         string // the repository (default: found from this file)
	NodeModules  string // where mcp-proxy and supergateway are installed (default: bench/mcpcompare/node_modules)
	EverythingJS string // server-everything's dist/index.js (default: under testdata/npm)
	Toolserverd  string // a toolserverd binary (default: built from ./cmd/toolserverd)
	EchoServer   string // the Go echo server binary (default: built from ./bench/mcpcompare/echoserver)
	// DaemonCPUProfile, when set, runs toolserverd as the profdaemon build and writes
	// a CPU profile of its measured window to DaemonCPUProfile-<upstream>.prof.
	DaemonCPUProfile string
	Progress         io.Writer // progress lines (nil: none)
	started          time.Time
}

// Upstream names.
const (
	upstreamGo         = "go"
	upstreamEverything = "everything"
)

// Row is the measurement of one target in front of one upstream.
type Row struct {
	Upstream, Target string
	Proto            string
	Calls, Errors    int
	FirstError       string
	Elapsed          time.Duration
	RPS              float64
	P50, P99         time.Duration
	SerialP50        time.Duration // p50 with one caller; 0 if not measured
	// CPU time used during the measured window by the proxy process (not its
	// children; none for direct), by the upstream process(es) and by the benchmark
	// process itself, which is the MCP or HTTP client.
	ProxyCPU, UpstreamCPU, ClientCPU time.Duration
	HasProxy                         bool
	// OtherCores is how many CPUs, on average over the measured window, processes
	// outside the benchmark used: a busy machine makes every figure worse.
	OtherCores float64
	LoadAvg    string // 1-minute load average at the end of the window
}

// perK is CPU seconds per 1,000 calls.
func (r Row) perK(d time.Duration) float64 {
	if r.Calls == 0 {
		return 0
	}
	return d.Seconds() / float64(r.Calls) * 1000
}

// Check is one target of the issue, evaluated.
type Check struct {
	Name, Value, Want string
	Pass              bool
	Missing           bool // a configuration it needs was not measured
	Info              bool // not one of the targets: shown for insight
}

// Result of a run.
type Result struct {
	Options Options
	Rows    []Row
	Checks  []Check
	Node    string
}

func (r *Result) row(upstream, target string) (Row, bool) {
	for _, x := range r.Rows {
		if x.Upstream == upstream && x.Target == target && x.Calls > 0 {
			return x, true
		}
	}
	return Row{}, false
}

// Run measures every target in front of every upstream, one configuration at a
// time (only its processes alive), and evaluates the targets.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := &Result{Options: o}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		res.Node = strings.TrimSpace(string(out))
	}
	dir, err := os.MkdirTemp("", "mcpcompare-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Build the daemon while the echo server builds.
	daemon := o.Toolserverd
	built := make(chan error, 1)
	if daemon == "" && slices.Contains(o.Targets, targetToolserverd) {
		pkg := "./cmd/toolserverd"
		if o.DaemonCPUProfile != "" {
			pkg = "./bench/mcpcompare/profdaemon"
		}
		daemon = filepath.Join(dir, "toolserverd")
		go func() {
			_, err := o.build(pkg, daemon)
			built <- err
		}()
	} else {
		built <- nil
	}
	ups, err := o.upstreams(dir)
	if err2 := <-built; err == nil {
		err = err2
	}
	if err != nil {
		return nil, err
	}
	for _, up := range ups {
		for _, tname := range o.Targets {
			o.progress("%s / %s", up.Name, tname)
			row, err := measure(ctx, o, up, tname, daemon)
			if err != nil {
				return res, fmt.Errorf("%s in front of %s: %w", tname, up.Name, err)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	res.evaluate()
	return res, nil
}

func measure(ctx context.Context, o Options, up upstream, tname, daemon string) (Row, error) {
	var (
		t   *target
		err error
	)
	switch tname {
	case targetDirect:
		t, err = startDirect(ctx, up)
	case targetToolserverd:
		t, err = startToolserverd(ctx, o, up, daemon)
	case targetMCPProxy:
		t, err = startMCPProxy(ctx, o, up)
	case targetSupergateway:
		t, err = startSupergateway(ctx, o, up)
	default:
		err = fmt.Errorf("unknown target %q", tname)
	}
	if err != nil {
		return Row{}, err
	}
	defer func() {
		t.close()
		o.progress("%s / %s: stopped", up.Name, tname)
	}()
	o.progress("%s / %s: started", up.Name, tname)
	warm := load(ctx, o.Clients, bound{calls: o.WarmupCalls, time: o.Warmup}, t.call)
	if len(warm.lat) == 0 {
		return Row{}, fmt.Errorf("no successful call while warming up (%d errors, first: %v)", warm.errors, warm.firstEr)
	}
	o.progress("%s / %s: warmed up", up.Name, tname)
	ups := t.upstreams()
	if len(ups) == 0 {
		return Row{}, errors.New("no upstream process found")
	}
	proxyCPU, upCPU, selfCPU := newCPUMeter(), newCPUMeter(ups...), newCPUMeter(os.Getpid())
	if t.proxyPID != 0 {
		proxyCPU = newCPUMeter(t.proxyPID)
	}
	p0, u0, s0, m0 := proxyCPU.read(), upCPU.read(), selfCPU.read(), machineBusy()
	if t.startProfile != nil {
		if err := t.startProfile(); err != nil {
			return Row{}, err
		}
	}
	ph := load(ctx, o.Clients, bound{calls: o.Calls, time: o.Duration}, t.call)
	p1, u1, s1, m1, load1 := proxyCPU.read(), upCPU.read(), selfCPU.read(), machineBusy(), loadAvg()
	o.progress("%s / %s: measured", up.Name, tname)
	if t.stopProfile != nil {
		if err := t.stopProfile(); err != nil {
			return Row{}, err
		}
	}
	var serialP50 time.Duration
	if o.SerialCalls > 0 {
		if sp := load(ctx, 1, bound{calls: o.SerialCalls, time: 2 * time.Second}, t.call); len(sp.lat) > 0 {
			serialP50 = sp.quantile(0.5)
		}
	}
	row := Row{
		Upstream: up.Name, Target: tname, Proto: t.proto,
		Calls: len(ph.lat), Errors: ph.errors, Elapsed: ph.elapsed,
		P50: ph.quantile(0.50), P99: ph.quantile(0.99), SerialP50: serialP50,
		ProxyCPU: p1 - p0, UpstreamCPU: u1 - u0, ClientCPU: s1 - s0, HasProxy: t.proxyPID != 0,
		LoadAvg: load1,
	}
	if ph.elapsed > 0 {
		others := (m1 - m0) - row.ProxyCPU - row.UpstreamCPU - row.ClientCPU
		row.OtherCores = max(0, others.Seconds()/ph.elapsed.Seconds())
	}
	if ph.firstEr != nil {
		row.FirstError = ph.firstEr.Error()
	}
	if ph.elapsed > 0 {
		row.RPS = float64(row.Calls) / ph.elapsed.Seconds()
	}
	return row, nil
}

// evaluate computes the targets from the rows.
func (r *Result) evaluate() {
	ratio := func(name string, a, b float64, want float64, atLeast bool, missing bool) Check {
		c := Check{Name: name, Missing: missing}
		if missing {
			c.Value, c.Want = "—", ""
			return c
		}
		v := a / b
		if atLeast {
			c.Want = fmt.Sprintf("≥ %.2f", want)
			c.Pass = v >= want
		} else {
			c.Want = fmt.Sprintf("< %.2f", want)
			c.Pass = v < want
		}
		c.Value = fmt.Sprintf("%.2f", v)
		return c
	}
	ts, okT := r.row(upstreamGo, targetToolserverd)
	direct, okD := r.row(upstreamGo, targetDirect)
	for _, npm := range []string{targetMCPProxy, targetSupergateway} {
		n, ok := r.row(upstreamGo, npm)
		r.Checks = append(r.Checks, ratio("go: calls/s toolserverd / "+npm, ts.RPS, n.RPS, 2, true, !okT || !ok))
	}
	added := Check{Name: "go: p50 toolserverd − direct", Missing: !okT || !okD, Value: "—"}
	if !added.Missing {
		d := ts.P50 - direct.P50
		added.Value = fmt.Sprintf("%+.3f ms", float64(d)/1e6)
		added.Want = "< 0.500 ms"
		added.Pass = d < 500*time.Microsecond
	}
	r.Checks = append(r.Checks, added)
	if okT && okD && ts.SerialP50 > 0 && direct.SerialP50 > 0 {
		d := ts.SerialP50 - direct.SerialP50
		r.Checks = append(r.Checks, Check{Name: "go: p50@1 toolserverd − direct (one caller)", Value: fmt.Sprintf("%+.3f ms", float64(d)/1e6),
			Want: "< 0.500 ms", Pass: d < 500*time.Microsecond, Info: true})
	}
	for _, npm := range []string{targetMCPProxy, targetSupergateway} {
		n, ok := r.row(upstreamGo, npm)
		r.Checks = append(r.Checks, ratio("go: CPU/call toolserverd / "+npm, ts.perK(ts.ProxyCPU), n.perK(n.ProxyCPU), 1.0/3, false, !okT || !ok || n.ProxyCPU == 0))
	}
	te, okT := r.row(upstreamEverything, targetToolserverd)
	best, okB := Row{}, false
	for _, name := range []string{targetDirect, targetMCPProxy} {
		if x, ok := r.row(upstreamEverything, name); ok && x.RPS > best.RPS {
			best, okB = x, true
		}
	}
	c := ratio("everything: calls/s toolserverd / best of direct, mcp-proxy", te.RPS, best.RPS, 0.9, true, !okT || !okB)
	if okB {
		c.Name += " (" + best.Target + ")"
	}
	r.Checks = append(r.Checks, c)
	if mp, ok := r.row(upstreamEverything, targetMCPProxy); ok && okT && best.Target != targetMCPProxy {
		c := ratio("everything: calls/s toolserverd / mcp-proxy", te.RPS, mp.RPS, 0.9, true, false)
		c.Info = true
		r.Checks = append(r.Checks, c)
	}
}

// Print writes the table and the targets.
func (r *Result) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "mcpcompare: %d callers; per configuration ≤%d calls or ≤%s measured, after ≤%d calls or ≤%s of warm-up; %d CPUs, %s, node %s\n",
		o.Clients, o.Calls, o.Duration, o.WarmupCalls, o.Warmup, runtime.NumCPU(), runtime.Version(), r.Node)
	fmt.Fprintf(w, "%-10s %-12s %7s %4s %8s %9s %9s %9s %10s %10s %10s %7s %5s  %s\n",
		"upstream", "target", "calls", "err", "calls/s", "p50", "p99", "p50@1", "proxy CPU", "upstr CPU", "client CPU", "others", "load", "client protocol")
	for _, x := range r.Rows {
		proxy := "n/a"
		if x.HasProxy {
			proxy = fmt.Sprintf("%.3f", x.perK(x.ProxyCPU))
		}
		serial := "—"
		if x.SerialP50 > 0 {
			serial = ms(x.SerialP50)
		}
		fmt.Fprintf(w, "%-10s %-12s %7d %4d %8.0f %9s %9s %9s %10s %10.3f %10.3f %7.2f %5s  %s\n",
			x.Upstream, x.Target, x.Calls, x.Errors, x.RPS, ms(x.P50), ms(x.P99), serial, proxy, x.perK(x.UpstreamCPU), x.perK(x.ClientCPU), x.OtherCores, x.LoadAvg, x.Proto)
		if x.FirstError != "" {
			fmt.Fprintf(w, "%23s first error: %s\n", "", oneLine(x.FirstError))
		}
	}
	fmt.Fprintf(w, "p50 and p99 with %d callers; p50@1: with one caller, after the measured window (no queueing).\n", o.Clients)
	fmt.Fprintln(w, "CPU columns: CPU-seconds per 1,000 calls during the measured window, from /proc/PID/stat utime+stime:")
	fmt.Fprintln(w, "  proxy = the proxy process alone (toolserverd daemon, node mcp-proxy, node supergateway; n/a for direct),")
	fmt.Fprintln(w, "  upstr = the upstream server process(es) below it, client = this benchmark process (the mcp-go or HTTP client).")
	fmt.Fprintln(w, "others: CPUs used on average by processes outside the benchmark during the window; load: 1-min load average after it.")
	fmt.Fprintln(w, "targets:")
	for _, c := range r.Checks {
		verdict := "MISS"
		switch {
		case c.Missing:
			verdict = "n/a (not measured)"
		case c.Pass:
			verdict = "PASS"
		}
		if c.Info {
			verdict += " (info, not a target)"
		}
		fmt.Fprintf(w, "  %-66s %12s  %-11s %s\n", c.Name, c.Value, c.Want, verdict)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "mcpcompare: %5.1fs "+format+"\n", append([]any{time.Since(o.started).Seconds()}, args...)...)
	}
}

func (o *Options) defaults() error {
	if o.started.IsZero() {
		o.started = time.Now()
	}
	if o.Clients <= 0 {
		return errors.New("clients must be positive")
	}
	if o.Calls <= 0 || o.Duration <= 0 {
		return errors.New("calls and duration must be positive")
	}
	if o.Warmup <= 0 || o.WarmupCalls <= 0 {
		return errors.New("warm-up calls and time must be positive")
	}
	if len(o.Upstreams) == 0 {
		o.Upstreams = []string{upstreamGo, upstreamEverything}
	}
	if len(o.Targets) == 0 {
		o.Targets = allTargets
	}
	for _, t := range o.Targets {
		if !slices.Contains(allTargets, t) {
			return fmt.Errorf("unknown target %q (want %s)", t, strings.Join(allTargets, ", "))
		}
	}
	if o.Root == "" {
		_, file, _, _ := runtime.Caller(0)
		o.Root = filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(o.Root, "go.mod")); err != nil {
			// Built with -trimpath: ask the go command where the module is.
			if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output(); err == nil {
				o.Root = strings.TrimSpace(string(out))
			}
		}
	}
	if _, err := os.Stat(filepath.Join(o.Root, "go.mod")); err != nil {
		return fmt.Errorf("repository root %s: %w", o.Root, err)
	}
	if o.NodeModules == "" {
		o.NodeModules = filepath.Join(o.Root, "bench", "mcpcompare", "node_modules")
	}
	if o.EverythingJS == "" {
		o.EverythingJS = filepath.Join(o.Root, "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	}
	return nil
}

// Prerequisites reports what the run needs and is missing: node, the npm packages.
func (o Options) Prerequisites() error {
	if err := o.defaults(); err != nil {
		return err
	}
	var missing []string
	needNode := slices.Contains(o.Upstreams, upstreamEverything) || slices.Contains(o.Targets, targetMCPProxy) || slices.Contains(o.Targets, targetSupergateway)
	if _, err := exec.LookPath("node"); needNode && err != nil {
		missing = append(missing, "node is not on PATH")
	}
	if slices.Contains(o.Upstreams, upstreamEverything) {
		if _, err := os.Stat(o.EverythingJS); err != nil {
			missing = append(missing, "server-everything is not installed (npm ci in testdata/npm)")
		}
	}
	for _, t := range []struct{ name, file string }{
		{targetMCPProxy, filepath.Join(o.NodeModules, "mcp-proxy", "dist", "bin", "mcp-proxy.mjs")},
		{targetSupergateway, filepath.Join(o.NodeModules, "supergateway", "dist", "index.js")},
	} {
		if _, err := os.Stat(t.file); slices.Contains(o.Targets, t.name) && err != nil {
			missing = append(missing, t.name+" is not installed (npm ci in bench/mcpcompare)")
		}
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// upstreams resolves the upstream names, building the Go echo server into binDir
// unless a binary was given.
func (o *Options) upstreams(binDir string) ([]upstream, error) {
	var ups []upstream
	for _, name := range o.Upstreams {
		switch name {
		case upstreamGo:
			bin := o.EchoServer
			if bin == "" {
				var err error
				if bin, err = o.build("./bench/mcpcompare/echoserver", filepath.Join(binDir, "echoserver")); err != nil {
					return nil, err
				}
			}
			ups = append(ups, upstream{Name: upstreamGo, Command: bin})
		case upstreamEverything:
			ups = append(ups, upstream{Name: upstreamEverything, Command: "node", Args: []string{o.EverythingJS, "stdio"}})
		default:
			return nil, fmt.Errorf("unknown upstream %q (want go, everything)", name)
		}
	}
	return ups, nil
}

func (o *Options) build(pkg, out string) (string, error) {
	o.progress("go build %s", pkg)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = o.Root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

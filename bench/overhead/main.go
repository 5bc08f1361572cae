// Command overhead measures what toolserverd adds to a bare HTTP round trip. In one run
// it loads (a) a bare net/http handler that writes three flushed NDJSON lines and (b) a
// real toolserverd (SQLite store, every call durably recorded) executing one no-op tool
// call per request, over the same loopback HTTP/NDJSON path with the same clients, and
// prints requests/s, p50 and p99 of both and their ratios. A third target, (c) "floor",
// is the bare handler plus the one thing toolserverd cannot skip: the call's record,
// committed through the same group committer and SQLite store before the message line.
// It shows how much of the gap is durability and how much is toolserverd's own work.
//
// The targets take turns, -rounds times (A B C A B C …), and each figure printed is the
// median of its rounds: on a shared machine whose speed drifts by a quarter within a
// minute, one pass of each target compares two different machines.
//
//	go run ./bench/overhead [-clients 32] [-duration 5s] [-rounds 3] [-store postgres://…] [-cpuprofile f]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// daemonGCPercent is the GOGC cmd/toolserverd sets when the environment sets none
// (its defaultGCPercent). The three targets share this process, so they all run with
// it: toolserverd as the daemon runs, and the bare handler and the floor with the same
// collector setting.
const daemonGCPercent = 400

func main() {
	gogc := os.Getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(daemonGCPercent)
		gogc = strconv.Itoa(daemonGCPercent) + " (the daemon's default)"
	}
	clients := flag.Int("clients", 32, "concurrent clients")
	duration := flag.Duration("duration", 5*time.Second, "load time per target and round")
	rounds := flag.Int("rounds", 3, "turns of the three targets; figures are medians over them")
	warmup := flag.Duration("warmup", time.Second, "unmeasured load before each target")
	storeURL := flag.String("store", "", "toolserverd store (default: SQLite in a temp dir)")
	sync := flag.String("sqlite-synchronous", "full", "SQLite durability of the floor and of toolserverd: full or normal")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the toolserverd phase")
	memprofile := flag.String("memprofile", "", "write an allocation profile after the run")
	flag.Parse()
	res, err := Run(context.Background(), Options{Clients: *clients, Duration: *duration, Rounds: *rounds, Warmup: *warmup, Store: *storeURL, SQLiteSync: *sync, CPUProfile: *cpuprofile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
	fmt.Printf("GOGC=%s\n", gogc)
	res.Print(os.Stdout)
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
}

// Options of a run.
type Options struct {
	Clients    int
	Duration   time.Duration
	Rounds     int // <= 0: 1
	Warmup     time.Duration
	Store      string
	SQLiteSync string // SQLite's synchronous setting (store.SyncFull, store.SyncNormal) for both
	CPUProfile string
}

// Stats of one target.
type Stats struct {
	Name     string
	Rounds   int
	Requests int // in all rounds
	Warmup   int // successful requests during the unmeasured warm-ups
	Errors   int
	RPS      float64
	P50, P99 time.Duration
	// CPUPerReq is this process's CPU time (user+system, all threads) per measured
	// request: the clients and the target together. Less sensitive to other load on
	// the machine than requests/s.
	CPUPerReq time.Duration
}

// Result of a run.
type Result struct {
	Clients              int
	Sync                 string // SQLite synchronous setting of the floor and toolserverd
	Bare, Floor, Toolsrv Stats
	Recorded             int64 // call records found in the store after the run
	RecordsExpected      int64
	Transactions         uint64 // store transactions during the toolserverd phase
	StoreOps             uint64 // record writes (inserts, finishes) in them
	Folded               uint64 // finishes written with their call's insert, as one row
}

// Print writes the comparison table.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d clients; medians of %d rounds (targets taking turns); SQLite synchronous=%s\n", r.Clients, r.Toolsrv.Rounds, r.Sync)
	fmt.Fprintf(w, "%-12s %10s %8s %10s %10s %12s\n", "target", "req/s", "errors", "p50", "p99", "CPU/req")
	for _, s := range []Stats{r.Bare, r.Floor, r.Toolsrv} {
		fmt.Fprintf(w, "%-12s %10.0f %8d %10s %10s %12s\n", s.Name, s.RPS, s.Errors, s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), s.CPUPerReq.Round(100*time.Nanosecond))
	}
	fmt.Fprintf(w, "throughput ratio (toolserverd/bare): %.2f   (target ≥ 0.80)\n", r.Toolsrv.RPS/r.Bare.RPS)
	fmt.Fprintf(w, "p99 ratio        (toolserverd/bare): %.2f   (target ≤ 2.00)\n", float64(r.Toolsrv.P99)/float64(r.Bare.P99))
	fmt.Fprintf(w, "floor: bare + one durable record per request: throughput %.2f of bare, p99 %.2f× bare; toolserverd is %.2f of the floor\n",
		r.Floor.RPS/r.Bare.RPS, float64(r.Floor.P99)/float64(r.Bare.P99), r.Toolsrv.RPS/r.Floor.RPS)
	fmt.Fprintf(w, "CPU per request added (same clients): by the record %s, by toolserverd %s\n",
		(r.Floor.CPUPerReq - r.Bare.CPUPerReq).Round(100*time.Nanosecond), (r.Toolsrv.CPUPerReq - r.Bare.CPUPerReq).Round(100*time.Nanosecond))
	fmt.Fprintf(w, "calls durably recorded: %d of %d (%d record writes in %d store transactions, %.1f per transaction; %d finishes folded into their insert)\n",
		r.Recorded, r.RecordsExpected, r.StoreOps, r.Transactions, float64(r.StoreOps)/float64(max(r.Transactions, 1)), r.Folded)
}

// Run loads both targets one after the other with the same client setup.
func Run(ctx context.Context, o Options) (Result, error) {
	res := Result{Clients: o.Clients, Sync: o.SQLiteSync}
	if res.Sync == "" {
		res.Sync = store.SyncFull
	}
	body := []byte(`{"calls":[{"id":"call_1","name":"noop","arguments":{}}]}`)

	bareURL, stopBare, err := serveBare()
	if err != nil {
		return res, err
	}
	defer stopBare()

	dir, err := os.MkdirTemp("", "toolserverd-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	floorURL, stopFloor, err := serveFloor(ctx, filepath.Join(dir, "floor.db"), store.SQLiteOptions{Synchronous: o.SQLiteSync})
	if err != nil {
		return res, err
	}
	defer stopFloor()

	cfg := config.Defaults()
	cfg.Auth.Unauthenticated = true // loopback only; the measured path is the same
	cfg.DataDir = dir
	cfg.Store = o.Store
	if o.SQLiteSync != "" {
		cfg.SQLite.Synchronous = o.SQLiteSync
	}
	cfg.ReplicaID = "bench"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return res, err
	}
	defer a.Close()
	a.Tools.MustRegister(noop{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx, ln) }()
	defer func() { stop(); <-served }()
	base := "http://" + ln.Addr().String()

	// One session per client, as separate agents would have.
	urls := make([]string, o.Clients)
	for i := range urls {
		resp, err := http.Post(base+"/v1/sessions", "application/json", bytes.NewReader([]byte(`{"available_tools":["noop"]}`)))
		if err != nil {
			return res, err
		}
		var s struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil || s.ID == "" {
			return res, fmt.Errorf("create session: %v", err)
		}
		urls[i] = base + "/v1/sessions/" + s.ID + "/tool-calls"
	}
	var bare, floor, toolsrv []Stats
	var before, after store.GroupCommitStats
	for round := range max(o.Rounds, 1) {
		st, err := load(ctx, "bare", o, func(int) (string, []byte) { return bareURL, body })
		if err != nil {
			return res, err
		}
		bare = append(bare, st)
		if st, err = load(ctx, "floor", o, func(i int) (string, []byte) { return floorURL + "?session=" + strconv.Itoa(i), body }); err != nil {
			return res, err
		}
		floor = append(floor, st)
		if round == 0 {
			before = a.Commits.Stats()
		}
		if st, err = loadProfiled(ctx, "toolserverd", o, round == 0, func(i int) (string, []byte) { return urls[i], body }); err != nil {
			return res, err
		}
		toolsrv = append(toolsrv, st)
		after = a.Commits.Stats()
	}
	res.Bare, res.Floor, res.Toolsrv = median(bare), median(floor), median(toolsrv)
	// Each call is two durable writes (insert + finish), acknowledged before its
	// message is sent; count them to show nothing was skipped.
	res.Recorded = int64(after.Ops-before.Ops) / 2
	res.StoreOps, res.Transactions = after.Ops-before.Ops, after.Batches-before.Batches
	res.Folded = after.Folded - before.Folded
	res.RecordsExpected = int64(res.Toolsrv.Requests + res.Toolsrv.Warmup)
	return res, nil
}

// loadProfiled is load, under the CPU profile of o.CPUProfile when profile is set.
func loadProfiled(ctx context.Context, name string, o Options, profile bool, target func(int) (string, []byte)) (Stats, error) {
	if !profile || o.CPUProfile == "" {
		return load(ctx, name, o, target)
	}
	f, err := os.Create(o.CPUProfile)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return Stats{}, err
	}
	defer pprof.StopCPUProfile()
	return load(ctx, name, o, target)
}

// median combines rounds: each figure is the median of its rounds (the upper one of
// an even count); counts are summed.
func median(rounds []Stats) Stats {
	pick := func(v func(Stats) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, s := range rounds {
			xs[i] = v(s)
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	out := Stats{Name: rounds[0].Name, Rounds: len(rounds)}
	for _, s := range rounds {
		out.Requests += s.Requests
		out.Warmup += s.Warmup
		out.Errors += s.Errors
	}
	out.RPS = pick(func(s Stats) float64 { return s.RPS })
	out.P50 = time.Duration(pick(func(s Stats) float64 { return float64(s.P50) }))
	out.P99 = time.Duration(pick(func(s Stats) float64 { return float64(s.P99) }))
	out.CPUPerReq = time.Duration(pick(func(s Stats) float64 { return float64(s.CPUPerReq) }))
	return out
}

type noop struct{}

func (noop) Spec() tool.Spec {
	return tool.Spec{Name: "noop", Description: "Does nothing.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`),
		Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}, Risk: tool.RiskSafe}
}

func (noop) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult("ok"), nil
}

// floorLines are the three lines the bare and floor handlers write, shaped like toolserverd's.
var floorLines = [][]byte{
	[]byte(`{"type":"tool_start","tool_call_id":"call_1","call_id":"tc_aaaaaaaaaaaaaaaaaaaaaaaaaa","name":"noop","ts":1761700000.123456}` + "\n"),
	[]byte(`{"type":"message","tool_call_id":"call_1","call_id":"tc_aaaaaaaaaaaaaaaaaaaaaaaaaa","name":"noop","is_error":false,"message":{"role":"tool","tool_call_id":"call_1","name":"noop","content":"ok","is_error":false},"ts":1761700000.123456}` + "\n"),
	[]byte(`{"type":"done","ts":1761700000.123456}` + "\n"),
}

// serveBare starts the baseline: three flushed NDJSON lines shaped like toolserverd's.
func serveBare() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		rc := http.NewResponseController(w)
		for _, l := range floorLines {
			_, _ = w.Write(l)
			_ = rc.Flush()
		}
	})
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// serveFloor starts the bare handler plus a durable record per request: the record is
// queued when the call starts (as toolserverd queues a read-only call's) and the
// handler waits for its final state to commit before writing the message line. The
// records go through store.GroupCommitter into a SQLite store opened as the daemon
// opens it; one session per client, time-ordered call ids, as toolserverd writes them.
func serveFloor(ctx context.Context, path string, opt store.SQLiteOptions) (string, func(), error) {
	db, err := store.OpenSQLiteWith(ctx, path, opt)
	if err != nil {
		return "", nil, err
	}
	gc, err := store.NewGroupCommitter(db, store.GroupCommitConfig{})
	if err == nil {
		err = gc.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		db.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gc.Stop()
		db.Close()
		return "", nil, err
	}
	result := tool.TextResult("ok")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		now := time.Now().UTC()
		c := &store.Call{ID: session.NewTimeID("tc"), SessionID: "ses_" + r.URL.Query().Get("session"), Tenant: "default",
			ToolCallID: "call_1", Name: "noop", Arguments: json.RawMessage(`{}`), Status: store.CallRunning,
			Owner: "bench", CreatedAt: now, StartedAt: &now}
		if err := gc.Enqueue(c); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		rc := http.NewResponseController(w)
		_, _ = w.Write(floorLines[0])
		_ = rc.Flush()
		if err := gc.Finish(r.Context(), store.CallFinish{ID: c.ID, Status: store.CallSucceeded, Result: result}); err != nil {
			return // the client sees a short answer and counts an error
		}
		for _, l := range floorLines[1:] {
			_, _ = w.Write(l)
			_ = rc.Flush()
		}
	})
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); gc.Stop(); db.Close() }, nil
}

// load runs o.Clients clients for o.Warmup (unmeasured) then o.Duration; each request
// is a POST whose NDJSON answer is read to the end and must have three lines.
func load(ctx context.Context, name string, o Options, target func(client int) (string, []byte)) (Stats, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: o.Clients, MaxConnsPerHost: o.Clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	run := func(d time.Duration) ([]time.Duration, int) {
		var mu sync.Mutex
		var all []time.Duration
		errs := 0
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for c := 0; c < o.Clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				url, body := target(c)
				lat := make([]time.Duration, 0, 1<<14)
				br := bufio.NewReaderSize(nil, 64<<10) // one per client, reused
				bad := 0
				for time.Now().Before(end) && ctx.Err() == nil {
					t0 := time.Now()
					if err := roundTrip(client, url, body, br); err != nil {
						bad++
						continue
					}
					lat = append(lat, time.Since(t0))
				}
				mu.Lock()
				all = append(all, lat...)
				errs += bad
				mu.Unlock()
			}()
		}
		wg.Wait()
		return all, errs
	}
	warm, _ := run(o.Warmup) // counted, so records can be checked, not timed
	t0, cpu0 := time.Now(), processCPU()
	lat, errs := run(o.Duration)
	elapsed, cpu := time.Since(t0), processCPU()-cpu0
	if len(lat) == 0 {
		return Stats{}, fmt.Errorf("%s: no successful request (%d errors)", name, errs)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return Stats{
		Name: name, Requests: len(lat), Warmup: len(warm), Errors: errs, RPS: float64(len(lat)) / elapsed.Seconds(),
		P50: lat[len(lat)/2], P99: lat[len(lat)*99/100], CPUPerReq: cpu / time.Duration(len(lat)),
	}, nil
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func roundTrip(c *http.Client, url string, body []byte, br *bufio.Reader) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	br.Reset(resp.Body)
	n := 0
	var last []byte
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			n++
			last = line
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if bytes.Contains(last, []byte(`"done"`)) {
			_, _ = io.Copy(io.Discard, br)
			break
		}
	}
	if n != 3 || !bytes.Contains(last, []byte(`"done"`)) {
		return fmt.Errorf("got %d lines", n)
	}
	return nil
}

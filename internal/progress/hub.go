// Package progress carries the live output of running tool calls to user
// interfaces. It is UI-only: nothing that passes through it becomes part of a
// tool result.
//
// A Hub hands every call an Emitter (a tool.Progress). Each Emit is appended,
// byte for byte, to an append-only log per (call, stream) under Config.Dir and
// published as an Event to the subscribers whose Filter matches. Emits are
// coalesced per (call, stream): an emit arriving within FlushInterval of the
// stream's previous flush is buffered until the window ends or the buffer
// reaches FlushBytes. Each flush writes its bytes to the log and publishes them
// as one event whose Offset is where they begin in that log, so the events of a
// stream, concatenated in order, equal its log exactly, and a consumer that
// missed events (Subscription.Dropped) recovers the gap with Hub.Read.
//
// Pollers read the logs by byte offset with Hub.Read: no loss, no duplicates.
//
// Numeric progress (Emitter.Report) rides on the same path: a report's line goes to
// the "info" stream like any emit, the call keeps the report as its latest Value
// (one per call, message capped), and the event that flushes the line carries the
// value, so reports are coalesced with the text and the latest one wins. Hub.Latest
// reads it at any time.
package progress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CallMeta identifies a call whose progress an Emitter carries.
type CallMeta struct {
	// CallID is the daemon's id (tc_…); it names the call's log directory.
	CallID string
	// ToolCallID is the model's id, unique only within the session.
	ToolCallID string
	SessionID  string
}

// Hub owns every call's progress: coalescing, logs, fan-out and retention.
type Hub struct {
	cfg     Config
	metrics *metrics

	mu      sync.RWMutex
	calls   map[string]*call
	started bool
	stopped bool
	cancel  context.CancelFunc
	gcDone  chan struct{}

	subs subscribers
}

type metrics struct {
	events    prometheus.Counter
	dropped   prometheus.Counter
	bytes     prometheus.Counter
	logErrors prometheus.Counter
}

// NewHub builds a hub and registers its metrics on reg (nil: not registered).
// When cfg.Enabled is set it creates cfg.Dir.
func NewHub(cfg Config, reg prometheus.Registerer) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Hub{cfg: cfg, calls: make(map[string]*call)}
	h.subs.init()
	h.metrics = &metrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolserverd_progress_events_total",
			Help: "Progress events published, including closed events.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolserverd_progress_events_dropped_total",
			Help: "Progress events dropped for a subscriber whose buffer was full.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolserverd_progress_bytes_total",
			Help: "Bytes of tool output published as progress.",
		}),
		logErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolserverd_progress_log_errors_total",
			Help: "Failures to write or open a progress log file.",
		}),
	}
	if reg != nil {
		active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "toolserverd_progress_calls",
			Help: "Calls whose progress state the hub holds in memory (running, or finished in the last 10 s).",
		}, func() float64 {
			h.mu.Lock()
			defer h.mu.Unlock()
			return float64(len(h.calls))
		})
		for _, c := range []prometheus.Collector{h.metrics.events, h.metrics.dropped, h.metrics.bytes, h.metrics.logErrors, active} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("progress: register metrics: %w", err)
			}
		}
	}
	if cfg.Enabled {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("progress: create dir: %w", err)
		}
	}
	return h, nil
}

// Start runs garbage collection of old logs until ctx ends or Stop is called.
func (h *Hub) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started {
		return errors.New("progress: hub already started")
	}
	if h.stopped {
		return errors.New("progress: hub stopped")
	}
	h.started = true
	if !h.cfg.Enabled {
		return nil
	}
	ctx, h.cancel = context.WithCancel(ctx)
	h.gcDone = make(chan struct{})
	go h.runGC(ctx, h.gcDone)
	return nil
}

// Stop ends garbage collection, flushes every pending buffer, closes the log
// files and closes every subscription. Later emits are dropped. Calls still
// running are not marked finished. Stop is idempotent.
func (h *Hub) Stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	cancel, done := h.cancel, h.gcDone
	calls := make([]*call, 0, len(h.calls))
	for _, c := range h.calls {
		calls = append(calls, c)
	}
	h.mu.Unlock()

	if cancel != nil {
		cancel()
		<-done
	}
	for _, c := range calls {
		c.halt()
	}
	h.subs.closeAll()
}

// Begin starts (or rejoins) the progress of a call. With progress disabled, after
// Stop, or without a CallID it returns an emitter that does nothing. A second
// Begin with the same CallID shares the first call's logs and state.
func (h *Hub) Begin(m CallMeta) *Emitter {
	if !h.cfg.Enabled || m.CallID == "" {
		return &Emitter{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return &Emitter{}
	}
	c, ok := h.calls[m.CallID]
	if !ok {
		c = &call{
			hub:  h,
			meta: m,
			dir:  filepath.Join(h.cfg.Dir, encodeName(m.CallID)),
		}
		h.calls[m.CallID] = c
	}
	return &Emitter{c: c}
}

func (h *Hub) lookup(callID string) *call {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.calls[callID]
}

// gcInterval checks often enough that a log outlives Retention by at most half of it.
func (h *Hub) gcInterval() time.Duration {
	return min(max(h.cfg.Retention/2, 10*time.Millisecond), time.Minute)
}

func (h *Hub) linger() time.Duration {
	if h.cfg.FinishedLinger > 0 {
		return h.cfg.FinishedLinger
	}
	return DefaultFinishedLinger
}

func (h *Hub) runGC(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	// Finished calls leave memory every half linger; logs go every gcInterval.
	t := time.NewTicker(min(max(h.linger()/2, 10*time.Millisecond), h.gcInterval()))
	defer t.Stop()
	var collected time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.forgetFinished(now)
			if now.Sub(collected) >= h.gcInterval() {
				h.collect(now)
				collected = now
			}
		}
	}
}

// forgetFinished drops from memory the calls finished more than the linger before
// now. Their logs stay on disk until Retention, read as an earlier process's are, and
// their latest value in latestFile.
func (h *Hub) forgetFinished(now time.Time) {
	cutoff := now.Add(-h.linger())
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, c := range h.calls {
		if fin, at := c.finishedAt(); fin && at.Before(cutoff) {
			delete(h.calls, id)
		}
	}
}

// collect deletes the logs of calls finished more than Retention before now, and
// directories no call in memory owns (left by an earlier process, or by calls
// forgotten after their linger) idle that long.
func (h *Hub) collect(now time.Time) {
	cutoff := now.Add(-h.cfg.Retention)
	type doomedCall struct {
		id string
		c  *call
	}
	var doomed []doomedCall
	h.mu.Lock()
	for id, c := range h.calls {
		if fin, at := c.finishedAt(); fin && at.Before(cutoff) {
			doomed = append(doomed, doomedCall{id, c})
		}
	}
	h.mu.Unlock()
	// The logs go first, then the call: a call the hub no longer knows has no logs left.
	for _, d := range doomed {
		if err := os.RemoveAll(d.c.dir); err != nil {
			h.metrics.logErrors.Inc()
		}
		h.mu.Lock()
		if h.calls[d.id] == d.c {
			delete(h.calls, d.id)
		}
		h.mu.Unlock()
	}

	entries, err := os.ReadDir(h.cfg.Dir)
	if err != nil {
		return
	}
	var stale []string
	for _, e := range entries {
		dir := filepath.Join(h.cfg.Dir, e.Name())
		if e.IsDir() && latestModTime(dir).Before(cutoff) {
			stale = append(stale, dir)
		}
	}
	if len(stale) == 0 {
		return
	}
	// Under the lock so that Begin cannot claim a directory while it goes.
	h.mu.Lock()
	defer h.mu.Unlock()
	owned := make(map[string]bool, len(h.calls))
	for _, c := range h.calls {
		owned[c.dir] = true
	}
	for _, dir := range stale {
		if !owned[dir] {
			_ = os.RemoveAll(dir)
		}
	}
}

// latestModTime is the newest modification time of dir and the files in it.
func latestModTime(dir string) time.Time {
	var latest time.Time
	if fi, err := os.Stat(dir); err == nil {
		latest = fi.ModTime()
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.ModTime().After(latest) {
			latest = fi.ModTime()
		}
	}
	return latest
}

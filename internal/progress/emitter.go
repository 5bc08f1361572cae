package progress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	// maxStreams bounds the log files one call may open; emits on further
	// stream names are dropped.
	maxStreams = 16
	// maxStreamName bounds stream names; longer names are truncated.
	maxStreamName = 64
	// defaultStream names the stream of an Emit that gives none.
	defaultStream = "stdout"
	// reportStream carries the text line of every Report.
	reportStream = "info"
	// MaxMessage bounds a report's message in bytes; longer ones are cut.
	MaxMessage = 1 << 10
	// keepBufCap is the largest buffer a stream keeps between flushes once it
	// has slowed to timer-driven flushes; busier streams reuse theirs.
	keepBufCap = 4 << 10
)

// Emitter is one call's tool.Progress. Emit never waits for consumers: it
// appends to a buffer or a local log file and hands events to subscribers
// without blocking. The zero Emitter (and a nil one) does nothing.
type Emitter struct {
	c *call
}

// Emit sends text on a stream ("stdout", "stderr", "info"; empty means stdout).
// text may hold any bytes; they are logged unchanged. Emits after Close are
// dropped.
func (e *Emitter) Emit(stream, text string) {
	if e == nil || e.c == nil || text == "" {
		return
	}
	e.c.emit(stream, text)
}

// Report records the call's numeric progress (see tool.Reporter): it becomes the
// call's latest Value (Hub.Latest) and its line (tool.ProgressLine) is emitted on
// the "info" stream. The value is published with that stream's next flush, so it is
// coalesced with the text: of reports within one window the event carries the
// latest. Numbers that are not finite or are negative are dropped; a message longer
// than MaxMessage is cut.
func (e *Emitter) Report(progress, total float64, message string) {
	if e == nil || e.c == nil {
		return
	}
	e.c.report(progress, total, message)
}

// Close flushes every pending stream, then publishes the call's one closed
// event and marks it finished. Later calls do nothing.
func (e *Emitter) Close() {
	if e == nil || e.c == nil {
		return
	}
	e.c.close()
}

// Hold keeps the call's progress open past Close until release is called (see
// tool.ProgressHolder): emits are still taken, and the closed event and the finished
// state come at the later of Close and the last release. release is idempotent.
func (e *Emitter) Hold() (release func()) {
	if e == nil || e.c == nil {
		return func() {}
	}
	return e.c.hold()
}

// Held reports whether the call's progress goes on past Close: Close was called and a
// Hold is not released yet (a background job still streams under the call).
func (e *Emitter) Held() bool {
	if e == nil || e.c == nil {
		return false
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	return e.c.closing && !e.c.closed && !e.c.halted
}

// WhenEnded runs fn, in a goroutine of its own, once the call's progress has ended:
// closed, or cut off by the hub's Stop. If it has already ended, fn runs at once.
func (e *Emitter) WhenEnded(fn func()) {
	if e == nil || e.c == nil {
		go fn()
		return
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if e.c.closed || e.c.halted {
		go fn()
		return
	}
	e.c.ended = append(e.c.ended, fn)
}

// call is the progress state of one tool call. mu serializes emits, flushes and
// publication, which keeps each call's events in log order.
type call struct {
	hub  *Hub
	meta CallMeta
	dir  string

	mu      sync.Mutex
	streams map[string]*stream
	order   []*stream
	dirMade bool
	closed  bool // the call's progress is finished
	holds   int  // Holds not released yet: Close waits for them
	closing bool // Close was called while held
	halted  bool // the hub stopped
	doneAt  time.Time
	latest  Value    // the last report; Seq 0: none
	ended   []func() // WhenEnded's, run when the call ends or halts
}

// stream is one (call, stream) log and its coalescing buffer.
type stream struct {
	name      string
	path      string
	file      *os.File
	logErr    error // first failure to open or write the log; Read reports it
	size      int64 // bytes published, which is the log's size unless logErr
	buf       []byte
	lastFlush time.Time
	timer     *time.Timer
	seq       uint64 // invalidates a timer whose callback already started
	report    bool   // the buffer holds a report's line: its flush carries the value
}

func (c *call) finishedAt() (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed, c.doneAt
}

func (c *call) emit(name, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.halted {
		return
	}
	if st := c.stream(name); st != nil {
		c.buffer(st, text)
	}
}

func (c *call) report(progress, total float64, message string) {
	if !tool.ValidProgress(progress, total) {
		if message != "" {
			c.emit(reportStream, capMessage(message)+"\n")
		}
		return
	}
	message = capMessage(message)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.halted {
		return
	}
	c.latest = Value{Progress: progress, Total: total, Message: message, Seq: c.latest.Seq + 1, TS: time.Now()}
	// Past maxStreams the value is still the latest (pollers read it), unpublished.
	if st := c.stream(reportStream); st != nil {
		st.report = true
		c.buffer(st, tool.ProgressLine(progress, total, message))
	}
}

// buffer adds text to a stream, publishing at once or when the window ends.
func (c *call) buffer(st *stream, text string) {
	cfg := &c.hub.cfg
	if cfg.FlushInterval == 0 {
		c.publish(st, text, time.Now())
		return
	}
	now := time.Now()
	if len(st.buf) == 0 {
		// Leading edge: output after a quiet window goes out at once, so sparse
		// output has no added latency; large chunks skip the copy.
		if now.Sub(st.lastFlush) >= cfg.FlushInterval || len(text) >= cfg.FlushBytes {
			c.publish(st, text, now)
			return
		}
	}
	st.buf = append(st.buf, text...)
	if len(st.buf) >= cfg.FlushBytes {
		c.flush(st, now, true)
		return
	}
	if st.timer == nil {
		c.arm(st, st.lastFlush.Add(cfg.FlushInterval).Sub(now))
	}
}

// stream returns the named stream, creating it; nil past maxStreams.
func (c *call) stream(name string) *stream {
	if name == "" {
		name = defaultStream
	}
	if len(name) > maxStreamName {
		name = name[:maxStreamName]
	}
	if st, ok := c.streams[name]; ok {
		return st
	}
	if len(c.order) >= maxStreams {
		return nil
	}
	st := &stream{name: name, path: filepath.Join(c.dir, encodeName(name)+logSuffix)}
	if c.streams == nil { // most calls write no output: made on the first stream
		c.streams = map[string]*stream{}
	}
	c.streams[name] = st
	c.order = append(c.order, st)
	return st
}

func (c *call) arm(st *stream, d time.Duration) {
	st.seq++
	seq := st.seq
	st.timer = time.AfterFunc(d, func() { c.onTimer(st, seq) })
}

func (c *call) disarm(st *stream) {
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
		st.seq++
	}
}

func (c *call) onTimer(st *stream, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.halted || st.seq != seq {
		return
	}
	st.timer = nil
	c.flush(st, time.Now(), false)
}

// flush publishes the buffered bytes of st, if any. keep says whether the
// buffer's memory is worth reusing (the stream is busy).
func (c *call) flush(st *stream, now time.Time, keep bool) {
	c.disarm(st)
	if len(st.buf) == 0 {
		return
	}
	text := string(st.buf)
	if keep || cap(st.buf) <= keepBufCap {
		st.buf = st.buf[:0]
	} else {
		st.buf = nil
	}
	c.publish(st, text, now)
}

// publish appends text to the stream's log and fans it out as one event.
func (c *call) publish(st *stream, text string, now time.Time) {
	off := st.size
	c.writeLog(st, text)
	st.size += int64(len(text))
	st.lastFlush = now
	c.hub.metrics.bytes.Add(float64(len(text)))
	var v *Value
	if st.report {
		st.report = false
		latest := c.latest
		v = &latest
	}
	c.hub.publish(Event{
		CallID:     c.meta.CallID,
		ToolCallID: c.meta.ToolCallID,
		SessionID:  c.meta.SessionID,
		Stream:     st.name,
		Text:       text,
		Offset:     off,
		Progress:   v,
		TS:         now,
	})
}

// writeLog appends to the stream's log, opening it on first use. A failure is
// remembered and the live events go on; Read reports the broken log.
func (c *call) writeLog(st *stream, text string) {
	if st.logErr != nil {
		return
	}
	if st.file == nil {
		if !c.dirMade {
			if err := os.MkdirAll(c.dir, 0o700); err != nil {
				c.logFailed(st, err)
				return
			}
			c.dirMade = true
		}
		// O_TRUNC: a log left by an earlier process under the same call id is stale.
		f, err := os.OpenFile(st.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
		if err != nil {
			c.logFailed(st, err)
			return
		}
		st.file = f
	}
	if _, err := st.file.WriteString(text); err != nil {
		c.logFailed(st, err)
	}
}

func (c *call) logFailed(st *stream, err error) {
	st.logErr = err
	c.hub.metrics.logErrors.Inc()
}

// close ends the call: flush all, close the logs, publish the closed event.
func (c *call) hold() (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.halted {
		return func() {}
	}
	c.holds++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.holds--; c.holds == 0 && c.closing {
				c.closeLocked()
			}
		})
	}
}

func (c *call) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds > 0 {
		c.closing = true
		return
	}
	c.closeLocked()
}

func (c *call) closeLocked() {
	if c.closed || c.halted {
		return
	}
	now := time.Now()
	c.finish(now)
	c.closed = true
	c.doneAt = now
	c.runEnded()
	c.saveLatest()
	c.hub.publish(Event{
		CallID:     c.meta.CallID,
		ToolCallID: c.meta.ToolCallID,
		SessionID:  c.meta.SessionID,
		Closed:     true,
		TS:         now,
	})
}

// saveLatest writes the latest value next to the logs, where it is read once the
// hub has forgotten the call (FinishedLinger). A write that fails loses the value
// only: the logs hold the report's line.
func (c *call) saveLatest() {
	if c.latest.Seq == 0 {
		return
	}
	b, err := json.Marshal(c.latest)
	if err == nil && !c.dirMade {
		if err = os.MkdirAll(c.dir, 0o700); err == nil {
			c.dirMade = true
		}
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(c.dir, latestFile), b, 0o600)
	}
	if err != nil {
		c.hub.metrics.logErrors.Inc()
	}
}

// halt is the hub's Stop: flush and close the logs without finishing the call.
func (c *call) halt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.halted {
		return
	}
	c.finish(time.Now())
	c.halted = true
	c.runEnded()
}

// runEnded starts the WhenEnded functions; c.mu is held.
func (c *call) runEnded() {
	for _, fn := range c.ended {
		go fn()
	}
	c.ended = nil
}

func (c *call) finish(now time.Time) {
	for _, st := range c.order {
		c.flush(st, now, false)
		st.buf = nil
		if st.file != nil {
			if err := st.file.Close(); err != nil && st.logErr == nil {
				c.logFailed(st, err)
			}
			st.file = nil
		}
	}
}

// capMessage cuts a message to MaxMessage bytes on a character boundary, ending it
// with "…" when cut.
func capMessage(m string) string {
	if len(m) <= MaxMessage {
		return m
	}
	const ell = "…"
	return strings.ToValidUTF8(m[:MaxMessage-len(ell)], "") + ell
}

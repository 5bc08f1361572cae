package progress

import (
	"errors"
	"fmt"
	"time"
)

// Defaults, as documented in DESIGN.md ("default 50 ms window, 16 KiB flush").
const (
	DefaultFlushInterval    = 50 * time.Millisecond
	DefaultFlushBytes       = 16 << 10
	DefaultRetention        = time.Hour
	DefaultSubscriberBuffer = 1024
	DefaultFinishedLinger   = 10 * time.Second

	// maxFlushBytes bounds FlushBytes so a misconfiguration cannot make every
	// stream buffer gigabytes in memory.
	maxFlushBytes = 64 << 20
)

// Config configures a Hub. Start from DefaultConfig: the zero value of
// FlushInterval is meaningful (no coalescing), so zero fields are not defaulted.
type Config struct {
	// Enabled false makes every emitter a no-op (TOOLSERVER_PROGRESS_ENABLED=false).
	Enabled bool
	// FlushInterval is the coalescing window per (call, stream). Zero publishes
	// every Emit as its own event.
	FlushInterval time.Duration
	// FlushBytes flushes a stream's buffer at once when it reaches this size.
	FlushBytes int
	// Dir holds one directory per call with one append-only log per stream. It
	// should belong to this process alone: garbage collection removes any
	// directory in it that has been idle longer than Retention.
	Dir string
	// Retention is how long the logs of a finished call stay readable.
	Retention time.Duration
	// SubscriberBuffer is how many events a subscriber may have unread before
	// further events are dropped for it (and counted).
	SubscriberBuffer int
	// FinishedLinger is how long a finished call's state stays in memory; after it
	// the call is read from its logs on disk (until Retention), as an earlier
	// process's are. Memory then holds the running calls and the last seconds'
	// finished ones, not a Retention's worth. Zero means DefaultFinishedLinger.
	FinishedLinger time.Duration
}

// DefaultConfig returns the documented defaults with Enabled set. Dir has no
// default: the caller chooses where logs live.
func DefaultConfig() Config {
	return Config{
		Enabled:          true,
		FlushInterval:    DefaultFlushInterval,
		FlushBytes:       DefaultFlushBytes,
		Retention:        DefaultRetention,
		SubscriberBuffer: DefaultSubscriberBuffer,
	}
}

// Validate reports every invalid field at once. A disabled config is always valid.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("progress: flush interval must not be negative, got %v", c.FlushInterval))
	}
	if c.FlushBytes <= 0 || c.FlushBytes > maxFlushBytes {
		errs = append(errs, fmt.Errorf("progress: flush bytes must be in 1..%d, got %d", maxFlushBytes, c.FlushBytes))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("progress: dir is required when progress is enabled"))
	}
	if c.Retention <= 0 {
		errs = append(errs, fmt.Errorf("progress: retention must be positive, got %v", c.Retention))
	}
	if c.FinishedLinger < 0 {
		errs = append(errs, fmt.Errorf("progress: finished linger must not be negative, got %v", c.FinishedLinger))
	}
	if c.SubscriberBuffer <= 0 {
		errs = append(errs, fmt.Errorf("progress: subscriber buffer must be positive, got %d", c.SubscriberBuffer))
	}
	return errors.Join(errs...)
}

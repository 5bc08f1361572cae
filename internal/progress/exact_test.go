package progress

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// chunker produces random bytes in random-size chunks: mostly small writes,
// some medium, a few larger than any flush threshold.
type chunker struct {
	rng *rand.Rand
	src *rand.ChaCha8
	buf []byte
}

func newChunker(seed uint64) *chunker {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	src := rand.NewChaCha8(key)
	return &chunker{rng: rand.New(src), src: src, buf: make([]byte, 64<<10)}
}

func (c *chunker) next(limit int) []byte {
	var n int
	switch p := c.rng.IntN(100); {
	case p < 70:
		n = 1 + c.rng.IntN(256)
	case p < 95:
		n = 257 + c.rng.IntN(8<<10)
	default:
		n = 1 + c.rng.IntN(64<<10)
	}
	n = min(n, limit)
	_, _ = c.src.Read(c.buf[:n])
	return c.buf[:n]
}

// emitRandom sends size random bytes on stream and returns their hash.
func emitRandom(e *Emitter, stream string, seed uint64, size int) []byte {
	c := newChunker(seed)
	h := sha256.New()
	for left := size; left > 0; {
		chunk := c.next(left)
		h.Write(chunk)
		e.Emit(stream, string(chunk))
		left -= len(chunk)
	}
	return h.Sum(nil)
}

// streamCheck rebuilds streams from events, checking offsets are contiguous.
type streamCheck struct {
	hashes map[string]hash.Hash
	next   map[string]int64
}

func newStreamCheck() *streamCheck {
	return &streamCheck{hashes: map[string]hash.Hash{}, next: map[string]int64{}}
}

func (s *streamCheck) add(ev Event) error {
	if ev.Offset != s.next[ev.Stream] {
		return fmt.Errorf("%s: event at offset %d, want %d", ev.Stream, ev.Offset, s.next[ev.Stream])
	}
	if s.hashes[ev.Stream] == nil {
		s.hashes[ev.Stream] = sha256.New()
	}
	s.hashes[ev.Stream].Write([]byte(ev.Text))
	s.next[ev.Stream] += int64(len(ev.Text))
	return nil
}

func (s *streamCheck) sum(stream string) []byte {
	if s.hashes[stream] == nil {
		return sha256.New().Sum(nil)
	}
	return s.hashes[stream].Sum(nil)
}

func TestExactness(t *testing.T) {
	t.Parallel()
	size := 50 << 20
	if testing.Short() {
		size = 4 << 20
	}
	for _, window := range []time.Duration{0, time.Millisecond, 50 * time.Millisecond} {
		for _, flush := range []int{4 << 10, 16 << 10} {
			t.Run(fmt.Sprintf("window=%v/flush=%d", window, flush), func(t *testing.T) {
				t.Parallel()
				h, reg := newTestHub(t, func(c *Config) {
					c.FlushInterval, c.FlushBytes, c.SubscriberBuffer = window, flush, 1<<16
				})
				sub := h.Subscribe(Filter{CallIDs: []string{"tc_x"}})
				check := newStreamCheck()
				consumed := make(chan error, 1)
				go func() {
					for ev := range sub.Events() {
						if ev.Closed {
							consumed <- nil
							return
						}
						if err := check.add(ev); err != nil {
							consumed <- err
							return
						}
					}
				}()

				e := h.Begin(CallMeta{CallID: "tc_x", SessionID: "ses"})
				want := map[string][]byte{}
				var wg sync.WaitGroup
				var mu sync.Mutex
				for i, stream := range []string{"stdout", "stderr"} {
					n := size >> (3 * i) // stderr: an eighth, written concurrently
					wg.Go(func() {
						sum := emitRandom(e, stream, uint64(i+1), n)
						mu.Lock()
						want[stream] = sum
						mu.Unlock()
					})
				}
				wg.Wait()
				e.Close()
				if err := <-consumed; err != nil {
					t.Fatal(err)
				}
				sub.Close()
				if sub.Dropped() != 0 {
					t.Fatalf("fast subscriber dropped %d events", sub.Dropped())
				}
				for stream, sum := range want {
					if got := check.sum(stream); !bytes.Equal(got, sum) {
						t.Errorf("%s: events hash %x, input %x", stream, got, sum)
					}
					for _, max := range []int{4093, 64 << 10, 0} {
						got := sha256.Sum256(readAll(t, h, "tc_x", stream, max))
						if !bytes.Equal(got[:], sum) {
							t.Errorf("%s: Read(max=%d) hash %x, input %x", stream, max, got, sum)
						}
					}
				}
				if d := counter(t, reg, "toolserverd_progress_events_dropped_total"); d != 0 {
					t.Fatalf("dropped_total = %v", d)
				}
			})
		}
	}
}

// A consumer too slow for its buffer loses events, sees the loss as an offset
// gap, and reads the missing bytes back from the log.
func TestDroppedEventsRecoveredByOffset(t *testing.T) {
	t.Parallel()
	h, reg := newTestHub(t, func(c *Config) {
		c.FlushInterval, c.FlushBytes, c.SubscriberBuffer = time.Millisecond, 4<<10, 4
	})
	sub := h.Subscribe(Filter{SessionID: "ses"})
	halfway := make(chan struct{})
	type result struct {
		sums     map[string][]byte
		gaps     int
		finished bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		<-halfway // guarantees the tiny buffer overflows
		got := map[string]*bytes.Buffer{"stdout": {}, "stderr": {}}
		var r result
		fill := func(stream string, upTo int64) error {
			for off := int64(got[stream].Len()); off < upTo; {
				data, next, fin, err := h.Read("tc_slow", stream, off, int(upTo-off))
				if err != nil {
					return err
				}
				if len(data) == 0 {
					r.finished = fin
					return nil
				}
				got[stream].Write(data)
				off = next
			}
			return nil
		}
		for ev := range sub.Events() {
			time.Sleep(100 * time.Microsecond)
			if ev.Closed {
				continue
			}
			have := int64(got[ev.Stream].Len())
			switch {
			case ev.Offset < have:
				r.err = fmt.Errorf("%s: duplicate bytes at %d (have %d)", ev.Stream, ev.Offset, have)
			case ev.Offset > have:
				r.gaps++
				r.err = fill(ev.Stream, ev.Offset)
			}
			if r.err != nil {
				done <- r
				return
			}
			got[ev.Stream].WriteString(ev.Text)
		}
		// The channel is closed: catch up to the end, as the closed event may be lost.
		r.sums = map[string][]byte{}
		for stream, buf := range got {
			if r.err = fill(stream, 1<<62); r.err != nil {
				break
			}
			sum := sha256.Sum256(buf.Bytes())
			r.sums[stream] = sum[:]
		}
		done <- r
	}()

	e := h.Begin(CallMeta{CallID: "tc_slow", SessionID: "ses"})
	const size = 8 << 20
	want := map[string][]byte{}
	want["stderr"] = emitRandom(e, "stderr", 7, size/8)
	close(halfway)
	want["stdout"] = emitRandom(e, "stdout", 8, size)
	e.Close()
	sub.Close()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.finished {
		t.Error("Read did not report the call finished at the end of its log")
	}
	for stream, sum := range want {
		if !bytes.Equal(r.sums[stream], sum) {
			t.Errorf("%s: recovered hash %x, input %x", stream, r.sums[stream], sum)
		}
	}
	if sub.Dropped() == 0 || r.gaps == 0 {
		t.Fatalf("dropped %d events, saw %d gaps; the test needs losses", sub.Dropped(), r.gaps)
	}
	if d := counter(t, reg, "toolserverd_progress_events_dropped_total"); d != float64(sub.Dropped()) {
		t.Fatalf("dropped_total = %v, subscription dropped %d", d, sub.Dropped())
	}
}

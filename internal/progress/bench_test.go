package progress

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkEmitCoalesced measures throughput through Emit at the default
// settings (50 ms window, 16 KiB flush) to one subscriber that keeps up,
// including the log writes.
func BenchmarkEmitCoalesced(b *testing.B) {
	for _, size := range []int{64, 1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("chunk=%d", size), func(b *testing.B) {
			h, _ := newTestHub(b, nil)
			sub := h.Subscribe(Filter{CallIDs: []string{"tc_bench"}})
			received := make(chan int64, 1)
			go func() {
				var n int64
				for ev := range sub.Events() {
					if ev.Closed {
						received <- n
						return
					}
					n += int64(len(ev.Text))
				}
			}()
			e := h.Begin(CallMeta{CallID: "tc_bench"})
			chunk := strings.Repeat("x", size-1) + "\n"
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				e.Emit("stdout", chunk)
			}
			e.Close()
			got := <-received
			b.StopTimer()
			b.ReportMetric(float64(sub.Dropped()), "dropped")
			if sub.Dropped() == 0 && got != int64(b.N)*int64(size) {
				b.Fatalf("received %d bytes, sent %d", got, int64(b.N)*int64(size))
			}
		})
	}
}

// BenchmarkEmitLatency measures the time from Emit to the receipt of the event
// carrying its bytes at the default 50 ms window, for one line emitted every gap.
// Each op is one emit followed by a sleep of gap.
func BenchmarkEmitLatency(b *testing.B) {
	for _, gap := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) {
			h, _ := newTestHub(b, nil)
			sub := h.Subscribe(Filter{CallIDs: []string{"tc_lat"}})
			type receipt struct {
				end int64
				at  time.Time
			}
			receipts := make(chan []receipt, 1)
			go func() {
				var rs []receipt
				for ev := range sub.Events() {
					at := time.Now()
					if ev.Closed {
						receipts <- rs
						return
					}
					rs = append(rs, receipt{ev.Offset + int64(len(ev.Text)), at})
				}
			}()
			e := h.Begin(CallMeta{CallID: "tc_lat"})
			const line = "a line of output from a running tool\n"
			sent := make([]time.Time, 0, b.N)
			b.ResetTimer()
			for range b.N {
				sent = append(sent, time.Now())
				e.Emit("stdout", line)
				time.Sleep(gap)
			}
			e.Close()
			rs := <-receipts
			b.StopTimer()

			lat := make([]time.Duration, 0, len(sent))
			j := 0
			for i, at := range sent {
				end := int64(i+1) * int64(len(line))
				for j < len(rs) && rs[j].end < end {
					j++
				}
				if j == len(rs) {
					b.Fatalf("emit %d never delivered (dropped %d)", i, sub.Dropped())
				}
				lat = append(lat, rs[j].at.Sub(at))
			}
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(len(rs))/float64(len(sent)), "events/emit")
		})
	}
}

package server_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// BenchmarkToolCall runs one echo call per request through a real daemon over
// loopback HTTP (SQLite store, synchronous=normal so that disk syncs do not drown
// the daemon's own work), from parallel clients with a session each. cpu-µs/op is
// the process's CPU (user+system: the clients and the daemon) per call; compare
// builds by ratio, in one run, alternately.
func BenchmarkToolCall(b *testing.B) {
	d := startDaemon(b, daemonOpts{mutate: func(c *config.Config) { c.SQLite.Synchronous = "normal" }})
	body := []byte(`{"calls":[{"id":"call_1","name":"echo","arguments":{"text":"ok"}}]}`)
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	const par = 4 // clients per GOMAXPROCS
	b.SetParallelism(par)
	urls := make(chan string, par*runtime.GOMAXPROCS(0))
	for range cap(urls) {
		urls <- d.url + "/v1/sessions/" + d.createSession(map[string]any{"available_tools": []string{"echo"}})["id"].(string) + "/tool-calls"
	}
	b.ResetTimer()
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		url := <-urls
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"type":"done"`)) {
				b.Errorf("status %d, %v: %s", resp.StatusCode, err, got)
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package telemetry_test

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// topBucket is the largest finite upper bound of m's histogram; 0 if none.
func topBucket(m *dto.Metric) float64 {
	top := 0.0
	if m == nil || m.Histogram == nil {
		return top
	}
	for _, b := range m.Histogram.Bucket {
		if ub := b.GetUpperBound(); !math.IsInf(ub, 1) && ub > top {
			top = ub
		}
	}
	return top
}

// TestCallDurationBucketsCoverMaxTimeout: a call may run for calls.max_timeout, so the
// duration histograms have a finite bucket at or above it (a 30-minute call must not
// fall into +Inf with everything above 7 minutes).
func TestCallDurationBucketsCoverMaxTimeout(t *testing.T) {
	const maxTimeout = 30 * time.Minute
	d := testdaemon.Start(t, func(c *config.Config) { c.Calls.MaxTimeout = maxTimeout })
	sid := createSession(t, d.URL, `{"available_tools":["execute_command"]}`)
	code, _, b := request(t, "POST", d.URL+"/v1/sessions/"+sid+"/tool-calls", `{"calls":[{"id":"ro","name":"execute_command","arguments":{"command":"echo hi"}}]}`, nil)
	if m := message(t, ndjson(t, b), "ro"); code != 200 || m["is_error"] != false {
		t.Fatalf("call: %d %v", code, m)
	}
	fams := scrape(t, d.URL)
	exec := map[string]string{"tool": "execute_command"}
	for _, name := range []string{"toolserverd_tool_call_duration_seconds", "toolserverd_tool_call_queue_wait_seconds"} {
		if top := topBucket(series(fams, name, exec)); top < maxTimeout.Seconds() {
			t.Errorf("%s: top bucket %gs, below calls.max_timeout %s", name, top, maxTimeout)
		}
	}
	// A tool-call request's stream lasts as long as its calls.
	route := map[string]string{"route": "/v1/sessions/{sessionID}/tool-calls", "method": "POST"}
	if top := topBucket(series(fams, "toolserverd_http_request_duration_seconds", route)); top < maxTimeout.Seconds() {
		t.Errorf("toolserverd_http_request_duration_seconds: top bucket %gs, below calls.max_timeout %s", top, maxTimeout)
	}
}

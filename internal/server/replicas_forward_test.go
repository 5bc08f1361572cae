package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// forwardedJob starts two replicas on one PostgreSQL (configured by mutate) and a
// background job on replica A in a shared session; it returns both and the URL and
// body of a read_job_output call of that job.
func forwardedJob(t testing.TB, mutate func(*config.Config)) (a, b *daemon, path, body string) {
	t.Helper()
	shared := t.TempDir()
	a, b = twoReplicas(t, func(c *config.Config) {
		c.Sessions.WorkdirRoots = []string{shared}
		if mutate != nil {
			mutate(c)
		}
	})
	sess := a.createSession(map[string]any{"available_tools": []string{"execute_command", "read_job_output"}, "workdir": shared})["id"].(string)
	path = "/v1/sessions/" + sess + "/tool-calls"
	code, _, out := a.do("POST", path, `{"calls":[{"id":"c","name":"execute_command","arguments":{"command":"echo job-started; while :; do sleep 0.1; done","background":true}}]}`)
	var job struct {
		Message struct {
			Structured struct {
				JobID string `json:"job_id"`
			} `json:"structured"`
		} `json:"message"`
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(line, []byte(`"type":"message"`)) {
			_ = json.Unmarshal(line, &job)
		}
	}
	if code != 200 || !strings.HasPrefix(job.Message.Structured.JobID, "job_") {
		t.Fatalf("starting a job on A: %d %s", code, out)
	}
	body = fmt.Sprintf(`{"calls":[{"id":"r","name":"read_job_output","arguments":{"job_id":%q}}]}`, job.Message.Structured.JobID)
	// The job runs in the background: wait (on A) until it has printed, so that what
	// a read through B finds does not depend on how soon its echo ran.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, _, out := a.do("POST", path, body); bytes.Contains(out, []byte("job-started")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job printed nothing in 30 s")
		}
	}
	return a, b, path, body
}

// TestForwardedCallNotHeldByFoldWindow: a read-only job call forwarded to the replica
// running the job is on record there before it arrives, however long this replica
// would hold its record for the call's result (calls.record_fold_window): the owner
// checks the record before running the call, and must not be left waiting for it.
func TestForwardedCallNotHeldByFoldWindow(t *testing.T) {
	t.Parallel()
	_, b, path, body := forwardedJob(t, func(c *config.Config) { c.Calls.RecordFoldWindow = 8 * time.Second })
	code, _, out := b.do("POST", path, body)
	if code != 200 || !strings.Contains(string(out), `"is_error":false`) || !strings.Contains(string(out), `job-started`) {
		t.Fatalf("read_job_output through B of A's job, with an 8s fold window: %d %s", code, out)
	}
}

// BenchmarkForwardedJobCall measures one read_job_output call per request on a job
// that replica A runs, sent to A itself (local) and to replica B, which forwards it
// to A (forwarded), with the default fold window. Serial clients: latency, not
// throughput.
func BenchmarkForwardedJobCall(b *testing.B) {
	a, r, path, body := forwardedJob(b, nil)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, bc := range []struct {
		name string
		d    *daemon
	}{{"local", a}, {"forwarded", r}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := client.Post(bc.d.url+path, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(got, []byte(`"is_error":false`)) {
					b.Fatalf("%d %s", resp.StatusCode, got)
				}
			}
		})
	}
}

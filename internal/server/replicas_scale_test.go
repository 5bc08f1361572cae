package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// TestUnsafeCallsSerializedAcrossReplicas: two daemons on one PostgreSQL serve one
// session; execute_command (not concurrency-safe) calls sent to both at once never
// overlap. Each call claims a directory with mkdir, which fails if another call of
// the session holds it, so an overlap is recorded by the command itself, not inferred
// from timing (without the advisory lock half of them overlap).
func TestUnsafeCallsSerializedAcrossReplicas(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) { c.Sessions.WorkdirRoots = []string{shared} })
	replicas := []*daemon{a, b}
	id := replicas[0].createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)

	const perReplica = 4
	cmd := `if mkdir held 2>/dev/null; then sleep 0.2; echo ok >> ran.txt; rmdir held; else echo OVERLAP >> ran.txt; fi`
	bodies := make([][]byte, 2*perReplica)
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := replicas[i%2]
			body := fmt.Sprintf(`{"calls":[{"id":"c%d","name":"execute_command","arguments":{"command":%q}}]}`, i, cmd)
			resp, err := http.Post(d.url+"/v1/sessions/"+id+"/tool-calls", "application/json", strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			bodies[i], errs[i] = io.ReadAll(resp.Body)
			if errs[i] == nil && resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, bodies[i])
			}
		}()
	}
	wg.Wait()
	for i, b := range bodies {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		m := messages(t, parseNDJSON(t, b))[fmt.Sprint("c", i)]
		if m.m["is_error"] != false {
			t.Fatalf("call %d: %s", i, m.raw)
		}
	}
	got, err := os.ReadFile(filepath.Join(shared, "ran.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("ok\n", 2*perReplica); string(got) != want {
		t.Fatalf("ran.txt = %q, want %q: unsafe calls of one session overlapped across replicas", got, want)
	}
	for _, d := range replicas {
		if d.tools.unsafeMax.Load() > 1 {
			t.Fatalf("in-process overlap on %s", d.url)
		}
	}
}

// TestProgressReadOnAnotherReplica: a call runs on replica A; its live output is read
// through replica B, by offset and as an SSE stream, and B answers with A's output
// (forwarded to A's advertised address). Once A has stopped, while its lease holds,
// the output read through B is 503 (out of reach) and the record has the result.
func TestProgressReadOnAnotherReplica(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	a, b := twoReplicas(t, func(c *config.Config) { c.Sessions.WorkdirRoots = []string{shared} })
	id := a.createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)

	callID := make(chan string, 1)
	done := make(chan []byte, 1)
	go func() {
		defer close(done)
		resp, err := http.Post(a.url+"/v1/sessions/"+id+"/tool-calls", "application/json", strings.NewReader(
			`{"calls":[{"id":"p","name":"execute_command","arguments":{"command":"echo first-line; while [ ! -e go ]; do sleep 0.05; done; echo second-line"}}]}`))
		if err != nil {
			close(callID)
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var rest []byte
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
			}
			_ = json.Unmarshal(sc.Bytes(), &ev)
			if ev.Type == "tool_start" {
				callID <- ev.CallID
			}
			rest = append(append(rest, sc.Bytes()...), '\n')
		}
		done <- rest
	}()
	var cid string
	select {
	case c, ok := <-callID:
		if !ok {
			t.Fatal("the call could not be posted to A")
		}
		cid = c
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not start on A")
	}

	read := func(d *daemon) progressRead {
		code, _, body := d.do("GET", "/v1/tool-calls/"+cid+"/progress?offset=0", nil)
		if code != 200 {
			t.Fatalf("progress on %s: %d %s", d.url, code, body)
		}
		var p progressRead
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitFor(t, 30*time.Second, "A's live output read through B", func() bool {
		return strings.Contains(read(b).Data, "first-line")
	})
	if p := read(b); p.Finished {
		t.Fatalf("the running call reads as finished through B: %+v", p)
	}
	if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case rest := <-done:
		if m := messages(t, parseNDJSON(t, rest))["p"]; m.m["is_error"] != false {
			t.Fatalf("the call on A: %s", m.raw)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call on A did not finish")
	}
	waitFor(t, 30*time.Second, "the finished output read through B", func() bool {
		p := read(b)
		return p.Finished && p.Data == "first-line\nsecond-line\n"
	})
	if text, _ := readSSE(t, b, cid, ""); text != "first-line\nsecond-line\n" {
		t.Fatalf("SSE through B: %q", text)
	}

	// A stopped cleanly, giving its lease up: its output went with it, which B says
	// (rather than "finished, no output"); the result is in the record. (An owner
	// alive but out of reach is a 503: replicas_unreachable_test.go.)
	a.stop()
	code, _, body := b.do("GET", "/v1/tool-calls/"+cid+"/progress?offset=0", nil)
	var lost struct {
		Finished   bool `json:"finished"`
		OutputLost bool `json:"output_lost"`
	}
	if code != 200 || json.Unmarshal(body, &lost) != nil || !lost.Finished || !lost.OutputLost {
		t.Fatalf("progress through B with the owner stopped: %d %s; want finished with output_lost", code, body)
	}
	if code, _, body := b.do("GET", "/v1/tool-calls/"+cid, nil); code != 200 || !strings.Contains(string(body), "second-line") {
		t.Fatalf("the call's record through B with the owner stopped: %d %s", code, body)
	}
	// The server-sent-event stream says so too: its closed event, with no output
	// before it, read as a call that printed nothing.
	if text, closed := readSSEClosed(t, b, cid); text != "" || closed["output_lost"] != true {
		t.Fatalf("SSE through B with the owner stopped: output %q, closed event %v; want no output and output_lost", text, closed)
	}
}

// readSSEClosed reads a call's progress stream to its closed event: the stdout text
// before it and the closed event's data.
func readSSEClosed(t *testing.T, d *daemon, callID string) (string, map[string]any) {
	t.Helper()
	resp, err := http.Get(d.url + "/v1/tool-calls/" + callID + "/progress/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("SSE: %d", resp.StatusCode)
	}
	text, closed, err := readProgressSSE(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if closed == nil {
		t.Fatal("SSE stream ended without a closed event")
	}
	return text, closed
}

// readProgressSSE reads a progress stream (GET …/progress/stream) until its closed
// event: the stdout text sent before it and the closed event's data, nil when the
// stream ended without one.
func readProgressSSE(r io.Reader) (string, map[string]any, error) {
	var text strings.Builder
	var event string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var e map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				return text.String(), nil, fmt.Errorf("event %q: %w", event, err)
			}
			if event == "closed" {
				return text.String(), e, nil
			}
			if e["stream"] == "stdout" {
				s, _ := e["text"].(string)
				text.WriteString(s)
			}
		}
	}
	return text.String(), nil, sc.Err()
}

type progressRead struct {
	Data       string `json:"data"`
	NextOffset int64  `json:"next_offset"`
	Finished   bool   `json:"finished"`
}

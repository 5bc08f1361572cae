package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/progress"
)

func TestProgressInStream(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Progress.FlushIntervalMS = 20 }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	code, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []any{
		map[string]any{"id": "c1", "name": "execute_command", "arguments": map[string]any{
			"command": "for i in 1 2 3; do echo line$i; sleep 0.15; done; echo oops >&2"}},
	}})
	if code != 200 {
		t.Fatal(code)
	}
	msgs := messages(t, evs)
	var stdout, stderr strings.Builder
	var chunks, closed int
	phase := "before"
	for _, e := range evs {
		switch e.str("type") {
		case "tool_start":
			phase = "running"
		case "message":
			phase = "after"
		case "tool_progress":
			if phase != "running" {
				t.Fatalf("tool_progress %s the call's start/message: %s", phase, e.raw)
			}
			if e.m["closed"] == true {
				closed++
				continue
			}
			chunks++
			if e.str("stream") == "stderr" {
				stderr.WriteString(e.str("text"))
			} else {
				stdout.WriteString(e.str("text"))
			}
		}
	}
	if stdout.String() != "line1\nline2\nline3\n" || stderr.String() != "oops\n" || closed != 1 || chunks < 3 {
		t.Fatalf("progress: stdout %q stderr %q closed %d chunks %d", stdout.String(), stderr.String(), closed, chunks)
	}
	if msgs["c1"].m["is_error"] != false {
		t.Fatalf("message: %s", msgs["c1"].raw)
	}

	// The same output through the polling endpoint, after the fact.
	tc := msgs["c1"].str("call_id")
	code, _, body := d.do("GET", "/v1/tool-calls/"+tc+"/progress?stream=stdout&offset=6", nil)
	if code != 200 {
		t.Fatalf("poll: %d %s", code, body)
	}
	validate(t, "ProgressChunk", body)
	var ch struct {
		Data       string   `json:"data"`
		NextOffset int64    `json:"next_offset"`
		Finished   bool     `json:"finished"`
		Streams    []string `json:"streams"`
	}
	_ = json.Unmarshal(body, &ch)
	if ch.Data != "line2\nline3\n" || ch.NextOffset != 18 || !ch.Finished || strings.Join(ch.Streams, ",") != "stderr,stdout" {
		t.Fatalf("poll = %s", body)
	}
	code, _, body = d.do("GET", "/v1/tool-calls/"+tc+"/progress?offset=999", nil)
	if code != 200 || !strings.Contains(string(body), `"data":""`) {
		t.Fatalf("offset past the end: %d %s", code, body)
	}
	for _, bad := range []string{"offset=-1", "max_bytes=0", "encoding=hex", "offset=x"} {
		if code, _, body := d.do("GET", "/v1/tool-calls/"+tc+"/progress?"+bad, nil); code != 400 {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	if code, _, _ := d.do("GET", "/v1/tool-calls/tc_nope/progress", nil); code != 404 {
		t.Errorf("unknown call: %d", code)
	}
	// A call that printed nothing reads as empty and finished.
	_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"q","name":"execute_command","arguments":{"command":"true"}}]}`)
	code, _, body = d.do("GET", "/v1/tool-calls/"+messages(t, evs)["q"].str("call_id")+"/progress", nil)
	if code != 200 || !strings.Contains(string(body), `"finished":true`) {
		t.Fatalf("silent call: %d %s", code, body)
	}
}

// TestProgressExactness streams random bytes through a real command and checks that the
// tool_progress events (gaps filled from the polling endpoint, as a client would) and
// the polling endpoint alone both reproduce the output byte for byte.
//
// 8 MiB is hundreds of times the stream's subscriber buffer (16 events of at most
// flush_bytes), so events are dropped and the gaps must be filled, and more than two
// polls' worth (max_bytes 4 MiB), so polling goes on across pages and ends in a part of
// one. It was 50 MiB, which under the race detector took three minutes of the
// package's CPU for nothing these checks see.
func TestProgressExactness(t *testing.T) {
	t.Parallel()
	size := 8 << 20
	if testing.Short() {
		size = 4 << 20
	}
	settings := []struct{ interval, bytes int }{{0, 16384}, {50, 16384}, {5, 4096}}
	for _, s := range settings {
		t.Run(fmt.Sprintf("interval=%dms,bytes=%d", s.interval, s.bytes), func(t *testing.T) {
			d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
				c.Progress.FlushIntervalMS, c.Progress.FlushBytes = s.interval, s.bytes
			}})
			sess := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})
			want := make([]byte, size)
			_, _ = rand.Read(want)
			if err := os.WriteFile(filepath.Join(sess["workdir"].(string), "data.bin"), want, 0o600); err != nil {
				t.Fatal(err)
			}
			wantSum := sha256.Sum256(want)

			req, _ := http.NewRequest("POST", d.url+"/v1/sessions/"+sess["id"].(string)+"/tool-calls",
				strings.NewReader(`{"calls":[{"id":"cat","name":"execute_command","arguments":{"command":"cat data.bin"}}]}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got bytes.Buffer
			var callID string
			gaps := 0
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				var e struct {
					Type, Stream, Text, Data string
					CallID                   string `json:"call_id"`
					Offset                   int64
					Closed                   bool
					IsError                  bool `json:"is_error"`
				}
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatal(err)
				}
				if e.Type == "tool_start" {
					callID = e.CallID
				}
				if e.Type == "message" && e.IsError {
					t.Fatalf("command failed: %.500s", sc.Bytes())
				}
				if e.Type != "tool_progress" || e.Closed || e.Stream != "stdout" {
					continue
				}
				chunk := []byte(e.Text)
				if e.Data != "" {
					if chunk, err = base64.StdEncoding.DecodeString(e.Data); err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case e.Offset > int64(got.Len()):
					gaps++
					got.Write(poll(t, d, callID, int64(got.Len()), e.Offset))
				case e.Offset < int64(got.Len()):
					t.Fatalf("chunk at %d overlaps what was received (%d bytes)", e.Offset, got.Len())
				}
				got.Write(chunk)
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if got.Len() < size { // events dropped at the very end
				got.Write(poll(t, d, callID, int64(got.Len()), int64(size)))
			}
			if sha256.Sum256(got.Bytes()) != wantSum {
				t.Fatalf("stream: %d bytes received, content differs from the %d bytes written", got.Len(), size)
			}
			if gaps > 0 {
				t.Fatalf("the stream had %d gaps; it must fill dropped events from the log itself", gaps)
			}
			polled := poll(t, d, callID, 0, -1)
			if sha256.Sum256(polled) != wantSum {
				t.Fatalf("polling: %d bytes, content differs", len(polled))
			}
		})
	}
}

// poll reads stdout of a call from offset to end (-1: until finished) in base64.
func poll(t *testing.T, d *daemon, callID string, from, to int64) []byte {
	t.Helper()
	var out []byte
	for off := from; to < 0 || off < to; {
		code, _, body := d.do("GET", fmt.Sprintf("/v1/tool-calls/%s/progress?stream=stdout&encoding=base64&offset=%d&max_bytes=4194304", callID, off), nil)
		if code != 200 {
			t.Fatalf("poll %d: %d %s", off, code, body)
		}
		var ch struct {
			Data       string `json:"data"`
			NextOffset int64  `json:"next_offset"`
			Finished   bool   `json:"finished"`
		}
		if err := json.Unmarshal(body, &ch); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(ch.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ch.NextOffset != off+int64(len(b)) {
			t.Fatalf("next_offset %d after %d bytes from %d", ch.NextOffset, len(b), off)
		}
		out = append(out, b...)
		off = ch.NextOffset
		if to > 0 && off > to {
			return out[:to-from]
		}
		if ch.Finished {
			break
		}
	}
	return out
}

func TestProgressSSE(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Progress.FlushIntervalMS = 10 }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command", "await_job"}})["id"].(string)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"bg","name":"execute_command","arguments":{"command":"seq 1 5 | while read i; do echo tick$i; sleep 0.1; done","background":true}}]}`)
	m := messages(t, evs)["bg"]
	if m.m["is_error"] != false {
		t.Fatalf("background start: %s", m.raw)
	}
	// Follow the job with await_job; watch that call's output over SSE while it runs.
	done := make(chan []event, 1)
	jobID := m.m["message"].(map[string]any)["structured"].(map[string]any)["job_id"].(string)
	go func() {
		_, e := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"aw","name":"await_job","arguments":{"job_id":"`+jobID+`","timeout_ms":10000}}]}`)
		done <- e
	}()
	var awaitID string
	for awaitID == "" {
		code, _, body := d.do("GET", "/v1/sessions/"+id+"/tool-calls/aw", nil)
		if code == 200 {
			var rec struct{ ID string }
			_ = json.Unmarshal(body, &rec)
			awaitID = rec.ID
		}
	}
	text, lastID := readSSE(t, d, awaitID, "")
	<-done
	if !strings.Contains(text, "tick5") {
		t.Fatalf("SSE output: %q", text)
	}
	// Resuming from the last id replays nothing; from a mid cursor, exactly the rest.
	rest, _ := readSSE(t, d, awaitID, lastID)
	if rest != "" {
		t.Fatalf("resume from the end replayed %q", rest)
	}
	rest, _ = readSSE(t, d, awaitID, "stdout:6")
	if rest != text[6:] {
		t.Fatalf("resume from 6: %q, want %q", rest, text[6:])
	}
}

// readSSE reads a call's SSE stream to its closed event; it returns the stdout text and
// the last event id.
func readSSE(t *testing.T, d *daemon, callID, lastID string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url+"/v1/tool-calls/"+callID+"/progress/stream", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var text strings.Builder
	var event, id string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var e struct{ Stream, Text string }
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e)
			if event == "closed" {
				return text.String(), id
			}
			if e.Stream == "stdout" {
				text.WriteString(e.Text)
			}
		}
	}
	t.Fatal("SSE stream ended without a closed event")
	return "", ""
}

// TestProgressSSEClosedAfterDrops: a slow SSE client whose subscription dropped the
// call's last events (the closed one among them) still gets all the output and the
// closed event, instead of a stream that stays open for ever.
func TestProgressSSEClosedAfterDrops(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Progress.FlushIntervalMS = 0 }})
	id := d.createSession(map[string]any{"available_tools": []string{"block"}})["id"].(string)
	go d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"block","arguments":{}}]}`)
	callID := <-d.tools.blockStarts
	defer close(d.tools.release)
	em := d.app.Progress.Begin(progress.CallMeta{CallID: callID})

	// A client that reads nothing until told to, with a small receive buffer, so that
	// the handler blocks writing the first (large) event while the rest pile up.
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}).DialContext}}
	// Bounds a stream that never closes; 16 MiB through a 4 KiB receive buffer under
	// the race detector on a busy machine took over 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/v1/tool-calls/"+callID+"/progress/stream", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	big := strings.Repeat("a", 16<<20)
	em.Emit("stdout", big)
	const small = 3000 // more than the subscriber buffer (1024)
	for range small {
		em.Emit("stdout", "b")
	}
	em.Close()

	got, closed := 0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var event string
	for sc.Scan() && !closed {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var e struct{ Text string }
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e)
			got += len(e.Text)
			closed = event == "closed"
		}
	}
	if !closed {
		t.Fatalf("no closed event after %d of %d bytes (stream: %v)", got, len(big)+small, ctx.Err())
	}
	if got != len(big)+small {
		t.Fatalf("SSE delivered %d bytes, want %d", got, len(big)+small)
	}
}

// TestProgressSSEOpensAtOnce: the SSE response starts (status and headers reach the
// client) as soon as it is subscribed, not at the first output or keep-alive, so a
// client watching a quiet call knows it is connected.
func TestProgressSSEOpensAtOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"block"}})["id"].(string)
	go d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"block","arguments":{}}]}`)
	callID := <-d.tools.blockStarts
	defer close(d.tools.release)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/v1/tool-calls/"+callID+"/progress/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the stream of a call without output did not open: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestProgressPollTextKeepsCharacters: in text encoding a character whose bytes have
// not all been written yet is held back, also when it is all there is to read, so a
// poller that keeps up with the output never gets it split into two U+FFFD.
func TestProgressPollTextKeepsCharacters(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Progress.FlushIntervalMS = 0 }})
	id := d.createSession(map[string]any{"available_tools": []string{"block"}})["id"].(string)
	go d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"block","arguments":{}}]}`)
	callID := <-d.tools.blockStarts
	defer close(d.tools.release)
	em := d.app.Progress.Begin(progress.CallMeta{CallID: callID})
	var text strings.Builder
	off := int64(0)
	read := func() {
		t.Helper()
		code, _, body := d.do("GET", fmt.Sprintf("/v1/tool-calls/%s/progress?offset=%d", callID, off), nil)
		if code != 200 {
			t.Fatalf("poll: %d %s", code, body)
		}
		validate(t, "ProgressChunk", body)
		var ch struct {
			Data        string `json:"data"`
			NextOffset  int64  `json:"next_offset"`
			InvalidUTF8 bool   `json:"invalid_utf8"`
		}
		if err := json.Unmarshal(body, &ch); err != nil {
			t.Fatal(err)
		}
		if ch.InvalidUTF8 {
			t.Fatalf("poll from %d: invalid UTF-8 in %s", off, body)
		}
		text.WriteString(ch.Data)
		off = ch.NextOffset
	}
	em.Emit("stdout", "price: \xe2\x82") // "€" is e2 82 ac
	read()                               // "price: ", the partial character held back
	read()                               // nothing new but the partial character
	em.Emit("stdout", "\xac 12\n")
	read()
	if got := text.String(); got != "price: € 12\n" {
		t.Fatalf("polled text %q, want %q", got, "price: € 12\n")
	}
}

// TestProgressPollSlowReaderHoldsLittle: a poll may ask for 16 MiB, and text that is
// all control characters escapes to six times its size in JSON. The answer was built
// whole before the first byte went out, and a client that did not read held all of it
// (about 200 MB for 16 MiB of NUL bytes) for as long as it kept the connection. Now
// the answer is written piece by piece from the log, so a reader that stalls holds one
// piece; a reader that reads gets exactly the same bytes.
func TestProgressPollSlowReaderHoldsLittle(t *testing.T) {
	// Not parallel: it measures the process's heap.
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	const size = 16 << 20
	evs := streamSkippingOutput(t, d, "/v1/sessions/"+id+"/tool-calls", fmt.Sprintf(
		`{"calls":[{"id":"z","name":"execute_command","arguments":{"command":"head -c %d /dev/zero"}}]}`, size))
	callID := messages(t, evs)["z"].str("call_id")
	path := fmt.Sprintf("/v1/tool-calls/%s/progress?stream=stdout&offset=0&max_bytes=%d", callID, size)

	code, _, body := d.do("GET", path, nil)
	if code != 200 {
		t.Fatalf("poll: %d %.300s", code, body)
	}
	validate(t, "ProgressChunk", body)
	var ch struct {
		Data       string `json:"data"`
		NextOffset int64  `json:"next_offset"`
		Finished   bool   `json:"finished"`
	}
	if err := json.Unmarshal(body, &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Data != strings.Repeat("\x00", size) || ch.NextOffset != size || !ch.Finished {
		t.Fatalf("poll of %d NUL bytes: %d bytes of data, next_offset %d, finished %v", size, len(ch.Data), ch.NextOffset, ch.Finished)
	}
	body, ch.Data = nil, ""

	// A character across the boundary of two pieces arrives whole, and one that
	// max_bytes cuts is held back for the next poll, as from a single read.
	_, evs = d.stream("/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"e","name":"execute_command","arguments":{"command":"head -c 65535 /dev/zero | tr '\\0' a; printf '\\342\\202\\254 end'"}}]}`)
	euroID := messages(t, evs)["e"].str("call_id")
	want := strings.Repeat("a", 65535) + "€ end"
	for _, c := range []struct {
		max      int
		data     string
		next     int64
		finished bool
	}{
		{1 << 20, want, int64(len(want)), true},
		{65537, want[:65535], 65535, false},
	} {
		code, _, body := d.do("GET", fmt.Sprintf("/v1/tool-calls/%s/progress?max_bytes=%d", euroID, c.max), nil)
		ch.Data, ch.NextOffset, ch.Finished = "", 0, false
		if err := json.Unmarshal(body, &ch); code != 200 || err != nil {
			t.Fatalf("max_bytes %d: %d %v %.200s", c.max, code, err, body)
		}
		if ch.Data != c.data || ch.NextOffset != c.next || ch.Finished != c.finished || strings.Contains(string(body), "invalid_utf8") {
			t.Errorf("max_bytes %d: %d bytes ending %q, next_offset %d, finished %v; want %d bytes ending %q, %d, %v",
				c.max, len(ch.Data), ch.Data[max(len(ch.Data)-8, 0):], ch.NextOffset, ch.Finished, len(c.data), c.data[len(c.data)-8:], c.next, c.finished)
		}
	}

	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const stalled = 4
	for range stalled {
		c, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // the answers fill the sockets and stall
	if grew := int64(heap()) - int64(before); grew > 32<<20 {
		t.Fatalf("%d polls of %d NUL bytes whose clients do not read hold %d MB", stalled, size, grew>>20)
	}
}

// streamSkippingOutput is d.stream for a batch whose calls print megabytes the test
// reads elsewhere: the tool_progress lines are read past, not decoded and checked
// against the schema one by one (96 MB of escaped NUL bytes took the race detector
// about ten seconds); every other line is, as d.stream does.
func streamSkippingOutput(t *testing.T, d *daemon, path, body string) []event {
	t.Helper()
	resp, err := http.Post(d.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	progressLine := []byte(`{"type":"tool_progress"`)
	var out bytes.Buffer
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		skip := bytes.HasPrefix(line, progressLine)
		if !skip {
			out.Write(line)
		}
		for errors.Is(err, bufio.ErrBufferFull) { // a line longer than the buffer
			if line, err = r.ReadSlice('\n'); !skip {
				out.Write(line)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return parseNDJSON(t, out.Bytes())
}

// TestProgressStreamsSlowReaderHoldsLittle: the progress SSE stream and a call's
// events replay catch up from the output log; each event carried up to 1 MiB of
// output, six times that once control characters are escaped, and a client that did
// not read held it (about 17 MB a stream). Events now carry at most a piece of it.
func TestProgressStreamsSlowReaderHoldsLittle(t *testing.T) {
	// Not parallel: it measures the process's heap.
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	evs := streamSkippingOutput(t, d, "/v1/sessions/"+id+"/tool-calls",
		`{"calls":[{"id":"z","name":"execute_command","arguments":{"command":"head -c 8000000 /dev/zero | tr '\\\\0' '\\\\1'"}}]}`)
	callID := messages(t, evs)["z"].str("call_id")
	evs = nil
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	paths := []string{"/v1/tool-calls/" + callID + "/progress/stream", "/v1/tool-calls/" + callID + "/events"}
	const stalled = 4
	for i := range 2 * stalled {
		c, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", paths[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // the streams fill the sockets and stall
	// About 8 MB on a quiet machine; the defect held about 17 MB a stream (136 MB).
	// A clean-clone CI run, loaded, measured 26 MB once with nothing held wrongly (the
	// same build measured 7–8 MB alone), so the bound leaves room for that.
	if grew := int64(heap()) - int64(before); grew > 40<<20 {
		t.Fatalf("%d progress streams and %d events replays whose clients do not read hold %d MB", stalled, stalled, grew>>20)
	}
}

// TestProgressStreamEndsForCallThatNeverRan: a call denied, or cancelled, while it
// waits for a decision never writes output; its SSE stream still ends with closed
// once the call is over, instead of sending keep-alives for ever.
func TestProgressStreamEndsForCallThatNeverRan(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = nil }})
	id := d.createSession(map[string]any{"available_tools": []string{"execute_command"}})["id"].(string)
	for _, end := range []string{"deny", "cancel"} {
		t.Run(end, func(t *testing.T) {
			apr, rest, stop := streamUntilApproval(t, d, "/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"`+end+`","name":"execute_command","arguments":{"command":"touch x"}}]}`)
			defer stop()
			_, _, body := d.do("GET", "/v1/approvals/"+apr["id"].(string), nil)
			var a struct {
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(body, &a); err != nil || a.CallID == "" {
				t.Fatalf("approval: %s (%v)", body, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/v1/tool-calls/"+a.CallID+"/progress/stream", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			events := make(chan string, 16)
			go func() {
				defer close(events)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
						events <- ev
					}
				}
			}()
			switch end {
			case "deny":
				if code, _, body := d.do("POST", "/v1/approvals/"+apr["id"].(string)+"/decision", map[string]string{"decision": "deny"}); code != 200 {
					t.Fatalf("deny: %d %s", code, body)
				}
			case "cancel":
				if code, _, body := d.do("POST", "/v1/tool-calls/"+a.CallID+"/cancel", nil); code != 202 {
					t.Fatalf("cancel: %d %s", code, body)
				}
			}
			for _, e := range <-rest {
				if e.str("type") == "message" && e.m["is_error"] != true {
					t.Fatalf("message: %s", e.raw)
				}
			}
			var got []string
			for ev := range events {
				got = append(got, ev)
			}
			if ctx.Err() != nil || len(got) == 0 || got[len(got)-1] != "closed" {
				t.Fatalf("SSE events %v (%v), want the stream to end with closed", got, ctx.Err())
			}
		})
	}
}

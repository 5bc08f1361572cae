package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

type wireValue struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total"`
	Message  *string  `json:"message"`
}

// valuesOf returns the numeric progress the tool_progress events carry, in order,
// and the text of their info stream.
func valuesOf(t *testing.T, lines [][]byte) ([]wireValue, string) {
	t.Helper()
	var vals []wireValue
	var info strings.Builder
	for _, l := range lines {
		var e struct {
			Type, Stream, Text string
			Progress           *wireValue
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("bad event %s: %v", l, err)
		}
		if e.Type != "tool_progress" {
			continue
		}
		if e.Stream == "info" {
			info.WriteString(e.Text)
		}
		if e.Progress != nil {
			vals = append(vals, *e.Progress)
		}
	}
	return vals, info.String()
}

// checkRising fails unless vals rise strictly, all of total want, and end at want.
func checkRising(t *testing.T, where string, vals []wireValue, want float64, atLeast int) {
	t.Helper()
	if len(vals) < atLeast {
		t.Fatalf("%s: %d values %+v, want at least %d", where, len(vals), vals, atLeast)
	}
	for i, v := range vals {
		if v.Total == nil || *v.Total != want {
			t.Fatalf("%s: value %d = %+v, want total %v", where, i, v, want)
		}
		if i > 0 && v.Progress <= vals[i-1].Progress {
			t.Fatalf("%s: values do not rise: %+v", where, vals)
		}
	}
	if last := vals[len(vals)-1]; last.Progress != want {
		t.Fatalf("%s: last value %+v, want %v/%v", where, last, want, want)
	}
}

// TestNumericProgressFromMCPServer: a real MCP server's notifications/progress (the
// reference server-everything over stdio, whose long-running operation reports each
// step of a known total) reach the NDJSON stream as numeric progress on tool_progress
// events, beside the same report as a line of the info stream; the poll endpoint, the
// SSE stream and the call's events replay give the latest value afterwards.
func TestNumericProgressFromMCPServer(t *testing.T) {
	t.Parallel()
	js := everythingServer(t)
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
		c.Permissions.Allow = append(c.Permissions.Allow, "mcp__everything__*")
		c.Progress.FlushIntervalMS = 10
	}})
	addEverything(t, d, js)
	s := d.createSession(map[string]any{"available_tools": []string{"mcp__everything__trigger-long-running-operation"}})
	_, evs := d.stream("/v1/sessions/"+s["id"].(string)+"/tool-calls", `{"calls":[
		{"id":"op","name":"mcp__everything__trigger-long-running-operation","arguments":{"duration":1.2,"steps":4}}]}`)
	m := messages(t, evs)["op"]
	if m.m["is_error"] != false || !strings.Contains(string(m.raw), "Long running operation completed") {
		t.Fatalf("message: %s", m.raw)
	}
	var lines [][]byte
	for _, e := range evs {
		lines = append(lines, e.raw)
	}
	vals, info := valuesOf(t, lines)
	// Steps 0.3 s apart, a 10 ms window: each step is its own event.
	checkRising(t, "NDJSON stream", vals, 4, 4)
	if vals[0].Message != nil {
		t.Fatalf("a message where the server sent none: %q", *vals[0].Message)
	}
	if info != "1/4\n2/4\n3/4\n4/4\n" {
		t.Fatalf("info stream %q, want every step as a line", info)
	}

	callID := m.str("call_id")
	code, _, body := d.do("GET", "/v1/tool-calls/"+callID+"/progress?stream=info", nil)
	if code != 200 {
		t.Fatalf("poll: %d %s", code, body)
	}
	validate(t, "ProgressChunk", body)
	var chunk struct{ Progress *wireValue }
	_ = json.Unmarshal(body, &chunk)
	checkRising(t, "poll", []wireValue{*chunk.Progress}, 4, 1)

	// The replay of the call's events: its output from the log, with the latest value once.
	code, _, body = d.do("GET", "/v1/tool-calls/"+callID+"/events", nil)
	if code != 200 {
		t.Fatalf("events: %d %s", code, body)
	}
	var replay [][]byte
	for _, e := range parseNDJSON(t, body) {
		replay = append(replay, e.raw)
	}
	vals, info = valuesOf(t, replay)
	checkRising(t, "events replay", vals, 4, 1)
	if len(vals) != 1 || info != "1/4\n2/4\n3/4\n4/4\n" {
		t.Fatalf("events replay: values %+v, info %q; want the latest once and every line", vals, info)
	}

	// The SSE stream of the finished call: the same.
	resp, err := http.Get(d.url + "/v1/tool-calls/" + callID + "/progress/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sse [][]byte
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			validate(t, "ToolProgressEvent", []byte(data))
			sse = append(sse, []byte(data))
		}
	}
	vals, _ = valuesOf(t, sse)
	if len(vals) != 1 {
		t.Fatalf("SSE: values %+v, want the latest once", vals)
	}
	checkRising(t, "SSE", vals, 4, 1)
}

// TestNumericProgressSSEResume: a client that resumes the SSE stream of a running call
// with everything read (Last-Event-ID at the end of its output) gets the call's value
// at once, on an event without text, then the later values live, the last one included.
func TestNumericProgressSSEResume(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Permissions.Allow = append(c.Permissions.Allow, "steps") }})
	release := make(chan struct{})
	reported := make(chan string, 1)
	steps, err := toolmgr.NewFunc(tool.Spec{Name: "steps", Description: "Reports 2 of 4 steps, waits, reports the rest.", Flags: tool.Flags{ConcurrencySafe: true}},
		func(ctx *tool.Context, _ struct{}) (*tool.Result, error) {
			ctx.Report(1, 4, "one")
			ctx.Report(2, 4, "two")
			reported <- ctx.CallID
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			ctx.Report(3, 4, "three")
			ctx.Report(4, 4, "four")
			return tool.TextResult("done"), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.app.Tools.Register(steps); err != nil {
		t.Fatal(err)
	}
	id := d.createSession(map[string]any{"available_tools": []string{"steps"}})["id"].(string)
	streamDone := make(chan []event, 1)
	go func() {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"s","name":"steps","arguments":{}}]}`)
		streamDone <- evs
	}()
	var callID string
	select {
	case callID = <-reported:
	case <-time.After(30 * time.Second):
		t.Fatal("the tool did not start")
	}
	// Everything the call wrote so far, by poll (the reports' lines, once flushed).
	var info struct {
		NextOffset int64 `json:"next_offset"`
		Progress   *wireValue
	}
	waitFor(t, 30*time.Second, "both lines in the info stream", func() bool {
		_, _, body := d.do("GET", "/v1/tool-calls/"+callID+"/progress?stream=info", nil)
		_ = json.Unmarshal(body, &info)
		return info.NextOffset == int64(len("one (1/4)\ntwo (2/4)\n"))
	})
	if info.Progress == nil || info.Progress.Progress != 2 || *info.Progress.Message != "two" {
		t.Fatalf("poll value %+v, want 2/4 two", info.Progress)
	}

	req, _ := http.NewRequest("GET", d.url+"/v1/tool-calls/"+callID+"/progress/stream", nil)
	req.Header.Set("Last-Event-ID", "info:"+strconv.FormatInt(info.NextOffset, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var sse [][]byte
	var texts []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		validate(t, "ToolProgressEvent", []byte(data))
		sse = append(sse, []byte(data))
		var e struct {
			Text   string
			Closed bool
		}
		_ = json.Unmarshal([]byte(data), &e)
		texts = append(texts, e.Text)
		if len(sse) == 1 {
			close(release) // the resumed stream has begun: let the call go on
		}
		if e.Closed {
			break
		}
	}
	vals, info2 := valuesOf(t, sse)
	if len(texts) == 0 || texts[0] != "" || len(vals) == 0 || vals[0].Progress != 2 {
		t.Fatalf("first resumed event: texts %q values %+v; want the value 2/4 without text", texts, vals)
	}
	checkRising(t, "resumed SSE", vals, 4, 2)
	if info2 != "three (3/4)\nfour (4/4)\n" {
		t.Fatalf("resumed info text %q, want only the later lines", info2)
	}
	evs := <-streamDone
	var lines [][]byte
	for _, e := range evs {
		lines = append(lines, e.raw)
	}
	vals, _ = valuesOf(t, lines)
	checkRising(t, "NDJSON stream", vals, 4, 2)
}

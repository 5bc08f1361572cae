package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
)

// TestAskUser: the call waits for a person; the answer posted to the result endpoint
// becomes the tool's result; a second answer is a conflict.
func TestAskUser(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"ask_user", "task_create", "task_list", "memory_save", "memory_search"}})["id"].(string)
	req, _ := http.NewRequest("POST", d.url+"/v1/sessions/"+id+"/tool-calls", strings.NewReader(
		`{"calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which colour?","options":["blue","red"]}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var final string
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		validate(t, "StreamEvent", line)
		var e struct {
			Type      string `json:"type"`
			Call      string `json:"call_id"`
			Arguments json.RawMessage
			Message   struct{ Content string }
		}
		_ = json.Unmarshal(line, &e)
		if e.Type == "input_required" {
			if !strings.Contains(string(e.Arguments), "Which colour?") {
				t.Fatalf("input_required without the question: %s", line)
			}
			if code, _, body := d.do("POST", "/v1/tool-calls/"+e.Call+"/result", `{"content":"blue","structured":{"choice":"blue"}}`); code != 200 {
				t.Fatalf("answer: %d %s", code, body)
			}
			if code, _, _ := d.do("POST", "/v1/tool-calls/"+e.Call+"/result", `{"content":"red"}`); code != 409 {
				t.Fatalf("second answer: %d", code)
			}
		}
		if e.Type == "message" {
			final = e.Message.Content
		}
		if e.Type == "done" {
			break
		}
	}
	if final != "blue" {
		t.Fatalf("final = %q", final)
	}
	// Answers the contract forbids are refused before the call is looked up.
	for _, bad := range []string{`{}`, `{"content":5}`, `{"content":[]}`, `{"content":null}`,
		`{"content":[{"type":"bogus"}]}`, `{"content":[{"type":"image","data":"!!","mime_type":"image/png"}]}`,
		`{"content":[{"type":"image","data":"aGk="}]}`, `{"content":[{"type":"resource"}]}`,
		`{"content":"no","is_error":true,"error_kind":"attacker-chosen-label"}`,
		`{"content":"ok","error_kind":"failed"}`,
		// structured output deeper than the daemon sends (tool.MaxStructuredDepth)
		`{"content":"ok","structured":` + strings.Repeat("[", 257) + strings.Repeat("]", 257) + `}`} {
		code, _, body := d.do("POST", "/v1/tool-calls/tc_nope/result", bad)
		if code != 400 {
			t.Errorf("%s: %d %s; want 400", bad, code, body)
		}
		validate(t, "Error", body)
	}
	// Well-formed answers get as far as the lookup.
	for _, good := range []string{`{"content":""}`, `{"content":"no","is_error":true,"error_kind":"denied"}`,
		`{"content":"ok","structured":` + strings.Repeat("[", 256) + strings.Repeat("]", 256) + `}`,
		`{"content":[{"type":"image","data":"aGk=","mime_type":"image/png"},{"type":"resource","uri":"file:///x"}]}`} {
		if code, _, body := d.do("POST", "/v1/tool-calls/tc_nope/result", good); code != 404 {
			t.Errorf("%s: %d %s; want 404 (valid answer, unknown call)", good, code, body)
		}
	}

	// Tasks and memory, persisted in the store.
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"strategy":"sequential","calls":[
		{"id":"t1","name":"task_create","arguments":{"subject":"write the release notes"}},
		{"id":"t2","name":"task_list","arguments":{}},
		{"id":"m1","name":"memory_save","arguments":{"content":"the staging database is called orion"}},
		{"id":"m2","name":"memory_search","arguments":{"query":"which staging database"}}]}`)
	msgs := messages(t, evs)
	for _, cid := range []string{"t1", "t2", "m1", "m2"} {
		if msgs[cid].m["is_error"] != false {
			t.Fatalf("%s: %s", cid, msgs[cid].raw)
		}
	}
	if !strings.Contains(string(msgs["t2"].raw), "write the release notes") || !strings.Contains(string(msgs["m2"].raw), "orion") {
		t.Fatalf("task_list %s / memory_search %s", msgs["t2"].raw, msgs["m2"].raw)
	}
}

// TestClientAnswersAndInterrupts: a Go backend using the client sees what ask_user asks,
// answers it, and can interrupt a session.
func TestClientAnswersAndInterrupts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	ctx := t.Context()
	c := client.New(d.url)
	sess, err := c.CreateSession(ctx, client.SessionSpec{AvailableTools: []string{"ask_user"}})
	if err != nil {
		t.Fatal(err)
	}
	var final client.Event
	err = c.Run(ctx, sess.ID, "", client.Batch{Calls: []client.Call{{ID: "q", Name: "ask_user", Arguments: json.RawMessage(`{"question":"Which colour?"}`)}}},
		func(ev client.Event) error {
			switch ev.Type {
			case "input_required":
				if !strings.Contains(string(ev.Arguments), "Which colour?") {
					t.Errorf("input_required arguments %s, want the question", ev.Arguments)
				}
				if err := c.AnswerCall(ctx, ev.CallID, client.Answer{Text: "blue", Structured: json.RawMessage(`{"choice":"blue"}`)}); err != nil {
					t.Errorf("AnswerCall: %v", err)
				}
				var ce *client.Error
				if err := c.AnswerCall(ctx, ev.CallID, client.Answer{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"red"}`)}}); !errors.As(err, &ce) || ce.Status != 409 {
					t.Errorf("second answer: %v, want a 409", err)
				}
			case "message":
				final = ev
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if final.IsError || final.Content() != "blue" {
		t.Fatalf("final message %s, want the answer", final.Message)
	}
	if err := c.Interrupt(ctx, sess.ID, "the user changed topic"); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	if err := c.Interrupt(ctx, "ses_nope", ""); !client.IsNotFound(err) {
		t.Fatalf("Interrupt of an unknown session: %v, want 404", err)
	}
}

// TestCallEventsReplayInputRequired: a client that lost its stream and follows a call
// waiting for an answer at /v1/tool-calls/{id}/events learns it waits, with the
// question, as the original stream said; after the answer it gets the message.
func TestCallEventsReplayInputRequired(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	id := d.createSession(map[string]any{"available_tools": []string{"ask_user"}})["id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+"/v1/sessions/"+id+"/tool-calls", strings.NewReader(
		`{"calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which colour?"}}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var callID string
	br := bufio.NewReader(resp.Body)
	for callID == "" {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(line), `"input_required"`) {
			var e struct {
				CallID string `json:"call_id"`
			}
			_ = json.Unmarshal(line, &e)
			callID = e.CallID
		}
	}
	cancel() // the stream is lost; the call still waits, durably
	resp.Body.Close()

	follow, err := http.Get(d.url + "/v1/tool-calls/" + callID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Body.Close()
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		fr := bufio.NewReader(follow.Body)
		for {
			line, err := fr.ReadBytes('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	var types []string
	var answered atomic.Bool
	for line := range lines {
		validate(t, "StreamEvent", line)
		var e struct {
			Type      string
			Arguments json.RawMessage
		}
		_ = json.Unmarshal(line, &e)
		types = append(types, e.Type)
		if e.Type == "input_required" && !strings.Contains(string(e.Arguments), "Which colour?") {
			t.Fatalf("input_required without the question: %s", line)
		}
		if e.Type == "tool_start" {
			// Answer a moment later: the replay must have said the call waits by then.
			time.AfterFunc(300*time.Millisecond, func() {
				answered.Store(true)
				d.do("POST", "/v1/tool-calls/"+callID+"/result", `{"content":"blue"}`)
			})
		}
		if e.Type == "input_required" && answered.Load() {
			t.Fatal("input_required came only after the answer")
		}
	}
	if strings.Join(types, ",") != "tool_start,input_required,message,done" {
		t.Fatalf("replayed events: %v", types)
	}
}

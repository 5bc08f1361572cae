package session

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/telemetry"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// panicTool panics in Run, as a tool with a bug does.
type panicTool struct{}

func (panicTool) Spec() tool.Spec {
	return tool.Spec{Name: "crash", Description: "Crashes.", Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true}}
}

func (panicTool) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	var m map[string]int
	m["boom"]++ // assignment to entry in nil map
	return tool.TextResult("unreachable"), nil
}

// syncBuffer is a bytes.Buffer safe for the executor's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestToolPanicIsLogged: a tool that panics fails its call (kind failed) and the panic
// is logged at error level with its stack and the call's ids. Before, the stack went
// only to the call record's details and nothing reached the log at any level, so an
// operator watching the logs never learnt that a tool crashed.
func TestToolPanicIsLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newExecEnv(t, Config{}, envOpts{tools: []tool.Tool{panicTool{}}})
	var logs syncBuffer
	e.x = NewExecutor(ExecConfig{Owner: "test"}, e.commits, nil, nil, nil,
		slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	t.Cleanup(e.x.Close)
	sess, _, err := e.m.Create(ctx, "t1", Spec{AvailableTools: []string{"crash"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "crash"}}})
	if err != nil {
		t.Fatal(err)
	}
	var msg *Event
	e.x.Execute(telemetry.WithRequestID(ctx, "req_panic"), p, func(ev Event) {
		if ev.Type == EventMessage {
			msg = &ev
		}
	})
	if msg == nil || msg.Result == nil || !msg.Result.IsError || msg.Result.ErrorKind != tool.KindFailed {
		t.Fatalf("message = %+v, want an error of kind failed", msg)
	}
	checkPanicLine(t, logs.String(), "panicTool.Run", "crash", p.Calls[0].ID)
}

// checkPanicLine finds the log line naming the panic and checks its level, stack and ids.
func checkPanicLine(t *testing.T, logs, frame, toolName, callID string) {
	t.Helper()
	var line map[string]any
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "assignment to entry in nil map") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			break
		}
	}
	if line == nil {
		t.Fatalf("no log line names the panic; logs:\n%s", logs)
	}
	if line["level"] != "ERROR" {
		t.Errorf("level = %v, want ERROR", line["level"])
	}
	if s, _ := line["stack"].(string); !strings.Contains(s, frame) {
		t.Errorf("stack = %q, want one through %s", s, frame)
	}
	if line["tool"] != toolName || line["call_id"] != callID || line["request_id"] != "req_panic" {
		t.Errorf("tool, call_id, request_id = %v, %v, %v; want %s, %s, req_panic", line["tool"], line["call_id"], line["request_id"], toolName, callID)
	}
}

// prepanicTool asks for approval and panics in its Precheck.
type prepanicTool struct{}

func (prepanicTool) Spec() tool.Spec {
	return tool.Spec{Name: "precrash", Description: "Crashes before it is approved."}
}

func (prepanicTool) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult("ran"), nil
}

func (prepanicTool) Precheck(*tool.Context, json.RawMessage) error {
	var m map[string]int
	m["boom"]++
	return nil
}

type askAll struct{}

func (askAll) Check(approval.Request) approval.Decision {
	return approval.Decision{Outcome: approval.Ask, Reason: "asked"}
}

// TestPrecheckPanicIsLogged: a tool's Precheck that panics lets the call ask for its
// approval as usual, and the panic is logged at error level with its stack and the
// call's ids (before: without the stack, nor the request's id).
func TestPrecheckPanicIsLogged(t *testing.T) {
	t.Parallel()
	e := newExecEnv(t, Config{}, envOpts{tools: []tool.Tool{prepanicTool{}}})
	var logs syncBuffer
	e.x = NewExecutor(ExecConfig{Owner: "test"}, e.commits, nil, nil, nil,
		slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	t.Cleanup(e.x.Close)
	e.x.UsePermissions(&Permissions{Policy: askAll{}, Store: e.st, Notifier: store.NewInProcessNotifier(16)})
	sess, _, err := e.m.Create(context.Background(), "t1", Spec{AvailableTools: []string{"precrash"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.x.Plan(sess, Batch{Calls: []CallRequest{{ToolCallID: "c1", Name: "precrash"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(telemetry.WithRequestID(context.Background(), "req_panic"))
	defer cancel()
	asked := false
	e.x.Execute(ctx, p, func(ev Event) {
		if ev.Type == EventApproval {
			asked = true
			cancel() // the client leaves; the approval stays pending
		}
	})
	if !asked {
		t.Fatal("the call did not ask for approval")
	}
	checkPanicLine(t, logs.String(), "prepanicTool.Precheck", "precrash", p.Calls[0].ID)
}

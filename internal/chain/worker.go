package chain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
	"golang.org/x/sys/unix"

	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// A chain's script runs in a worker process: the daemon re-executes its own binary
// (/proc/self/exe) under the name workerArg0, and the init function below, which runs
// before main (or a test binary's TestMain), recognises that name, serves one script
// on stdin and stdout and exits. Any binary that links this package can so serve as
// the worker, and nothing else of the daemon runs in it. In any other process the init
// does nothing.
//
// One Starlark step is never interrupted: `s.replace('a', s)` or `[0] * n` asks the Go
// runtime for its whole value at once, and a Go program that cannot have the memory it
// asks for dies. In the worker, that ends the script, not the daemon.
const workerArg0 = "toolserverd-chain-worker"

// workerOOMScoreAdj makes the kernel kill a worker before the daemon when the host (or
// the daemon's container) runs out of memory, as commands (sandbox.commandOOMScoreAdj).
const workerOOMScoreAdj = "1000"

func init() {
	if len(os.Args) == 0 || os.Args[0] != workerArg0 {
		return
	}
	os.Exit(serveWorker(os.Stdin, os.Stdout, applyWorkerLimits))
}

// workerMaxStack bounds a goroutine's stack in the worker. Starlark walks some values
// and the script's syntax tree by recursion (str() or hashing of a tuple nested a
// million deep, a 200,000-term expression compiled); the runtime's default, 1 GiB,
// would be reached only past the memory bound, and the script told that one operation
// asked for too much memory. Values nested maxValueDepth deep (what a chain passes)
// take well under a MiB, under the race detector too.
const workerMaxStack = 64 << 20

// applyWorkerLimits bounds the worker process as start asks.
func applyWorkerLimits(s *workerStart) error {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte(workerOOMScoreAdj), 0)
	debug.SetMaxStack(workerMaxStack)
	if s.SoftMemoryLimit > 0 {
		debug.SetMemoryLimit(s.SoftMemoryLimit)
	}
	if s.AddressSpace > 0 {
		size, err := addressSpace()
		if err != nil {
			return err
		}
		lim := &unix.Rlimit{Cur: uint64(size + s.AddressSpace), Max: uint64(size + s.AddressSpace)}
		if err := unix.Setrlimit(unix.RLIMIT_AS, lim); err != nil {
			return fmt.Errorf("limit the address space: %w", err)
		}
	}
	return nil
}

// addressSpace is this process's virtual size (VmSize).
func addressSpace() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

// serveWorker runs the one script that arrives on in, talking to the daemon over in
// and out, and returns the exit code. limit (nil: none) bounds the process first.
func serveWorker(in io.Reader, out io.Writer, limit func(*workerStart) error) int {
	w := bufio.NewWriter(out)
	dec := json.NewDecoder(in)
	var first message
	if err := dec.Decode(&first); err != nil || first.Type != msgStart || first.Start == nil {
		fmt.Fprintf(os.Stderr, "%s: no start message: %v\n", workerArg0, err)
		return 2
	}
	s := &script{spec: first.Start, out: w, replies: make(chan *callReply, 1)}
	if limit != nil {
		if err := limit(s.spec); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", workerArg0, err)
			return 2
		}
	}
	s.thread = &starlark.Thread{Name: ToolName, Print: s.print}
	go s.read(dec)
	done := s.exec()
	err := s.send(message{Type: msgDone, Done: done})
	var long *lineTooLong
	if errors.As(err, &long) && done.Result != nil {
		if done.Error == nil {
			done.Error = &outcomeError{Kind: tool.KindFailed, Message: fmt.Sprintf(
				"the global result encodes to %d bytes of JSON, more than a chain may send to the daemon at once (%d bytes, the daemon's max_body_bytes, as for a request); return less, or have a tool write it",
				len(done.Result), long.max)}
		}
		done.Result = nil
		err = s.send(message{Type: msgDone, Done: done})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", workerArg0, err)
		return 2
	}
	return 0
}

// script is the worker's side of a chain.
type script struct {
	spec    *workerStart
	thread  *starlark.Thread
	out     *bufio.Writer
	line    bytes.Buffer    // the message being sent
	replies chan *callReply // closed when the daemon closes the connection

	calls     int
	printed   int
	truncated bool
	writeErr  error
	mu        sync.Mutex
	failure   *outcomeError // a limit that stopped the script
	heap      heapProbe
}

// read hands the daemon's replies to the script and its cancellation to the thread.
func (s *script) read(dec *json.Decoder) {
	defer close(s.replies)
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			s.thread.Cancel("the daemon closed the connection")
			return
		}
		switch m.Type {
		case msgReply:
			s.replies <- m.Reply
		case msgCancel:
			s.thread.Cancel("the chain was stopped: " + m.Reason)
		}
	}
}

// lineTooLong is a message longer than the daemon reads (workerStart.MaxLineBytes),
// not sent.
type lineTooLong struct{ len, max int }

func (e *lineTooLong) Error() string {
	return fmt.Sprintf("a message of %d bytes is more than the daemon reads (%d)", e.len, e.max)
}

// send writes one message; only the script's goroutine sends. One longer than the
// daemon reads is not sent (the daemon would kill the worker): a *lineTooLong.
func (s *script) send(m message) error {
	if s.writeErr != nil {
		return s.writeErr
	}
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false) // "<" is one byte on the line, not six
	if err := enc.Encode(m); err != nil {
		return err
	}
	if max := int(s.spec.MaxLineBytes); max > 0 && line.Len() > max {
		return &lineTooLong{len: line.Len(), max: max}
	}
	if _, err := s.out.Write(line.Bytes()); err != nil {
		s.writeErr = err
		return err
	}
	s.writeErr = s.out.Flush()
	return s.writeErr
}

// exec runs the script under the step and memory limits.
func (s *script) exec() *workerDone {
	p := s.spec
	guard := &memoryGuard{limit: p.MaxMemoryBytes, probe: &s.heap, stop: func(msg string) {
		s.fail(tool.KindFailed, msg)
		s.thread.Cancel("too much memory")
	}}
	guard.install(s.thread, p.MaxSteps, func(th *starlark.Thread) {
		s.fail(tool.KindFailed, fmt.Sprintf("the script exceeded %d execution steps (an endless loop?) and was stopped", p.MaxSteps))
		th.Cancel("too many execution steps")
	})
	end := guard.start()
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true, Set: true},
		s.thread, "script.star", p.Script, s.predeclared())
	end()
	done := &workerDone{Steps: s.thread.ExecutionSteps(), Truncated: s.truncated}
	if v, ok := globals["result"]; ok && v != nil {
		if b, encErr := encodeJSON(s.thread, v, maxValues(p.MaxMemoryBytes)); encErr == nil {
			done.Result = b
		} else if err == nil {
			err = fmt.Errorf("the global result cannot be encoded as JSON: %v", encErr)
		}
	}
	if err != nil {
		done.Error = s.classify(err)
	}
	return done
}

func (s *script) print(_ *starlark.Thread, msg string) {
	if s.printed+len(msg)+1 > maxOutputBytes {
		s.truncated = true
		return
	}
	s.printed += len(msg) + 1
	_ = s.send(message{Type: msgPrint, Text: msg})
}

// fail records the first limit that stopped the script.
func (s *script) fail(kind tool.ErrorKind, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = &outcomeError{Kind: kind, Message: msg}
	}
}

// classify turns the script's error into the result's error (the daemon replaces it
// when the chain was stopped by its deadline or a cancellation).
func (s *script) classify(err error) *outcomeError {
	s.mu.Lock()
	f := s.failure
	s.mu.Unlock()
	if f != nil {
		return f
	}
	var se syntax.Error
	if errors.As(err, &se) {
		return &outcomeError{Kind: tool.KindInvalidArgs, Message: "the script does not parse: " + err.Error()}
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return &outcomeError{Kind: tool.KindFailed, Message: ee.Backtrace()}
	}
	// Resolve errors (undefined names, …) are problems of the script text.
	if strings.HasPrefix(err.Error(), "script.star:") {
		return &outcomeError{Kind: tool.KindInvalidArgs, Message: "the script is not valid: " + err.Error()}
	}
	return &outcomeError{Kind: tool.KindFailed, Message: err.Error()}
}

// predeclared holds the builtins and one function per tool of the session whose name
// is a valid identifier that shadows nothing.
func (s *script) predeclared() starlark.StringDict {
	d := s.builtins()
	for _, name := range s.spec.Tools {
		if !identifier.MatchString(name) || reserved[name] || starlark.Universe.Has(name) || d.Has(name) {
			continue
		}
		d[name] = starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("%s: tools take keyword arguments only, e.g. %s(name=value)", name, name)
			}
			return s.call(name, kw, false)
		})
	}
	return d
}

// builtins are the functions every script has besides the session's tools.
func (s *script) builtins() starlark.StringDict {
	d := starlark.StringDict{
		"call": starlark.NewBuiltin("call", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return s.named(b, args, kw, false)
		}),
		"try_call": starlark.NewBuiltin("try_call", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return s.named(b, args, kw, true)
		}),
		"json":   boundedJSON(maxValues(s.spec.MaxMemoryBytes)),
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	}
	if s.spec.MaxMemoryBytes > 0 {
		d["range"] = boundedRange(s.spec.MaxMemoryBytes / bytesPerRangeElement)
	}
	return d
}

// boundedJSON is Starlark's json module whose functions refuse values and text nested
// more than maxValueDepth deep before they recurse into them, one Go call per level,
// and values holding more than maxValues values.
func boundedJSON(maxValues int) *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: starjson.Module.Name, Members: starlark.StringDict{}}
	for name, v := range starjson.Module.Members {
		b := v.(*starlark.Builtin)
		m.Members[name] = starlark.NewBuiltin(b.Name(), func(th *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				switch name {
				case "encode", "encode_indent":
					if err := checkDepth(fn.Name(), args[0], maxValueDepth, maxValues); err != nil {
						return nil, err
					}
				case "decode", "indent":
					if s, ok := starlark.AsString(args[0]); ok && jsontext.Deeper(s, maxValueDepth) {
						return nil, fmt.Errorf("%s: the value nests lists and dicts more than %d deep", fn.Name(), maxValueDepth)
					}
				}
			}
			return b.CallInternal(th, args, kw)
		})
	}
	return m
}

// named serves call("tool", ...) and try_call("tool", ...).
func (s *script) named(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple, try bool) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%s: want the tool name as the only positional argument, then keyword arguments", b.Name())
	}
	name, ok := starlark.AsString(args[0])
	if !ok {
		return nil, fmt.Errorf("%s: the tool name must be a string, not %s", b.Name(), args[0].Type())
	}
	return s.call(name, kw, try)
}

// call asks the daemon to make one tool call and waits for its reply.
func (s *script) call(name string, kw []starlark.Tuple, try bool) (starlark.Value, error) {
	if s.calls >= s.spec.MaxToolCalls {
		msg := fmt.Sprintf("the script tried to make more than %d tool calls (chain max_tool_calls); %s was not called", s.spec.MaxToolCalls, name)
		s.fail(tool.KindFailed, msg)
		return nil, errors.New(msg)
	}
	kwargs := starlark.NewDict(len(kw))
	for _, pair := range kw {
		if err := kwargs.SetKey(pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	argJSON, err := encodeJSON(s.thread, kwargs, maxValues(s.spec.MaxMemoryBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: arguments cannot be encoded as JSON: %v", name, err)
	}
	var long *lineTooLong
	if err := s.send(message{Type: msgCall, Call: &callRequest{Tool: name, Args: argJSON}}); errors.As(err, &long) {
		return nil, fmt.Errorf("%s: the arguments encode to %d bytes of JSON, more than a chain may send to the daemon at once (%d bytes, the daemon's max_body_bytes, as for a request); pass less in one call",
			name, len(argJSON), long.max)
	} else if err != nil {
		return nil, fmt.Errorf("%s: the daemon cannot be reached: %v", name, err)
	}
	s.calls++
	rep, ok := <-s.replies
	if !ok || rep == nil {
		return nil, fmt.Errorf("%s: the daemon closed the connection", name)
	}
	if rep.Error != "" {
		return nil, errors.New(rep.Error)
	}
	if rep.Failed {
		if try && !rep.Stopping {
			return attempt(false, starlark.None, starlark.String(rep.Message), starlark.String(rep.Kind), rep.CallID), nil
		}
		return nil, fmt.Errorf("%s failed (%s, call %s): %s", name, rep.Kind, rep.CallID, rep.Message)
	}
	value, err := s.value(rep)
	if err != nil {
		msg := fmt.Sprintf("%s's result cannot be read by a script (%v); the call ran (%s): call %s directly to see its result", name, err, rep.CallID, name)
		if try {
			// try_call never stops the script for a tool's doing: the call ran, its
			// value is out of reach, and the script decides what to do about it.
			return attempt(false, starlark.None, starlark.String(msg), starlark.String(tool.KindFailed), rep.CallID), nil
		}
		return nil, errors.New(msg)
	}
	if try {
		return attempt(true, value, starlark.None, starlark.None, rep.CallID), nil
	}
	return value, nil
}

func attempt(ok bool, value, errText, kind starlark.Value, callID string) starlark.Value {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"ok": starlark.Bool(ok), "value": value, "error": errText, "kind": kind, "call_id": starlark.String(callID),
	})
}

// value turns a successful reply into the script's value: decoded structured content,
// text, or an artifact reference. Structured content Starlark's decoder refuses (valid
// JSON: a number out of a float's range) is an error, not its text as a string.
func (s *script) value(rep *callReply) (starlark.Value, error) {
	if a := rep.Artifact; a != nil {
		d := starlark.NewDict(5)
		_ = d.SetKey(starlark.String("artifact"), starlark.String(a.Ref))
		_ = d.SetKey(starlark.String("bytes"), starlark.MakeInt(a.Bytes))
		_ = d.SetKey(starlark.String("preview"), starlark.String(a.Preview))
		_ = d.SetKey(starlark.String("json"), starlark.Bool(a.JSON))
		_ = d.SetKey(starlark.String("truncated"), starlark.Bool(a.Truncated))
		return d, nil
	}
	if len(rep.JSON) == 0 {
		return starlark.String(rep.Text), nil
	}
	return starlark.Call(s.thread, starjson.Module.Members["decode"], starlark.Tuple{starlark.String(rep.JSON)}, nil)
}

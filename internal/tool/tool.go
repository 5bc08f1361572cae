// Package tool is the shared vocabulary of toolserverd: what a tool is, what a call
// carries, what a result looks like and how failures are classified. It imports no
// other internal package.
package tool

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"time"
)

// Risk is how much harm a call of a tool could do. Policies map it to allow, ask or deny.
type Risk string

const (
	RiskSafe     Risk = "safe"
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

var riskOrder = map[Risk]int{RiskSafe: 0, RiskLow: 1, RiskMedium: 2, RiskHigh: 3, RiskCritical: 4}

// Valid reports whether r is one of the known risk levels.
func (r Risk) Valid() bool { _, ok := riskOrder[r]; return ok }

// Rank orders risks from safe (0) to critical (4); unknown risks rank as medium.
func (r Risk) Rank() int {
	if n, ok := riskOrder[r]; ok {
		return n
	}
	return riskOrder[RiskMedium]
}

// Mode is how a tool's result reaches the agent.
type Mode string

const (
	// ModeDirect tools finish within the call and their result is the message.
	ModeDirect Mode = "direct"
	// ModeBackground tools return a handle at once; the result arrives later.
	ModeBackground Mode = "background"
	// ModeStateful tools yield intermediate results the agent can answer.
	ModeStateful Mode = "stateful"
)

// Flags describe how a tool may be scheduled and who executes it.
type Flags struct {
	// ReadOnly tools change nothing outside the call.
	ReadOnly bool `json:"read_only"`
	// ConcurrencySafe tools may run in parallel with any other call of the session;
	// the rest are serialized per session.
	ConcurrencySafe bool `json:"concurrency_safe"`
	// External tools are completed by someone outside the daemon (a person, a UI).
	External bool `json:"external"`
	// Hosted tools are executed by the model provider, never by the daemon.
	Hosted bool `json:"hosted"`
	// Idempotent tools may be called again with the same arguments to no further
	// effect (MCP's idempotentHint, from a server whose annotations are trusted).
	// Information for clients: the daemon never repeats a call by itself.
	Idempotent bool `json:"idempotent,omitempty"`
	// OpenWorld says whether the tool reaches outside systems (MCP's openWorldHint,
	// as the server gave it); nil when unknown.
	OpenWorld *bool `json:"open_world,omitempty"`
	// Destructive says whether a tool that is not read-only may change or delete what
	// exists, rather than only add (MCP's destructiveHint, from a server whose
	// annotations are trusted); nil when not said. See DestructiveHint.
	Destructive *bool `json:"destructive,omitempty"`
	// Invokes tools call other tools of their session (tool_chain): the executor gives
	// their Context an Invoker. Not shown to models.
	Invokes bool `json:"-"`
}

// DestructiveHint is what MCP clients are told of whether the tool may change or
// delete what exists: false for a read-only tool; Destructive when said; else true
// from high risk up and false up to low risk; and nil (unknown, which MCP clients
// take as true) for a medium-risk tool nobody said anything of, such as an MCP
// tool its server did not annotate.
func (f Flags) DestructiveHint(risk Risk) *bool {
	yes, no := true, false
	switch {
	case f.ReadOnly:
		return &no
	case f.Destructive != nil:
		d := *f.Destructive
		return &d
	case risk.Rank() >= RiskHigh.Rank():
		return &yes
	case risk.Rank() <= RiskLow.Rank():
		return &no
	}
	return nil
}

// Spec is everything the registry and the model know about a tool.
type Spec struct {
	Name        string `json:"name"`
	Label       string `json:"label,omitempty"`
	Description string `json:"description"`
	// Parameters is a JSON Schema for the arguments object.
	Parameters json.RawMessage `json:"parameters"`
	// OutputSchema is a JSON Schema (type object) of the structured output
	// (Result.Structured) of the tool's successful calls, as an MCP server declares it
	// in a tool's outputSchema; nil when the tool declares none. MCP clients hold a
	// tool that declares one to it: every result that is not an error must carry
	// structured output that conforms.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Documentation is the full manual, returned on demand rather than in every prompt.
	Documentation string `json:"documentation,omitempty"`
	// PromptHint is a short paragraph for the system prompt.
	PromptHint string `json:"prompt_hint,omitempty"`
	Flags
	Risk Risk `json:"risk"`
	// RiskWhy says where Risk comes from when that is not the tool's own nature
	// ("its MCP server marks it destructive", "a DELETE of the petstore API"): an
	// approver reads it in the reason a call asks.
	RiskWhy string `json:"-"`
	Mode    Mode   `json:"mode"`
	// Timeout is the tool's default per-call deadline; zero means the server default.
	Timeout time.Duration `json:"-"`
	// CancelGrace is how long a cancelled call waits for the tool's own answer before
	// answering without it; zero means the executor's default (half a second). A tool
	// whose answer after a cancel carries what the caller needs (a chain's trace) and
	// that is sure to give it sets a longer one.
	CancelGrace time.Duration `json:"-"`
	// Source names where the tool comes from ("local", "mcp:github", "openapi:petstore").
	Source string `json:"source,omitempty"`
	// ProviderSpecs are the tool's declarations in model providers' own formats, by
	// provider ("openai", "anthropic"): that provider's schema export sends them instead
	// of the function shape. A Hosted tool is exported only to the providers listed.
	ProviderSpecs map[string]json.RawMessage `json:"provider_specs,omitempty"`
}

// AdvertisedOutputSchema is the OutputSchema to show callers, or nil when the daemon
// cannot promise that results carry structured output conforming to it: a
// background call's result is a handle, and an external tool's is whatever is posted
// for it.
func (s Spec) AdvertisedOutputSchema() json.RawMessage {
	if s.Mode == ModeBackground || s.External {
		return nil
	}
	return s.OutputSchema
}

// HostedBy lists the providers that execute a hosted tool, sorted; nil for tools the
// daemon executes.
func (s Spec) HostedBy() []string {
	if !s.Hosted {
		return nil
	}
	out := make([]string, 0, len(s.ProviderSpecs))
	for p := range s.ProviderSpecs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// ErrorKind classifies a failed call so the model can decide what to do next.
type ErrorKind string

const (
	KindNotFound    ErrorKind = "not_found"
	KindInvalidArgs ErrorKind = "invalid_args"
	KindDenied      ErrorKind = "denied"
	KindTimeout     ErrorKind = "timeout"
	KindCancelled   ErrorKind = "cancelled"
	KindFailed      ErrorKind = "failed"
	KindUnavailable ErrorKind = "unavailable"
	KindSkipped     ErrorKind = "skipped"
)

// Known reports whether k is one of the kinds above.
func (k ErrorKind) Known() bool {
	switch k {
	case KindNotFound, KindInvalidArgs, KindDenied, KindTimeout, KindCancelled, KindFailed, KindUnavailable, KindSkipped:
		return true
	}
	return false
}

// Error is a tool failure with a kind. Tools return it (or any error, which counts as
// KindFailed); the dispatcher turns it into an is_error Result.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: sprintf(format, args...)}
}

// Progress receives live output of a running call. It is UI-only: what goes through it
// never becomes part of the result. Implementations must never block the tool.
type Progress interface {
	// Emit sends text on a stream ("stdout", "stderr", "info").
	Emit(stream, text string)
	// Close ends the call's progress; later emits are dropped.
	Close()
}

type noProgress struct{}

func (noProgress) Emit(string, string) {}
func (noProgress) Close()              {}

// NoProgress discards everything.
var NoProgress Progress = noProgress{}

// ProgressHolder is implemented by Progress emitters whose call's output may go on
// after the call returns. A tool whose work outlives its call (a background job) calls
// Hold before it returns and the returned release once that work is over: in between,
// Close does not end the call's progress, so pollers and UIs following the call go on
// receiving the work's output and are told it is complete only when it is. release
// may be called more than once.
type ProgressHolder interface {
	Hold() (release func())
}

// Reporter is implemented by Progress emitters that carry numeric progress besides
// text. Report records how far the call is: progress of total units (total 0 means
// unknown) and an optional short message. Like Emit it must never block the tool; it
// also writes the report as a line on the "info" stream (ProgressLine), so consumers
// of text lose nothing. Callers go through Context.Report, which checks the numbers.
type Reporter interface {
	Report(progress, total float64, message string)
}

// ValidProgress reports whether progress and total are usable numbers: finite and not
// negative (total 0 means unknown).
func ValidProgress(progress, total float64) bool {
	return progress >= 0 && total >= 0 && !math.IsInf(progress, 0) && !math.IsInf(total, 0)
}

// ProgressLine is a report as a line for a person, with its line end: the message
// followed by "(progress/total)" when the total is known, or "progress/total" (or
// "progress") without a message.
func ProgressLine(progress, total float64, message string) string {
	count := formatNumber(progress)
	if total > 0 {
		count += "/" + formatNumber(total)
	} else if message != "" {
		count = "" // a bare count says little beside a message
	}
	switch {
	case message == "":
		return count + "\n"
	case count == "":
		return message + "\n"
	}
	return message + " (" + count + ")\n"
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Session is what a tool may know about the session it runs in.
type Session struct {
	ID       string
	Tenant   string
	Workdir  string
	Metadata map[string]any
	// State is per-session storage for tools (file guards, scratchpads, job tables).
	State *State
	// Tools finds the tools this session may call (its whitelist applied), for meta
	// tools such as info.
	Tools Catalog
	// Loaded: this process loaded the session from the store (after a restart, an
	// eviction, or made by another replica) rather than creating it, so what its
	// tools kept in State before is gone.
	Loaded bool
}

// Catalog lists the tools a session may call.
type Catalog interface {
	// Lookup returns the spec of an allowed tool.
	Lookup(name string) (Spec, bool)
	// Names returns the allowed tools' names, sorted.
	Names() []string
}

// Context is what a running call carries besides its arguments: cancellation and
// deadline (the embedded context), ids, the session, and the progress emitter.
type Context struct {
	context.Context
	// CallID is the daemon's id for the call (tc_…), unique across sessions.
	CallID string
	// ToolCallID is the model's id for the call, unique only within a session.
	ToolCallID string
	ToolName   string
	Session    *Session
	// ReadOnly: the session's permission mode lets it change nothing (explore). Such
	// a session runs only read-only tools, and a read-only tool must then not write
	// as a side effect either (an API's binary answer is not saved to the working
	// directory).
	ReadOnly bool
	Progress Progress
	// Interact is set for stateful tools: it shows the agent an intermediate result
	// and returns the agent's answer.
	Interact Interactor
	// Invoke is set for tools whose spec has Invokes: it calls another tool of the
	// session through the same path as a direct call.
	Invoke Invoker
}

// Interactor lets a stateful tool yield an intermediate result and wait for the
// agent's answer.
type Interactor interface {
	Ask(ctx context.Context, intermediate *Result) (json.RawMessage, error)
}

// Ask yields an intermediate result to the agent and returns its answer. It fails for
// tools that are not run as stateful.
func (c *Context) Ask(intermediate *Result) (json.RawMessage, error) {
	if c.Interact == nil {
		return nil, Errorf(KindFailed, "%s cannot ask the agent for input: it is not a stateful tool", c.ToolName)
	}
	return c.Interact.Ask(c.Context, intermediate)
}

// Emit is a shorthand for c.Progress.Emit that tolerates a nil emitter.
func (c *Context) Emit(stream, text string) {
	if c.Progress != nil {
		c.Progress.Emit(stream, text)
	}
}

// Report sends numeric progress: progress of total units (total 0: unknown) and an
// optional message. Emitters that implement Reporter carry the numbers to UIs and MCP
// clients; with any other emitter the report becomes its text line on the "info"
// stream. Numbers that are not finite or are negative are dropped (a message still
// goes out as text).
func (c *Context) Report(progress, total float64, message string) {
	if c.Progress == nil {
		return
	}
	if !ValidProgress(progress, total) {
		if message != "" {
			c.Progress.Emit("info", message+"\n")
		}
		return
	}
	if r, ok := c.Progress.(Reporter); ok {
		r.Report(progress, total, message)
		return
	}
	c.Progress.Emit("info", ProgressLine(progress, total, message))
}

// Tool is an executable capability.
type Tool interface {
	Spec() Spec
	// Run executes one call. args has already been validated against Spec().Parameters.
	// A returned error becomes an is_error result (kind from *Error, else failed).
	Run(ctx *Context, args json.RawMessage) (*Result, error)
}

// Prechecker is implemented by tools that can see, before a person is asked to
// approve a call, that the call would be refused anyway: write_file on a file the
// session has not read, edit_file on one that does not exist. The executor calls
// Precheck only for a call that would otherwise wait for approval; a non-nil error
// (kind from *Error, else failed) is the call's result and nobody is asked. Precheck
// must change nothing a model or a person sees; it may keep, durably, what the call's
// Run will be checked against (the file tools keep the session's read stamp of the
// file), so that the call, approved after a restart, runs as it would have without
// one. The call's Run checks again, since the file may have changed while the call
// waited.
type Prechecker interface {
	Precheck(ctx *Context, args json.RawMessage) error
}

package chain

import (
	"encoding/json"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// The daemon and a chain's worker process speak JSON lines: the daemon writes to the
// worker's stdin, the worker to its stdout (its stderr is kept for the report of a
// crash). Starlark is sequential, so at most one call of the worker waits for a reply.
//
//	daemon → worker: start (first, once), reply (to each call), cancel
//	worker → daemon: call, print, done (last, once)
const (
	msgStart  = "start"
	msgReply  = "reply"
	msgCancel = "cancel"
	msgCall   = "call"
	msgPrint  = "print"
	msgDone   = "done"
)

// message is one line, either way.
type message struct {
	Type string `json:"type"`

	Start  *workerStart `json:"start,omitempty"`
	Reply  *callReply   `json:"reply,omitempty"`
	Reason string       `json:"reason,omitempty"` // cancel: why the chain stops

	Call *callRequest `json:"call,omitempty"`
	Text string       `json:"text,omitempty"` // print: one printed line, without its newline
	Done *workerDone  `json:"done,omitempty"`
}

// workerStart is the script and what bounds it.
type workerStart struct {
	Script string   `json:"script"`
	Tools  []string `json:"tools"` // the session's tool names, for the predeclared functions
	// The policy's limits the worker applies itself.
	MaxToolCalls         int    `json:"max_tool_calls"`
	MaxSteps             uint64 `json:"max_steps"`
	MaxMemoryBytes       int64  `json:"max_memory_bytes"`
	MaxInlineResultBytes int    `json:"max_inline_result_bytes"`
	MaxLineBytes         int64  `json:"max_line_bytes"` // the longest line the daemon reads
	// SoftMemoryLimit is the Go runtime's memory limit in the worker (0: none), so that
	// it collects hard before the hard bound; AddressSpace, when not 0, is how much the
	// worker's address space may grow past its size at start (RLIMIT_AS), the hard bound
	// where no memory cgroup can be made.
	SoftMemoryLimit int64 `json:"soft_memory_limit,omitempty"`
	AddressSpace    int64 `json:"address_space,omitempty"`
}

// callRequest is a tool call the script makes.
type callRequest struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// callReply is the daemon's answer to a call: a value (JSON to decode, or text, or an
// artifact reference), a tool error, or why the value cannot be handed over.
type callReply struct {
	CallID   string          `json:"call_id,omitempty"`
	JSON     json.RawMessage `json:"json,omitempty"`
	Text     string          `json:"text,omitempty"`
	Artifact *artifactRef    `json:"artifact,omitempty"`

	Failed  bool           `json:"failed,omitempty"`
	Kind    tool.ErrorKind `json:"kind,omitempty"`
	Message string         `json:"message,omitempty"`
	// Stopping: the chain is being stopped (deadline, cancellation), so try_call does
	// not catch the failure.
	Stopping bool `json:"stopping,omitempty"`

	Error string `json:"error,omitempty"`
}

// artifactRef is what the script gets for a result too large to inline.
type artifactRef struct {
	Ref       string `json:"ref"`
	Bytes     int    `json:"bytes"`
	Preview   string `json:"preview"`
	JSON      bool   `json:"json"`
	Truncated bool   `json:"truncated"`
}

// workerDone is the end of the script.
type workerDone struct {
	Error     *outcomeError   `json:"error,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Steps     uint64          `json:"steps"`
	Truncated bool            `json:"output_truncated,omitempty"`
}

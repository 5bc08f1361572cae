// Package chain is code-mode chaining: the tool_chain tool runs a Starlark script in
// which the session's tools are functions, so a model can call several tools and pass
// data between them in one turn; artifact_read reads results too large to inline.
// Every call the script makes goes through the session's executor (tool.Invoker), so
// it is checked, approved and recorded like a call from the model.
package chain

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Policy bounds a chain.
type Policy struct {
	// MaxToolCalls is how many tool calls one script may make.
	MaxToolCalls int
	// CallTimeout caps each call's deadline (a tool's shorter default still applies).
	CallTimeout time.Duration
	// TotalTimeout bounds the whole script, tool calls and approval waits included.
	TotalTimeout time.Duration
	// MaxInlineResultBytes is the largest result handed to the script as a value;
	// larger ones are stored as artifacts and handed over as a reference and preview.
	MaxInlineResultBytes int
	// ApprovalTimeout bounds how long a call that needs approval waits for a decision;
	// the request then expires and the call is denied.
	ApprovalTimeout time.Duration
	// MaxRiskWithoutApproval is the highest risk a chained call may run at without a
	// person's approval, whatever the rules and mode would allow.
	MaxRiskWithoutApproval tool.Risk
	// MaxSteps bounds the script's own computation (Starlark execution steps).
	MaxSteps uint64
	// MaxMemoryBytes bounds what a script keeps: its worker's live heap may grow by
	// this much (Starlark has no allocation accounting of its own; see memoryGuard), and
	// the worker process is bounded by the kernel at hardMemoryLimit of it.
	MaxMemoryBytes int64
	// ArtifactBytesPerSession bounds the artifacts kept per session; the oldest are
	// deleted to make room.
	ArtifactBytesPerSession int64
	// MaxMessageBytes bounds one message a script's worker sends the daemon (a call's
	// arguments, the global result, as JSON), which the daemon reads whole into its
	// heap: the daemon's max_body_bytes, as a direct call's request. 0: MaxMemoryBytes
	// plus 1 MiB.
	MaxMessageBytes int64
}

// maxLine is the longest line the daemon reads from a worker, and the worker sends.
func (p Policy) maxLine() int64 {
	if p.MaxMessageBytes > 0 {
		return p.MaxMessageBytes
	}
	return p.MaxMemoryBytes + 1<<20
}

// DefaultPolicy is the policy when the configuration changes nothing.
func DefaultPolicy() Policy {
	return Policy{
		MaxToolCalls:            50,
		CallTimeout:             60 * time.Second,
		TotalTimeout:            300 * time.Second,
		MaxInlineResultBytes:    4096,
		ApprovalTimeout:         120 * time.Second,
		MaxRiskWithoutApproval:  tool.RiskMedium,
		MaxSteps:                10_000_000,
		MaxMemoryBytes:          256 << 20,
		ArtifactBytesPerSession: 64 << 20,
	}
}

// Validate checks the policy.
func (p Policy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("chain: "+format, args...)) }
	if p.MaxToolCalls < 1 {
		bad("max tool calls must be at least 1")
	}
	if p.CallTimeout <= 0 || p.TotalTimeout <= 0 || p.ApprovalTimeout <= 0 {
		bad("timeouts must be positive")
	}
	if p.MaxInlineResultBytes < 256 {
		bad("max inline result bytes %d is below 256", p.MaxInlineResultBytes)
	}
	if !p.MaxRiskWithoutApproval.Valid() {
		bad("max risk without approval %q is not safe, low, medium, high or critical", p.MaxRiskWithoutApproval)
	}
	if p.MaxSteps < 1000 {
		bad("max steps %d is below 1000", p.MaxSteps)
	}
	if p.MaxMemoryBytes < 1<<20 {
		bad("max memory bytes %d is below 1 MiB", p.MaxMemoryBytes)
	}
	if p.ArtifactBytesPerSession < int64(p.MaxInlineResultBytes) {
		bad("artifact bytes per session %d is below the max inline result bytes", p.ArtifactBytesPerSession)
	}
	return errors.Join(errs...)
}

package tool

import (
	"context"
	"encoding/json"
	"time"
)

// NestedCall is a call a tool makes of another tool of its session (tool_chain's
// script calling read_file). It goes through the session's whitelist, argument
// validation, permission check and approvals like a call from the model.
type NestedCall struct {
	Name string
	Args json.RawMessage
	// Timeout caps the call's deadline (the tool's own default applies when it is
	// shorter); zero leaves the tool's default.
	Timeout time.Duration
	// ApprovalTimeout bounds how long a call that needs a person's approval waits for
	// the decision; the request expires then. Zero: the daemon's approval TTL.
	ApprovalTimeout time.Duration
	// MaxRiskWithoutApproval makes a call of higher effective risk ask for approval
	// even where rules or the mode would allow it. "": no such cap.
	MaxRiskWithoutApproval Risk
}

// NestedResult is what a nested call produced.
type NestedResult struct {
	// CallID is the nested call's own daemon id (tc_…), with its own record.
	CallID string
	// Result is the full result (not cut to the token budget).
	Result *Result
}

// Invoker runs nested calls for one running call.
type Invoker interface {
	Invoke(ctx context.Context, call NestedCall) NestedResult
}

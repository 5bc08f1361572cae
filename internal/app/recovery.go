package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// recoveryLogMax is how many calls or approvals a start-up recovery line names; the
// rest are counted ("and 12 more").
const recoveryLogMax = 20

// logAbandoned says which calls of a previous run the start marked failed, so that an
// operator can look them up (GET /v1/tool-calls/{id}): the first recoveryLogMax by
// id, tool, session and whether they had started, then how many more.
func logAbandoned(log *slog.Logger, replicaID string, calls []store.AbandonedCall) {
	if len(calls) == 0 {
		return
	}
	named := make([]string, 0, min(len(calls), recoveryLogMax)+1)
	for i, c := range calls {
		if i == recoveryLogMax {
			named = append(named, fmt.Sprintf("and %d more", len(calls)-recoveryLogMax))
			break
		}
		state := "was running, may have run partly"
		if !c.Started {
			state = "was pending, never ran"
		}
		named = append(named, fmt.Sprintf("%s (%s, session %s, %s)", c.ID, c.Name, c.SessionID, state))
	}
	log.Warn("calls left unfinished by a previous run were marked failed", "count", len(calls), "replica_id", replicaID, "calls", named)
}

// recoveredApprovals is what the start-up log needs of the approval store.
type recoveredApprovals interface {
	ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error)
	ApprovedUnclaimed(ctx context.Context, decidedBefore time.Time, limit int) ([]string, error)
	GetCall(ctx context.Context, id string) (*store.Call, error)
	CountPendingApprovals(ctx context.Context) (int, error)
}

// logRecoveredApprovals names, at start, the approval requests the store kept from
// before (still pending: decided later, the call runs then) and the approved calls
// nobody ran yet (the approvals sweep runs them within seconds): the first
// recoveryLogMax of each by approval and call id, tool and session, then how many more.
// Only what the store answers is logged; a failure to read is logged and not fatal.
func logRecoveredApprovals(ctx context.Context, log *slog.Logger, s recoveredApprovals) {
	n, err := s.CountPendingApprovals(ctx)
	var pending []*store.Approval
	if err == nil && n > 0 {
		pending, err = s.ListApprovals(ctx, store.ApprovalFilter{Status: store.ApprovalPending, Limit: recoveryLogMax})
	}
	if err != nil {
		log.Error("listing the approval requests kept from before the start failed", "err", err)
	} else if len(pending) > 0 {
		named := make([]string, 0, len(pending)+1)
		for _, a := range pending {
			named = append(named, fmt.Sprintf("%s for %s (%s, session %s)", a.ID, a.CallID, a.Tool, a.SessionID))
		}
		if n > len(pending) {
			named = append(named, fmt.Sprintf("and %d more", n-len(pending)))
		}
		log.Info("approval requests pending in the store; each call runs once approved", "count", n, "approvals", named)
	}
	ids, err := s.ApprovedUnclaimed(ctx, time.Now().UTC(), 10000)
	if err != nil {
		log.Error("listing the approved calls not run yet failed", "err", err)
		return
	}
	if len(ids) == 0 {
		return
	}
	named := make([]string, 0, min(len(ids), recoveryLogMax)+1)
	for i, id := range ids {
		if i == recoveryLogMax {
			named = append(named, fmt.Sprintf("and %d more", len(ids)-recoveryLogMax))
			break
		}
		if c, err := s.GetCall(ctx, id); err == nil {
			named = append(named, fmt.Sprintf("%s (%s, session %s)", id, c.Name, c.SessionID))
		} else {
			named = append(named, id)
		}
	}
	log.Warn("approved calls nobody ran yet; the approvals sweep runs them within seconds", "count", len(ids), "calls", named)
}

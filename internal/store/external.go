package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// External tools (ask_user and those an operator declares) are completed by someone
// outside the daemon. Their calls wait durably, like approvals: a restart leaves them
// waiting (AbandonCalls only touches pending and running calls), and the answer
// finishes them once.

// WaitCall moves a pending or running call to waiting for an external answer. Unknown
// call: ErrNotFound; any other state: ErrConflict.
func (s *SQLite) WaitCall(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE tool_calls SET status = 'waiting' WHERE id = ? AND status IN ('pending', 'running')`, id)
	return sqlRowOutcome("wait for call", id, res, err, func() error { return s.callExists(ctx, id) })
}

// AnswerCall finishes a call waiting for an external answer (and no approval) with
// result. Unknown call: ErrNotFound; not waiting, or waiting for an approval:
// ErrConflict.
func (s *SQLite) AnswerCall(ctx context.Context, id string, result *tool.Result, at time.Time) error {
	enc, err := encodeResult(result)
	if err != nil {
		return fmt.Errorf("store: answer call %s: %w", id, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tool_calls SET status = ?, result = ?, error_kind = ?, finished_at = ?
		WHERE id = ? AND status = 'waiting' AND NOT EXISTS (SELECT 1 FROM approvals WHERE call_id = ? AND status = 'pending')`,
		string(terminalStatus(result)), sqliteText(enc), string(resultErrorKind(result)), sqliteTime(at), id, id)
	return sqlRowOutcome("answer call", id, res, err, func() error { return s.callExists(ctx, id) })
}

func (s *SQLite) callExists(ctx context.Context, id string) error {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM tool_calls WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// WaitCall: see (*SQLite).WaitCall.
func (p *Postgres) WaitCall(ctx context.Context, id string) error {
	tag, err := p.pool.Exec(ctx, `UPDATE tool_calls SET status = 'waiting' WHERE id = $1 AND status IN ('pending', 'running')`, id)
	if err != nil {
		return fmt.Errorf("store: wait for call %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return p.stateError("wait for call", id, ctx)
}

// AnswerCall: see (*SQLite).AnswerCall.
func (p *Postgres) AnswerCall(ctx context.Context, id string, result *tool.Result, at time.Time) error {
	enc, err := encodeResult(result)
	if err != nil {
		return fmt.Errorf("store: answer call %s: %w", id, err)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE tool_calls SET status = $1, result = $2, error_kind = $3, finished_at = $4
		WHERE id = $5 AND status = 'waiting' AND NOT EXISTS (SELECT 1 FROM approvals WHERE call_id = $5 AND status = 'pending')`,
		string(terminalStatus(result)), enc, string(resultErrorKind(result)), utcMicro(at), id)
	if err != nil {
		return fmt.Errorf("store: answer call %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return p.stateError("answer call", id, ctx)
}

func (p *Postgres) stateError(op, id string, ctx context.Context) error {
	var one int
	err := p.pool.QueryRow(ctx, `SELECT 1 FROM tool_calls WHERE id = $1`, id).Scan(&one)
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", op, id, ErrNotFound)
	}
	return fmt.Errorf("store: %s %s: the call is not in a state that allows it: %w", op, id, ErrConflict)
}

func terminalStatus(r *tool.Result) CallStatus {
	if r != nil && r.IsError {
		return CallFailed
	}
	return CallSucceeded
}

func sqlRowOutcome(op, id string, res sql.Result, err error, exists func() error) error {
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", op, id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: %s %s: %w", op, id, err)
	} else if n == 1 {
		return nil
	}
	if err := exists(); err != nil {
		return fmt.Errorf("store: %s %s: %w", op, id, err)
	}
	return fmt.Errorf("store: %s %s: the call is not in a state that allows it: %w", op, id, ErrConflict)
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/migrations"
)

// Postgres is the store for production and for several replicas sharing one database.
// Tables live in the first schema of the connection's search_path, which may be set as
// a runtime parameter in the URL (postgres://…/db?search_path=myschema).
type Postgres struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig // for connections of their own (migrations, ClaimReplica)
	schema  Schema          // what opening found and did
}

var _ Store = (*Postgres)(nil)

// OpenPostgres connects to url and applies pending migrations (serialized across
// processes by an advisory lock scoped to the target schema).
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	return openPostgres(ctx, url, 0)
}

// openPostgres is OpenPostgres with the first connection bounded by connectTimeout
// (0: by ctx only); the migrations that follow are not.
func openPostgres(ctx context.Context, url string, connectTimeout time.Duration) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	p := &Postgres{pool: pool, connCfg: cfg.ConnConfig}
	pingCtx, cancel := ctx, context.CancelFunc(func() {})
	if connectTimeout > 0 {
		pingCtx, cancel = context.WithTimeoutCause(ctx, connectTimeout, fmt.Errorf("no connection within %s: %w", connectTimeout, ErrConnectTimeout))
	}
	err = pool.Ping(pingCtx)
	if err != nil && pingCtx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (%v)", context.Cause(pingCtx), err)
	}
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open postgres %s: %w", describePG(cfg.ConnConfig), err)
	}
	if err := p.migrate(ctx, cfg.ConnConfig); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open postgres %s: %w", describePG(cfg.ConnConfig), err)
	}
	return p, nil
}

// describePG names the database without credentials, for error messages.
func describePG(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

const (
	pgInsertCall = `INSERT INTO tool_calls
	(id, session_id, tenant, tool_call_id, name, arguments, status, result, error_kind, owner, created_at, started_at, finished_at, output_open)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
	pgStartCall = `UPDATE tool_calls SET status = 'running', owner = $1, started_at = $2
	WHERE id = $3 AND status IN ('pending', 'waiting')`
	pgFinishCall = `UPDATE tool_calls SET status = $1, result = $2, error_kind = $3, finished_at = $4, output_open = $6
	WHERE id = $5 AND status NOT IN ('succeeded', 'failed')`
	pgCallColumns = `id, session_id, tenant, tool_call_id, name, arguments, status, result, error_kind, owner, created_at, started_at, finished_at, output_open`
)

func isPGUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// CreateSession inserts s. A zero CreatedAt or UpdatedAt is set to now, in s.
func (p *Postgres) CreateSession(ctx context.Context, s *Session) error {
	if err := prepareSession(s); err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	_, err := p.pool.Exec(ctx,
		`INSERT INTO sessions (id, tenant, spec, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)`,
		s.ID, s.Tenant, rawJSON(s.Spec), utcMicro(s.CreatedAt), utcMicro(s.UpdatedAt))
	if isPGUniqueViolation(err) {
		return fmt.Errorf("store: create session %s: already exists: %w", s.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create session %s: %w", s.ID, err)
	}
	return nil
}

func (p *Postgres) GetSession(ctx context.Context, id string) (*Session, error) {
	var (
		s    Session
		spec []byte
	)
	err := p.pool.QueryRow(ctx,
		`SELECT id, tenant, spec, created_at, updated_at FROM sessions WHERE id = $1`, id,
	).Scan(&s.ID, &s.Tenant, &spec, &s.CreatedAt, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get session %s: %w", id, err)
	}
	if len(spec) > 0 {
		s.Spec = json.RawMessage(spec)
	}
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	return &s, nil
}

func (p *Postgres) UpdateSessionSpec(ctx context.Context, id string, prev, spec json.RawMessage, at time.Time) error {
	if err := checkJSON("spec", spec); err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	}
	if at.IsZero() {
		at = now()
	}
	// The json type keeps its text as written, so the comparison is byte for byte.
	var was *string
	if len(prev) > 0 {
		s := string(prev)
		was = &s
	}
	tag, err := p.pool.Exec(ctx, `UPDATE sessions SET spec = $1, updated_at = greatest(updated_at, $2)
		WHERE id = $3 AND spec::text IS NOT DISTINCT FROM $4::text`,
		rawJSON(spec), utcMicro(at), id, was)
	if err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, id).Scan(&exists); err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	}
	if !exists {
		return fmt.Errorf("store: update session %s: %w", id, ErrNotFound)
	}
	return fmt.Errorf("store: update session %s: changed by another writer: %w", id, ErrConflict)
}

// WriteCalls inserts and finishes calls in one transaction, sent as one pipelined
// batch. A duplicate insert id is ErrConflict, a finish of an unknown id is
// ErrNotFound; either rolls back everything. Zero CreatedAt / FinishedAt are set to
// now, in the arguments.
func (p *Postgres) WriteCalls(ctx context.Context, inserts []*Call, finishes []CallFinish) error {
	return p.WriteCallBatch(ctx, CallWrites{Inserts: inserts, Finishes: finishes})
}

// WriteCallBatch is WriteCalls with starts (see BatchWriter).
func (p *Postgres) WriteCallBatch(ctx context.Context, w CallWrites) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	if w.empty() {
		return nil
	}
	if err := prepareWrite(w); err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	b := &pgx.Batch{}
	for _, c := range w.Inserts {
		res, err := encodeResult(c.Result)
		if err != nil {
			return fmt.Errorf("store: write calls: insert %s: encode result: %w", c.ID, err)
		}
		b.Queue(pgInsertCall, c.ID, c.SessionID, c.Tenant, c.ToolCallID, c.Name, rawJSON(c.Arguments),
			string(c.Status), res, string(c.ErrorKind), c.Owner,
			utcMicro(c.CreatedAt), utcMicroPtr(c.StartedAt), utcMicroPtr(c.FinishedAt), c.OutputOpen)
	}
	for _, st := range w.Starts {
		b.Queue(pgStartCall, st.Owner, utcMicro(st.StartedAt), st.ID)
	}
	for _, f := range w.Finishes {
		res, err := encodeResult(f.Result)
		if err != nil {
			return fmt.Errorf("store: write calls: finish %s: encode result: %w", f.ID, err)
		}
		b.Queue(pgFinishCall, string(f.Status), res, string(resultErrorKind(f.Result)), utcMicro(f.FinishedAt), f.ID, f.OutputOpen)
	}

	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: write calls: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := sendWriteBatch(ctx, tx, b, w); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: write calls: commit: %w", err)
	}
	return nil
}

func sendWriteBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch, w CallWrites) error {
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for _, c := range w.Inserts {
		if _, err := br.Exec(); err != nil {
			if isPGUniqueViolation(err) {
				return fmt.Errorf("store: write calls: insert %s: already exists: %w", c.ID, ErrConflict)
			}
			return fmt.Errorf("store: write calls: insert %s: %w", c.ID, err)
		}
	}
	var notStarted, notFinished []string
	var notFinishedAt []int // their indexes in w.Finishes
	for _, st := range w.Starts {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("store: write calls: start %s: %w", st.ID, err)
		}
		if tag.RowsAffected() == 0 {
			notStarted = append(notStarted, st.ID)
		}
	}
	for i, f := range w.Finishes {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("store: write calls: finish %s: %w", f.ID, err)
		}
		if tag.RowsAffected() == 0 {
			notFinished = append(notFinished, f.ID)
			notFinishedAt = append(notFinishedAt, i)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	if len(notStarted) == 0 && len(notFinished) == 0 {
		return nil
	}
	// Conditional updates that changed nothing: look the calls up (a rare path).
	// A start of an existing call is a conflict, a finish of a terminal one is ignored,
	// anything unknown is ErrNotFound.
	rows, err := tx.Query(ctx, `SELECT id, status FROM tool_calls WHERE id = ANY($1)`, append(notStarted, notFinished...))
	if err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	status := map[string]string{}
	var id, st string
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error { status[id] = st; return nil }); err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	if len(notStarted) > 0 {
		id := notStarted[0]
		s, ok := status[id]
		if !ok {
			return fmt.Errorf("store: write calls: start %s: %w", id, ErrNotFound)
		}
		return fmt.Errorf("store: write calls: start %s: call is %s: %w", id, s, ErrConflict)
	}
	for _, id := range notFinished {
		if _, ok := status[id]; !ok {
			return fmt.Errorf("store: write calls: finish %s: %w", id, ErrNotFound)
		}
	}
	if w.Final != nil {
		for j, id := range notFinished {
			w.Final(notFinishedAt[j], CallStatus(status[id]))
		}
	}
	return nil
}

func scanPGCall(row pgx.Row) (*Call, error) {
	var (
		c            Call
		args, result []byte
		status, kind string
	)
	if err := row.Scan(&c.ID, &c.SessionID, &c.Tenant, &c.ToolCallID, &c.Name, &args, &status,
		&result, &kind, &c.Owner, &c.CreatedAt, &c.StartedAt, &c.FinishedAt, &c.OutputOpen); err != nil {
		return nil, err
	}
	c.Status = CallStatus(status)
	c.ErrorKind = tool.ErrorKind(kind)
	if len(args) > 0 {
		c.Arguments = json.RawMessage(args)
	}
	var err error
	if c.Result, err = decodeResult(result); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	if c.StartedAt != nil {
		*c.StartedAt = c.StartedAt.UTC()
	}
	if c.FinishedAt != nil {
		*c.FinishedAt = c.FinishedAt.UTC()
	}
	return &c, nil
}

func (p *Postgres) GetCall(ctx context.Context, id string) (*Call, error) {
	c, err := scanPGCall(p.pool.QueryRow(ctx, `SELECT `+pgCallColumns+` FROM tool_calls WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get call %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get call %s: %w", id, err)
	}
	return c, nil
}

// GetCallByToolCallID returns the call with the latest created_at (ties: the greatest
// id) among those with the model's id in the session.
func (p *Postgres) GetCallByToolCallID(ctx context.Context, sessionID, toolCallID string) (*Call, error) {
	c, err := scanPGCall(p.pool.QueryRow(ctx,
		`SELECT `+pgCallColumns+` FROM tool_calls WHERE session_id = $1 AND tool_call_id = $2
		ORDER BY created_at DESC, id DESC LIMIT 1`, sessionID, toolCallID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: get call %s/%s: %w", sessionID, toolCallID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get call %s/%s: %w", sessionID, toolCallID, err)
	}
	return c, nil
}

// ListCalls returns the session's calls by created_at descending (ties: id descending),
// the page p of them. An unknown session has no calls (not ErrNotFound).
func (p *Postgres) ListCalls(ctx context.Context, sessionID string, page CallPage) ([]*Call, error) {
	q, args := pgSessionCallsQuery(sessionID, page)
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list calls of %s: %w", sessionID, err)
	}
	defer rows.Close()
	calls, err := collectCalls(rows, page.MaxBytes, func() (*Call, error) { return scanPGCall(rows) })
	if err != nil {
		return nil, fmt.Errorf("store: list calls of %s: %w", sessionID, err)
	}
	return calls, nil
}

// pgAbandonCalls fails a replica's unfinished calls. Its status condition is the
// predicate of tool_calls_owner_active_idx, so that index answers it.
const pgAbandonCalls = `UPDATE tool_calls SET status = $1,
		result = CASE status WHEN 'pending' THEN $2::json ELSE $3::json END,
		error_kind = CASE status WHEN 'pending' THEN $4 ELSE $5 END, finished_at = $6
	WHERE owner = $7 AND status IN ('pending', 'running')`

func (p *Postgres) AbandonCalls(ctx context.Context, owner string, result *tool.Result, at time.Time) ([]AbandonedCall, error) {
	if err := checkResult(result); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	enc, err := encodeResult(result)
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: encode result: %w", owner, err)
	}
	notStarted := NotStartedResult()
	encNS, err := encodeResult(notStarted)
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: encode result: %w", owner, err)
	}
	if at.IsZero() {
		at = now()
	}
	// The calls are read first, locked, in the same transaction, to be named in the
	// start-up log; a sweep of another replica waits for it.
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	rows, err := tx.Query(ctx, `SELECT id, session_id, name, created_at, status FROM tool_calls
		WHERE owner = $1 AND status IN ('pending', 'running') FOR UPDATE`, owner)
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AbandonedCall, error) {
		var c AbandonedCall
		var status string
		err := row.Scan(&c.ID, &c.SessionID, &c.Name, &c.CreatedAt, &status)
		c.CreatedAt, c.Started = c.CreatedAt.UTC(), status == string(CallRunning)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	// The CASEs read the status before the update.
	if _, err := tx.Exec(ctx, pgAbandonCalls,
		string(CallFailed), encNS, enc, string(resultErrorKind(notStarted)), string(resultErrorKind(result)), utcMicro(at), owner); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	if _, err := tx.Exec(ctx, pgCloseOutputs, owner); err != nil {
		return nil, fmt.Errorf("store: close the output of calls of %q: %w", owner, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	sortAbandoned(out)
	return out, nil
}

// pgCloseOutputs clears a replica's open-output marks; its condition is the predicate
// of tool_calls_owner_output_open_idx.
const pgCloseOutputs = `UPDATE tool_calls SET output_open = FALSE WHERE owner = $1 AND output_open`

// CloseCallOutput clears the call's OutputOpen mark.
func (p *Postgres) CloseCallOutput(ctx context.Context, id string) error {
	if _, err := p.pool.Exec(ctx, `UPDATE tool_calls SET output_open = FALSE WHERE id = $1 AND output_open`, id); err != nil {
		return fmt.Errorf("store: close the output of call %s: %w", id, err)
	}
	return nil
}

func (p *Postgres) Ping(ctx context.Context) error {
	if err := p.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: ping postgres: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for acquired connections to be released.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// migrate applies pending migrations on a dedicated connection holding a session-level
// advisory lock, so replicas starting together apply each migration once. The lock key
// is derived from the target schema: tests that isolate by schema do not queue behind
// each other. The connection is closed at the end, which releases the lock even if the
// unlock fails.
func (p *Postgres) migrate(ctx context.Context, cfg *pgx.ConnConfig) error {
	ms, err := loadMigrations(migrations.Postgres())
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	unlock, err := pgMigrationLock(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer unlock()
	p.schema, err = migrateUp(ctx, pgMigrations{conn}, ms)
	return err
}

// Schema says what opening the store found and did to its schema.
func (p *Postgres) Schema() Schema { return p.schema }

// pgMigrationLock takes the migration advisory lock for the connection's current schema.
func pgMigrationLock(ctx context.Context, conn *pgx.Conn) (unlock func(), err error) {
	var schema *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, err
	}
	if schema == nil {
		return nil, errors.New("no schema to create tables in: check search_path (does the schema exist?)")
	}
	h := fnv.New64a()
	h.Write([]byte("toolserverd.migrations:" + *schema))
	key := int64(h.Sum64())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
	}, nil
}

type pgMigrations struct{ conn *pgx.Conn }

func (m pgMigrations) ensureTable(ctx context.Context) error {
	_, err := m.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	return err
}

func (m pgMigrations) applied(ctx context.Context) (map[int]string, error) {
	rows, err := m.conn.Query(ctx, `SELECT version, name FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	done := map[int]string{}
	var v int32
	var name string
	_, err = pgx.ForEachRow(rows, []any{&v, &name}, func() error {
		done[int(v)] = name
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

func (m pgMigrations) step(ctx context.Context, mg migration, up bool) error {
	tx, err := m.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, mg.Version).Scan(&n); err != nil {
		return err
	}
	if (n > 0) == up {
		return nil
	}
	if up {
		if _, err := tx.Exec(ctx, mg.Up); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, mg.Version, mg.Name); err != nil {
			return err
		}
	} else {
		if _, err := tx.Exec(ctx, mg.Down); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version = $1`, mg.Version); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

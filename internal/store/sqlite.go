package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/migrations"
)

// SQLite is the embedded store: one database file in WAL mode. Every write goes through
// one connection (SQLite has one writer anyway; queuing in Go is cheaper than
// SQLITE_BUSY retries), reads use a separate pool so they never wait for the writer.
type SQLite struct {
	path string
	// file is the database file as opened: Ping reports when path no longer leads to
	// it (deleted, its directory removed, replaced), since writes then go on into a
	// file that the next start will not see.
	file os.FileInfo
	w    *sql.DB // exactly one connection
	r    *sql.DB // read-only connections

	insertCall *sql.Stmt // on w
	startCall  *sql.Stmt // on w
	finishCall *sql.Stmt // on w
	callStatus *sql.Stmt // on w

	// The checkpointer copies the WAL into the database file on its own connection,
	// so no commit of the writer pays for a checkpoint (and its fsync).
	ckpt     *sql.DB
	ckptStop chan struct{}
	ckptDone chan struct{}

	schema Schema // what opening found and did

	// lock is the flock Open holds on the database's ".lock" file; closed (released)
	// last by Close. Nil when opened by OpenSQLite, or when the file system refused
	// the lock (unlocked says why).
	lock     *os.File
	unlocked error
}

var _ Store = (*SQLite)(nil)

const (
	// writerParams: WAL so readers do not block the writer; _txlock=immediate takes
	// the write lock at BEGIN, so a second process waits on busy_timeout instead of
	// failing a lock upgrade. wal_autocheckpoint(0): checkpoints run in the background
	// (see checkpointLoop). journal_size_limit: a WAL that grew under load (readers
	// kept it from being reset) is cut back to sqliteWALLimit when it is next reset,
	// rather than keeping its largest size on disk (70 MB beside a 5 MB database after
	// 6,000 calls). The synchronous pragma comes from SQLiteOptions.
	sqliteWriterParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(16777216)&_txlock=immediate"
	sqliteCkptParams   = "_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
	sqliteReaderParams = "_pragma=busy_timeout(5000)&_pragma=query_only(1)"
)

// sqliteWALLimit is the journal_size_limit of the writer, in bytes.
const sqliteWALLimit = 16 << 20

// SQLite durability: how a commit reaches the disk.
const (
	// SyncFull syncs the WAL at every commit (one fsync per group commit): a commit
	// that returned survives a power loss or a kernel crash.
	SyncFull = "full"
	// SyncNormal syncs only at checkpoints (every half second here): a commit that
	// returned survives the process crashing or being killed, but a power loss or a
	// kernel crash can take back the commits since the last checkpoint. Never corrupt.
	SyncNormal = "normal"
)

// SQLiteOptions tune an SQLite store. The zero value is the default.
type SQLiteOptions struct {
	// Synchronous is SyncFull (default when empty) or SyncNormal.
	Synchronous string
}

// Validate rejects an unknown Synchronous.
func (o SQLiteOptions) Validate() error {
	switch o.Synchronous {
	case "", SyncFull, SyncNormal:
		return nil
	}
	return fmt.Errorf("store: sqlite synchronous %q is not one of %s, %s", o.Synchronous, SyncFull, SyncNormal)
}

func (o SQLiteOptions) writerParams() string {
	mode := "FULL"
	if o.Synchronous == SyncNormal {
		mode = "NORMAL"
	}
	return sqliteWriterParams + "&_pragma=synchronous(" + mode + ")"
}

// OpenSQLite opens (creating it and its parent directory if needed) the database at
// path and applies pending migrations, with the default options.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	return OpenSQLiteWith(ctx, path, SQLiteOptions{})
}

// OpenSQLiteWith is OpenSQLite with options.
func OpenSQLiteWith(ctx context.Context, path string, o SQLiteOptions) (*SQLite, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("store: open sqlite: empty path")
	}
	if path == ":memory:" {
		return nil, errors.New("store: open sqlite: in-memory databases are not supported (readers and the writer need one shared file); give a file path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: create directory: %w", abs, err)
	}
	// A new database is made 0600 here, before SQLite makes it with the umask (0644
	// by default): it holds every call's arguments and result, as the output logs do
	// (0600), and SQLite gives its WAL and shared-memory files the database's mode. An
	// existing database keeps the mode it has. An empty file is an empty database.
	if f, err := os.OpenFile(abs, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		_ = f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("store: open sqlite %s: create: %w", abs, err)
	}
	name := "file:" + (&url.URL{Path: abs}).EscapedPath()

	s := &SQLite{path: abs}
	if s.w, err = sql.Open("sqlite", name+"?"+o.writerParams()); err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", abs, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.openWriter(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", abs, err)
	}
	if s.file, err = os.Stat(abs); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", abs, err)
	}

	if s.r, err = sql.Open("sqlite", name+"?"+sqliteReaderParams); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open sqlite %s: readers: %w", abs, err)
	}
	readers := max(4, 2*runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	if err := s.r.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open sqlite %s: readers: %w", abs, err)
	}

	if s.ckpt, err = sql.Open("sqlite", name+"?"+sqliteCkptParams); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: open sqlite %s: checkpointer: %w", abs, err)
	}
	s.ckpt.SetMaxOpenConns(1)
	s.ckptStop, s.ckptDone = make(chan struct{}), make(chan struct{})
	go s.checkpointLoop()

	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.insertCall, sqliteInsertCall},
		{&s.startCall, sqliteStartCall},
		{&s.finishCall, sqliteFinishCall},
		{&s.callStatus, `SELECT status FROM tool_calls WHERE id = ?`},
	} {
		if *p.stmt, err = s.w.PrepareContext(ctx, p.sql); err != nil {
			s.Close()
			return nil, fmt.Errorf("store: open sqlite %s: prepare: %w", abs, err)
		}
	}
	return s, nil
}

// Path is the absolute path of the database file.
func (s *SQLite) Path() string { return s.path }

// Unlocked says why Open could not lock the database (the file system refuses
// flock), nil when it holds the lock or did not try (OpenSQLite).
func (s *SQLite) Unlocked() error { return s.unlocked }

const (
	sqliteInsertCall = `INSERT INTO tool_calls
	(id, session_id, tenant, tool_call_id, name, arguments, status, result, error_kind, owner, created_at, started_at, finished_at, output_open)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqliteStartCall = `UPDATE tool_calls SET status = 'running', owner = ?, started_at = ?
	WHERE id = ? AND status IN ('pending', 'waiting')`
	sqliteFinishCall = `UPDATE tool_calls SET status = ?, result = ?, error_kind = ?, finished_at = ?, output_open = ?
	WHERE id = ? AND status NOT IN ('succeeded', 'failed')`
	sqliteCallColumns = `id, session_id, tenant, tool_call_id, name, arguments, status, result, error_kind, owner, created_at, started_at, finished_at, output_open`
)

// sqliteText turns bytes into a TEXT value (a []byte would be stored as a BLOB).
func sqliteText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func sqliteTime(t time.Time) string { return utcMicro(t).Format(sqliteTimeLayout) }

func sqliteTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return sqliteTime(*t)
}

func parseSQLiteTime(s string) (time.Time, error) {
	t, err := time.Parse(sqliteTimeLayout, s)
	if err != nil {
		// Written by something else (the sqlite3 shell, datetime('now')): accept RFC 3339.
		t, err = time.Parse(time.RFC3339Nano, s)
	}
	return t.UTC(), err
}

func parseSQLiteTimePtr(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := parseSQLiteTime(s.String)
	return &t, err
}

func sqliteErrCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isSQLiteUniqueViolation(err error) bool {
	c := sqliteErrCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

// CreateSession inserts s. A zero CreatedAt or UpdatedAt is set to now, in s.
func (s *SQLite) CreateSession(ctx context.Context, sess *Session) error {
	if err := prepareSession(sess); err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO sessions (id, tenant, spec, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		sess.ID, sess.Tenant, sqliteText(sess.Spec), sqliteTime(sess.CreatedAt), sqliteTime(sess.UpdatedAt))
	if isSQLiteUniqueViolation(err) {
		return fmt.Errorf("store: create session %s: already exists: %w", sess.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create session %s: %w", sess.ID, err)
	}
	return nil
}

func (s *SQLite) GetSession(ctx context.Context, id string) (*Session, error) {
	var (
		sess             Session
		spec             []byte
		created, updated string
	)
	err := s.r.QueryRowContext(ctx,
		`SELECT id, tenant, spec, created_at, updated_at FROM sessions WHERE id = ?`, id,
	).Scan(&sess.ID, &sess.Tenant, &spec, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get session %s: %w", id, err)
	}
	if len(spec) > 0 {
		sess.Spec = json.RawMessage(spec)
	}
	if sess.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, fmt.Errorf("store: get session %s: created_at: %w", id, err)
	}
	if sess.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
		return nil, fmt.Errorf("store: get session %s: updated_at: %w", id, err)
	}
	return &sess, nil
}

func (s *SQLite) UpdateSessionSpec(ctx context.Context, id string, prev, spec json.RawMessage, at time.Time) error {
	if err := checkJSON("spec", spec); err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	}
	if at.IsZero() {
		at = now()
	}
	res, err := s.w.ExecContext(ctx, `UPDATE sessions SET spec = ?, updated_at = max(updated_at, ?) WHERE id = ? AND spec IS ?`,
		sqliteText(spec), sqliteTime(at), id, sqliteText(prev))
	if err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	} else if n > 0 {
		return nil
	}
	var exists bool
	if err := s.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?)`, id).Scan(&exists); err != nil {
		return fmt.Errorf("store: update session %s: %w", id, err)
	}
	if !exists {
		return fmt.Errorf("store: update session %s: %w", id, ErrNotFound)
	}
	return fmt.Errorf("store: update session %s: changed by another writer: %w", id, ErrConflict)
}

// WriteCalls inserts and finishes calls in one transaction. A duplicate insert id is
// ErrConflict, a finish of an unknown id is ErrNotFound; either rolls back everything.
// Zero CreatedAt / FinishedAt are set to now, in the arguments.
func (s *SQLite) WriteCalls(ctx context.Context, inserts []*Call, finishes []CallFinish) error {
	return s.WriteCallBatch(ctx, CallWrites{Inserts: inserts, Finishes: finishes})
}

// WriteCallBatch is WriteCalls with starts (see BatchWriter).
func (s *SQLite) WriteCallBatch(ctx context.Context, w CallWrites) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	if w.empty() {
		return nil
	}
	if err := prepareWrite(w); err != nil {
		return fmt.Errorf("store: write calls: %w", err)
	}
	// Encode before BEGIN: the write lock is held for as short a time as possible.
	insArgs := make([][]any, len(w.Inserts))
	for i, c := range w.Inserts {
		res, err := encodeResult(c.Result)
		if err != nil {
			return fmt.Errorf("store: write calls: insert %s: encode result: %w", c.ID, err)
		}
		insArgs[i] = []any{c.ID, c.SessionID, c.Tenant, c.ToolCallID, c.Name, sqliteText(c.Arguments),
			string(c.Status), sqliteText(res), string(c.ErrorKind), c.Owner,
			sqliteTime(c.CreatedAt), sqliteTimePtr(c.StartedAt), sqliteTimePtr(c.FinishedAt), c.OutputOpen}
	}
	finArgs := make([][]any, len(w.Finishes))
	for i, f := range w.Finishes {
		res, err := encodeResult(f.Result)
		if err != nil {
			return fmt.Errorf("store: write calls: finish %s: encode result: %w", f.ID, err)
		}
		finArgs[i] = []any{string(f.Status), sqliteText(res), string(resultErrorKind(f.Result)),
			sqliteTime(f.FinishedAt), f.OutputOpen, f.ID}
	}

	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: write calls: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// The statements run without ctx's cancellation: modernc starts a goroutine per
	// statement to watch a cancellable context, one per record here. Nothing after
	// BEGIN waits for a lock (_txlock=immediate took the write lock there, under ctx),
	// and the transaction still ends with ctx: database/sql rolls it back when ctx is
	// done (after the statement running then) and refuses the statements after it.
	ctx = context.WithoutCancel(ctx)
	if len(insArgs) > 0 {
		ins := tx.StmtContext(ctx, s.insertCall)
		for i, args := range insArgs {
			if _, err := ins.ExecContext(ctx, args...); err != nil {
				if isSQLiteUniqueViolation(err) {
					return fmt.Errorf("store: write calls: insert %s: already exists: %w", w.Inserts[i].ID, ErrConflict)
				}
				return fmt.Errorf("store: write calls: insert %s: %w", w.Inserts[i].ID, err)
			}
		}
	}
	if len(w.Starts) > 0 {
		start := tx.StmtContext(ctx, s.startCall)
		for _, st := range w.Starts {
			res, err := start.ExecContext(ctx, st.Owner, sqliteTime(st.StartedAt), st.ID)
			if err != nil {
				return fmt.Errorf("store: write calls: start %s: %w", st.ID, err)
			}
			if err := s.checkChanged(ctx, tx, res, st.ID, ErrConflict); err != nil {
				return fmt.Errorf("store: write calls: start %s: %w", st.ID, err)
			}
		}
	}
	if len(finArgs) > 0 {
		fin := tx.StmtContext(ctx, s.finishCall)
		for i, args := range finArgs {
			res, err := fin.ExecContext(ctx, args...)
			if err != nil {
				return fmt.Errorf("store: write calls: finish %s: %w", w.Finishes[i].ID, err)
			}
			// Already terminal is ignored (nil, told to w.Final), unknown is an error.
			status, err := s.unchanged(ctx, tx, res, w.Finishes[i].ID)
			if err != nil {
				return fmt.Errorf("store: write calls: finish %s: %w", w.Finishes[i].ID, err)
			}
			if status != "" && w.Final != nil {
				w.Final(i, CallStatus(status))
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: write calls: commit: %w", err)
	}
	return nil
}

// checkChanged explains a conditional update: nil if it changed a row; otherwise
// ErrNotFound if the call does not exist, or unchanged if it does.
// Only this rare path looks the call up.
func (s *SQLite) checkChanged(ctx context.Context, tx *sql.Tx, res sql.Result, id string, unchanged error) error {
	status, err := s.unchanged(ctx, tx, res, id)
	if err != nil || status == "" {
		return err
	}
	return fmt.Errorf("call is %s: %w", status, unchanged)
}

// unchanged is the status of call id when a conditional update of it changed no row
// ("" when it changed one); ErrNotFound if the call does not exist.
func (s *SQLite) unchanged(ctx context.Context, tx *sql.Tx, res sql.Result, id string) (string, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return "", err
	}
	if n > 0 {
		return "", nil
	}
	var status string
	err = tx.StmtContext(ctx, s.callStatus).QueryRowContext(ctx, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", err
	}
	return status, nil
}

func scanSQLiteCall(row interface{ Scan(...any) error }) (*Call, error) {
	var (
		c                 Call
		args, result      []byte
		status, kind      string
		created           string
		started, finished sql.NullString
	)
	if err := row.Scan(&c.ID, &c.SessionID, &c.Tenant, &c.ToolCallID, &c.Name, &args, &status,
		&result, &kind, &c.Owner, &created, &started, &finished, &c.OutputOpen); err != nil {
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
	if c.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, fmt.Errorf("created_at: %w", err)
	}
	if c.StartedAt, err = parseSQLiteTimePtr(started); err != nil {
		return nil, fmt.Errorf("started_at: %w", err)
	}
	if c.FinishedAt, err = parseSQLiteTimePtr(finished); err != nil {
		return nil, fmt.Errorf("finished_at: %w", err)
	}
	return &c, nil
}

func (s *SQLite) GetCall(ctx context.Context, id string) (*Call, error) {
	c, err := scanSQLiteCall(s.r.QueryRowContext(ctx,
		`SELECT `+sqliteCallColumns+` FROM tool_calls WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get call %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get call %s: %w", id, err)
	}
	return c, nil
}

// GetCallByToolCallID returns the call with the latest created_at (ties: the greatest
// id) among those with the model's id in the session.
func (s *SQLite) GetCallByToolCallID(ctx context.Context, sessionID, toolCallID string) (*Call, error) {
	c, err := scanSQLiteCall(s.r.QueryRowContext(ctx,
		`SELECT `+sqliteCallColumns+` FROM tool_calls WHERE session_id = ? AND tool_call_id = ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, sessionID, toolCallID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get call %s/%s: %w", sessionID, toolCallID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get call %s/%s: %w", sessionID, toolCallID, err)
	}
	return c, nil
}

// ListCalls returns the session's calls by created_at descending (ties: id descending),
// the page p of them. An unknown session has no calls (not ErrNotFound).
func (s *SQLite) ListCalls(ctx context.Context, sessionID string, p CallPage) ([]*Call, error) {
	q, args := sqliteSessionCallsQuery(sessionID, p)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list calls of %s: %w", sessionID, err)
	}
	defer rows.Close()
	calls, err := collectCalls(rows, p.MaxBytes, func() (*Call, error) { return scanSQLiteCall(rows) })
	if err != nil {
		return nil, fmt.Errorf("store: list calls of %s: %w", sessionID, err)
	}
	return calls, nil
}

// sqliteAbandonCalls fails a replica's unfinished calls. Its status condition is the
// predicate of tool_calls_owner_active_idx, word for word, so that index answers it.
const sqliteAbandonCalls = `UPDATE tool_calls SET status = ?,
		result = CASE status WHEN 'pending' THEN ? ELSE ? END,
		error_kind = CASE status WHEN 'pending' THEN ? ELSE ? END, finished_at = ?
	WHERE owner = ? AND status IN ('pending', 'running')`

func (s *SQLite) AbandonCalls(ctx context.Context, owner string, result *tool.Result, at time.Time) ([]AbandonedCall, error) {
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
	// The calls are read first, in the same transaction (the one writer: nothing
	// changes them between the read and the update), to be named in the start-up log.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	rows, err := tx.QueryContext(ctx, `SELECT id, session_id, name, created_at, status FROM tool_calls
		WHERE owner = ? AND status IN ('pending', 'running')`, owner)
	if err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	var out []AbandonedCall
	for rows.Next() {
		var c AbandonedCall
		var created, status string
		if err := rows.Scan(&c.ID, &c.SessionID, &c.Name, &created, &status); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
		}
		if c.CreatedAt, err = parseSQLiteTime(created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
		}
		c.Started = status == string(CallRunning)
		out = append(out, c)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	// The CASEs read the status before the update.
	if _, err := tx.ExecContext(ctx, sqliteAbandonCalls,
		string(CallFailed), sqliteText(encNS), sqliteText(enc), string(resultErrorKind(notStarted)), string(resultErrorKind(result)),
		sqliteTime(at), owner); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tool_calls SET output_open = 0 WHERE owner = ? AND output_open`, owner); err != nil {
		return nil, fmt.Errorf("store: close the output of calls of %q: %w", owner, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: abandon calls of %q: %w", owner, err)
	}
	sortAbandoned(out)
	return out, nil
}

// CloseCallOutput clears the call's OutputOpen mark.
func (s *SQLite) CloseCallOutput(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE tool_calls SET output_open = 0 WHERE id = ? AND output_open`, id); err != nil {
		return fmt.Errorf("store: close the output of call %s: %w", id, err)
	}
	return nil
}

// Ping checks that the database file is still at its path and that both the writer
// and a reader answer. It writes nothing: a stat and two pings.
func (s *SQLite) Ping(ctx context.Context) error {
	if fi, err := os.Stat(s.path); err != nil {
		return fmt.Errorf("store: the database file %s is no longer there (deleted, or its directory removed, while the daemon ran): records written now are lost when it stops: %w", s.path, err)
	} else if !os.SameFile(fi, s.file) {
		return fmt.Errorf("store: the database file %s is no longer the one the daemon opened (replaced while it ran): records written now go to the old file and are lost when it stops", s.path)
	}
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping sqlite: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping sqlite readers: %w", err)
	}
	return nil
}

// Close closes the database. Calls in flight fail.
func (s *SQLite) Close() error {
	var errs []error
	if s.ckptStop != nil {
		close(s.ckptStop)
		<-s.ckptDone
		s.ckptStop = nil
	}
	if s.ckpt != nil {
		// Leave a small file behind: fold the WAL in and truncate it.
		_, _ = s.ckpt.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		errs = append(errs, s.ckpt.Close())
	}
	for _, st := range []*sql.Stmt{s.insertCall, s.startCall, s.finishCall, s.callStatus} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close sqlite: %w", err)
	}
	return nil
}

// migrate applies pending migrations through the writer. Each runs in a BEGIN IMMEDIATE
// transaction that re-checks schema_migrations, so two processes opening the same file
// at once apply each migration exactly once.
func (s *SQLite) migrate(ctx context.Context) error {
	ms, err := loadMigrations(migrations.SQLite())
	if err != nil {
		return err
	}
	s.schema, err = migrateUp(ctx, sqliteMigrations{s.w}, ms)
	return err
}

// Schema says what opening the store found and did to its schema.
func (s *SQLite) Schema() Schema { return s.schema }

type sqliteMigrations struct{ db *sql.DB }

func (m sqliteMigrations) ensureTable(ctx context.Context) error {
	_, err := m.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY NOT NULL,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`)
	return err
}

func (m sqliteMigrations) applied(ctx context.Context) (map[int]string, error) {
	rows, err := m.db.QueryContext(ctx, `SELECT version, name FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := map[int]string{}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return nil, err
		}
		done[v] = name
	}
	return done, rows.Err()
}

func (m sqliteMigrations) step(ctx context.Context, mg migration, up bool) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, mg.Version).Scan(&n); err != nil {
		return err
	}
	if (n > 0) == up {
		return nil // another process got here first
	}
	if up {
		if _, err := tx.ExecContext(ctx, mg.Up); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			mg.Version, mg.Name, sqliteTime(time.Now())); err != nil {
			return err
		}
	} else {
		if _, err := tx.ExecContext(ctx, mg.Down); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = ?`, mg.Version); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// openWriter connects the writer and migrates. SQLite answers SQLITE_BUSY without
// consulting busy_timeout in a few lock-upgrade cases (switching a new file to WAL while
// another process does the same), so BUSY here is retried with backoff for a while.
func (s *SQLite) openWriter(ctx context.Context) error {
	const busy = 5 // SQLITE_BUSY
	deadline := time.Now().Add(10 * time.Second)
	wait := 5 * time.Millisecond
	for {
		err := s.w.PingContext(ctx)
		if err == nil {
			err = s.migrate(ctx)
		}
		if err == nil || sqliteErrCode(err)&0xff != busy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// checkpointLoop folds the WAL into the database file every half second (a passive
// checkpoint never blocks the writer or readers), and harder when the WAL has grown
// large, so it stays bounded under sustained writes.
func (s *SQLite) checkpointLoop() {
	defer close(s.ckptDone)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ckptStop:
			return
		case <-t.C:
		}
		var busy, logPages, done int
		err := s.ckpt.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &done)
		if err == nil && logPages > 64<<10 { // WAL over ~256 MB: restart it once readers allow
			_, _ = s.ckpt.Exec("PRAGMA wal_checkpoint(RESTART)")
		}
	}
}

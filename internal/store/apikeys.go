package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKey is a stored API key: its SHA-256 (hex), never the key itself.
type APIKey struct {
	ID        string
	Tenant    string
	Name      string
	Roles     []string
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// APIKeyStore keeps API keys. Every method honours ctx.
type APIKeyStore interface {
	// CreateAPIKey stores a key. ID, Tenant, Hash and at least one role are
	// required (ErrInvalid); a duplicate id or hash is ErrConflict.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeyByHash finds a key, revoked or not; ErrNotFound when none has the hash.
	APIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// ListAPIKeys lists the keys of a tenant ("" for every tenant), oldest first;
	// an empty store gives an empty, non-nil slice.
	ListAPIKeys(ctx context.Context, tenant string) ([]*APIKey, error)
	// RevokeAPIKey marks a key revoked at at and returns it; ErrNotFound for an unknown id,
	// ErrConflict when it already is.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) (*APIKey, error)
}

var (
	_ APIKeyStore = (*SQLite)(nil)
	_ APIKeyStore = (*Postgres)(nil)
)

func checkAPIKey(k *APIKey) error {
	switch {
	case k == nil:
		return fmt.Errorf("nil api key: %w", ErrInvalid)
	case k.ID == "" || k.Tenant == "" || k.Hash == "":
		return fmt.Errorf("api key needs an id, a tenant and a hash: %w", ErrInvalid)
	case len(k.Roles) == 0:
		return fmt.Errorf("api key %s has no role: %w", k.ID, ErrInvalid)
	}
	for _, r := range k.Roles {
		if r == "" || strings.Contains(r, ",") {
			return fmt.Errorf("api key %s: bad role %q: %w", k.ID, r, ErrInvalid)
		}
	}
	return nil
}

const apiKeyColumns = `id, tenant, name, roles, hash, created_at, revoked_at`

// CreateAPIKey stores a key (see APIKeyStore).
func (s *SQLite) CreateAPIKey(ctx context.Context, k *APIKey) error {
	if err := checkAPIKey(k); err != nil {
		return fmt.Errorf("store: create api key: %w", err)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = now()
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Tenant, k.Name, strings.Join(k.Roles, ","), k.Hash, sqliteTime(k.CreatedAt), sqliteTimePtr(k.RevokedAt))
	if err != nil {
		if isSQLiteUniqueViolation(err) {
			return fmt.Errorf("store: create api key %s: %w", k.ID, ErrConflict)
		}
		return fmt.Errorf("store: create api key %s: %w", k.ID, err)
	}
	return nil
}

func scanSQLiteAPIKey(row interface{ Scan(...any) error }) (*APIKey, error) {
	var (
		k       APIKey
		roles   string
		created string
		revoked sql.NullString
	)
	if err := row.Scan(&k.ID, &k.Tenant, &k.Name, &roles, &k.Hash, &created, &revoked); err != nil {
		return nil, err
	}
	k.Roles = strings.Split(roles, ",")
	var err error
	if k.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return nil, err
	}
	if k.RevokedAt, err = parseSQLiteTimePtr(revoked); err != nil {
		return nil, err
	}
	return &k, nil
}

// APIKeyByHash finds a key by its hash (see APIKeyStore).
func (s *SQLite) APIKeyByHash(ctx context.Context, hash string) (*APIKey, error) {
	k, err := scanSQLiteAPIKey(s.r.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = ?`, hash))
	if err == sql.ErrNoRows {
		return nil, fmt.Errorf("store: api key: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: api key: %w", err)
	}
	return k, nil
}

// ListAPIKeys lists keys (see APIKeyStore).
func (s *SQLite) ListAPIKeys(ctx context.Context, tenant string) ([]*APIKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE ? = '' OR tenant = ? ORDER BY created_at, id`, tenant, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: list api keys: %w", err)
	}
	defer rows.Close()
	out := []*APIKey{}
	for rows.Next() {
		k, err := scanSQLiteAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey revokes a key (see APIKeyStore).
func (s *SQLite) RevokeAPIKey(ctx context.Context, id string, at time.Time) (*APIKey, error) {
	k, err := scanSQLiteAPIKey(s.w.QueryRowContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING `+apiKeyColumns, sqliteTime(at), id))
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: revoke api key %s: %w", id, err)
	}
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1 FROM api_keys WHERE id = ?`, id).Scan(&one); err == sql.ErrNoRows {
		return nil, fmt.Errorf("store: revoke api key %s: %w", id, ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("store: revoke api key %s: %w", id, err)
	}
	return nil, fmt.Errorf("store: revoke api key %s: already revoked: %w", id, ErrConflict)
}

// CreateAPIKey stores a key (see APIKeyStore).
func (p *Postgres) CreateAPIKey(ctx context.Context, k *APIKey) error {
	if err := checkAPIKey(k); err != nil {
		return fmt.Errorf("store: create api key: %w", err)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = now()
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.Tenant, k.Name, strings.Join(k.Roles, ","), k.Hash, k.CreatedAt, k.RevokedAt)
	if err != nil {
		if isPGUniqueViolation(err) {
			return fmt.Errorf("store: create api key %s: %w", k.ID, ErrConflict)
		}
		return fmt.Errorf("store: create api key %s: %w", k.ID, err)
	}
	return nil
}

func scanPGAPIKey(row pgx.Row) (*APIKey, error) {
	var (
		k     APIKey
		roles string
	)
	if err := row.Scan(&k.ID, &k.Tenant, &k.Name, &roles, &k.Hash, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	k.Roles = strings.Split(roles, ",")
	k.CreatedAt = k.CreatedAt.UTC()
	if k.RevokedAt != nil {
		t := k.RevokedAt.UTC()
		k.RevokedAt = &t
	}
	return &k, nil
}

// APIKeyByHash finds a key by its hash (see APIKeyStore).
func (p *Postgres) APIKeyByHash(ctx context.Context, hash string) (*APIKey, error) {
	k, err := scanPGAPIKey(p.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = $1`, hash))
	if err == pgx.ErrNoRows {
		return nil, fmt.Errorf("store: api key: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: api key: %w", err)
	}
	return k, nil
}

// ListAPIKeys lists keys (see APIKeyStore).
func (p *Postgres) ListAPIKeys(ctx context.Context, tenant string) ([]*APIKey, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE $1 = '' OR tenant = $1 ORDER BY created_at, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: list api keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*APIKey, error) { return scanPGAPIKey(row) })
	if err != nil {
		return nil, fmt.Errorf("store: list api keys: %w", err)
	}
	if out == nil {
		out = []*APIKey{}
	}
	return out, nil
}

// RevokeAPIKey revokes a key (see APIKeyStore).
func (p *Postgres) RevokeAPIKey(ctx context.Context, id string, at time.Time) (*APIKey, error) {
	k, err := scanPGAPIKey(p.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING `+apiKeyColumns, id, at))
	if err == nil {
		return k, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: revoke api key %s: %w", id, err)
	}
	var one int
	if err := p.pool.QueryRow(ctx, `SELECT 1 FROM api_keys WHERE id = $1`, id).Scan(&one); err == pgx.ErrNoRows {
		return nil, fmt.Errorf("store: revoke api key %s: %w", id, ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("store: revoke api key %s: %w", id, err)
	}
	return nil, fmt.Errorf("store: revoke api key %s: already revoked: %w", id, ErrConflict)
}

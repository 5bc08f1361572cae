package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// MCPServerRecord is an MCP server added at run time. Config is the proxy's JSON
// configuration of it; the store does not interpret it.
type MCPServerRecord struct {
	Name      string
	Config    json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MCPServerStore keeps the MCP servers added at run time. Every method honours ctx.
type MCPServerStore interface {
	// PutMCPServer inserts the server or replaces its config (CreatedAt is kept,
	// UpdatedAt set to now). The name must be non-empty, cfg valid non-empty JSON.
	PutMCPServer(ctx context.Context, name string, cfg json.RawMessage) error
	// CreateMCPServer inserts the server unless its name is stored already
	// (ErrConflict): an addition, which must not replace what another replica added.
	CreateMCPServer(ctx context.Context, name string, cfg json.RawMessage) error
	// DeleteMCPServer returns ErrNotFound for an unknown name.
	DeleteMCPServer(ctx context.Context, name string) error
	// ListMCPServers returns every server by name; an empty store gives an empty,
	// non-nil slice.
	ListMCPServers(ctx context.Context) ([]MCPServerRecord, error)
}

var (
	_ MCPServerStore = (*SQLite)(nil)
	_ MCPServerStore = (*Postgres)(nil)
)

func checkMCPServer(name string, cfg json.RawMessage) error {
	if name == "" {
		return fmt.Errorf("mcp server name is empty: %w", ErrInvalid)
	}
	if len(cfg) == 0 {
		return fmt.Errorf("mcp server %s: config is empty: %w", name, ErrInvalid)
	}
	return checkJSON("mcp server config", cfg)
}

// PutMCPServer inserts or replaces a server (see MCPServerStore).
func (s *SQLite) PutMCPServer(ctx context.Context, name string, cfg json.RawMessage) error {
	if err := checkMCPServer(name, cfg); err != nil {
		return fmt.Errorf("store: put mcp server: %w", err)
	}
	at := sqliteTime(now())
	_, err := s.w.ExecContext(ctx, `INSERT INTO mcp_servers (name, config, created_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at`,
		name, string(cfg), at, at)
	if err != nil {
		return fmt.Errorf("store: put mcp server %s: %w", name, err)
	}
	return nil
}

// CreateMCPServer inserts a server of a new name (see MCPServerStore).
func (s *SQLite) CreateMCPServer(ctx context.Context, name string, cfg json.RawMessage) error {
	if err := checkMCPServer(name, cfg); err != nil {
		return fmt.Errorf("store: create mcp server: %w", err)
	}
	at := sqliteTime(now())
	res, err := s.w.ExecContext(ctx, `INSERT INTO mcp_servers (name, config, created_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, name, string(cfg), at, at)
	if err != nil {
		return fmt.Errorf("store: create mcp server %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: create mcp server %s: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("store: create mcp server %s: it exists: %w", name, ErrConflict)
	}
	return nil
}

// DeleteMCPServer deletes a server (see MCPServerStore).
func (s *SQLite) DeleteMCPServer(ctx context.Context, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM mcp_servers WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("store: delete mcp server %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: delete mcp server %s: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("store: delete mcp server %s: %w", name, ErrNotFound)
	}
	return nil
}

// ListMCPServers lists the servers by name (see MCPServerStore).
func (s *SQLite) ListMCPServers(ctx context.Context) ([]MCPServerRecord, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, config, created_at, updated_at FROM mcp_servers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list mcp servers: %w", err)
	}
	defer rows.Close()
	out := []MCPServerRecord{}
	for rows.Next() {
		var (
			r                MCPServerRecord
			cfg              string
			created, updated string
		)
		if err := rows.Scan(&r.Name, &cfg, &created, &updated); err != nil {
			return nil, fmt.Errorf("store: list mcp servers: %w", err)
		}
		r.Config = json.RawMessage(cfg)
		if r.CreatedAt, err = parseSQLiteTime(created); err != nil {
			return nil, fmt.Errorf("store: list mcp servers: %s created_at: %w", r.Name, err)
		}
		if r.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
			return nil, fmt.Errorf("store: list mcp servers: %s updated_at: %w", r.Name, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list mcp servers: %w", err)
	}
	return out, nil
}

// PutMCPServer inserts or replaces a server (see MCPServerStore).
func (p *Postgres) PutMCPServer(ctx context.Context, name string, cfg json.RawMessage) error {
	if err := checkMCPServer(name, cfg); err != nil {
		return fmt.Errorf("store: put mcp server: %w", err)
	}
	at := now()
	_, err := p.pool.Exec(ctx, `INSERT INTO mcp_servers (name, config, created_at, updated_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at`,
		name, []byte(cfg), at)
	if err != nil {
		return fmt.Errorf("store: put mcp server %s: %w", name, err)
	}
	return nil
}

// CreateMCPServer inserts a server of a new name (see MCPServerStore).
func (p *Postgres) CreateMCPServer(ctx context.Context, name string, cfg json.RawMessage) error {
	if err := checkMCPServer(name, cfg); err != nil {
		return fmt.Errorf("store: create mcp server: %w", err)
	}
	at := now()
	tag, err := p.pool.Exec(ctx, `INSERT INTO mcp_servers (name, config, created_at, updated_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (name) DO NOTHING`, name, []byte(cfg), at)
	if err != nil {
		return fmt.Errorf("store: create mcp server %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: create mcp server %s: it exists: %w", name, ErrConflict)
	}
	return nil
}

// DeleteMCPServer deletes a server (see MCPServerStore).
func (p *Postgres) DeleteMCPServer(ctx context.Context, name string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM mcp_servers WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("store: delete mcp server %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: delete mcp server %s: %w", name, ErrNotFound)
	}
	return nil
}

// ListMCPServers lists the servers by name (see MCPServerStore).
func (p *Postgres) ListMCPServers(ctx context.Context) ([]MCPServerRecord, error) {
	rows, err := p.pool.Query(ctx, `SELECT name, config, created_at, updated_at FROM mcp_servers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list mcp servers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MCPServerRecord, error) {
		var (
			r   MCPServerRecord
			cfg []byte
		)
		if err := row.Scan(&r.Name, &cfg, &r.CreatedAt, &r.UpdatedAt); err != nil {
			return r, err
		}
		r.Config = json.RawMessage(cfg)
		r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list mcp servers: %w", err)
	}
	if out == nil {
		out = []MCPServerRecord{}
	}
	return out, nil
}

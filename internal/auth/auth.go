// Package auth authenticates API requests: API keys (stored as SHA-256 hashes) with
// roles and a tenant, per-key rate and concurrency limits, and the principal a
// request carries. It knows nothing of HTTP routing: the server says which role a
// route needs.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolserverd/toolserverd/internal/store"
)

// Roles. admin includes the other two.
const (
	RoleAgent    = "agent"    // sessions and tool calls
	RoleApprover = "approver" // approvals
	RoleAdmin    = "admin"    // MCP servers, keys, configuration views
)

// DefaultTenant owns everything in unauthenticated mode and bootstrap keys.
const DefaultTenant = "default"

// KeyPrefix starts every key the daemon makes, so that leaked keys are recognisable.
const KeyPrefix = "tsk_"

// ValidRole reports whether r is a role.
func ValidRole(r string) bool { return r == RoleAgent || r == RoleApprover || r == RoleAdmin }

// Principal is who a request acts as.
type Principal struct {
	KeyID  string // "" in unauthenticated mode
	Name   string
	Tenant string
	Roles  []string
}

// Has reports whether the principal holds role (admin holds every role).
func (p *Principal) Has(role string) bool {
	return slices.Contains(p.Roles, role) || slices.Contains(p.Roles, RoleAdmin)
}

type ctxKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the request's principal; nil when none was set.
func From(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

type credentialKey struct{}

// WithCredential returns ctx carrying the API key the request presented, so that a
// replica forwarding work to another can authenticate as the caller (forwarding
// grants nothing the caller does not hold). Never log it.
func WithCredential(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, credentialKey{}, key)
}

// Credential returns the API key the request presented; "" when none was.
func Credential(ctx context.Context) string {
	k, _ := ctx.Value(credentialKey{}).(string)
	return k
}

// NewKey returns a new random key and its hash.
func NewKey() (key, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return key, Hash(key)
}

// Hash is the SHA-256 of a key, hex encoded: what the store and config hold. Keys are
// 256 random bits, so a fast hash is as safe as a slow one and costs nothing per request.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ConfigKey is a key declared in the configuration (by hash).
type ConfigKey struct {
	Name   string
	Tenant string
	Roles  []string
	SHA256 string
}

// Limits bound what one key may do; zero values mean no limit.
type Limits struct {
	RequestsPerSecond float64
	Burst             int
	MaxConcurrent     int
}

// Config configures the authenticator.
type Config struct {
	// Unauthenticated serves every request as an admin of DefaultTenant. Only for
	// loopback listeners (CheckListen).
	Unauthenticated bool
	Keys            []ConfigKey
	Limits          Limits
	// CacheTTL bounds how long a looked-up key is trusted without asking the store
	// again (default 10s): revoking through another replica takes at most this long.
	CacheTTL time.Duration
}

// Errors of Authenticate.
var (
	ErrNoKey      = errors.New("an API key is required: send Authorization: Bearer <key>")
	ErrBadKey     = errors.New("the API key is not valid")
	ErrRevoked    = errors.New("the API key has been revoked")
	ErrRateLimit  = errors.New("rate limit exceeded")
	ErrConcurrent = errors.New("too many requests in flight for this API key")
)

// Authenticator checks keys and applies per-key limits.
type Authenticator struct {
	cfg    Config
	store  store.APIKeyStore
	static map[string]*Principal // by hash

	mu      sync.Mutex
	cache   map[string]cached // by hash
	limits  map[string]*limiter
	revoked map[string]bool // ids revoked through this replica
}

type cached struct {
	p       *Principal
	revoked bool
	at      time.Time
}

type limiter struct {
	bucket   *rate.Limiter
	inflight int
}

// New returns an Authenticator over st (which may be nil when only config keys exist).
func New(cfg Config, st store.APIKeyStore) (*Authenticator, error) {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 10 * time.Second
	}
	a := &Authenticator{cfg: cfg, store: st, static: map[string]*Principal{}, cache: map[string]cached{},
		limits: map[string]*limiter{}, revoked: map[string]bool{}}
	for i, k := range cfg.Keys {
		h := strings.ToLower(strings.TrimSpace(k.SHA256))
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("auth.keys[%d] (%s): sha256 must be 64 hex digits (toolserverctl keys hash KEY prints it)", i, k.Name)
		}
		if k.Tenant == "" {
			k.Tenant = DefaultTenant
		}
		if len(k.Roles) == 0 {
			return nil, fmt.Errorf("auth.keys[%d] (%s): roles must name at least one of agent, approver, admin", i, k.Name)
		}
		for _, r := range k.Roles {
			if !ValidRole(r) {
				return nil, fmt.Errorf("auth.keys[%d] (%s): unknown role %q (use agent, approver or admin)", i, k.Name, r)
			}
		}
		a.static[h] = &Principal{KeyID: "cfg_" + h[:12], Name: k.Name, Tenant: k.Tenant, Roles: k.Roles}
	}
	return a, nil
}

// Unauthenticated reports whether requests need no key.
func (a *Authenticator) Unauthenticated() bool { return a.cfg.Unauthenticated }

// HasConfigKeys reports whether the configuration declares keys.
func (a *Authenticator) HasConfigKeys() bool { return len(a.static) > 0 }

var anonymous = &Principal{Name: "unauthenticated", Tenant: DefaultTenant, Roles: []string{RoleAdmin}}

// Authenticate returns the principal of a presented key ("" when none was sent).
func (a *Authenticator) Authenticate(ctx context.Context, key string) (*Principal, error) {
	if key == "" {
		if a.cfg.Unauthenticated {
			return anonymous, nil
		}
		return nil, ErrNoKey
	}
	h := Hash(key)
	if p, ok := a.static[h]; ok {
		return p, nil
	}
	a.mu.Lock()
	c, ok := a.cache[h]
	a.mu.Unlock()
	if !ok || time.Since(c.at) > a.cfg.CacheTTL {
		if a.store == nil {
			return nil, ErrBadKey
		}
		k, err := a.store.APIKeyByHash(ctx, h)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, ErrBadKey
		case err != nil:
			return nil, fmt.Errorf("looking up the API key: %w", err)
		}
		c = cached{p: &Principal{KeyID: k.ID, Name: k.Name, Tenant: k.Tenant, Roles: k.Roles}, revoked: k.RevokedAt != nil, at: time.Now()}
		a.mu.Lock()
		if len(a.cache) > 10000 {
			clear(a.cache) // bounded: a flood of distinct valid keys only costs lookups
		}
		a.cache[h] = c
		a.mu.Unlock()
	}
	a.mu.Lock()
	revoked := c.revoked || a.revoked[c.p.KeyID]
	a.mu.Unlock()
	if revoked {
		return nil, ErrRevoked
	}
	return c.p, nil
}

// Forget drops a revoked key at once on this replica.
func (a *Authenticator) Forget(keyID string) {
	a.mu.Lock()
	a.revoked[keyID] = true
	a.mu.Unlock()
}

// Admit applies the principal's rate and concurrency limits. On success the caller
// must call done when the request ends; on failure retryAfter says when to try again.
func (a *Authenticator) Admit(p *Principal) (done func(), retryAfter time.Duration, err error) {
	l := a.cfg.Limits
	if l.RequestsPerSecond <= 0 && l.MaxConcurrent <= 0 {
		return func() {}, 0, nil
	}
	id := p.KeyID
	if id == "" {
		id = "unauthenticated"
	}
	a.mu.Lock()
	lim := a.limits[id]
	if lim == nil {
		lim = &limiter{}
		if l.RequestsPerSecond > 0 {
			burst := max(l.Burst, 1)
			lim.bucket = rate.NewLimiter(rate.Limit(l.RequestsPerSecond), burst)
		}
		a.limits[id] = lim
	}
	if l.MaxConcurrent > 0 && lim.inflight >= l.MaxConcurrent {
		a.mu.Unlock()
		return nil, time.Second, ErrConcurrent
	}
	if lim.bucket != nil {
		r := lim.bucket.Reserve()
		if d := r.Delay(); d > 0 {
			r.Cancel()
			a.mu.Unlock()
			return nil, d, ErrRateLimit
		}
	}
	lim.inflight++
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		lim.inflight--
		a.mu.Unlock()
	}, 0, nil
}

// CheckListen refuses unauthenticated mode on an address that is not loopback.
func CheckListen(unauthenticated bool, addr string) error {
	if !unauthenticated {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("auth.unauthenticated: cannot read listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("auth.unauthenticated is only allowed on a loopback address (127.0.0.1, ::1), not %q: configure API keys to listen there", addr)
}

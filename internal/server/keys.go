package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/go-chi/cors"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/store"
)

type keyJSON struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name"`
	Roles     []string   `json:"roles"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// Key is the secret, shown once in the answer to its creation.
	Key string `json:"key,omitempty"`
}

func toKeyJSON(k *store.APIKey) keyJSON {
	return keyJSON{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Roles: k.Roles, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func (s *Server) keyStore() (store.APIKeyStore, error) {
	if s.Keys == nil {
		return nil, errorf(CodeUnavailable, "this daemon has no key store")
	}
	return s.Keys, nil
}

// listKeys lists API keys (admins see every tenant's; ?tenant= narrows).
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.keyStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	keys, err := ks.ListAPIKeys(r.Context(), r.URL.Query().Get("tenant"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, toKeyJSON(k))
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

type createKeyRequest struct {
	Name   string   `json:"name"`
	Tenant string   `json:"tenant"`
	Roles  []string `json:"roles"`
}

// createKey makes a key; the answer is the only place the key itself appears.
// decodeCreateKey reads and checks a key creation body (already capped at limit): the
// tenant defaults to the caller's, every problem is listed in one bad_request, and
// the roles come back sorted without duplicates.
func decodeCreateKey(body io.Reader, limit int64, contentType, callerTenant string) (createKeyRequest, error) {
	var req createKeyRequest
	if err := checkContentType(contentType); err != nil {
		return req, err
	}
	if err := decodeBody(body, limit, &req); err != nil {
		return req, err
	}
	if req.Tenant == "" {
		req.Tenant = callerTenant
	}
	var problems []string
	if len(req.Roles) == 0 {
		problems = append(problems, "roles: name at least one of agent, approver, admin")
	}
	for _, role := range req.Roles {
		if !auth.ValidRole(role) {
			problems = append(problems, "roles: unknown role "+quote(role)+" (use agent, approver or admin)")
		}
	}
	if len(req.Tenant) > 128 || strings.ContainsAny(req.Tenant, " \t\r\n,") || hasControl(req.Tenant) {
		problems = append(problems, "tenant: at most 128 characters, no spaces, commas or control characters")
	}
	if len(req.Name) > 200 || hasControl(req.Name) {
		problems = append(problems, "name: at most 200 bytes, no control characters")
	}
	if len(problems) > 0 {
		return req, errorf(CodeBadRequest, strings.Join(problems, "; "))
	}
	slices.Sort(req.Roles)
	req.Roles = slices.Compact(req.Roles)
	return req, nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	ks, err := s.keyStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ct := r.Header.Get("Content-Type")
	if err := checkContentType(ct); err != nil { // before reading, as decodeJSON does
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := decodeCreateKey(bytes.NewReader(body), s.cfg.MaxBodyBytes, ct, tenantOf(r))
	if err == nil {
		// Who gets which roles in which tenant: a key sent twice must not be read one
		// way by a proxy or log and another by the daemon.
		err = refuseDuplicateKeys(body, reflect.TypeFor[createKeyRequest]())
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	key, hash := auth.NewKey()
	k := &store.APIKey{ID: session.NewID("key_"), Tenant: req.Tenant, Name: req.Name, Roles: req.Roles, Hash: hash}
	if err := ks.CreateAPIKey(r.Context(), k); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "api key created", "key_id", k.ID, "tenant", k.Tenant, "roles", k.Roles, "by", principal(r.Context()).KeyID)
	s.audit(r, AuditKeyCreated, k.ID, map[string]any{"name": k.Name, "tenant": k.Tenant, "roles": k.Roles})
	out := toKeyJSON(k)
	out.Key = key
	writeJSON(w, http.StatusCreated, out)
}

// revokeKey revokes a key at once on this replica (other replicas within the
// authenticator's cache time).
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	ks, err := s.keyStore()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := pathParam(r, "keyID")
	k, err := ks.RevokeAPIKey(r.Context(), id, time.Now().UTC())
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.writeError(w, r, errorf(CodeNotFound, "no API key "+quote(id)))
		return
	case errors.Is(err, store.ErrConflict):
		s.writeError(w, r, errorf(CodeConflict, "API key "+quote(id)+" is already revoked"))
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	}
	if s.Auth != nil {
		s.Auth.Forget(id)
	}
	s.log.InfoContext(r.Context(), "api key revoked", "key_id", id, "tenant", k.Tenant, "by", principal(r.Context()).KeyID)
	s.audit(r, AuditKeyRevoked, id, map[string]any{"name": k.Name, "tenant": k.Tenant, "roles": k.Roles})
	w.WriteHeader(http.StatusNoContent)
}

// whoami tells a client which tenant and roles its key has.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"key_id": p.KeyID, "name": p.Name, "tenant": p.Tenant, "roles": p.Roles})
}

// corsMiddleware answers browsers on the configured origins (go-chi/cors: preflight,
// Vary and credential rules done right); without origins it does nothing.
func (s *Server) corsMiddleware() func(http.Handler) http.Handler {
	if len(s.CORS.AllowedOrigins) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	c := cors.Handler(cors.Options{
		// Matched by the same rules as unauthenticated mode's page check.
		AllowOriginFunc: func(_ *http.Request, origin string) bool { return s.origins.allowed(origin) },
		AllowedMethods:  []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete},
		// The MCP endpoints' too: an MCP client sends back the Mcp-Session-Id that
		// initialize answered, and Mcp-Protocol-Version (Last-Event-ID resumes its
		// stream, as it resumes progress streams); /mcp names the session in a header.
		// The W3C trace headers, which a traced browser UI adds to every fetch and the
		// daemon continues (observeMiddleware): refused, its preflights would fail.
		AllowedHeaders: []string{"Authorization", "Content-Type", "X-API-Key", "X-Request-Id", "Last-Event-ID",
			"Mcp-Session-Id", "Mcp-Protocol-Version", "X-Toolserver-Session", "Traceparent", "Tracestate"},
		// Every response header the contract documents; browsers hide the others.
		ExposedHeaders:   []string{"X-Request-Id", "Retry-After", "Location", "X-Session-Id", "WWW-Authenticate", "Mcp-Session-Id"},
		AllowCredentials: false, // keys travel in headers, never cookies
		MaxAge:           int(s.CORS.MaxAge.Seconds()),
	})
	// It runs before routing, on the paths browsers may call, so that it answers
	// preflights (OPTIONS, routed nowhere) of routes at any depth: the REST API and
	// both MCP endpoints (/v1/sessions/{id}/mcp is routed outside /v1's group).
	return func(next http.Handler) http.Handler {
		withCORS := c(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/mcp" || strings.HasPrefix(r.URL.Path, "/v1/") {
				withCORS.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func quote(s string) string { return `"` + s + `"` }

// hasControl reports a control character (NUL, line breaks, escapes) in a name: no
// store keeps a NUL in text, and the others garble logs and listings.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

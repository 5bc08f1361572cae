package server

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/auth"
)

// authenticate finds the request's principal (Authorization: Bearer KEY, or
// X-API-Key), applies its key's limits, and puts it in the request context.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Auth == nil {
			next.ServeHTTP(w, r.WithContext(auth.With(r.Context(), anonymous)))
			return
		}
		key := presentedKey(r)
		p, err := s.Auth.Authenticate(r.Context(), key)
		if err != nil {
			if errors.Is(err, auth.ErrNoKey) || errors.Is(err, auth.ErrBadKey) || errors.Is(err, auth.ErrRevoked) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolserverd"`)
				s.writeError(w, r, errorf(CodeUnauthorized, err.Error()))
				return
			}
			s.writeError(w, r, err)
			return
		}
		if key == "" && s.Auth.Unauthenticated() {
			if msg := s.fromWebPage(r); msg != "" {
				writeForbidden(w, msg)
				return
			}
		}
		done, retry, err := s.Auth.Admit(p)
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retry.Seconds(), 1)))))
			s.writeError(w, r, errorf(CodeRateLimited, err.Error()))
			return
		}
		defer done()
		ctx := auth.WithCredential(auth.With(r.Context(), p), key)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// fromWebPage says why a request without a key in unauthenticated mode is refused,
// or "" to serve it. That mode listens on loopback only, yet a browser on the machine
// reaches loopback for any web site: a page's no-cors POST without Content-Type needs
// no preflight (Origin names the page's site), and a name rebound to 127.0.0.1 makes
// the page same-origin (Host is then that name). Pages on localhost or a loopback
// address (the console) and the configured CORS origins are served.
func (s *Server) fromWebPage(r *http.Request) string {
	if !loopbackHost(r.Host) {
		return "without an API key only requests to localhost or a loopback address are served, not to " + quote(r.Host)
	}
	o := r.Header.Get("Origin")
	if o == "" || s.origins.allowed(o) {
		return ""
	}
	if u, err := url.Parse(o); err == nil && (u.Scheme == "http" || u.Scheme == "https") && loopbackHost(u.Host) {
		return ""
	}
	return "without an API key requests from web pages of other sites are refused (Origin " + quote(o) + ")"
}

// probeFromWebPage applies fromWebPage to /readyz and /metrics in unauthenticated
// mode: they need no key in any mode (for probes and scrapers), and tell what runs
// (tool names and counts, the sandbox's host), which a page of another site reaching
// loopback through a rebound name must not read there either.
func (s *Server) probeFromWebPage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Auth != nil && s.Auth.Unauthenticated() {
			if msg := s.fromWebPage(r); msg != "" {
				writeForbidden(w, msg)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header value (host, host:port, [v6]:port) is
// localhost or a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// endOnRevoke ends a long-lived response (an event stream) once the key that opened it
// is no longer valid: every request is authenticated when it arrives, but a stream
// outlives that check, and a revoked key must stop seeing events too. The key is
// checked every cfg.RevokeCheck: a revocation through this replica ends the stream
// within that, one through another replica within auth's cache TTL as well.
func (s *Server) endOnRevoke(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := auth.Credential(r.Context())
		if s.Auth == nil || key == "" {
			next.ServeHTTP(w, r) // no key to revoke
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		go func() {
			t := time.NewTicker(s.cfg.RevokeCheck)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				_, err := s.Auth.Authenticate(ctx, key)
				if errors.Is(err, auth.ErrRevoked) || errors.Is(err, auth.ErrBadKey) {
					s.log.InfoContext(ctx, "event stream ended: its API key is no longer valid",
						"key_id", principal(r.Context()).KeyID, "reason", err.Error())
					cancel(err)
					return
				}
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// anonymous is the principal when the server runs without an authenticator (tests
// that build the API directly).
var anonymous = &auth.Principal{Name: "unauthenticated", Tenant: auth.DefaultTenant, Roles: []string{auth.RoleAdmin}}

func presentedKey(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		// The scheme is case-insensitive (RFC 9110 §11.1).
		if scheme, k, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(k)
		}
		return h // a malformed header is a bad key, not a missing one
	}
	return strings.TrimSpace(r.Header.Get("X-API-Key"))
}

// require lets through principals holding any of roles.
func require(roles ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principal(r.Context())
			for _, role := range roles {
				if p.Has(role) {
					next.ServeHTTP(w, r)
					return
				}
			}
			writeForbidden(w, "this API key lacks the role this route needs ("+strings.Join(roles, " or ")+")")
		})
	}
}

func writeForbidden(w http.ResponseWriter, msg string) {
	var body errorBody
	body.Error.Code, body.Error.Message = CodeForbidden, msg
	writeJSON(w, http.StatusForbidden, body)
}

// principal is the request's principal (anonymous when none was set).
func principal(ctx context.Context) *auth.Principal {
	if p := auth.From(ctx); p != nil {
		return p
	}
	return anonymous
}

// tenantOf is the tenant a request acts for.
func tenantOf(r *http.Request) string { return principal(r.Context()).Tenant }

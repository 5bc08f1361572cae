package server

import (
	"net/http"
	"strings"
)

// noOAuth is what the daemon answers where MCP clients look for OAuth. Clients that
// speak OAuth (mcp-remote, the MCP Inspector, desktop assistants: the MCP SDKs'
// authorization flow) answer a 401 by fetching protected resource metadata (RFC 9728)
// and authorization server metadata (RFC 8414, OpenID Connect Discovery), and, finding
// none, fall back to the default endpoints of MCP's 2025-03-26 revision: they register
// at /register, send the person to /authorize and ask /token. They show what the
// last of these answered, so it has to say what to do instead: send the key.
const noOAuth = "toolserverd does not use OAuth: its API and MCP endpoint take an API key, " +
	"sent as the header Authorization: Bearer tsk_… (an agent key, from POST /v1/keys). " +
	"Configure the MCP client to send that header (mcp-remote and the MCP Inspector: " +
	"--header \"Authorization: Bearer tsk_…\") rather than to sign in; " +
	"a client that sent one had it refused (missing, unknown or revoked)"

// oauthMetadata reports whether path is one of the metadata documents OAuth clients
// look for: those of RFC 9728 and RFC 8414 (at the root or with the resource's path
// after it) and OpenID Connect Discovery's.
func oauthMetadata(path string) bool {
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// oauthEndpoint reports whether path is one of the default OAuth endpoints MCP clients
// fall back to without metadata.
func oauthEndpoint(path string) bool {
	return path == "/register" || path == "/authorize" || path == "/token"
}

// notFound answers a request no route takes; the places of OAuth say that the daemon
// takes API keys. The metadata documents get the API's error shape (clients only
// look at the 404); the endpoints an OAuth error's (RFC 6749 §5.2, RFC 7591 §3.2.2),
// which the clients parse and show the description of.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	switch {
	case oauthMetadata(r.URL.Path):
		s.writeError(w, r, errorf(CodeNotFound, noOAuth))
	case oauthEndpoint(r.URL.Path):
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "invalid_request", "error_description": noOAuth})
	default:
		s.writeError(w, r, errorf(CodeNotFound, "no route for "+r.Method+" "+r.URL.Path))
	}
}

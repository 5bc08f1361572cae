// Package openapi turns an OpenAPI 3.0 or 3.1 document (or a Swagger 2.0 one, converted
// to 3.0 first) into tools: one per operation, named {prefix}__{operationId}, whose
// arguments merge the operation's path, query, header and cookie parameters and its
// body into one JSON Schema, and whose calls are HTTP requests to the API.
package openapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Defaults of a source.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultFetchTimeout     = 30 * time.Second
	DefaultMaxResponseBytes = 4 << 20
	// DefaultMaxFileBytes caps a file sent from a session's working directory (the
	// files of one call together) and an answer saved in it.
	DefaultMaxFileBytes = 32 << 20
	// MaxSpecBytes caps a spec document; anything larger is refused at start.
	MaxSpecBytes = 16 << 20
	// MaxSpecFiles caps the files (or URLs) one document may span, itself included,
	// and MaxSpecTotalBytes their size together: a document split over files is
	// read whole at start, and a hostile one must not make that unbounded.
	MaxSpecFiles      = 5000
	MaxSpecTotalBytes = 32 << 20
	// MaxOperations caps the tools one source may make; narrow a bigger API with include.
	MaxOperations = 1000
	// MaxSchemaBytes caps the argument schemas of one source's tools together, after
	// references are expanded: a small document whose references fan out would
	// otherwise make gigabytes of schemas. Narrow a bigger API with include.
	MaxSchemaBytes = 8 << 20
	// maxWarnings caps the warnings one source reports; a summary counts the rest.
	maxWarnings = 50
)

var validIdent = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Config declares one OpenAPI source.
type Config struct {
	// Name identifies the source in logs, errors and tool sources (openapi:{name}).
	Name string
	// Prefix starts every tool name ({prefix}__{operationId}); defaults to Name.
	Prefix string
	// Spec is a file path or an http(s) URL of the document, read once at start.
	Spec string
	// BaseURL replaces the document's first server URL.
	BaseURL string
	Auth    Auth
	// Include and Exclude are globs over operation ids (or, for operations without
	// one, the name made from method and path). Empty Include means every operation.
	Include []string
	Exclude []string
	// Timeout is each call's default deadline.
	Timeout time.Duration
	// FetchTimeout bounds reading Spec from a URL at start.
	FetchTimeout time.Duration
	// MaxResponseBytes caps how much of a response body is read into memory and shown.
	MaxResponseBytes int64
	// MaxFileBytes caps the files a call sends from the session's working directory
	// ({path} file arguments, together) and a binary answer saved in it.
	MaxFileBytes int64
	// Workspaces finds a calling session's working directory: a file argument may
	// then name a file in it ({path}), and an answer the model cannot read (a PDF, an
	// archive) is saved in its downloads/ directory. Nil: files are given inline
	// only, and such answers are named, not kept.
	Workspaces Workspaces
	// Getenv reads the environment (os.LookupEnv when nil).
	Getenv func(string) (string, bool)
	// Client sends the calls and fetches the spec; a default client when nil.
	Client *http.Client
}

// Auth says where the credentials come from. At most one of BearerTokenEnv, APIKeyEnv
// and the Basic pair may be set; an API key goes in APIKeyHeader or APIKeyQuery.
type Auth struct {
	BearerTokenEnv string
	APIKeyEnv      string
	APIKeyHeader   string
	APIKeyQuery    string
	// BasicUsernameEnv and BasicPasswordEnv, set together, send HTTP Basic credentials.
	BasicUsernameEnv string
	BasicPasswordEnv string
	// OAuth2, when TokenURL is set, gets bearer tokens by the client credentials grant.
	OAuth2 OAuth2
}

// OAuth2 is the client credentials grant (RFC 6749 §4.4): the daemon asks TokenURL for
// a token with the client's id and secret, sends it as a bearer token, and asks again
// shortly before it expires.
type OAuth2 struct {
	TokenURL        string
	ClientIDEnv     string
	ClientSecretEnv string
	Scopes          []string
}

func (a Auth) basic() bool { return a.BasicUsernameEnv != "" || a.BasicPasswordEnv != "" }

func (a Auth) oauth2() bool {
	o := a.OAuth2
	return o.TokenURL != "" || o.ClientIDEnv != "" || o.ClientSecretEnv != "" || len(o.Scopes) > 0
}

func (c *Config) withDefaults() {
	if c.Prefix == "" {
		c.Prefix = c.Name
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.FetchTimeout <= 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.Getenv == nil {
		c.Getenv = os.LookupEnv
	}
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: sameHostRedirects}
	}
}

// maxRedirects is how many redirects on its own host a call follows.
const maxRedirects = 5

// sameHostRedirects follows at most maxRedirects redirects and never to another host,
// so credentials in headers or the query never leave the API. A redirect it does not
// follow is the call's answer (result says why it was not followed): the API answered.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return http.ErrUseLastResponse
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return http.ErrUseLastResponse
	}
	return nil
}

// Validate checks the configuration, naming the first bad field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !validIdent.MatchString(c.Name) {
		bad("name", "%q must be letters, digits, _ or -", c.Name)
	}
	if c.Prefix != "" && !validIdent.MatchString(c.Prefix) {
		bad("prefix", "%q must be letters, digits, _ or -", c.Prefix)
	}
	if c.Spec == "" {
		bad("spec", "is required (a file path or an http(s) URL)")
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("base_url", "%q is not an http(s) URL", c.BaseURL)
		}
	}
	a := c.Auth
	if n := btoi(a.BearerTokenEnv != "") + btoi(a.APIKeyEnv != "") + btoi(a.basic()) + btoi(a.oauth2()); n > 1 {
		bad("auth", "set one of bearer_token_env, api_key_env, basic_username_env/basic_password_env and oauth2")
	}
	if a.oauth2() {
		o := a.OAuth2
		u, err := url.Parse(o.TokenURL)
		switch {
		case o.TokenURL == "" || o.ClientIDEnv == "" || o.ClientSecretEnv == "":
			bad("auth.oauth2", "needs token_url, client_id_env and client_secret_env")
		case err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname()))):
			bad("auth.oauth2.token_url", "%q: want an https URL (http only on loopback): the client secret is sent there", o.TokenURL)
		}
	}
	if a.basic() && (a.BasicUsernameEnv == "" || a.BasicPasswordEnv == "") {
		bad("auth.basic_username_env", "basic_username_env and basic_password_env go together")
	}
	if a.APIKeyEnv != "" && (a.APIKeyHeader == "") == (a.APIKeyQuery == "") {
		bad("auth.api_key_env", "needs exactly one of api_key_header and api_key_query")
	}
	if a.APIKeyEnv == "" && (a.APIKeyHeader != "" || a.APIKeyQuery != "") {
		bad("auth.api_key_header", "api_key_header and api_key_query need api_key_env")
	}
	for _, g := range append(append([]string{}, c.Include...), c.Exclude...) {
		if _, err := path.Match(g, ""); err != nil {
			bad("include/exclude", "%q is not a valid glob: %v", g, err)
		}
	}
	if c.Timeout < 0 || c.FetchTimeout < 0 || c.MaxResponseBytes < 0 || c.MaxFileBytes < 0 {
		bad("timeout", "timeouts, max_response_bytes and max_file_bytes must not be negative")
	}
	return errors.Join(errs...)
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// oauthTokens returns the source of the OAuth2 tokens calls send, nil without
// OAuth2. The client's id and secret are read now; the first token is asked for at
// the first call (an identity provider that is down does not stop the daemon), with
// client, and reused until shortly before it expires.
func (c Config) oauthTokens() (*tokens, error) {
	if !c.Auth.oauth2() {
		return nil, nil
	}
	id, err := c.env(c.Auth.OAuth2.ClientIDEnv)
	if err != nil {
		return nil, err
	}
	secret, err := c.env(c.Auth.OAuth2.ClientSecretEnv)
	if err != nil {
		return nil, err
	}
	cc := &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: c.Auth.OAuth2.TokenURL, Scopes: c.Auth.OAuth2.Scopes}
	// A token request cannot take the call's context (the source is shared): it gets
	// fetch_timeout of its own, and follows redirects only on the token URL's host.
	client := *c.Client
	client.Timeout = c.FetchTimeout
	t := &tokens{cfg: cc, ctx: context.WithValue(context.Background(), oauth2.HTTPClient, &client)}
	t.Refresh()
	return t, nil
}

// tokens are a source's OAuth2 tokens: one kept until shortly before it expires, or
// until the API refuses it (a token revoked before its expiry).
type tokens struct {
	cfg *clientcredentials.Config
	ctx context.Context
	cur atomic.Pointer[oauth2.TokenSource]
}

// Token returns the current token, asking for one when there is none or it expires.
func (t *tokens) Token() (*oauth2.Token, error) { return (*t.cur.Load()).Token() }

// Refresh drops the token kept: the next call asks for a new one.
func (t *tokens) Refresh() {
	ts := t.cfg.TokenSource(t.ctx)
	t.cur.Store(&ts)
}

// credentials reads the configured secret from the environment: the token, the key,
// or for Basic the base64 of "username:password" that the Authorization header takes.
func (c Config) credentials() (string, error) {
	if c.Auth.oauth2() {
		return "", nil // oauthCredentials: the token comes at the first call
	}
	if c.Auth.basic() {
		user, err := c.env(c.Auth.BasicUsernameEnv)
		if err != nil {
			return "", err
		}
		pass, err := c.env(c.Auth.BasicPasswordEnv)
		if err != nil {
			return "", err
		}
		if strings.Contains(user, ":") {
			return "", fmt.Errorf("auth: the Basic username in %s has a colon, which Basic credentials cannot carry", c.Auth.BasicUsernameEnv)
		}
		return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)), nil
	}
	env := c.Auth.BearerTokenEnv
	if env == "" {
		env = c.Auth.APIKeyEnv
	}
	if env == "" {
		return "", nil
	}
	return c.env(env)
}

func (c Config) env(name string) (string, error) {
	v, ok := c.Getenv(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("auth: environment variable %s is not set", name)
	}
	return strings.TrimSpace(v), nil
}

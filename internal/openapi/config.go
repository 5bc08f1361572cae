// Package openapi turns an OpenAPI 3.0 or 3.1 document into tools: one per operation,
// named {prefix}__{operationId}, whose arguments merge the operation's path, query,
// header and cookie parameters and its JSON body into one JSON Schema, and whose calls
// are HTTP requests to the API.
package openapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
)

// Defaults of a source.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultFetchTimeout     = 30 * time.Second
	DefaultMaxResponseBytes = 4 << 20
	// MaxSpecBytes caps a spec document; anything larger is refused at start.
	MaxSpecBytes = 16 << 20
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
	// MaxResponseBytes caps how much of a response body is read.
	MaxResponseBytes int64
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
}

func (a Auth) basic() bool { return a.BasicUsernameEnv != "" || a.BasicPasswordEnv != "" }

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
	if c.Getenv == nil {
		c.Getenv = os.LookupEnv
	}
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: sameHostRedirects}
	}
}

// sameHostRedirects follows at most five redirects and never to another host, so
// credentials in headers or the query never leave the API.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
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
	if n := btoi(a.BearerTokenEnv != "") + btoi(a.APIKeyEnv != "") + btoi(a.basic()); n > 1 {
		bad("auth", "set one of bearer_token_env, api_key_env and basic_username_env/basic_password_env")
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
	if c.Timeout < 0 || c.FetchTimeout < 0 || c.MaxResponseBytes < 0 {
		bad("timeout", "timeouts and max_response_bytes must not be negative")
	}
	return errors.Join(errs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// credentials reads the configured secret from the environment: the token, the key,
// or for Basic the base64 of "username:password" that the Authorization header takes.
func (c Config) credentials() (string, error) {
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

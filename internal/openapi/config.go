// Package openapi turns an OpenAPI 3.0 or 3.1 document into tools: one per operation,
// named {prefix}__{operationId}, whose arguments merge the operation's path, query,
// header and cookie parameters and its JSON body into one JSON Schema, and whose calls
// are HTTP requests to the API.
package openapi

import (
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

// Auth says where the credentials come from. At most one of BearerTokenEnv and
// APIKeyEnv may be set; an API key goes in APIKeyHeader or APIKeyQuery.
type Auth struct {
	BearerTokenEnv string
	APIKeyEnv      string
	APIKeyHeader   string
	APIKeyQuery    string
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
	if a.BearerTokenEnv != "" && a.APIKeyEnv != "" {
		bad("auth", "set bearer_token_env or api_key_env, not both")
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

// credentials reads the configured secret from the environment.
func (c Config) credentials() (string, error) {
	env := c.Auth.BearerTokenEnv
	if env == "" {
		env = c.Auth.APIKeyEnv
	}
	if env == "" {
		return "", nil
	}
	v, ok := c.Getenv(env)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("auth: environment variable %s is not set", env)
	}
	return strings.TrimSpace(v), nil
}

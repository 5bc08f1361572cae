package builtin

// The web tools: web_fetch reads a page through the network guard, web_search asks
// an operator-configured search provider. This file holds their configuration.

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/toolserverd/toolserverd/internal/netguard"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// FetchConfig configures web_fetch.
type FetchConfig struct {
	// AllowHosts and AllowCIDRs let web_fetch reach hosts and addresses the guard
	// refuses by default (loopback, private, link-local …), e.g. an internal docs
	// server. See netguard.Config.
	AllowHosts []string
	AllowCIDRs []string
	// MaxBytes is the most body bytes a call may ask for (default 10 MiB);
	// DefaultBytes is what a call reads when it does not say (default 2 MiB).
	MaxBytes     int64
	DefaultBytes int64
	// Timeout is a call's default time limit (default 20 s); MaxTimeout the most a
	// call may ask for (default 2 min).
	Timeout    time.Duration
	MaxTimeout time.Duration
	// MaxRedirects is how many redirects are followed (default 5, at most 20).
	MaxRedirects int
	// UserAgent is sent with every request (default "toolserverd-web-fetch/1 (…)").
	UserAgent string
	// Proxy, if set, is an http(s) proxy every request goes through. The proxy
	// variables of the environment are never used: they would bypass the guard.
	Proxy string

	// resolver replaces the system resolver in tests.
	resolver netguard.Resolver
}

// SearchConfig configures web_search. With no Provider the tool is not offered.
type SearchConfig struct {
	// Provider is "searxng", "brave" or "" (no web_search).
	Provider string
	// BaseURL is the provider's address: a SearXNG instance ("https://searx.example"),
	// or for Brave the API's origin (default https://api.search.brave.com).
	BaseURL string
	// APIKey is Brave's subscription token (required for brave). For SearXNG it is
	// optional and sent as a bearer token, for instances behind an authenticating proxy.
	APIKey string
	// Timeout bounds one search (default 15 s).
	Timeout time.Duration
	// MaxResults is the most results a call may ask for (default 10, at most 20).
	MaxResults int
}

// WebConfig configures the web tools.
type WebConfig struct {
	Fetch  FetchConfig
	Search SearchConfig
}

const (
	fetchDefaultBytes     = 2 << 20
	fetchDefaultMaxBytes  = 10 << 20
	fetchDefaultTimeout   = 20 * time.Second
	fetchDefaultMaxTime   = 2 * time.Minute
	fetchDefaultRedirects = 5
	fetchRedirectCap      = 20
	fetchUserAgent        = "toolserverd-web-fetch/1 (+https://github.com/toolserverd/toolserverd)"

	ProviderSearXNG      = "searxng"
	ProviderBrave        = "brave"
	braveDefaultBaseURL  = "https://api.search.brave.com"
	searchDefaultTimeout = 15 * time.Second
	searchDefaultResults = 10
	searchResultCap      = 20
)

// Validate reports configuration errors; zero values mean the defaults.
func (c FetchConfig) Validate() error {
	var errs []error
	if c.MaxBytes < 0 || c.DefaultBytes < 0 {
		errs = append(errs, errors.New("web fetch: byte limits must not be negative"))
	}
	if c.MaxBytes > 0 && c.DefaultBytes > c.MaxBytes {
		errs = append(errs, fmt.Errorf("web fetch: default bytes %d exceed max bytes %d", c.DefaultBytes, c.MaxBytes))
	}
	if c.Timeout < 0 || c.MaxTimeout < 0 {
		errs = append(errs, errors.New("web fetch: timeouts must not be negative"))
	}
	if c.MaxTimeout > 0 && c.Timeout > c.MaxTimeout {
		errs = append(errs, fmt.Errorf("web fetch: timeout %s exceeds max timeout %s", c.Timeout, c.MaxTimeout))
	}
	if c.MaxRedirects < 0 || c.MaxRedirects > fetchRedirectCap {
		errs = append(errs, fmt.Errorf("web fetch: max redirects %d: must be between 0 (default %d) and %d", c.MaxRedirects, fetchDefaultRedirects, fetchRedirectCap))
	}
	if c.Proxy != "" {
		if u, err := url.Parse(c.Proxy); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("web fetch: proxy %q: want an http:// or https:// URL", c.Proxy))
		}
	}
	if _, err := netguard.New(netguard.Config{AllowHosts: c.AllowHosts, AllowCIDRs: c.AllowCIDRs}); err != nil {
		errs = append(errs, fmt.Errorf("web fetch: %w", err))
	}
	return errors.Join(errs...)
}

func (c FetchConfig) withDefaults() FetchConfig {
	if c.MaxBytes == 0 {
		c.MaxBytes = max(fetchDefaultMaxBytes, c.DefaultBytes)
	}
	if c.DefaultBytes == 0 {
		c.DefaultBytes = min(fetchDefaultBytes, c.MaxBytes)
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = max(fetchDefaultMaxTime, c.Timeout)
	}
	if c.Timeout == 0 {
		c.Timeout = min(fetchDefaultTimeout, c.MaxTimeout)
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = fetchDefaultRedirects
	}
	if c.UserAgent == "" {
		c.UserAgent = fetchUserAgent
	}
	return c
}

// Validate reports configuration errors; zero values mean the defaults.
func (c SearchConfig) Validate() error {
	var errs []error
	switch c.Provider {
	case "":
		return nil
	case ProviderSearXNG:
		if c.BaseURL == "" {
			errs = append(errs, errors.New("web search: searxng needs a base URL"))
		}
	case ProviderBrave:
		if c.APIKey == "" {
			errs = append(errs, errors.New("web search: brave needs an API key"))
		}
	default:
		errs = append(errs, fmt.Errorf("web search: unknown provider %q (want %q or %q)", c.Provider, ProviderSearXNG, ProviderBrave))
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("web search: base URL %q: want an http:// or https:// URL", c.BaseURL))
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("web search: timeout must not be negative"))
	}
	if c.MaxResults < 0 || c.MaxResults > searchResultCap {
		errs = append(errs, fmt.Errorf("web search: max results %d: must be between 0 (default %d) and %d", c.MaxResults, searchDefaultResults, searchResultCap))
	}
	return errors.Join(errs...)
}

func (c SearchConfig) withDefaults() SearchConfig {
	if c.Provider == ProviderBrave && c.BaseURL == "" {
		c.BaseURL = braveDefaultBaseURL
	}
	if c.Timeout == 0 {
		c.Timeout = searchDefaultTimeout
	}
	if c.MaxResults == 0 {
		c.MaxResults = searchDefaultResults
	}
	return c
}

// Validate reports configuration errors of both tools.
func (c WebConfig) Validate() error {
	return errors.Join(c.Fetch.Validate(), c.Search.Validate())
}

// WebTools returns web_fetch, and web_search when a search provider is configured.
func WebTools(cfg WebConfig) ([]tool.Tool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fetch, err := WebFetch(cfg.Fetch)
	if err != nil {
		return nil, err
	}
	tools := []tool.Tool{fetch}
	search, err := WebSearch(cfg.Search)
	if err != nil {
		return nil, err
	}
	if search != nil {
		tools = append(tools, search)
	}
	return tools, nil
}

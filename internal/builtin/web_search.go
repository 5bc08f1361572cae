package builtin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	// webSearchBodyLimit bounds a provider's answer.
	webSearchBodyLimit = 4 << 20
	// webSearchDefaultShown is how many results a call gets when it does not say.
	webSearchDefaultShown = 5
)

// WebSearch returns the web_search tool, or nil (and no error) when cfg names no
// provider: then the tool is not offered at all.
func WebSearch(cfg SearchConfig) (tool.Tool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Provider == "" {
		return nil, nil
	}
	cfg = cfg.withDefaults()
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	var p webProvider = searxngProvider{base: base, key: cfg.APIKey}
	if cfg.Provider == ProviderBrave {
		p = braveProvider{base: base, key: cfg.APIKey}
	}
	// The provider is the operator's choice, not the model's: it is reached without the
	// network guard, and through the environment's proxy if there is one.
	rt := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	return &webSearch{cfg: cfg, provider: p, client: &http.Client{Transport: rt, CheckRedirect: providerRedirects}}, nil
}

// providerRedirects follows a provider's redirects on its own host only: Go forwards
// custom headers (Brave's X-Subscription-Token) to any host a redirect names.
func providerRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return fmt.Errorf("it redirected to another host (%s://%s), which is not followed with the API key; set web.search.base_url to the address it redirects to",
			req.URL.Scheme, req.URL.Host)
	}
	return nil
}

type webSearch struct {
	cfg      SearchConfig
	provider webProvider
	client   *http.Client
}

// webResult is one search hit, the same for every provider.
type webResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

type webSearchArgs struct {
	Query      string `json:"query"`
	MaxResults *int   `json:"max_results"`
}

type webSearchOutput struct {
	Query    string      `json:"query"`
	Provider string      `json:"provider"`
	Results  []webResult `json:"results"`
}

// webProvider speaks one search API.
type webProvider interface {
	request(ctx context.Context, query string, n int) (*http.Request, error)
	parse(body []byte) ([]webResult, error)
	// advice is a hint for an HTTP error status ("" if none).
	advice(status int) string
}

func (t *webSearch) Spec() tool.Spec {
	return tool.Spec{
		Name:  "web_search",
		Label: "Web search",
		Description: "Search the web and return the top results, each with title, URL and snippet. " +
			"Use web_fetch on a result's URL to read the page.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 400, "description": "The search query, as you would type it into a search engine."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many results to return at most (default %d)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`, t.cfg.MaxResults, min(webSearchDefaultShown, t.cfg.MaxResults))),
		Documentation: webSearchDoc,
		PromptHint:    "Use web_search to find pages on the web, then web_fetch to read the ones that matter.",
		Flags:         tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:          tool.RiskLow,
		Mode:          tool.ModeDirect,
		Timeout:       t.cfg.Timeout + 5*time.Second,
		Source:        "builtin",
	}
}

func (t *webSearch) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args webSearchArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	query := strings.Join(strings.Fields(args.Query), " ")
	if query == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "query is empty")
	}
	n := min(webSearchDefaultShown, t.cfg.MaxResults)
	if args.MaxResults != nil {
		if *args.MaxResults < 1 || *args.MaxResults > t.cfg.MaxResults {
			return nil, tool.Errorf(tool.KindInvalidArgs, "max_results %d: must be between 1 and %d", *args.MaxResults, t.cfg.MaxResults)
		}
		n = *args.MaxResults
	}
	cctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	req, err := t.provider.request(cctx, query, n)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, t.webSearchError(ctx, cctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, webSearchBodyLimit+1))
	if err != nil {
		return nil, t.webSearchError(ctx, cctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("search provider %s answered HTTP %s", t.cfg.Provider, resp.Status)
		if a := t.provider.advice(resp.StatusCode); a != "" {
			msg += "; " + a
		}
		if excerpt := strings.TrimSpace(string(body[:min(len(body), 500)])); excerpt != "" {
			s, _ := sanitize([]byte(excerpt))
			msg += ": " + s
		}
		return nil, tool.Errorf(tool.KindUnavailable, "%s", msg)
	}
	if len(body) > webSearchBodyLimit {
		return nil, tool.Errorf(tool.KindUnavailable, "search provider %s sent more than %d bytes", t.cfg.Provider, webSearchBodyLimit)
	}
	results, err := t.provider.parse(body)
	if err != nil {
		return nil, tool.Errorf(tool.KindUnavailable, "search provider %s sent an answer that could not be read: %v", t.cfg.Provider, err)
	}
	results = webCleanResults(results, n)
	return webSearchResult(webSearchOutput{Query: query, Provider: t.cfg.Provider, Results: results})
}

func (t *webSearch) webSearchError(ctx, cctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return tool.Errorf(tool.KindCancelled, "the search was cancelled")
	case cctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err):
		return tool.Errorf(tool.KindTimeout, "search provider %s did not answer within %s", t.cfg.Provider, t.cfg.Timeout)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return tool.Errorf(tool.KindUnavailable, "search provider %s is unreachable: %v", t.cfg.Provider, err)
}

// webCleanResults drops hits without a URL, turns the HTML some providers put in titles
// and snippets into plain text, and keeps at most n.
func webCleanResults(in []webResult, n int) []webResult {
	out := make([]webResult, 0, min(len(in), n))
	for _, r := range in {
		if len(out) == n {
			break
		}
		if r.URL = strings.TrimSpace(r.URL); r.URL == "" {
			continue
		}
		out = append(out, webResult{Title: webPlainText(r.Title), URL: r.URL, Snippet: webPlainText(r.Snippet)})
	}
	return out
}

// webPlainText strips tags and entities from an HTML fragment and collapses whitespace.
func webPlainText(s string) string {
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			t, _ := sanitize([]byte(strings.Join(strings.Fields(b.String()), " ")))
			return t
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			// Emphasis marks query words, inside words as often as not: no space for it.
			if name, _ := z.TagName(); !webInlineTags[string(name)] {
				b.WriteByte(' ')
			}
		}
	}
}

var webInlineTags = map[string]bool{"b": true, "strong": true, "em": true, "i": true, "mark": true, "span": true}

func webSearchResult(out webSearchOutput) (*tool.Result, error) {
	var w strings.Builder
	if len(out.Results) == 0 {
		fmt.Fprintf(&w, "No results for %q.", out.Query)
	} else {
		fmt.Fprintf(&w, "%d result(s) for %q:\n", len(out.Results), out.Query)
	}
	for i, r := range out.Results {
		fmt.Fprintf(&w, "\n%d. %s\n   %s\n", i+1, cmp.Or(r.Title, "(no title)"), r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&w, "   %s\n", r.Snippet)
		}
	}
	structured, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &tool.Result{
		Content:    []tool.Content{{Type: tool.ContentText, Text: strings.TrimRight(w.String(), "\n")}},
		Structured: structured,
	}, nil
}

// searxngProvider is a SearXNG instance's JSON API: GET {base}/search?q=…&format=json.
type searxngProvider struct {
	base *url.URL
	key  string
}

func (p searxngProvider) request(ctx context.Context, query string, _ int) (*http.Request, error) {
	u := p.base.JoinPath("search")
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
	return req, nil
}

func (p searxngProvider) parse(body []byte) ([]webResult, error) {
	var v struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	out := make([]webResult, 0, len(v.Results))
	for _, r := range v.Results {
		out = append(out, webResult{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}

func (p searxngProvider) advice(status int) string {
	if status == http.StatusForbidden {
		return "SearXNG refuses JSON unless \"json\" is in search.formats of its settings.yml"
	}
	if status == http.StatusTooManyRequests {
		return "the instance is rate limiting; try again later"
	}
	return ""
}

// braveProvider is the Brave Search API: GET {base}/res/v1/web/search?q=…&count=n with the
// subscription token in X-Subscription-Token.
type braveProvider struct {
	base *url.URL
	key  string
}

func (p braveProvider) request(ctx context.Context, query string, n int) (*http.Request, error) {
	u := p.base.JoinPath("res/v1/web/search")
	u.RawQuery = url.Values{"q": {query}, "count": {strconv.Itoa(n)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Subscription-Token", p.key)
	return req, nil
}

func (p braveProvider) parse(body []byte) ([]webResult, error) {
	var v struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	out := make([]webResult, 0, len(v.Web.Results))
	for _, r := range v.Web.Results {
		out = append(out, webResult{Title: r.Title, URL: r.URL, Snippet: r.Description})
	}
	return out, nil
}

func (p braveProvider) advice(status int) string {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "the API key was refused"
	case http.StatusTooManyRequests:
		return "the plan's rate limit or quota is used up; try again later"
	}
	return ""
}

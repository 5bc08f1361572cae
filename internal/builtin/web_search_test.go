package builtin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolserverd/toolserverd/internal/tool"
)

type searchOut struct {
	Query    string      `json:"query"`
	Provider string      `json:"provider"`
	Results  []webResult `json:"results"`
}

func newWebSearch(t *testing.T, cfg SearchConfig) tool.Tool {
	t.Helper()
	tl, err := WebSearch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tl == nil {
		t.Fatal("no tool")
	}
	// The provider's connections are kept between calls; close them with the test.
	t.Cleanup(tl.(*webSearch).client.CloseIdleConnections)
	return tl
}

const searxngAnswer = `{
  "query": "go ssrf",
  "number_of_results": 3,
  "results": [
    {"url": "https://one.example/a", "title": "First &amp; best", "content": "About <b>go</b>   ssrf\n guards", "engine": "ddg", "score": 3},
    {"url": "", "title": "No URL", "content": "dropped"},
    {"url": "https://two.example/", "title": "Second", "content": ""},
    {"url": "https://three.example/", "title": "Third", "content": "three"}
  ],
  "answers": [], "infoboxes": [], "unresponsive_engines": []
}`

func TestWebSearchSearXNG(t *testing.T) {
	t.Parallel()
	var got http.Header
	var gotQuery string
	srv := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/searx/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "wrong request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		got, gotQuery = r.Header.Clone(), r.URL.Query().Get("q")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, searxngAnswer)
	}))
	tl := newWebSearch(t, SearchConfig{Provider: "searxng", BaseURL: srv.URL + "/searx/", APIKey: "s3cret"})
	res := runWeb(t, context.Background(), tl, map[string]any{"query": "  go   ssrf\n", "max_results": 2})
	wantKind(t, res, "", `2 result(s) for "go ssrf":`, "1. First & best\n   https://one.example/a\n   About go ssrf guards",
		"2. Second\n   https://two.example/")
	if gotQuery != "go ssrf" || got.Get("Authorization") != "Bearer s3cret" || got.Get("Accept") != "application/json" {
		t.Errorf("request: q=%q headers %v", gotQuery, got)
	}
	out := decode[searchOut](t, res)
	want := []webResult{
		{Title: "First & best", URL: "https://one.example/a", Snippet: "About go ssrf guards"},
		{Title: "Second", URL: "https://two.example/"},
	}
	if out.Query != "go ssrf" || out.Provider != "searxng" || !equalResults(out.Results, want) {
		t.Errorf("structured %+v", out)
	}
	// The default count, then the schema's maximum.
	res = runWeb(t, context.Background(), tl, map[string]any{"query": "x"})
	if out := decode[searchOut](t, res); len(out.Results) != 3 || out.Results[2].Snippet != "three" {
		t.Errorf("default: %+v", out)
	}
	wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"query": "x", "max_results": 11}), tool.KindInvalidArgs)
	wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"query": "  "}), tool.KindInvalidArgs)
}

func equalResults(a, b []webResult) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestWebSearchBrave(t *testing.T) {
	t.Parallel()
	srv := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/res/v1/web/search" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("X-Subscription-Token") != "brave-key" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID"}}`)
			return
		}
		if q := r.URL.Query(); q.Get("q") != "brave query" || q.Get("count") != "3" {
			http.Error(w, "wrong query "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"search","query":{"original":"brave query"},"web":{"type":"search","results":[
			{"title":"Brave <strong>Query</strong> docs","url":"https://api.example/docs","description":"How to <strong>query</strong> the API&#39;s index.","age":"2 days"},
			{"title":"Second","url":"https://second.example/","description":"two"}]}}`)
	}))
	tl := newWebSearch(t, SearchConfig{Provider: "brave", BaseURL: srv.URL, APIKey: "brave-key", MaxResults: 3})
	res := runWeb(t, context.Background(), tl, map[string]any{"query": "brave query", "max_results": 3})
	wantKind(t, res, "", "1. Brave Query docs\n   https://api.example/docs\n   How to query the API's index.")
	out := decode[searchOut](t, res)
	if out.Provider != "brave" || len(out.Results) != 2 || out.Results[1] != (webResult{Title: "Second", URL: "https://second.example/", Snippet: "two"}) {
		t.Errorf("structured %+v", out)
	}
	bad := newWebSearch(t, SearchConfig{Provider: "brave", BaseURL: srv.URL, APIKey: "wrong"})
	wantKind(t, runWeb(t, context.Background(), bad, map[string]any{"query": "q"}), tool.KindUnavailable,
		"HTTP 401 Unauthorized; the API key was refused", "SUBSCRIPTION_TOKEN_INVALID")
}

func TestWebSearchProviderFailures(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mux := http.NewServeMux()
	mux.HandleFunc("/forbidden/search", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "Forbidden", http.StatusForbidden) })
	mux.HandleFunc("/limited/search", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	mux.HandleFunc("/garbage/search", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>not json</html>") })
	mux.HandleFunc("/empty/search", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"results":[]}`) })
	mux.HandleFunc("/slow/search", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := webServer(t, mux)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		base string
		kind tool.ErrorKind
		want string
	}{
		{srv.URL + "/forbidden", tool.KindUnavailable, `HTTP 403 Forbidden; SearXNG refuses JSON unless "json" is in search.formats`},
		{srv.URL + "/limited", tool.KindUnavailable, "HTTP 429 Too Many Requests; the instance is rate limiting"},
		{srv.URL + "/garbage", tool.KindUnavailable, "an answer that could not be read"},
		{srv.URL + "/empty", "", `No results for "q".`},
		{srv.URL + "/slow", tool.KindTimeout, "did not answer within 300ms"},
		{closed.URL, tool.KindUnavailable, "is unreachable"},
	}
	for _, tt := range tests {
		tl := newWebSearch(t, SearchConfig{Provider: "searxng", BaseURL: tt.base, Timeout: 300 * time.Millisecond})
		start := time.Now()
		res := runWeb(t, context.Background(), tl, map[string]any{"query": "q"})
		t.Run(tt.base, func(t *testing.T) {
			wantKind(t, res, tt.kind, tt.want)
			// The kind and text say what ended the search; the bound is a hang
			// guard (/slow answers only when the test ends).
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

func TestWebSearchSpec(t *testing.T) {
	t.Parallel()
	spec := newWebSearch(t, SearchConfig{Provider: "searxng", BaseURL: "http://127.0.0.1:1"}).Spec()
	if spec.Name != "web_search" || !spec.ReadOnly || !spec.ConcurrencySafe || spec.Risk != tool.RiskLow || spec.Documentation == "" {
		t.Fatalf("spec %+v", spec)
	}
	schema := compileSchema(t, spec.Parameters)
	for args, valid := range map[string]bool{
		`{"query":"go"}`:                  true,
		`{"query":"go","max_results":10}`: true,
		`{"query":""}`:                    false,
		`{"query":"go","max_results":0}`:  false,
		`{"query":"go","max_results":11}`: false,
		`{"q":"go"}`:                      false,
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err := schema.Validate(v); (err == nil) != valid {
			t.Errorf("%s: valid=%v, want %v (%v)", args, err == nil, valid, err)
		}
	}
}

func TestWebToolsConfig(t *testing.T) {
	t.Parallel()
	names := func(cfg WebConfig) []string {
		tools, err := WebTools(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range tools {
			out = append(out, tl.Spec().Name)
			if s, ok := tl.(*webSearch); ok {
				t.Cleanup(s.client.CloseIdleConnections)
			}
		}
		return out
	}
	if got := strings.Join(names(WebConfig{}), ","); got != "web_fetch" {
		t.Errorf("unconfigured search: %s", got)
	}
	if tl, err := WebSearch(SearchConfig{}); tl != nil || err != nil {
		t.Errorf("WebSearch without a provider = %v, %v", tl, err)
	}
	if got := strings.Join(names(WebConfig{Search: SearchConfig{Provider: "brave", APIKey: "k"}}), ","); got != "web_fetch,web_search" {
		t.Errorf("configured search: %s", got)
	}
	d := FetchConfig{}.withDefaults()
	if d.DefaultBytes != 2<<20 || d.MaxBytes != 10<<20 || d.Timeout != 20*time.Second || d.MaxTimeout != 2*time.Minute ||
		d.MaxRedirects != 5 || d.UserAgent == "" {
		t.Errorf("fetch defaults %+v", d)
	}
	if s := (SearchConfig{Provider: "brave"}).withDefaults(); s.BaseURL != "https://api.search.brave.com" || s.MaxResults != 10 || s.Timeout != 15*time.Second {
		t.Errorf("search defaults %+v", s)
	}
	for name, cfg := range map[string]WebConfig{
		"negative bytes":     {Fetch: FetchConfig{MaxBytes: -1}},
		"default over max":   {Fetch: FetchConfig{MaxBytes: 10, DefaultBytes: 11}},
		"timeout over max":   {Fetch: FetchConfig{Timeout: time.Minute, MaxTimeout: time.Second}},
		"too many redirects": {Fetch: FetchConfig{MaxRedirects: 21}},
		"bad CIDR":           {Fetch: FetchConfig{AllowCIDRs: []string{"10.0.0.0/99"}}},
		"bad proxy":          {Fetch: FetchConfig{Proxy: "socks9://x"}},
		"unknown provider":   {Search: SearchConfig{Provider: "google"}},
		"searxng no base":    {Search: SearchConfig{Provider: "searxng"}},
		"brave no key":       {Search: SearchConfig{Provider: "brave"}},
		"bad base URL":       {Search: SearchConfig{Provider: "searxng", BaseURL: "searx.local"}},
		"too many results":   {Search: SearchConfig{Provider: "brave", APIKey: "k", MaxResults: 21}},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
		if _, err := WebTools(cfg); err == nil {
			t.Errorf("%s: WebTools accepted it", name)
		}
	}
}

// TestWebSearchKeyStaysWithTheProvider: a provider that redirects to another host does
// not get the API key sent there (Go forwards custom headers such as Brave's
// X-Subscription-Token on redirects); the call fails saying where it was sent.
func TestWebSearchKeyStaysWithTheProvider(t *testing.T) {
	t.Parallel()
	leaked := make(chan string, 4)
	other := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked <- r.Header.Get("X-Subscription-Token") + r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"search","web":{"results":[]},"results":[]}`)
	}))
	for _, provider := range []string{"brave", "searxng"} {
		srv := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
		}))
		tl := newWebSearch(t, SearchConfig{Provider: provider, BaseURL: srv.URL, APIKey: "secret-key"})
		res := runWeb(t, context.Background(), tl, map[string]any{"query": "q"})
		select {
		case got := <-leaked:
			t.Errorf("%s: the other host received the request (credentials %q)", provider, got)
		default:
		}
		wantKind(t, res, tool.KindUnavailable, "redirected to another host")
	}
}

package builtin

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// The network guard as web_fetch applies it, against real servers on the loopback
// network. Public addresses are only ever judged (see internal/netguard), never
// connected to: a broken guard here would reach a local port and nothing else.

// hitCounter is a handler that counts requests by Host and answers "secret".
type hitCounter struct {
	mu   sync.Mutex
	hits map[string]int
}

func (h *hitCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.hits == nil {
		h.hits = map[string]int{}
	}
	h.hits[r.Host]++
	h.mu.Unlock()
	_, _ = io.WriteString(w, "secret")
}

func (h *hitCounter) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.hits {
		n += c
	}
	return n
}

func (h *hitCounter) count(host string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[host]
}

// serverOn starts a server listening on addr ("127.0.0.2:0", "[::1]:0"), or skips
// the test when the machine has no such address.
func serverOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := httptest.NewUnstartedServer(h)
	_ = s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func portOf(t *testing.T, s *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// webResolver answers lookups from a table, like a DNS server under test control.
type webResolver map[string][]string

func (r webResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range r[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

func TestWebFetchDenied(t *testing.T) {
	t.Parallel()
	secret := &hitCounter{}
	srv := webServer(t, secret)
	port := portOf(t, srv)
	tl := newWebFetch(t, FetchConfig{}) // the default: no internal address is allowed
	tests := []struct{ url, want string }{
		{srv.URL + "/", "127.0.0.1 is a loopback address; not allowed"},
		{"http://localhost:" + port + "/", "localhost resolves to 127.0.0.1, a loopback address; not allowed"},
		{"http://LocalHost.:" + port + "/", "resolves to 127.0.0.1, a loopback address"},
		{"http://127.0.0.1.:" + port + "/", "127.0.0.1 is a loopback address"},
		{"http://ＬＯＣＡＬＨＯＳＴ:" + port + "/", "localhost resolves to 127.0.0.1"},
		{"http://[::ffff:127.0.0.1]:" + port + "/", "resolves to 127.0.0.1, a loopback address"},
		{"http://[::ffff:7f00:1]:" + port + "/", "a loopback address"},
		{"http://127.0.0.2:" + port + "/", "127.0.0.2 is a loopback address"},
		{"http://0.0.0.0:" + port + "/", "the unspecified address"},
		// Go's URL parser takes these as host names and its resolver would look them up
		// in DNS; the C library's would turn them into 127.0.0.1. They are refused
		// before either can.
		{"http://2130706433:" + port + "/", `"2130706433" is an unusual spelling of 127.0.0.1, a loopback address`},
		{"http://0x7f000001:" + port + "/", "unusual spelling of 127.0.0.1"},
		{"http://0177.0.0.1:" + port + "/", "unusual spelling of 127.0.0.1"},
		{"http://127.1:" + port + "/", "unusual spelling of 127.0.0.1"},
		// The transport maps this to 127.0.0.1 through IDNA before dialing.
		{"http://①②⑦.0.0.1:" + port + "/", "resolves to 127.0.0.1, a loopback address"},
		{"http://metadata.google.internal/computeMetadata/v1/", `"metadata.google.internal" is a cloud metadata service`},
		{"file:///etc/passwd", `scheme "file" is not allowed; only http and https`},
		{"gopher://127.0.0.1:" + port + "/_GET%20/", `scheme "gopher" is not allowed`},
		{"ftp://127.0.0.1:" + port + "/", `scheme "ftp" is not allowed`},
		{"data:text/plain,secret", `scheme "data" is not allowed`},
		{"localhost:" + port, `scheme "localhost" is not allowed`},
		{"//127.0.0.1/", "has no scheme"},
	}
	for _, tt := range tests {
		res := runWeb(t, context.Background(), tl, map[string]any{"url": tt.url})
		t.Run(tt.url, func(t *testing.T) { wantKind(t, res, tool.KindDenied, tt.want) })
	}
	v6 := serverOn(t, "[::1]:0", secret)
	res := runWeb(t, context.Background(), tl, map[string]any{"url": v6.URL + "/"})
	wantKind(t, res, tool.KindDenied, "::1 is a loopback address; not allowed")
	if n := secret.total(); n != 0 {
		t.Fatalf("the servers were reached %d time(s)", n)
	}
	// The same servers are reachable once allowed, so the refusals above were the
	// guard's doing.
	open := newWebFetch(t, FetchConfig{AllowCIDRs: []string{"127.0.0.1", "::1"}})
	for _, u := range []string{srv.URL, "http://localhost:" + port, v6.URL} {
		wantKind(t, runWeb(t, context.Background(), open, map[string]any{"url": u}), "", "secret")
	}
}

// A server the operator allowed redirects to internal addresses: every hop is
// checked, and the targets are never reached.
func TestWebFetchRedirectDenied(t *testing.T) {
	t.Parallel()
	inner := &hitCounter{}
	other := serverOn(t, "127.0.0.2:0", inner)
	v6 := serverOn(t, "[::1]:0", inner)
	var target sync.Map // path → redirect target
	srv := webServer(t, inner)
	front := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to, ok := target.Load(r.URL.Path); ok {
			http.Redirect(w, r, to.(string), http.StatusFound)
			return
		}
		http.NotFound(w, r)
	}))
	port := portOf(t, srv)
	target.Store("/to-other", other.URL+"/")
	target.Store("/to-v6", v6.URL+"/")
	target.Store("/to-mapped", "http://[::ffff:127.0.0.2]:"+portOf(t, other)+"/")
	target.Store("/to-name", "http://internal.test:"+port+"/")
	target.Store("/to-metadata", "http://169.254.169.254/latest/meta-data/")
	target.Store("/to-file", "file:///etc/passwd")
	target.Store("/to-docs", "http://docs.test:"+port+"/")
	tl := newWebFetch(t, FetchConfig{
		AllowHosts: []string{"docs.test", "front.test"},
		resolver: webResolver{
			"front.test":    {"127.0.0.1"},
			"docs.test":     {"127.0.0.1"},
			"internal.test": {"127.0.0.1"}, // the same address, but not an allowed name
		},
	})
	base := "http://front.test:" + portOf(t, front)
	tests := []struct{ path, want string }{
		{"/to-other", "127.0.0.2 is a loopback address; not allowed"},
		{"/to-v6", "::1 is a loopback address; not allowed"},
		{"/to-mapped", "resolves to 127.0.0.2, a loopback address"},
		{"/to-name", "internal.test resolves to 127.0.0.1, a loopback address; not allowed"},
		{"/to-metadata", "169.254.169.254 is the cloud metadata address; not allowed"},
		{"/to-file", `scheme "file" is not allowed`},
	}
	for _, tt := range tests {
		res := runWeb(t, context.Background(), tl, map[string]any{"url": base + tt.path})
		t.Run(tt.path, func(t *testing.T) { wantKind(t, res, tool.KindDenied, tt.want) })
	}
	if n := inner.total(); n != 0 {
		t.Fatalf("redirect targets were reached %d time(s): %v", n, inner.hits)
	}
	// An allowed name on the same address is fetched, through the same redirect.
	res := runWeb(t, context.Background(), tl, map[string]any{"url": base + "/to-docs"})
	wantKind(t, res, "", "secret", "Requested: "+base+"/to-docs (1 redirect(s))")
	if inner.count("docs.test:"+port) != 1 {
		t.Fatalf("hits %v", inner.hits)
	}
}

// A name with several addresses is refused when any one of them is refused.
func TestWebFetchMultipleRecords(t *testing.T) {
	t.Parallel()
	secret := &hitCounter{}
	srv := webServer(t, secret)
	tl := newWebFetch(t, FetchConfig{
		AllowCIDRs: []string{"127.0.0.1"},
		resolver:   webResolver{"mixed.test": {"127.0.0.1", "127.0.0.3"}, "v6mixed.test": {"127.0.0.1", "::1"}, "fine.test": {"127.0.0.1"}},
	})
	port := portOf(t, srv)
	wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"url": "http://mixed.test:" + port}), tool.KindDenied,
		"mixed.test resolves to 127.0.0.3, a loopback address")
	wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"url": "http://v6mixed.test:" + port}), tool.KindDenied,
		"v6mixed.test resolves to ::1")
	if secret.total() != 0 {
		t.Fatal("the server was reached")
	}
	wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"url": "http://fine.test:" + port}), "", "secret")
}

// The environment's proxy settings never apply to web_fetch; a configured proxy is
// used, and the guard still judges each request's host before the proxy sees it.
func TestWebFetchProxy(t *testing.T) {
	t.Parallel()
	direct := newWebFetch(t, FetchConfig{}).(*webFetch)
	if direct.rt.Proxied() {
		t.Fatal("web_fetch uses a proxy nobody configured")
	}
	var mu sync.Mutex
	var seen []string
	proxy := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "proxied "+r.URL.String())
	}))
	tl := newWebFetch(t, FetchConfig{
		Proxy:      proxy.URL, // itself on 127.0.0.1, which is not allowed for targets
		AllowCIDRs: []string{"127.0.0.7"},
		resolver:   webResolver{"site.test": {"127.0.0.7"}, "blocked.test": {"127.0.0.8"}, "localhost": {"127.0.0.1"}},
	})
	wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"url": "http://site.test/x"}), "", "proxied http://site.test/x")
	for _, u := range []string{"http://blocked.test/", "http://127.0.0.1/", "http://localhost/"} {
		wantKind(t, runWeb(t, context.Background(), tl, map[string]any{"url": u}), tool.KindDenied, "loopback")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, " ") != "http://site.test/x" {
		t.Fatalf("the proxy got %v", seen)
	}
}

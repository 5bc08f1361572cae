package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from a table; names not in it are not found. Every address
// in these tests is on the loopback network: nothing leaves the machine even if the
// guard were broken.
type fakeResolver map[string][]string

func (r fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range r[host] {
		ip := netip.MustParseAddr(s)
		if network == "ip4" && !ip.Unmap().Is4() || network == "ip6" && ip.Is4() {
			continue
		}
		out = append(out, ip)
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// countingListener is a TCP listener on addr that counts the connections it accepts.
type countingListener struct {
	ln    net.Listener
	mu    sync.Mutex
	count int
	done  chan struct{}
}

func listen(t *testing.T, network, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	l := &countingListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.count++
			l.mu.Unlock()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-l.done })
	return l
}

func (l *countingListener) port() string {
	_, p, _ := net.SplitHostPort(l.ln.Addr().String())
	return p
}

func (l *countingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func TestDialContext(t *testing.T) {
	t.Parallel()
	v4 := listen(t, "tcp4", "127.0.0.1:0")
	resolver := fakeResolver{
		"multi.test":  {"127.0.0.1", "127.0.0.3"}, // one allowed, one not: refused whole
		"v6.test":     {"::1"},
		"mapped.test": {"::ffff:127.0.0.1"},
		"ok.test":     {"127.0.0.1"},
	}
	open := mustGuard(t, Config{AllowCIDRs: []string{"127.0.0.1"}, Resolver: resolver})
	closed := mustGuard(t, Config{Resolver: resolver})
	byName := mustGuard(t, Config{}) // the system resolver: localhost is in /etc/hosts
	tests := []struct {
		name string
		g    *Guard
		host string
		want string // substring of the error; "" to connect
	}{
		{"literal refused", closed, "127.0.0.1", "127.0.0.1 is a loopback address; not allowed"},
		{"literal allowed", open, "127.0.0.1", ""},
		{"name allowed by address", open, "ok.test", ""},
		{"name refused", closed, "ok.test", "ok.test resolves to 127.0.0.1, a loopback address"},
		{"one bad record refuses all", open, "multi.test", "multi.test resolves to 127.0.0.3"},
		{"AAAA loopback", open, "v6.test", "v6.test resolves to ::1, a loopback address"},
		{"mapped record", closed, "mapped.test", "resolves to 127.0.0.1"},
		{"system resolver", byName, "localhost", "localhost resolves to"},
		{"unusual spelling", open, "2130706433", "unusual spelling of the address 127.0.0.1"},
		{"unusual spelling refused", closed, "0x7f000001", "unusual spelling of 127.0.0.1, a loopback address"},
		{"unknown name", open, "nowhere.test", "no such host"},
	}
	for _, tt := range tests {
		before := v4.accepted()
		conn, err := tt.g.DialContext(context.Background(), "tcp", net.JoinHostPort(tt.host, v4.port()))
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
				continue
			}
			_ = conn.Close()
			// Wait for the listener to count it, so it is not blamed on the next case.
			for deadline := time.Now().Add(5 * time.Second); v4.accepted() == before && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		if err == nil {
			_ = conn.Close()
			t.Errorf("%s: connected", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
		if strings.Contains(tt.want, "not allowed") && !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v is not ErrDenied", tt.name, err)
		}
		// Give a connection that slipped through time to be accepted.
		time.Sleep(20 * time.Millisecond)
		if n := v4.accepted(); n != before {
			t.Errorf("%s: the listener accepted %d connection(s)", tt.name, n-before)
		}
	}
}

func TestDialIPv6Loopback(t *testing.T) {
	t.Parallel()
	v6 := listen(t, "tcp6", "[::1]:0")
	g := mustGuard(t, Config{})
	for _, host := range []string{"::1", "::ffff:127.0.0.1"} {
		_, err := g.DialContext(context.Background(), "tcp", net.JoinHostPort(host, v6.port()))
		if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("dial %s: %v", host, err)
		}
	}
	allowed := mustGuard(t, Config{AllowCIDRs: []string{"::1/128"}})
	conn, err := allowed.DialContext(context.Background(), "tcp", net.JoinHostPort("::1", v6.port()))
	if err != nil {
		t.Fatalf("allowlisted ::1: %v", err)
	}
	_ = conn.Close()
}

// The Control hook alone guards any dialer: it runs with the address being connected
// to, after resolution, before connect(2).
func TestControl(t *testing.T) {
	t.Parallel()
	g := mustGuard(t, Config{})
	ctl := g.Control("some.name")
	for addr, allowed := range map[string]bool{
		"127.0.0.1:80":          false,
		"[::1]:443":             false,
		"[::ffff:127.0.0.1]:80": false,
		"169.254.169.254:80":    false,
		"[fe80::1%eth0]:80":     false,
		"93.184.216.34:443":     true,
		"[2606:4700::1]:443":    true,
		"not-an-address:80":     false,
	} {
		if err := ctl("tcp", addr, nil); (err == nil) != allowed {
			t.Errorf("Control(%s) = %v, want allowed %v", addr, err, allowed)
		}
	}
	v4 := listen(t, "tcp4", "127.0.0.1:0")
	d := net.Dialer{Control: g.Control("")}
	_, err := d.DialContext(context.Background(), "tcp", "127.0.0.1:"+v4.port())
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("plain dialer with the guard's Control: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if v4.accepted() != 0 {
		t.Fatal("the connection was made")
	}
}

func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, tr *Transport, u string) (string, error) {
	t.Helper()
	c := &http.Client{Transport: tr}
	defer c.CloseIdleConnections()
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// The environment's proxy variables must not carry requests past the guard: the
// direct transport ignores them. Not parallel: it sets the environment.
func TestTransportIgnoresEnvironmentProxy(t *testing.T) {
	var proxied sync.Map
	proxy := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String(), true)
		_, _ = io.WriteString(w, "from the proxy")
	})
	origin := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from the origin") })
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	g := mustGuard(t, Config{AllowCIDRs: []string{"127.0.0.1"}, Resolver: fakeResolver{
		"ok.test": {"127.0.0.1"}, "bad.test": {"127.0.0.9"},
	}})
	tr := g.NewTransport(nil)
	if tr.Proxied() {
		t.Fatal("the direct transport has a proxy")
	}
	port := strings.TrimPrefix(origin.URL, "http://127.0.0.1:")
	body, err := get(t, tr, "http://ok.test:"+port+"/")
	if err != nil || body != "from the origin" {
		t.Fatalf("ok.test: %q, %v", body, err)
	}
	if _, err := get(t, tr, "http://bad.test:"+port+"/"); !errors.Is(err, ErrDenied) {
		t.Fatalf("bad.test: %v", err)
	}
	proxied.Range(func(k, _ any) bool { t.Errorf("the proxy got %v", k); return true })
}

// With a configured proxy, the guard checks the request's host before the proxy is
// asked; the proxy itself (trusted configuration) may be on a private address.
func TestTransportConfiguredProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	proxy := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.String())
		mu.Unlock()
		_, _ = io.WriteString(w, "via proxy")
	})
	pu, _ := url.Parse(proxy.URL)
	g := mustGuard(t, Config{AllowCIDRs: []string{"127.0.0.7"}, Resolver: fakeResolver{
		"ok.test": {"127.0.0.7"}, "bad.test": {"127.0.0.8"}, "mixed.test": {"127.0.0.7", "::1"},
	}})
	tr := g.NewTransport(pu)
	if !tr.Proxied() {
		t.Fatal("no proxy")
	}
	body, err := get(t, tr, "http://ok.test/page")
	if err != nil || body != "via proxy" {
		t.Fatalf("ok.test: %q, %v", body, err)
	}
	for _, u := range []string{"http://bad.test/", "http://mixed.test/", "http://127.0.0.1/", "http://[::1]:8080/", "gopher://ok.test/"} {
		if _, err := get(t, tr, u); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v", u, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[http://ok.test/page]" {
		t.Errorf("the proxy got %v", seen)
	}
}

func TestTransportRefusesLoopbackServer(t *testing.T) {
	t.Parallel()
	var hits sync.Map
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Store(r.URL.Path, true) })
	tr := mustGuard(t, Config{}).NewTransport(nil)
	_, err := get(t, tr, srv.URL+"/secret")
	var de *DeniedError
	if !errors.As(err, &de) || de.Reason != "a loopback address" {
		t.Fatalf("GET %s: %v", srv.URL, err)
	}
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	if _, err := get(t, tr, "http://localhost:"+port+"/by-name"); !errors.Is(err, ErrDenied) {
		t.Fatalf("GET localhost: %v", err)
	}
	hits.Range(func(k, _ any) bool { t.Errorf("the server was reached at %v", k); return true })
}

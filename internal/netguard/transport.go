package netguard

import (
	"net/http"
	"net/url"
	"time"
)

const (
	dialTimeout = 10 * time.Second
	keepAlive   = 30 * time.Second
)

// Transport is an http.RoundTripper whose requests go only where the guard allows.
type Transport struct {
	g     *Guard
	proxy *url.URL
	base  *http.Transport
}

// NewTransport returns a transport that checks every request's URL and every
// connection it opens. With proxy nil it connects directly and the proxy variables of
// the environment are ignored (they would otherwise carry requests past the guard).
// With a proxy (operator configuration, trusted) every connection goes to the proxy
// and the guard resolves each request's host beforehand, refusing it if any of its
// addresses is refused; the proxy resolves the name again on its own, so there the
// proxy's own rules are the last word.
func (g *Guard) NewTransport(proxy *url.URL) *Transport {
	base := &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 256 << 10,
	}
	if proxy != nil {
		base.Proxy = http.ProxyURL(proxy)
		d := g.dialer
		base.DialContext = d.DialContext
	}
	return &Transport{g: g, proxy: proxy, base: base}
}

// RoundTrip refuses a request the guard refuses, and sends the rest.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.g.CheckURL(req.URL); err != nil {
		closeBody(req)
		return nil, err
	}
	if t.proxy != nil {
		if _, err := t.g.Resolve(req.Context(), "tcp", req.URL.Hostname()); err != nil {
			closeBody(req)
			return nil, err
		}
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the connections kept for reuse; http.Client's method of
// the same name calls it.
func (t *Transport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// Proxied reports whether requests go through a configured proxy.
func (t *Transport) Proxied() bool { return t.base.Proxy != nil }

// closeBody honours the RoundTripper contract: the body is closed even on error.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

var _ http.RoundTripper = (*Transport)(nil)

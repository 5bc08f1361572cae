// Package netguard keeps outgoing HTTP requests made on behalf of a model away from
// the server's own network: loopback, private, link-local, metadata and other
// non-public addresses, and the machine's own public addresses, are refused unless an
// operator allowlists them.
//
// The decision is taken on the address actually connected to, after name resolution,
// for every connection a transport opens (each redirect hop, each address of a name
// with several A/AAAA records), so DNS tricks and redirects cannot route around it.
// URLs are also checked before a request is sent, so that refusals are early and
// clear (scheme, obfuscated addresses, metadata names).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"

	"golang.org/x/net/idna"
)

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config says what may be reached besides public addresses.
type Config struct {
	// AllowHosts are host names whose addresses are allowed whatever they are (an
	// internal docs server). "*.example.com" allows every name under example.com,
	// but for the cloud metadata service: a metadata host name, or a name that
	// resolves to a metadata or credentials address (any link-local one, ECS's
	// 169.254.170.2 among them; see credentialRanges), needs to be named exactly
	// here (or its address be in AllowCIDRs). An IP address here is the same as in AllowCIDRs.
	AllowHosts []string
	// AllowCIDRs are address ranges that are allowed ("10.1.2.0/24"); a bare address
	// stands for itself.
	AllowCIDRs []string
	// Resolver looks names up (default net.DefaultResolver).
	Resolver Resolver
	// Dialer opens connections (default: 10 s connect timeout, 30 s keep-alive). Its
	// Control function, if any, is replaced.
	Dialer *net.Dialer
}

// metadataNames are cloud instance-metadata host names, refused by name before any
// lookup (their addresses are refused too, but a name says more in the error).
var metadataNames = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// Guard decides which URLs and addresses may be connected to. It is safe for
// concurrent use.
type Guard struct {
	hosts    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	prefixes []netip.Prefix
	resolver Resolver
	dialer   net.Dialer
}

// New checks cfg and builds a Guard.
func New(cfg Config) (*Guard, error) {
	g := &Guard{hosts: map[string]bool{}, resolver: cfg.Resolver}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if cfg.Dialer != nil {
		g.dialer = *cfg.Dialer
	} else {
		g.dialer = net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	}
	for _, h := range cfg.AllowHosts {
		h = normalizeHost(h)
		if ip, err := netip.ParseAddr(h); err == nil {
			ip = ip.WithZone("").Unmap()
			g.prefixes = append(g.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		switch {
		case h == "" || strings.ContainsAny(h, "/:@ "):
			return nil, fmt.Errorf("allow host %q: not a host name", h)
		case strings.Contains(strings.TrimPrefix(h, "*."), "*"):
			return nil, fmt.Errorf("allow host %q: a * may only start the name, as \"*.\" (*.example.com allows every name under example.com)", h)
		case strings.HasPrefix(h, "*."):
			g.suffixes = append(g.suffixes, h[1:])
		default:
			g.hosts[h] = true
		}
	}
	for _, c := range cfg.AllowCIDRs {
		c = strings.TrimSpace(c)
		p, err := netip.ParsePrefix(c)
		if err != nil {
			ip, err2 := netip.ParseAddr(c)
			if err2 != nil {
				return nil, fmt.Errorf("allow CIDR %q: %v", c, err)
			}
			ip = ip.WithZone("").Unmap()
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		g.prefixes = append(g.prefixes, p.Masked())
	}
	return g, nil
}

// DeniedError is a refusal. Its message is meant for the model and the operator.
type DeniedError struct {
	// Host is the host name or address as requested; URL is set for scheme refusals.
	Host string
	URL  string
	// Addr is the refused address, if the refusal is about one.
	Addr   netip.Addr
	Reason string
}

func (e *DeniedError) Error() string {
	switch {
	case e.Addr.IsValid() && e.Host != "" && e.Host != e.Addr.String():
		return fmt.Sprintf("%s resolves to %s, %s; not allowed", e.Host, e.Addr, e.Reason)
	case e.Addr.IsValid():
		return fmt.Sprintf("%s is %s; not allowed", e.Addr, e.Reason)
	case e.Host != "":
		return fmt.Sprintf("host %q %s; not allowed", e.Host, e.Reason)
	default:
		return e.Reason
	}
}

// ErrDenied matches every *DeniedError with errors.Is.
var ErrDenied = errors.New("denied by the network guard")

func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// hostAllowed reports whether the (normalized) name is on the allowlist, exactly
// or by a wildcard.
func (g *Guard) hostAllowed(host string) bool {
	return g.hosts[host] || g.wildcardAllowed(host)
}

// wildcardAllowed reports whether a "*." entry allows the (normalized) name.
func (g *Guard) wildcardAllowed(host string) bool {
	for _, s := range g.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func (g *Guard) addrAllowed(ip netip.Addr) bool {
	for _, p := range g.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// CheckAddr is the decision on one address that host (a name, or "" for a literal)
// resolved to: nil when it may be connected to.
func (g *Guard) CheckAddr(host string, ip netip.Addr) error {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	host = normalizeHost(host)
	if g.addrAllowed(ip) || (host != "" && g.hosts[host]) {
		return nil
	}
	// A wildcard opens a zone of names, and the metadata service may be in it
	// (metadata.google.internal under "*.internal"): it is never reached that way.
	if host != "" && g.wildcardAllowed(host) && !isMetadataAddr(ip) {
		return nil
	}
	if what := Classify(ip); what != "" {
		return &DeniedError{Host: host, Addr: ip, Reason: what}
	}
	if isLocal(ip) {
		return &DeniedError{Host: host, Addr: ip, Reason: "an address of this machine"}
	}
	return nil
}

// CheckURL refuses URLs that must not be fetched whatever their host resolves to:
// schemes other than http and https, missing hosts, metadata host names, addresses
// in unusual spellings, and literal addresses that CheckAddr refuses. Names are
// checked again, on their addresses, when they are connected to.
func (g *Guard) CheckURL(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return &DeniedError{URL: u.String(), Reason: fmt.Sprintf("URL %q has no scheme; only http:// and https:// URLs can be fetched", u.String())}
	default:
		return &DeniedError{URL: u.String(), Reason: fmt.Sprintf("scheme %q is not allowed; only http and https URLs can be fetched", u.Scheme)}
	}
	if u.Hostname() == "" {
		return &DeniedError{URL: u.String(), Reason: fmt.Sprintf("URL %q has no host", u.String())}
	}
	return g.CheckHost(u.Hostname())
}

// CheckHost applies CheckURL's rules to a host name or address.
func (g *Guard) CheckHost(host string) error {
	raw := host
	host = normalizeHost(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.CheckAddr(host, ip)
	}
	// The transport puts names through IDNA before dialing ("①②⑦.0.0.1" becomes
	// "127.0.0.1"), so judge the name it will dial.
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return &DeniedError{Host: raw, Reason: "is not a valid host name"}
	}
	host = normalizeHost(ascii)
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.CheckAddr(raw, ip)
	}
	if g.hosts[host] {
		return nil
	}
	if metadataNames[host] {
		return &DeniedError{Host: raw, Reason: "is a cloud metadata service"}
	}
	if g.wildcardAllowed(host) {
		return nil
	}
	if numericLabel(host) {
		if ip, ok := nonCanonicalIPv4(host); ok {
			if what := Classify(ip); what != "" && !g.addrAllowed(ip) {
				return &DeniedError{Host: raw, Reason: fmt.Sprintf("is an unusual spelling of %s, %s", ip, what)}
			}
			return &DeniedError{Host: raw, Reason: fmt.Sprintf("is an unusual spelling of the address %s; write it as %s", ip, ip)}
		}
		return &DeniedError{Host: raw, Reason: "is not a valid host name (its last label is a number)"}
	}
	return nil
}

// Resolve looks host up and checks every address it has: one refused address refuses
// the host (a name that mixes public and internal addresses is a rebinding trick).
func (g *Guard) Resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := g.CheckHost(host); err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	// The name is looked up as it was judged: lower case, without a final dot, IDNA.
	host = normalizeHost(host)
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = normalizeHost(ascii)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	ipnet := "ip"
	switch network {
	case "tcp4", "udp4":
		ipnet = "ip4"
	case "tcp6", "udp6":
		ipnet = "ip6"
	}
	addrs, err := g.resolver.LookupNetIP(ctx, ipnet, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	for i, ip := range addrs {
		addrs[i] = ip.Unmap()
		if err := g.CheckAddr(host, addrs[i]); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// DialContext resolves addr's host through the guard, then connects to its addresses
// one after the other until one answers. The dialer's Control checks each address
// again as the socket connects: nothing reaches connect(2) without a decision.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := g.Resolve(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d := g.dialer
	d.Control = g.Control(host)
	d.ControlContext = nil
	var first error
	for _, ip := range ips {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if errors.Is(err, ErrDenied) || ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// Control returns a net.Dialer Control function that refuses to connect to an
// address CheckAddr refuses for host. It can guard any dialer on its own.
func (g *Guard) Control(host string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &DeniedError{Host: host, Reason: fmt.Sprintf("connects to %q, which is not an IP address", address)}
		}
		return g.CheckAddr(host, ap.Addr())
	}
}

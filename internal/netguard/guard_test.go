package netguard

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/idna"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ip   string
		want string // a substring of the reason; "" for an allowed public address
	}{
		// Public addresses, judged here only: nothing in these tests connects to them.
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"172.32.0.1", ""},     // just past 172.16/12
		{"172.15.255.255", ""}, // just before it
		{"100.128.0.1", ""},    // just past 100.64/10
		{"192.169.0.1", ""},
		{"11.0.0.1", ""},
		{"2606:4700::1", ""},
		{"2001:4860:4860::8888", ""},
		{"64:ff9b::808:808", ""},     // NAT64 form of 8.8.8.8
		{"2002:808:808::1", ""},      // 6to4 form of 8.8.8.8
		{"::ffff:93.184.216.34", ""}, // IPv4-mapped public
		// Loopback.
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"127.0.0.2", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:7f00:2", "loopback"},
		// Private.
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:192.168.0.1", "private"},
		{"fc00::1", "unique local"},
		{"fd00:ec2::254", "the cloud metadata address"}, // AWS over IPv6
		// Link-local and metadata.
		{"169.254.169.254", "metadata"},
		{"::ffff:169.254.169.254", "metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		// Unspecified, this-network, broadcast, multicast, reserved.
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"::", "unspecified"},
		{"255.255.255.255", "broadcast"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"240.0.0.1", "reserved"},
		// CGNAT (Alibaba's metadata lives at 100.100.100.200).
		{"100.64.0.1", "CGNAT"},
		{"100.100.100.200", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		// Special purpose.
		{"192.0.0.192", "IETF"}, // Oracle metadata
		{"192.0.2.1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"2001:db8::1", "documentation"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::ffff:0:7f00:1", "IPv4-translated"},
		{"64:ff9b::7f00:1", "NAT64 form of a loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64 form of the cloud metadata"},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"2002:7f00:1::1", "6to4 form of a loopback"},
		{"2002:c0a8:101::1", "6to4 form of a private"},
		{"2001::1", "Teredo"},
		{"fec0::1", "site-local"},
		{"100::1", "discard"},
	}
	for _, tt := range tests {
		got := Classify(netip.MustParseAddr(tt.ip))
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("Classify(%s) = %q, want %q", tt.ip, got, tt.want)
		}
	}
	if got := Classify(netip.Addr{}); got == "" {
		t.Error("the zero Addr is allowed")
	}
}

func mustGuard(t *testing.T, cfg Config) *Guard {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCheckAddrAllowlist(t *testing.T) {
	t.Parallel()
	g := mustGuard(t, Config{
		AllowHosts: []string{"Docs.Internal.", "*.corp.example", "192.168.9.9"},
		AllowCIDRs: []string{"127.0.0.1", "10.1.0.0/16", "::ffff:172.16.5.0/120", "fd00::/8"},
	})
	tests := []struct {
		host, ip string
		allowed  bool
	}{
		{"", "127.0.0.1", true},
		{"", "::ffff:127.0.0.1", true},
		{"", "127.0.0.2", false},
		{"", "10.1.200.3", true},
		{"", "10.2.0.1", false},
		{"", "172.16.5.77", true},
		{"", "172.16.6.1", false},
		{"", "fd12::1", true},
		{"", "fc00::1", false},
		{"", "192.168.9.9", true}, // an address in AllowHosts
		{"docs.internal", "10.9.9.9", true},
		{"DOCS.internal.", "169.254.169.254", true}, // the operator's word wins
		{"api.corp.example", "192.168.0.5", true},
		{"corp.example", "192.168.0.5", false}, // "*." needs a subdomain
		{"evilcorp.example", "192.168.0.5", false},
		{"other.example", "192.168.0.5", false},
		{"other.example", "93.184.216.34", true},
	}
	for _, tt := range tests {
		err := g.CheckAddr(tt.host, netip.MustParseAddr(tt.ip))
		if (err == nil) != tt.allowed {
			t.Errorf("CheckAddr(%q, %s) = %v, want allowed %v", tt.host, tt.ip, err, tt.allowed)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("CheckAddr(%q, %s): %v is not ErrDenied", tt.host, tt.ip, err)
		}
	}
	err := g.CheckAddr("intranet.example", netip.MustParseAddr("127.0.0.5"))
	if err == nil || err.Error() != "intranet.example resolves to 127.0.0.5, a loopback address; not allowed" {
		t.Errorf("message: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{AllowCIDRs: []string{"10.0.0.0/33"}},
		{AllowCIDRs: []string{"not-a-cidr"}},
		{AllowHosts: []string{"http://x.example/"}},
		{AllowHosts: []string{""}},
		// A "*" anywhere but a leading "*." would match no name at all.
		{AllowHosts: []string{"*"}},
		{AllowHosts: []string{"*example.com"}},
		{AllowHosts: []string{"docs.*.example"}},
		{AllowHosts: []string{"*.*.example"}},
		{AllowHosts: []string{"*."}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	g := mustGuard(t, Config{AllowHosts: []string{"docs.internal"}, AllowCIDRs: []string{"10.7.0.0/16"}})
	tests := []struct {
		url  string
		want string // substring of the refusal; "" when allowed
	}{
		{"https://example.com/a?b=c", ""},
		{"http://example.com:8080/", ""},
		{"HTTP://Example.COM/", ""},
		{"http://93.184.216.34/", ""},
		{"http://[2606:4700::1]/", ""},
		{"http://docs.internal/", ""},
		{"http://10.7.1.1/", ""},
		{"http://metadata.google.internal./computeMetadata/v1/", "metadata"},
		{"http://METADATA.google.internal/", "metadata"},
		{"http://metadata/", "metadata"},
		{"http://127.0.0.1/", "127.0.0.1 is a loopback address; not allowed"},
		{"http://127.0.0.1:8080/admin", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 resolves to 127.0.0.1, a loopback"},
		{"http://[::ffff:7f00:1]/", "loopback"},
		{"http://[fe80::1%25eth0]/", "link-local"},
		{"http://169.254.169.254/latest/meta-data/", "metadata"},
		{"http://0.0.0.0:8080/", "unspecified"},
		{"http://10.0.0.1/", "private"},
		{"http://2130706433/", "unusual spelling of 127.0.0.1, a loopback"},
		{"http://0x7f000001/", "unusual spelling of 127.0.0.1"},
		{"http://0177.0.0.1/", "unusual spelling of 127.0.0.1"},
		{"http://127.1/", "unusual spelling of 127.0.0.1"},
		{"http://0x7f.0.0.1/", "unusual spelling of 127.0.0.1"},
		{"http://0xa9.0xfe.0xa9.0xfe/", "unusual spelling of 169.254.169.254"},
		{"http://1572395042/", "write it as 93.184.216.34"},
		{"http://1.2.3.4.5/", "not a valid host name"},
		{"http://99999999999/", "not a valid host name"},
		{"http://example.123/", "not a valid host name"},
		{"http://①②⑦.0.0.1/", "loopback"}, // IDNA maps it to 127.0.0.1, as the transport does
		{"http://ｌｏｃａｌｈｏｓｔ/", ""},         // a name: refused when it resolves (see the dial tests)
		{"file:///etc/passwd", `scheme "file" is not allowed`},
		{"gopher://127.0.0.1:25/_HELO", `scheme "gopher" is not allowed`},
		{"ftp://example.com/x", `scheme "ftp" is not allowed`},
		{"data:text/plain,hello", `scheme "data" is not allowed`},
		{"javascript:alert(1)", `scheme "javascript"`},
		{"dict://127.0.0.1:11211/", `scheme "dict"`},
		{"//example.com/", "no scheme"},
		{"example.com/path", "no scheme"},
		{"http:///path", "has no host"},
		{"http:example.com", "has no host"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatalf("%s: %v", tt.url, err)
		}
		err = g.CheckURL(u)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckURL(%s) = %v, want allowed", tt.url, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckURL(%s) = %v, want %q", tt.url, err, tt.want)
		case err != nil && !errors.Is(err, ErrDenied):
			t.Errorf("CheckURL(%s): %T is not ErrDenied", tt.url, err)
		}
	}
}

func TestNonCanonicalIPv4(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want string // "" when it is not an address at all
	}{
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"10.65535", "10.0.255.255"},
		{"0", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"256.1.1.1", ""},
		{"1.2.3.4.5", ""},
		{"08.1.1.1", ""},
		{"0x", ""},
		{"+1.2.3.4", ""},
		{"example.com", ""},
	}
	for _, tt := range tests {
		ip, ok := nonCanonicalIPv4(tt.host)
		if got := map[bool]string{true: ip.String(), false: ""}[ok]; got != tt.want {
			t.Errorf("nonCanonicalIPv4(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

// FuzzGuardURL checks the invariants of CheckURL on arbitrary input: it never panics,
// and whatever it accepts is an http(s) URL with a host that is neither a refused
// literal address nor an unusual spelling of one.
func FuzzGuardURL(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "http://127.0.0.1/", "http://[::ffff:127.0.0.1]:80/", "http://2130706433/",
		"http://0x7f000001/", "http://127.1/", "file:///etc/passwd", "http://[fe80::1%25lo]/",
		"http://metadata.google.internal/", "https://①②⑦.0.0.1/", "http://1.2.3.4.5/", "gopher://x/",
		"http://a.b.c.0x10/", "http://[64:ff9b::7f00:1]/", "HTTP://LOCALHOST./",
	} {
		f.Add(s)
	}
	g, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if g.CheckURL(u) != nil {
			return
		}
		if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
			t.Fatalf("accepted scheme %q in %q", u.Scheme, raw)
		}
		host := u.Hostname()
		if host == "" {
			t.Fatalf("accepted %q without a host", raw)
		}
		names := []string{normalizeHost(host)}
		// The transport dials the IDNA form of a name: judge that too.
		if ascii, err := idna.Lookup.ToASCII(names[0]); err == nil {
			names = append(names, normalizeHost(ascii))
		}
		for _, name := range names {
			if ip, err := netip.ParseAddr(name); err == nil {
				if Classify(ip) != "" {
					t.Fatalf("accepted %q: %s is %s", raw, ip, Classify(ip))
				}
			} else if ip, ok := nonCanonicalIPv4(name); ok {
				t.Fatalf("accepted %q, an unusual spelling of %s", raw, ip)
			}
			if metadataNames[name] {
				t.Fatalf("accepted the metadata name in %q", raw)
			}
		}
	})
}

func TestDeniedErrorMatches(t *testing.T) {
	t.Parallel()
	g := mustGuard(t, Config{})
	_, err := g.Resolve(context.Background(), "tcp", "127.0.0.1")
	var de *DeniedError
	if !errors.As(err, &de) || de.Addr != netip.MustParseAddr("127.0.0.1") || de.Reason != "a loopback address" {
		t.Fatalf("Resolve(127.0.0.1) = %#v", err)
	}
}

// TestWildcardNeverReachesMetadata: a "*." entry opens a zone of internal names
// ("*.internal" for a GCP project's hosts), and GCP's metadata server is one of
// them: metadata.google.internal. A wildcard does not reach the cloud metadata
// service, by name or by address (169.254.169.254, fd00:ec2::254, their NAT64 and
// mapped forms), which would hand the model the machine's cloud credentials; an
// exact name or an address range that covers it still does.
func TestWildcardNeverReachesMetadata(t *testing.T) {
	t.Parallel()
	resolver := fakeResolver{
		"md.corp.internal":   {"169.254.169.254"},
		"md6.corp.internal":  {"fd00:ec2::254"},
		"nat.corp.internal":  {"64:ff9b::a9fe:a9fe"},
		"s24.corp.internal":  {"2002:a9fe:a9fe::1"},
		"cmp.corp.internal":  {"::a9fe:a9fe"},
		"map.corp.internal":  {"::ffff:169.254.169.254"},
		"docs.corp.internal": {"10.0.0.5"},
		"md.exact.test":      {"169.254.169.254"},
	}
	wild := mustGuard(t, Config{AllowHosts: []string{"*.internal", "md.exact.test"}, Resolver: resolver})
	cidr := mustGuard(t, Config{AllowHosts: []string{"*.internal"}, AllowCIDRs: []string{"169.254.169.254/32"}, Resolver: resolver})
	exact := mustGuard(t, Config{AllowHosts: []string{"metadata.google.internal"}, Resolver: resolver})
	tests := []struct {
		g    *Guard
		host string
		want string // substring of the refusal; "" when allowed
	}{
		{wild, "metadata.google.internal", "metadata"},
		{wild, "METADATA.Google.Internal.", "metadata"},
		{wild, "md.corp.internal", "169.254.169.254, the cloud metadata address"},
		{wild, "md6.corp.internal", "fd00:ec2::254, the cloud metadata address"},
		{wild, "nat.corp.internal", "metadata"},
		{wild, "s24.corp.internal", "metadata"},
		{wild, "cmp.corp.internal", "not allowed"},
		{wild, "map.corp.internal", "metadata"},
		{wild, "docs.corp.internal", ""}, // what the wildcard is for
		{wild, "md.exact.test", ""},      // named exactly: the operator's word wins
		{cidr, "md.corp.internal", ""},   // the address allowed as such
		{exact, "metadata.google.internal", ""},
	}
	for _, tt := range tests {
		_, err := tt.g.Resolve(context.Background(), "tcp", tt.host)
		if tt.host == "metadata.google.internal" || strings.HasPrefix(tt.host, "METADATA") {
			err = tt.g.CheckHost(tt.host) // a name no resolver here knows
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tt.host, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.host, err, tt.want)
		case err != nil && !errors.Is(err, ErrDenied):
			t.Errorf("%s: %v is not ErrDenied", tt.host, err)
		}
	}
}

// TestWildcardNeverReachesOtherCredentialServices: 169.254.169.254 is not the only
// address that hands out a machine's cloud credentials. ECS tasks get theirs from
// 169.254.170.2, EKS pods from 169.254.170.23 (fd00:ec2::23 over IPv6), Alibaba
// Cloud's metadata is 100.100.100.200, and any link-local address is a service of
// the host or its cloud, never a zone's internal server. A wildcard reaches none of
// them; an exact name or an address range still does.
func TestWildcardNeverReachesOtherCredentialServices(t *testing.T) {
	t.Parallel()
	resolver := fakeResolver{
		"ecs.corp.internal":   {"169.254.170.2"},
		"eks.corp.internal":   {"169.254.170.23"},
		"eks6.corp.internal":  {"fd00:ec2::23"},
		"ali.corp.internal":   {"100.100.100.200"},
		"ll.corp.internal":    {"169.254.1.1"},
		"ll6.corp.internal":   {"fe80::1"},
		"nat.corp.internal":   {"64:ff9b::a9fe:aa02"}, // 169.254.170.2
		"cgnat.corp.internal": {"100.64.0.7"},         // a private zone's host
		"docs.corp.internal":  {"10.0.0.5"},
		"ecs.exact.test":      {"169.254.170.2"},
	}
	wild := mustGuard(t, Config{AllowHosts: []string{"*.internal", "ecs.exact.test"}, Resolver: resolver})
	cidr := mustGuard(t, Config{AllowHosts: []string{"*.internal"}, AllowCIDRs: []string{"169.254.170.2/32"}, Resolver: resolver})
	for _, tt := range []struct {
		g       *Guard
		host    string
		allowed bool
	}{
		{wild, "ecs.corp.internal", false},
		{wild, "eks.corp.internal", false},
		{wild, "eks6.corp.internal", false},
		{wild, "ali.corp.internal", false},
		{wild, "ll.corp.internal", false},
		{wild, "ll6.corp.internal", false},
		{wild, "nat.corp.internal", false},
		{wild, "cgnat.corp.internal", true},
		{wild, "docs.corp.internal", true},
		{wild, "ecs.exact.test", true},
		{cidr, "ecs.corp.internal", true},
	} {
		_, err := tt.g.Resolve(context.Background(), "tcp", tt.host)
		switch {
		case tt.allowed && err != nil:
			t.Errorf("%s: %v, want allowed", tt.host, err)
		case !tt.allowed && (err == nil || !errors.Is(err, ErrDenied)):
			t.Errorf("%s: %v, want refused", tt.host, err)
		}
	}
}

package netguard

import (
	"net/netip"
	"strconv"
	"strings"
)

// blockedRange is an address range that is refused unless allowlisted, with the words
// that describe its addresses ("a loopback address").
type blockedRange struct {
	prefix netip.Prefix
	what   string
}

func mustPrefixes(pairs ...string) []blockedRange {
	out := make([]blockedRange, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, blockedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// The order matters: the first matching range names the address, so the narrower
// ranges (the metadata address, broadcast) come before the ones that contain them.
var (
	blockedV4 = mustPrefixes(
		"169.254.169.254/32", "the cloud metadata address",
		"255.255.255.255/32", "the broadcast address",
		"0.0.0.0/32", "the unspecified address",
		"0.0.0.0/8", `a "this network" address`,
		"10.0.0.0/8", "a private address",
		"100.64.0.0/10", "a shared (CGNAT) address",
		"127.0.0.0/8", "a loopback address",
		"169.254.0.0/16", "a link-local address",
		"172.16.0.0/12", "a private address",
		"192.0.0.0/24", "an IETF protocol address",
		"192.0.2.0/24", "a documentation address",
		"192.168.0.0/16", "a private address",
		"198.18.0.0/15", "a benchmarking address",
		"198.51.100.0/24", "a documentation address",
		"203.0.113.0/24", "a documentation address",
		"224.0.0.0/4", "a multicast address",
		"240.0.0.0/4", "a reserved address",
	)
	blockedV6 = mustPrefixes(
		"::/128", "the unspecified address",
		"::1/128", "a loopback address",
		"::/96", "an IPv4-compatible address",
		"::ffff:0:0:0/96", "an IPv4-translated address",
		"fd00:ec2::254/128", "the cloud metadata address", // AWS's, over IPv6
		"64:ff9b:1::/48", "a local-use NAT64 address",
		"100::/64", "a discard-only address",
		"2001::/32", "a Teredo address",
		"2001:db8::/32", "a documentation address",
		"fc00::/7", "a private (unique local) address",
		"fe80::/10", "a link-local address",
		"fec0::/10", "a site-local address",
		"ff00::/8", "a multicast address",
	)
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4         = netip.MustParsePrefix("2002::/16")
	ipv4Compatible = netip.MustParsePrefix("::/96")
)

// credentialRanges hold the services that hand out a machine's cloud credentials,
// which no wildcard reaches: the link-local ranges (169.254.169.254, ECS tasks'
// 169.254.170.2, EKS pods' 169.254.170.23: a service of the host or its cloud, never
// a zone's own server), AWS's IPv6 services (fd00:ec2::254, EKS's fd00:ec2::23) and
// Alibaba Cloud's metadata address.
var credentialRanges = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::/32"),
}

// isMetadataAddr reports whether ip is a cloud metadata or credentials address
// (credentialRanges), its IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms included.
func isMetadataAddr(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	for _, p := range credentialRanges {
		if p.Contains(ip) {
			return true
		}
	}
	b := ip.As16()
	switch {
	case !ip.Is6():
		return false
	case nat64.Contains(ip), ipv4Compatible.Contains(ip):
		return isMetadataAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(ip):
		return isMetadataAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return false
}

// Classify says why ip may not be connected to ("a loopback address", "a private
// address" …), or "" when it is a public unicast address. IPv4-mapped IPv6 addresses
// are judged as the IPv4 address they carry; NAT64 and 6to4 addresses as the IPv4
// address they embed. Zones are ignored.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not a valid address"
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return Classify(ip.Unmap())
	}
	if ip.Is4() {
		for _, r := range blockedV4 {
			if r.prefix.Contains(ip) {
				return r.what
			}
		}
		return ""
	}
	for _, r := range blockedV6 {
		if r.prefix.Contains(ip) {
			return r.what
		}
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		if what := Classify(netip.AddrFrom4([4]byte(b[12:16]))); what != "" {
			return "a NAT64 form of " + what
		}
	case sixTo4.Contains(ip):
		if what := Classify(netip.AddrFrom4([4]byte(b[2:6]))); what != "" {
			return "a 6to4 form of " + what
		}
	}
	return ""
}

// nonCanonicalIPv4 reads host the way inet_aton(3) does: one to four parts, each
// decimal, octal (leading 0) or hexadecimal (0x), the last filling the remaining bytes
// ("127.1", "2130706433", "0x7f000001", "0177.0.0.1"). Some resolvers accept these
// forms, Go's does not; either way they never name a real host.
func nonCanonicalIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, p = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		if p == "" || p[0] == '+' || p[0] == '-' {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	last := len(vals) - 1
	var n uint64
	for i, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - uint(i)))
	}
	if vals[last] >= 1<<(8*(4-uint(last))) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// numericLabel reports whether the last label of host is a number (decimal or 0x
// hexadecimal). No top-level domain is numeric, so such a host is an address in an
// unusual spelling or invalid: it is never looked up.
func numericLabel(host string) bool {
	label := host[strings.LastIndexByte(host, '.')+1:]
	if len(label) > 2 && (label[:2] == "0x" || label[:2] == "0X") {
		label = label[2:]
		for _, c := range label {
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
		return true
	}
	if label == "" {
		return false
	}
	for _, c := range label {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

package netguard

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// localTTL is how long the machine's interface addresses are trusted before they are
// read again (an address added by DHCP is refused within this time).
const localTTL = 5 * time.Second

// local holds this machine's interface addresses. A public address of the machine
// reaches every service bound to all interfaces, as loopback does.
var local struct {
	mu    sync.Mutex
	read  time.Time
	addrs map[netip.Addr]bool
}

// isLocal reports whether ip is an address of one of this machine's interfaces. When
// the interfaces cannot be read, the last addresses read are used.
func isLocal(ip netip.Addr) bool {
	local.mu.Lock()
	defer local.mu.Unlock()
	if local.addrs == nil || time.Since(local.read) > localTTL {
		if ifaddrs, err := net.InterfaceAddrs(); err == nil || local.addrs == nil {
			addrs := make(map[netip.Addr]bool, len(ifaddrs))
			for _, a := range ifaddrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					addrs[p.Addr().WithZone("").Unmap()] = true
				}
			}
			local.addrs, local.read = addrs, time.Now()
		}
	}
	return local.addrs[ip]
}

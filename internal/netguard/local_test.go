package netguard

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Public addresses given to the loopback interface of the test's own network namespace.
const (
	ownV4 = "81.2.69.160"
	ownV6 = "2a00:1450:4001:800::2004"
)

// A machine whose interface holds a public address answers on it with every service
// bound to all interfaces (the daemon itself on 0.0.0.0, a database, an admin page):
// the guard refuses the machine's own addresses as it refuses loopback. The test runs
// itself again in a new network namespace (unshare -n, as root) whose loopback
// interface carries two public addresses, so the host's network is untouched.
func TestRefusesOwnAddresses(t *testing.T) {
	if os.Getenv("NETGUARD_OWN_ADDR_NETNS") != "1" {
		if os.Geteuid() != 0 || exec.Command("unshare", "-n", "true").Run() != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("this test needs root and unshare(1) (util-linux)")
			}
			t.Skip("needs root and unshare(1)")
		}
		script := `ip link set lo up && ip addr add ` + ownV4 + `/32 dev lo && ip addr add ` + ownV6 + `/128 dev lo nodad && exec "$0" -test.run '^TestRefusesOwnAddresses$' -test.v`
		cmd := exec.Command("unshare", "-n", "sh", "-c", script, os.Args[0])
		cmd.Env = append(os.Environ(), "NETGUARD_OWN_ADDR_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRefusesOwnAddresses") {
			t.Fatalf("in a new network namespace: %v\n%s", err, out)
		}
		return
	}

	g := mustGuard(t, Config{})
	for _, a := range []string{ownV4, ownV6} {
		ip := netip.MustParseAddr(a)
		if Classify(ip) != "" {
			t.Fatalf("%s is not a public address: %s", a, Classify(ip))
		}
		var de *DeniedError
		if err := g.CheckAddr("", ip); !errors.As(err, &de) || de.Reason != "an address of this machine" {
			t.Errorf("CheckAddr(%s) = %v, want a refusal as this machine's address", a, err)
		}
	}
	// Another public address is still allowed, and the allowlist still wins.
	if err := g.CheckAddr("", netip.MustParseAddr("81.2.69.161")); err != nil {
		t.Errorf("CheckAddr(81.2.69.161) = %v", err)
	}
	if err := mustGuard(t, Config{AllowCIDRs: []string{ownV4}}).CheckAddr("", netip.MustParseAddr(ownV4)); err != nil {
		t.Errorf("allowlisted own address: %v", err)
	}

	// A real server bound to all interfaces is not reached through either address.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var hits []string
	srv := &http.Server{Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.Host)
		mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	tr := g.NewTransport(nil)
	for _, a := range []string{ownV4, ownV6} {
		u := "http://" + net.JoinHostPort(a, strconv.Itoa(port)) + "/admin"
		if _, err := get(t, tr, u); !errors.Is(err, ErrDenied) {
			t.Errorf("GET %s: %v, want a refusal", u, err)
		}
	}
	// The namespace's addresses do answer without the guard: the refusals above are
	// the guard's doing, not a dead address.
	resp, err := http.Get("http://" + net.JoinHostPort(ownV4, strconv.Itoa(port)) + "/direct")
	if err != nil {
		t.Fatalf("direct GET: %v", err)
	}
	_ = resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != 1 {
		t.Errorf("server reached %d times (%v), want only the direct request", len(hits), hits)
	}
}

// Package testnet has loopback helpers for tests (Linux).
//
// A test that wants "an address where nothing listens" used to listen on port 0,
// note the port and close the listener; from then on any other listener of a
// whole-suite run could take the port, and the test's dials would reach it. A
// socket bound to the port without listening holds it instead: connections to it
// are refused (RST), and no other socket can bind it, since this one does not set
// SO_REUSEADDR.
package testnet

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Reservation is a loopback port held by a bound socket that does not listen.
type Reservation struct {
	fd   int
	Addr string // 127.0.0.1:port
	Port int
}

// Reserve binds addr ("127.0.0.1:port", port 0 for a free one) without listening.
func Reserve(addr string) (*Reservation, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host).To4()
	port, err := strconv.Atoi(p)
	if ip == nil || err != nil {
		return nil, fmt.Errorf("testnet: %q is not an IPv4 address and port", addr)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("testnet: socket: %w", err)
	}
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], ip)
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("testnet: bind %s: %w", addr, err)
	}
	got, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("testnet: getsockname: %w", err)
	}
	in4, ok := got.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return nil, fmt.Errorf("testnet: bound to %T", got)
	}
	return &Reservation{fd: fd, Addr: net.JoinHostPort(host, strconv.Itoa(in4.Port)), Port: in4.Port}, nil
}

// Release frees the port.
func (r *Reservation) Release() error { return syscall.Close(r.fd) }

// RefusedAddr is a loopback address ("127.0.0.1:port") where connections are
// refused and that no other socket can take until the test ends.
func RefusedAddr(t TB) string {
	t.Helper()
	r, err := Reserve("127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = r.Release() })
	return r.Addr
}

package testnet

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestClosedListenerPortCanBeTaken is why RefusedAddr exists: the port of a closed
// listener is anyone's.
func TestClosedListenerPortCanBeTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	other, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port of a closed listener could not be taken (%v); the test shows nothing", err)
	}
	other.Close()
}

// TestRefusedAddr: connections are refused, and no listener can take the port
// until the test ends.
func TestRefusedAddr(t *testing.T) {
	var addr string
	t.Run("held", func(t *testing.T) {
		addr = RefusedAddr(t)
		_, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial %s: %v, want connection refused", addr, err)
		}
		if ln, err := net.Listen("tcp", addr); !errors.Is(err, syscall.EADDRINUSE) {
			if err == nil {
				ln.Close()
			}
			t.Errorf("listen on %s: %v, want address in use", addr, err)
		}
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after the test that held it: listen on %s: %v", addr, err)
	}
	ln.Close()
}

// TestReserveAgain: a port given back can be reserved again (Cut and Resume of a
// forwarder).
func TestReserveAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, err := Reserve(addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Addr != addr {
		t.Errorf("reserved %s, want %s", r.Addr, addr)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	ln.Close()
}

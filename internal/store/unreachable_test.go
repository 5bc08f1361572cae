package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

// forwarder relays TCP connections to a PostgreSQL server, so that a test can take the
// database away from one store (Cut) and give it back (Resume) without stopping a
// server other tests share.
type forwarder struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	held  *testnet.Reservation // while cut: the port, so that no other listener takes it
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	f := &forwarder{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(func() {
		f.Cut()
		f.wg.Wait()
		if f.held != nil {
			_ = f.held.Release()
		}
	})
	return f
}

func (f *forwarder) serve(ln net.Listener) {
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns[c], f.conns[up] = struct{}{}, struct{}{}
			f.mu.Unlock()
			f.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer f.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
}

// Cut closes the listener and every relayed connection: the database is away. The
// port is held meanwhile (bound, not listening): connections are refused, and no
// other listener of the test run can take it.
func (f *forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
		f.held, _ = testnet.Reserve(f.addr) // taken already: nothing to hold
	}
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}

// Resume listens again on the same address. Should another listener have taken the
// port all the same, it is tried again for a while, and logged.
func (f *forwarder) Resume(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	if f.held != nil {
		_ = f.held.Release()
		f.held = nil
	}
	f.mu.Unlock()
	var ln net.Listener
	var err error
	for attempt := 1; ; attempt++ {
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		if attempt == 10 {
			t.Fatal(err)
		}
		t.Logf("forwarder: listen on %s: %v (attempt %d of 10); trying again", f.addr, err, attempt)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
	f.serve(ln)
}

// TestUnreachableErrors: the errors a PostgreSQL store returns while its database is
// away (connections cut, new ones refused) are told apart by IsUnreachable from the
// store's own answers, and the same store works again once the database is back.
func TestUnreachableErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	f := newForwarder(t, u.Host)
	u.Host = f.addr
	s, err := store.OpenPostgres(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	_, err = s.GetCall(ctx, "tc_none")
	if !errors.Is(err, store.ErrNotFound) || store.IsUnreachable(err) {
		t.Fatalf("GetCall of an unknown call: %v (unreachable: %v), want ErrNotFound, not unreachable", err, store.IsUnreachable(err))
	}
	for _, e := range []error{context.Canceled, context.DeadlineExceeded, store.ErrConflict, io.EOF, fmt.Errorf("store: x: %w", store.ErrInvalid)} {
		if store.IsUnreachable(e) {
			t.Errorf("IsUnreachable(%v) = true", e)
		}
	}

	f.Cut()
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"get call", func() error { _, err := s.GetCall(ctx, "tc_none"); return err }},
		{"write calls", func() error {
			return s.WriteCalls(ctx, []*store.Call{{ID: "tc_away", SessionID: "ses_away", Tenant: "t", ToolCallID: "c1", Name: "echo", Status: store.CallRunning}}, nil)
		}},
		{"create session", func() error {
			return s.CreateSession(ctx, &store.Session{ID: "ses_away", Tenant: "t", Spec: []byte(`{}`)})
		}},
		{"ping", func() error { return s.Ping(ctx) }},
	} {
		err := op.run()
		if err == nil || !store.IsUnreachable(err) || store.IsStorageFull(err) || errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s with the database away: %v (unreachable: %v), want an unreachable error", op.name, err, store.IsUnreachable(err))
		}
	}

	f.Resume(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.GetCall(ctx, "tc_none")
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20s after the database came back: %v, want ErrNotFound", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUnreachableAtOpen: of the ways Open can fail against PostgreSQL, only those that
// may pass by themselves (nothing listening, a name that does not resolve, a server
// that never answers) are unreachable; a server that answered and refused (a database
// that does not exist) is not, so the daemon's start-up does not wait on it.
func TestUnreachableAtOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := testnet.RefusedAddr(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts into its backlog, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	with := func(host, db string) string {
		v := *u
		if host != "" {
			v.Host = host
		}
		if db != "" {
			v.Path = "/" + db
		}
		return v.String()
	}
	for _, tc := range []struct {
		name        string
		url         string
		unreachable bool
	}{
		{"connection refused", with(refusedAddr, ""), true},
		{"unknown host", with("no-such-host.invalid:5432", ""), true},
		{"server that never answers", with(silent.Addr().String(), ""), true},
		{"missing database", with("", "no_such_database_x"), false},
	} {
		s, err := store.Open(ctx, store.Config{URL: tc.url, ConnectTimeout: 2 * time.Second})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if store.IsUnreachable(err) != tc.unreachable {
			t.Errorf("%s: %v: unreachable %v, want %v", tc.name, err, store.IsUnreachable(err), tc.unreachable)
		}
	}
}

// TestUnreachableWhileConnectionsBarred: a database an operator closed to new
// connections for a while (ALTER DATABASE … ALLOW_CONNECTIONS false, for maintenance
// or to shed a client) refuses them with SQLSTATE 55000; that passes by itself like
// a restart, so it is unreachable (a request is answered 503, start-up waits), not an
// internal error.
func TestUnreachableWhileConnectionsBarred(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL, admin := pgtest.Database(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+strings.TrimPrefix(u.Path, "/")+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(ctx, store.Config{URL: dbURL, ConnectTimeout: time.Second})
	if err == nil || !store.IsUnreachable(err) {
		t.Fatalf("Open of a database that bars connections: %v (unreachable: %v), want unreachable", err, store.IsUnreachable(err))
	}
}

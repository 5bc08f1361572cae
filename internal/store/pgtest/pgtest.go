// Package pgtest gives tests a real, empty PostgreSQL schema.
//
// The server comes from, in order:
//  1. TOOLSERVER_TEST_POSTGRES_URL (any database the tests may create schemas in);
//  2. a throwaway cluster started once per test process from the local PostgreSQL
//     binaries (/usr/lib/postgresql/*/bin, or initdb on PATH), on a free loopback port;
//  3. nothing: the test is skipped, or fails when CI=true.
//
// A package whose tests call URL must stop the cluster when its tests end:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pgtest.Stop()
//		os.Exit(code)
//	}
//
// If the process dies before Stop (a test timeout, a kill), a watchdog process started
// with the cluster stops it and removes its directory.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

// EnvURL names the environment variable that points the tests at an existing server.
const EnvURL = "TOOLSERVER_TEST_POSTGRES_URL"

// URL returns the URL of a new, empty schema (search_path=<schema> is set in the URL,
// so every connection made from it works in that schema). The schema is dropped in
// t.Cleanup; close connections made from the URL before that (register their cleanup
// after calling URL).
func URL(t testing.TB) string {
	t.Helper()
	base, err := server()
	if err != nil {
		var missing *unavailableError
		if errors.As(err, &missing) {
			if os.Getenv("CI") == "true" {
				t.Fatalf("pgtest: no PostgreSQL for tests and CI=true: %v; set %s or install PostgreSQL (apt-get install -y postgresql)", err, EnvURL)
			}
			t.Skipf("pgtest: no PostgreSQL: %v (set %s to run these tests)", err, EnvURL)
		}
		t.Fatalf("pgtest: %v", err)
	}

	schema := "pgtest_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", redact(base), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: connect: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", redact(base), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Database creates a database of its own on the test server (for a test that bars
// connections to it, or locks its tables, which a schema of a shared database cannot
// stand for) and returns its URL and an open admin connection to the server's
// database. In t.Cleanup, the database takes connections again, is dropped (FORCE:
// connections a daemon left open) and the admin connection is closed; register the
// cleanups of what uses the URL after calling Database.
func Database(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	u, err := url.Parse(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", redact(u.String()), err)
	}
	db := "pgtest_db_" + randomHex(8)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		admin.Close(context.Background())
		t.Skipf("pgtest: cannot create a database: %v", err)
	}
	t.Cleanup(func() {
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), "ALTER DATABASE "+db+" ALLOW_CONNECTIONS true")
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", db, err)
		}
	})
	u.Path = "/" + db
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String(), admin
}

// Stop stops the throwaway cluster if this process started one. It is safe to call
// when none was started, and more than once.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if cl != nil {
		cl.stop()
		cl = nil
	}
}

// unavailableError means there is no server to be had: a reason to skip, not to fail.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

var (
	mu       sync.Mutex
	started  bool
	startErr error
	cl       *cluster
	baseURL  string
)

// server returns the base URL of the server, starting the throwaway cluster on first use.
func server() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		cl, startErr = startCluster()
		if startErr == nil {
			baseURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", cl.port)
		}
	}
	if startErr != nil {
		return "", startErr
	}
	if cl == nil {
		return "", errors.New("the throwaway cluster was stopped (pgtest.Stop) and is not restarted")
	}
	return baseURL, nil
}

type cluster struct {
	binDir string
	dir    string // owned by the postgres user when we run as root
	data   string
	port   int
	held   *testnet.Reservation // the port while no server listens on it (see hold)
	asUser string               // "" or "postgres"
	dog    *exec.Cmd
}

func findBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", &unavailableError{"no PostgreSQL server binaries (looked in /usr/lib/postgresql/*/bin and PATH)"}
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func startCluster() (*cluster, error) {
	c, err := initCluster()
	if err != nil {
		return nil, err
	}
	// A free port can be taken between our probe and the server's bind: retry.
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			os.RemoveAll(c.dir)
			return nil, err
		}
		out, err := c.start()
		if err == nil {
			break
		}
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
			c.stop()
			return nil, fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
		}
	}
	c.startWatchdog()
	return c, nil
}

// Cluster is a throwaway PostgreSQL cluster of one test's own, for tests of a
// database that is not there yet: NewCluster makes it without starting it, so that
// nothing listens at its URL until Start.
type Cluster struct {
	c *cluster
}

// NewCluster creates (initdb) a cluster on a free loopback port and does not start
// it; it is stopped and removed when the test ends. It skips the test when there are
// no PostgreSQL binaries (fails when CI=true).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := initCluster()
	if err != nil {
		var missing *unavailableError
		if errors.As(err, &missing) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: no PostgreSQL: %v", err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	// The port is held until Start, so that no other listener takes it meanwhile.
	r, err := testnet.Reserve("127.0.0.1:0")
	if err != nil {
		c.stop()
		t.Fatal(err)
	}
	c.port, c.held = r.Port, r
	c.startWatchdog()
	t.Cleanup(c.stop)
	return &Cluster{c: c}
}

// URL is the cluster's postgres database, as user postgres (trust auth).
func (cl *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", cl.c.port)
}

// Start starts the server and returns once it accepts connections.
func (cl *Cluster) Start() error {
	if out, err := cl.c.startOnPort(); err != nil {
		log, _ := os.ReadFile(filepath.Join(cl.c.dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// initCluster runs initdb in a new temporary directory; the cluster has no port yet.
func initCluster() (*cluster, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &cluster{binDir: bin}
	if c.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	c.data = filepath.Join(c.dir, "data")
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(c.dir)
			return nil, &unavailableError{"running as root and there is no postgres user to run initdb as"}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(c.dir, uid, gid); err != nil {
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("chown %s: %w", c.dir, err)
		}
		c.asUser = "postgres"
	}

	if out, err := c.run(2*time.Minute, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return c, nil
}

func (c *cluster) start() (string, error) {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off", c.port, c.dir)
	return c.run(time.Minute, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-o", opts, "start")
}

// StopServer stops the throwaway cluster's server (fast shutdown: sessions are
// disconnected) and keeps its data, so that StartServer brings it back on the same
// port: for tests of a database outage. It fails when the server is not the throwaway
// cluster (TOOLSERVER_TEST_POSTGRES_URL is set, or URL was never called).
func StopServer() error {
	mu.Lock()
	defer mu.Unlock()
	if cl == nil {
		return errors.New("pgtest: no throwaway cluster to stop (unset " + EnvURL + " and call URL first)")
	}
	if out, err := cl.run(time.Minute, "pg_ctl", "-D", cl.data, "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out)
	}
	cl.hold()
	return nil
}

// StartServer starts the server StopServer stopped, on the same port.
func StartServer() error {
	mu.Lock()
	defer mu.Unlock()
	if cl == nil {
		return errors.New("pgtest: no throwaway cluster to start")
	}
	if out, err := cl.startOnPort(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// hold binds the cluster's port without listening while no server listens on it:
// connections are refused, as with nothing there, and no other listener of the
// test run can take the port before the server comes back on it.
func (c *cluster) hold() {
	if r, err := testnet.Reserve("127.0.0.1:" + strconv.Itoa(c.port)); err == nil {
		c.held = r
	}
}

func (c *cluster) release() {
	if c.held != nil {
		_ = c.held.Release()
		c.held = nil
	}
}

// startOnPort starts the server on the port it must come back on. Should another
// listener have taken the port all the same (it was not held, or between release
// and bind), the start is tried again, and said on stderr.
func (c *cluster) startOnPort() (string, error) {
	c.release()
	logPath := filepath.Join(c.dir, "log")
	const attempts = 10
	for attempt := 1; ; attempt++ {
		var before int64
		if fi, err := os.Stat(logPath); err == nil {
			before = fi.Size()
		}
		out, err := c.start()
		if err == nil {
			return out, nil
		}
		log, _ := os.ReadFile(logPath) // pg_ctl -l appends
		if attempt == attempts || int64(len(log)) < before || !strings.Contains(string(log[before:]), "Address already in use") {
			return out, err
		}
		fmt.Fprintf(os.Stderr, "pgtest: port %d is in use (attempt %d of %d); trying again\n", c.port, attempt, attempts)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// run runs a PostgreSQL binary, as the postgres user when we are root. Output goes
// through a file, not a pipe: the server inherits pg_ctl's descriptors and a pipe
// would keep Wait from returning.
func (c *cluster) run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	prog := filepath.Join(c.binDir, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.asUser, "--", prog}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, prog, args...)
	}
	cmd.Dir = c.dir
	out, err := os.CreateTemp("", "pgtest-out-")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	b, _ := os.ReadFile(out.Name())
	return string(b), err
}

func (c *cluster) stop() {
	defer c.release()
	if c.dog != nil && c.dog.Process != nil {
		c.dog.Process.Kill()
		c.dog.Wait()
	}
	c.run(time.Minute, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
}

// startWatchdog starts a shell, in its own session, that stops the cluster and removes
// its directory once this process is gone, in case Stop is never called.
func (c *cluster) startWatchdog() {
	pgctl := shellQuote(filepath.Join(c.binDir, "pg_ctl")) + " -D " + shellQuote(c.data) + " -m immediate -w stop"
	if c.asUser != "" {
		pgctl = "runuser -u " + c.asUser + " -- " + pgctl
	}
	script := fmt.Sprintf("while [ -d /proc/%d ]; do sleep 1; done; %s >/dev/null 2>&1; rm -rf %s",
		os.Getpid(), pgctl, shellQuote(c.dir))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Stdin, Stdout, Stderr nil: /dev/null, so `go test` is not kept waiting on our pipes.
	if err := cmd.Start(); err == nil {
		c.dog = cmd
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides the password of a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

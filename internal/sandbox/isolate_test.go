package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestIsolationFileSystem: an isolated command can change nothing outside its root,
// by any route, while everything works inside it.
func TestIsolationFileSystem(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, root := newSandbox(t, m, Options{})
			outside := t.TempDir()
			existing := filepath.Join(outside, "existing")
			if err := os.WriteFile(existing, []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(existing)
			etc := "/etc/toolserverd-isolation-test-" + bc.name
			t.Cleanup(func() { os.Remove(etc) })
			attempts := []struct{ name, command string }{
				{"create", `echo x > "$OUT/new"`},
				{"append", `echo x >> "$OUT/existing"`},
				{"truncate on open", `: > "$OUT/existing"`},
				{"truncate(2)", `truncate -s 0 "$OUT/existing"`},
				{"chmod", `chmod 600 "$OUT/existing"`},
				{"touch", `touch -d 2001-01-01 "$OUT/existing"`},
				{"rm", `rm "$OUT/existing"`},
				{"rename out of the host", `mv "$OUT/existing" ./moved`},
				{"hard link into the root", `ln "$OUT/existing" ./hl && echo pwn >> ./hl`},
				{"symlink into the root", `ln -s "$OUT/existing" ./sl && echo pwn >> ./sl`},
				{"mkdir", `mkdir "$OUT/dir"`},
				{"etc", `echo x > ` + etc},
				{"proc sysctl", `echo 1 > /proc/sys/vm/drop_caches`},
				{"remount", `mount -o remount,rw /`},
				{"mount", `mkdir -p mnt && mount -t tmpfs none mnt`},
			}
			for _, a := range attempts {
				j, info := run(t, sb, Cmd{Command: a.command, Env: []string{"OUT=" + outside}})
				if j.ExitCode() == 0 {
					t.Errorf("%s: %q succeeded (%s)", a.name, a.command, info.Status)
				}
			}
			if b, err := os.ReadFile(existing); err != nil || string(b) != "original" {
				t.Errorf("outside file now %q, %v", b, err)
			}
			if after, err := os.Stat(existing); err != nil || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("outside file's mode or time changed: %v → %v", before, after)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("outside dir holds %d entries", len(entries))
			}
			if _, err := os.Stat(etc); err == nil {
				t.Errorf("%s was created", etc)
			}

			j, info := run(t, sb, Cmd{Command: `echo ok > in.txt && mkdir -p a/b && ln -s in.txt link && chmod 600 in.txt && mv in.txt a/b/ && cat a/b/in.txt && rm -r a`})
			if info.Status != StatusExited || j.ExitCode() != 0 || output(t, j, Stdout) != "ok\n" {
				t.Errorf("work inside the root failed: %+v %q %q", info, output(t, j, Stdout), output(t, j, Stderr))
			}
			if _, err := os.Lstat(filepath.Join(root, "link")); err != nil {
				t.Errorf("the symlink made inside is not there: %v", err)
			}
		})
	}
}

// TestIsolationNetwork: a listener of the host on 127.0.0.1 is unreachable from an
// isolated command unless the sandbox allows the network.
func TestIsolationNetwork(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var accepted atomic.Int32
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted.Add(1)
					c.Close()
				}
			}()
			t.Cleanup(func() { ln.Close(); <-done })
			port := ln.Addr().(*net.TCPAddr).Port
			connect := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo connected`, port)

			off, _ := newSandbox(t, m, Options{})
			if off.Network() {
				t.Error("sandbox reports network by default")
			}
			j, _ := run(t, off, Cmd{Command: connect})
			if j.ExitCode() == 0 || strings.Contains(output(t, j, Stdout), "connected") {
				t.Errorf("connected to the host without network: %q", output(t, j, Stdout))
			}
			j, _ = run(t, off, Cmd{Command: `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`})
			if got := output(t, j, Stdout); got != "lo\n" {
				t.Errorf("interfaces without network: %q", got)
			}
			if n := accepted.Load(); n != 0 {
				t.Fatalf("the listener accepted %d connections from an isolated command", n)
			}

			allow := true
			on, _ := newSandbox(t, m, Options{AllowNetwork: &allow})
			j, _ = run(t, on, Cmd{Command: connect})
			// The accept loop counts the connection a moment after the command made it.
			for deadline := time.Now().Add(5 * time.Second); accepted.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if j.ExitCode() != 0 || output(t, j, Stdout) != "connected\n" || accepted.Load() != 1 {
				t.Errorf("with network: code %d %q %q, accepted %d", j.ExitCode(), output(t, j, Stdout), output(t, j, Stderr), accepted.Load())
			}
		})
	}
}

// TestIsolationRunMasked: without network, the host's /run (privileged Unix sockets)
// is hidden behind an empty read-only tmpfs.
func TestIsolationRunMasked(t *testing.T) {
	t.Parallel()
	if fi, err := os.Stat("/run"); err != nil || !fi.IsDir() {
		t.Skip("no /run on this host")
	}
	sock := fmt.Sprintf("/run/toolserverd-test-%d.sock", time.Now().UnixNano())
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("cannot create a socket in /run: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			j, _ := run(t, sb, Cmd{Command: `test -e "$SOCK" && echo visible; ls -A /run | wc -l; touch /run/x`, Env: []string{"SOCK=" + sock}})
			if got := output(t, j, Stdout); got != "0\n" || j.ExitCode() == 0 {
				t.Errorf("/run inside: %q (exit %d); want it empty and read-only", got, j.ExitCode())
			}
		})
	}
}

// TestIsolationProcesses: an isolated command sees its own pid namespace, holds no
// capability and cannot signal the daemon.
func TestIsolationProcesses(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			j, _ := run(t, sb, Cmd{Command: "kill -0 " + strconv.Itoa(os.Getpid())})
			if j.ExitCode() == 0 {
				t.Error("the command could signal the test process")
			}
			j, _ = run(t, sb, Cmd{Command: `grep -E '^Cap(Prm|Eff|Bnd|Amb|Inh):' /proc/self/status; ls /proc | grep -c '^[0-9]'`})
			lines := strings.Split(strings.TrimSpace(output(t, j, Stdout)), "\n")
			if len(lines) != 6 {
				t.Fatalf("status: %q %q", lines, output(t, j, Stderr))
			}
			for _, l := range lines[:5] {
				if !strings.HasSuffix(l, "0000000000000000") {
					t.Errorf("capability set not empty: %s", l)
				}
			}
			if n, _ := strconv.Atoi(lines[5]); n < 1 || n > 6 {
				t.Errorf("the command sees %d processes in /proc; want its own few", n)
			}
		})
	}
}

// TestForkBomb: with a pids cgroup a fork bomb is held to the limit and dies with
// its job; the host can start processes afterwards.
func TestForkBomb(t *testing.T) {
	t.Parallel()
	if hostCaps().PidsCgroup == "" {
		t.Skipf("no pids cgroup here (%s): a fork bomb is only bounded by the timeout kill", hostCaps().PidsCgroupError)
	}
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			cfg := bc.cfg
			cfg.PidsLimit = 64
			m := newManager(t, cfg)
			if !m.PidsLimited() {
				t.Fatal("manager has no pids cgroup although the host has one")
			}
			sb, _ := newSandbox(t, m, Options{})
			start := time.Now()
			_, info := run(t, sb, Cmd{Command: ":(){ :|:& };:; sleep 30", Timeout: 3 * time.Second})
			// Contained means the pids limit held it (peak below) and the 3s
			// timeout ended it; the bound is a hang guard below the sleep 30.
			t.Logf("the bomb ended after %s", time.Since(start))
			if elapsed := time.Since(start); elapsed > 25*time.Second {
				t.Errorf("the bomb took %s to contain", elapsed)
			}
			if info.PidsPeak < 10 || info.PidsPeak > 64 {
				t.Errorf("pids peak %d; want the bomb to have run into the limit of 64", info.PidsPeak)
			}
			groupGone(t, info.PID)
			j, info := run(t, sb, Cmd{Command: "echo alive"})
			if output(t, j, Stdout) != "alive\n" {
				t.Errorf("after the bomb: %+v", info)
			}
		})
	}
}

func TestIsolationUnavailable(t *testing.T) {
	t.Parallel()
	none := Capabilities{Bash: "/bin/bash", BwrapError: "bwrap is not installed", NamespacesError: "no user namespaces"}
	for _, want := range []Backend{BackendAuto, BackendBwrap, BackendNamespaces} {
		_, err := none.backend(want)
		if !errors.Is(err, ErrIsolationUnavailable) || !strings.Contains(err.Error(), "not") {
			t.Errorf("backend(%s) on a host without isolation: %v", want, err)
		}
	}
	ns := Capabilities{Bash: "/bin/bash", NamespacesUsable: true, BwrapError: "bwrap is not installed"}
	if b, err := ns.backend(BackendAuto); b != BackendNamespaces || err != nil {
		t.Errorf("auto with namespaces only: %s, %v", b, err)
	}
	if _, err := ns.backend(BackendBwrap); !errors.Is(err, ErrIsolationUnavailable) {
		t.Errorf("bwrap asked for, not there: %v", err)
	}
	both := Capabilities{Bash: "/bin/bash", NamespacesUsable: true, BwrapUsable: true}
	if b, _ := both.backend(BackendAuto); b != BackendBwrap {
		t.Errorf("auto with both picks %s; want bwrap", b)
	}
	if !hostCaps().BwrapUsable {
		_, err := NewManager(Config{Mode: ModeIsolated, Backend: BackendBwrap, StateDir: t.TempDir()})
		if !errors.Is(err, ErrIsolationUnavailable) {
			t.Errorf("NewManager(bwrap) without bwrap: %v", err)
		}
	}
}

func TestDetect(t *testing.T) {
	t.Parallel()
	c := Detect()
	b, _ := json.MarshalIndent(c, "", "  ")
	t.Logf("capabilities of this host:\n%s", b)
	if c.Bash == "" {
		t.Fatal("no bash found")
	}
	if (c.Isolation != "") != (c.BwrapUsable || c.NamespacesUsable) || (c.Isolation == "") != (c.IsolationError != "") {
		t.Errorf("inconsistent isolation report: %+v", c)
	}
	if c.BwrapUsable && (c.Bwrap == "" || !strings.Contains(c.BwrapVersion, "bubblewrap")) {
		t.Errorf("bwrap usable but path %q version %q", c.Bwrap, c.BwrapVersion)
	}
}

// TestStateDirInsideRoot: an isolated sandbox whose root contains the state dir (the
// job logs) covers it, as it does every hidden dir: another sandbox's job output is out
// of sight. A root that is the state dir, which nothing could cover, is refused.
func TestStateDirInsideRoot(t *testing.T) {
	t.Parallel()
	if hostCaps().Isolation == "" {
		t.Skip("no isolation on this host")
	}
	root := t.TempDir()
	m := newManager(t, Config{Mode: ModeIsolated, StateDir: filepath.Join(root, "state")})
	other, err := m.New(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	oj, _ := run(t, other, Cmd{Command: "echo other-job-output"})
	sb, err := m.New(root, Options{})
	if err != nil {
		t.Fatalf("New with the state dir inside the root: %v", err)
	}
	j, _ := run(t, sb, Cmd{Command: "cat " + filepath.Join(oj.dirPath, Stdout+".log")})
	if out := output(t, j, Stdout); j.ExitCode() == 0 || strings.Contains(out, "other-job-output") {
		t.Errorf("another sandbox's log from a root holding the state dir: exit %d, %q", j.ExitCode(), out)
	}

	m2 := newManager(t, Config{Mode: ModeIsolated, StateDir: t.TempDir()})
	if _, err := m2.New(m2.cfg.StateDir, Options{}); err == nil || !strings.Contains(err.Error(), "state dir") {
		t.Errorf("New with the state dir as the root: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		want string // "" valid
	}{
		{Config{}, ""},
		{Config{Mode: "docker"}, `mode "docker"`},
		{Config{Backend: "gvisor"}, `backend "gvisor"`},
		{Config{StateDir: "relative"}, "absolute"},
		{Config{OutputCap: 10}, "output cap"},
		{Config{DefaultTimeout: time.Hour, MaxTimeout: time.Minute}, "exceeds max timeout"},
		{Config{KillGrace: -1}, "positive"},
		{Config{MaxRunningJobs: -1}, "at least 1"},
		{Config{EnvAllow: []string{"OK_NAME", "BAD-NAME"}}, `"BAD-NAME"`},
	}
	for _, tt := range tests {
		err := tt.cfg.WithDefaults().Validate()
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v; want %q", tt.cfg, err, tt.want)
		}
	}
	d := Config{}.WithDefaults()
	if d.Mode != ModeLocal || d.OutputCap != DefaultOutputCap || d.PidsLimit != DefaultPidsLimit || d.Logger == nil {
		t.Errorf("defaults: %+v", d)
	}
}

// TestIsolationHidesDaemonDirs: an isolated command does not see the directories the
// daemon hides (its data dir: the admin key, the database, other sessions'
// workspaces) nor other sessions' job state; its own root inside them stays usable.
func TestIsolationHidesDaemonDirs(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			for name, content := range map[string]string{"admin.key": "tsk_secret", "workspaces/ses_other/notes.txt": "other tenant"} {
				p := filepath.Join(data, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			root := filepath.Join(data, "workspaces", "ses_mine")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := bc.cfg
			cfg.Hide = []string{data}
			m := newManager(t, cfg)
			sb, err := m.New(root, Options{})
			if err != nil {
				t.Fatal(err)
			}
			other, err := m.New(t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			oj, _ := run(t, other, Cmd{Command: "echo other-job-output"})
			otherLog := filepath.Join(oj.dirPath, Stdout+".log")
			for _, cmd := range []string{
				"cat " + filepath.Join(data, "admin.key"),
				"cat ../../admin.key",
				"cat ../ses_other/notes.txt",
				"cat " + otherLog,
			} {
				j, _ := run(t, sb, Cmd{Command: cmd})
				if out := output(t, j, Stdout); j.ExitCode() == 0 || strings.Contains(out, "secret") || strings.Contains(out, "other") {
					t.Errorf("%q: exit %d, stdout %q", cmd, j.ExitCode(), out)
				}
			}
			j, info := run(t, sb, Cmd{Command: "echo mine > f.txt && cat f.txt && ls ../ && cat $TMPDIR/../nothing 2>/dev/null; touch $TMPDIR/t && echo tmp-ok"})
			if out := output(t, j, Stdout); info.Status != StatusExited || out != "mine\nses_mine\ntmp-ok\n" {
				t.Errorf("work in the root: %+v %q %q", info, out, output(t, j, Stderr))
			}
			if b, err := os.ReadFile(filepath.Join(root, "f.txt")); err != nil || string(b) != "mine\n" {
				t.Errorf("the root's file on the host: %q %v", b, err)
			}
		})
	}
}

// TestHiddenDirsDropNested: a hidden dir inside another is dropped even when a
// sibling sorts between them (covering both would mount onto a path the outer tmpfs
// no longer has).
func TestHiddenDirsDropNested(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, d := range []string{"d", "d-x", "d/sandbox"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	got := hiddenDirs([]string{filepath.Join(base, "d/sandbox"), filepath.Join(base, "d-x"), filepath.Join(base, "d"), "/", filepath.Join(base, "missing")})
	want := []string{filepath.Join(real, "d"), filepath.Join(real, "d-x")}
	if !slices.Equal(got, want) {
		t.Fatalf("hiddenDirs = %q, want %q", got, want)
	}
}

// TestIsolationHidesDataDirInsideRoot: a root that contains the daemon's data dir (a
// checkout with the default data/ in it), with the sandbox state in that data dir as
// the daemon has it: the sandbox is made, its commands do not see the data dir, and
// their TMPDIR and HOME (in the covered state dir) still work.
func TestIsolationHidesDataDirInsideRoot(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			data := filepath.Join(root, "data")
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "admin.key"), []byte("tsk_secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := bc.cfg
			cfg.Hide = []string{data}
			cfg.StateDir = filepath.Join(data, "sandbox")
			m := newManager(t, cfg)
			sb, err := m.New(root, Options{})
			if err != nil {
				t.Fatalf("New with the data dir inside the root: %v", err)
			}
			for _, cmd := range []string{"cat data/admin.key", "cat " + filepath.Join(data, "admin.key")} {
				j, _ := run(t, sb, Cmd{Command: cmd})
				if out := output(t, j, Stdout); j.ExitCode() == 0 || strings.Contains(out, "secret") {
					t.Errorf("%q: exit %d, stdout %q", cmd, j.ExitCode(), out)
				}
			}
			j, info := run(t, sb, Cmd{Command: `ls -A data; echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && echo h > "$HOME/.h" && cat "$HOME/.h" && echo mine > f.txt && cat f.txt`})
			// data/ shows only the mount points of the command's own TMPDIR and HOME.
			if out := output(t, j, Stdout); info.Status != StatusExited || j.ExitCode() != 0 || strings.Contains(out, "admin.key") || !strings.HasSuffix(out, "t\nh\nmine\n") {
				t.Errorf("work in the root: %+v exit %d %q %q", info, j.ExitCode(), out, output(t, j, Stderr))
			}
		})
	}
}

// TestCommandsDieFirstOnOOM: commands get the highest OOM score adjustment, so that
// the kernel kills them before the daemon when memory runs out; the daemon keeps its.
func TestCommandsDieFirstOnOOM(t *testing.T) {
	t.Parallel()
	own := func() string {
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	before := own()
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			// $$ is the command's shell; cat is a process it forks at once, which a score
			// set after the start (the daemon writing it) would reach too late.
			j, _ := run(t, sb, Cmd{Command: `c=$(cat /proc/self/oom_score_adj); read -r s </proc/$$/oom_score_adj; echo "$s $c"`})
			if got := strings.TrimSpace(output(t, j, Stdout)); got != "1000 1000" {
				t.Errorf("oom_score_adj of the shell and its child: %q (stderr %q)", got, output(t, j, Stderr))
			}
		})
	}
	t.Cleanup(func() {
		if after := own(); after != before {
			t.Errorf("the daemon's own oom_score_adj changed from %s to %s", before, after)
		}
	})
}

// TestOperatorEnvAndWritableDirs: the operator's variables reach every command (a call's
// own win over them), and a writable dir (a shared cache) is writable by isolated
// commands of every session, while the rest of the host stays read-only.
func TestOperatorEnvAndWritableDirs(t *testing.T) {
	t.Parallel()
	// A name of this test's own: other tests running in parallel never read it.
	os.Setenv("TOOLSERVER_TEST_PASSED", "from-host")
	t.Cleanup(func() { os.Unsetenv("TOOLSERVER_TEST_PASSED") })
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			cache, other := t.TempDir(), t.TempDir()
			link := filepath.Join(t.TempDir(), "cache-link")
			if err := os.Symlink(cache, link); err != nil {
				t.Fatal(err)
			}
			cfg := bc.cfg
			cfg.Env = []string{"GOCACHE=" + link, "GOFLAGS=-mod=mod", "EMPTY="}
			cfg.EnvAllow = []string{"TOOLSERVER_TEST_PASSED"}
			cfg.WritableDirs = []string{link}
			m := newManager(t, cfg)
			for i, who := range []string{"a", "b"} {
				sb, _ := newSandbox(t, m, Options{})
				cmd := `echo "$GOFLAGS|$EMPTY|${EMPTY+set}|$TOOLSERVER_TEST_PASSED"; echo ` + who + ` >> "$GOCACHE/shared"; cat "$GOCACHE/shared"; echo x > "$OTHER/f" 2>/dev/null && echo other-written`
				j, _ := run(t, sb, Cmd{Command: cmd, Env: []string{"OTHER=" + other, "GOFLAGS=-v"}})
				want := "-v||set|from-host\na\n"
				if i == 1 {
					want += "b\n"
				}
				if bc.cfg.Mode == ModeLocal {
					want += "other-written\n"
				}
				if got := output(t, j, Stdout); got != want {
					t.Errorf("session %s: %q, want %q (stderr %q)", who, got, want, output(t, j, Stderr))
				}
			}
		})
	}
}

func TestWritableDirsValidated(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dirs []string
		env  []string
		want string
	}{
		{[]string{"relative"}, nil, "absolute path"},
		{[]string{"/"}, nil, "absolute path"},
		{[]string{"/nonexistent-toolserverd"}, nil, "no such file"},
		{[]string{file}, nil, "not a directory"},
		{[]string{filepath.Dir(state)}, nil, "overlaps"},
		{[]string{filepath.Join(state)}, nil, "overlaps"},
		{nil, []string{"NOEQUALS"}, "NAME=value"},
		{nil, []string{"1BAD=x"}, "NAME=value"},
	} {
		err := Config{StateDir: state, WritableDirs: c.dirs, Env: c.env}.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: want an error with %q, got %v", c.dirs, c.env, c.want, err)
		}
	}
}

// TestIsolationHidesDaemonFiles: an isolated command does not see the files the
// daemon hides (its config file, which may hold inline secrets), wherever they lie:
// outside the root (read through a symlink too), inside the root (where it cannot be
// overwritten or removed either), or inside a hidden dir. Their neighbours stay
// visible.
func TestIsolationHidesDaemonFiles(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			etc, root, data := t.TempDir(), t.TempDir(), t.TempDir()
			for p, content := range map[string]string{
				filepath.Join(etc, "config.yaml"):      "api_key: tsk_secret_outside\n",
				filepath.Join(etc, "neighbour.txt"):    "visible\n",
				filepath.Join(root, "conf/inner.yaml"): "api_key: tsk_secret_inside\n",
				filepath.Join(data, "config.yaml"):     "api_key: tsk_secret_data\n",
			} {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(filepath.Join(etc, "config.yaml"), filepath.Join(root, "link.yaml")); err != nil {
				t.Fatal(err)
			}
			cfg := bc.cfg
			cfg.Hide = []string{data}
			cfg.HideFiles = []string{filepath.Join(etc, "config.yaml"), filepath.Join(root, "conf/inner.yaml"), filepath.Join(data, "config.yaml")}
			m := newManager(t, cfg)
			sb, err := m.New(root, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{
				"cat " + filepath.Join(etc, "config.yaml"),
				"cat link.yaml",
				"cat conf/inner.yaml",
				"cat " + filepath.Join(data, "config.yaml"),
				"echo tsk_secret_overwritten > conf/inner.yaml; cat conf/inner.yaml",
				"rm -f conf/inner.yaml; mv conf/inner.yaml conf/moved.yaml; cat conf/moved.yaml",
			} {
				j, _ := run(t, sb, Cmd{Command: cmd})
				if out := output(t, j, Stdout); strings.Contains(out, "secret") {
					t.Errorf("%q: exit %d, stdout %q", cmd, j.ExitCode(), out)
				}
			}
			if b, err := os.ReadFile(filepath.Join(root, "conf/inner.yaml")); err != nil || string(b) != "api_key: tsk_secret_inside\n" {
				t.Errorf("the hidden file in the root on the host: %q %v", b, err)
			}
			j, info := run(t, sb, Cmd{Command: "cat " + filepath.Join(etc, "neighbour.txt") + " && echo mine > conf/other.txt && cat conf/other.txt"})
			if out := output(t, j, Stdout); info.Status != StatusExited || j.ExitCode() != 0 || out != "visible\nmine\n" {
				t.Errorf("the hidden files' neighbours: %+v %q %q", info, out, output(t, j, Stderr))
			}
		})
	}
}

// TestResolveRefusesHiddenFiles: in every mode, a hidden file inside the root cannot
// be resolved, by its name or through a symlink, and Hidden lists it; one outside the
// root is refused as outside anyway.
func TestResolveRefusesHiddenFiles(t *testing.T) {
	t.Parallel()
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			conf := filepath.Join(root, "conf", "config.yaml")
			if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(conf, []byte("api_key: tsk_secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("conf/config.yaml", filepath.Join(root, "link.yaml")); err != nil {
				t.Fatal(err)
			}
			cfg := bc.cfg
			cfg.HideFiles = []string{conf}
			m := newManager(t, cfg)
			sb, err := m.New(root, Options{})
			if err != nil {
				t.Fatal(err)
			}
			real, _ := filepath.EvalSymlinks(conf)
			if !slices.Contains(sb.Hidden(), real) {
				t.Errorf("Hidden() = %q, want it to list %s", sb.Hidden(), real)
			}
			for _, p := range []string{"conf/config.yaml", conf, "link.yaml", "conf/../conf/config.yaml"} {
				_, err := sb.Resolve(p)
				if !errors.Is(err, ErrHidden) || !strings.Contains(fmt.Sprint(err), "config") {
					t.Errorf("Resolve(%q) = %v, want ErrHidden naming the config file", p, err)
				}
			}
			for _, p := range []string{"conf", "conf/other.yaml"} {
				if _, err := sb.Resolve(p); err != nil {
					t.Errorf("Resolve(%q): %v", p, err)
				}
			}
		})
	}
}

// TestIsolationKernelControlReadOnly: an isolated command cannot move itself out of
// its cgroups (a pid written into any cgroup.procs, v1 or v2, fails) nor change a
// kernel setting: /sys and /proc/sys are read-only in both backends, which is why
// the permission policy's immune ask for such writes matters in local mode only.
func TestIsolationKernelControlReadOnly(t *testing.T) {
	t.Parallel()
	procs, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if v2, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil && !v2.IsDir() {
		procs = append(procs, "/sys/fs/cgroup/cgroup.procs")
	}
	if len(procs) == 0 {
		t.Skip("no cgroup file system here")
	}
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			cmd := `before=$(cat /proc/self/cgroup)
for f in ` + strings.Join(procs, " ") + `; do
  if (echo $$ > "$f") 2>/dev/null; then echo "wrote $f"; fi
done
for f in /proc/sys/kernel/sysrq /proc/sys/vm/overcommit_memory /sys/kernel/mm/ksm/run; do
  if [ -e "$f" ] && [ -w "$f" ]; then echo "writable $f"; fi
done
[ "$before" = "$(cat /proc/self/cgroup)" ] || echo "cgroups changed"
echo done`
			j, info := run(t, sb, Cmd{Command: cmd})
			if out := output(t, j, Stdout); info.Status != StatusExited || out != "done\n" {
				t.Errorf("%+v: %q %q", info, out, output(t, j, Stderr))
			}
		})
	}
}

// TestIsolationHidesSwappedConfig: a config file mounted as Kubernetes mounts a
// ConfigMap (config.yaml -> ..data/config.yaml, ..data -> a timestamped dir that an
// update replaces and deletes) stays hidden after an update, and commands still run:
// the file is found again for every command, not once at start.
func TestIsolationHidesSwappedConfig(t *testing.T) {
	t.Parallel()
	for _, bc := range isolatedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			etc := t.TempDir()
			version := func(name, secret string) {
				if err := os.Mkdir(filepath.Join(etc, name), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(etc, name, "config.yaml"), []byte("api_key: "+secret+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				tmp := filepath.Join(etc, "..data_tmp")
				if err := os.Symlink(name, tmp); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(etc, "..data")); err != nil {
					t.Fatal(err)
				}
			}
			version("..v1", "tsk_secret_v1")
			if err := os.Symlink("..data/config.yaml", filepath.Join(etc, "config.yaml")); err != nil {
				t.Fatal(err)
			}
			cfg := bc.cfg
			cfg.HideFiles = []string{filepath.Join(etc, "config.yaml")}
			m := newManager(t, cfg)
			sb, _ := newSandbox(t, m, Options{})
			check := func(when string) {
				t.Helper()
				j, info := run(t, sb, Cmd{Command: "cat " + filepath.Join(etc, "config.yaml") + "; echo ran"})
				if out := output(t, j, Stdout); info.Status != StatusExited || strings.Contains(out, "secret") || !strings.HasSuffix(out, "ran\n") {
					t.Errorf("%s: %+v %q %q", when, info, out, output(t, j, Stderr))
				}
			}
			check("before the update")
			version("..v2", "tsk_secret_v2")
			if err := os.RemoveAll(filepath.Join(etc, "..v1")); err != nil {
				t.Fatal(err)
			}
			check("after the update")
		})
	}
}

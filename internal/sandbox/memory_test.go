package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needMemoryCgroup skips the test where the host has no writable memory cgroup,
// except under CI, whose machines have one.
func needMemoryCgroup(t *testing.T) {
	t.Helper()
	if hostCaps().MemoryCgroup != "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no memory cgroup here: %s", hostCaps().MemoryCgroupError)
	}
	t.Skipf("no memory cgroup here: %s", hostCaps().MemoryCgroupError)
}

// fill makes the shell hold about 200 MB: a string that large in a bash variable.
const fill = `s=$(head -c 200000000 /dev/zero | tr '\0' x)`

// TestMemoryLimit: a command that fills memory is held to its job's limit, its
// process is killed by the kernel and the job says so; the next command runs.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	needMemoryCgroup(t)
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			cfg := bc.cfg
			cfg.MemoryLimit = 64 << 20
			m := newManager(t, cfg)
			if m.MemoryLimit() != 64<<20 {
				t.Fatalf("MemoryLimit() = %d; want the configured 64 MiB", m.MemoryLimit())
			}
			sb, _ := newSandbox(t, m, Options{})

			// The shell itself fills memory.
			_, info := run(t, sb, Cmd{Command: fill + "; echo survived"})
			if info.OOMKills < 1 || info.MemoryLimit != 64<<20 {
				t.Fatalf("the shell filling memory: %+v; want an OOM kill under a 64 MiB limit", info)
			}
			if info.MemoryPeak > 64<<20 || info.MemoryPeak < 32<<20 {
				t.Errorf("memory peak %d; want it near the 64 MiB limit", info.MemoryPeak)
			}
			if info.Status == StatusExited && info.ExitCode != nil && *info.ExitCode == 0 {
				t.Errorf("the job that ran out of memory exited 0: %+v", info)
			}

			// A child fills memory; the shell lives on and sees it killed.
			j, info := run(t, sb, Cmd{Command: `bash -c '` + strings.ReplaceAll(fill, `'`, `"`) + `'; echo "child exit $?"`})
			if got := output(t, j, Stdout); got != "child exit 137\n" || info.OOMKills != 1 {
				t.Errorf("a child filling memory: stdout %q, %+v; want it killed (137) and one OOM kill", got, info)
			}
			if info.Status != StatusExited || info.ExitCode == nil || *info.ExitCode != 0 {
				t.Errorf("the shell should have exited 0 after its child was killed: %+v", info)
			}

			j, info = run(t, sb, Cmd{Command: "echo alive"})
			if output(t, j, Stdout) != "alive\n" || info.OOMKills != 0 {
				t.Errorf("after running out of memory: %+v", info)
			}
			if st := m.Stats(); st.Started != 3 || st.OOMKills < 2 {
				t.Errorf("stats %+v: want 3 commands started and at least 2 OOM kills", st)
			}
		})
	}
}

// TestMemoryLimitDefault: without a configured limit, a job may use half of what
// the daemon may; a negative limit leaves jobs unlimited; either way the instance's
// memory cgroup is gone after shutdown.
func TestMemoryLimitDefault(t *testing.T) {
	t.Parallel()
	needMemoryCgroup(t)
	m := newManager(t, Config{})
	if want := hostCaps().Memory / 2; m.MemoryLimit() != want || want < MinMemoryLimit {
		t.Errorf("default MemoryLimit() = %d; want half of %d", m.MemoryLimit(), hostCaps().Memory)
	}
	instance := filepath.Join(hostCaps().MemoryCgroup, "toolserverd-"+filepath.Base(m.dir))
	if _, err := os.Stat(filepath.Join(instance, "memory.limit_in_bytes")); err != nil {
		t.Fatalf("no instance memory cgroup: %v", err)
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(instance); !os.IsNotExist(err) {
		t.Errorf("the instance memory cgroup is left after shutdown: %v", err)
	}

	if m := newManager(t, Config{MemoryLimit: -1}); m.MemoryLimit() != 0 || m.memoryDir != "" {
		t.Errorf("MemoryLimit -1: limit %d, cgroup %q; want none", m.MemoryLimit(), m.memoryDir)
	}
	if err := (Config{MemoryLimit: 1 << 20}).WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("a 1 MiB limit: %v; want it refused", err)
	}
}

// TestFinishedJobLeavesNoCgroup: a job's pids and memory cgroups are removed as soon
// as it has ended, not when the session drops it: a session keeps its last
// JobRetention finished jobs, and at two cgroups each a busy daemon ran the kernel out
// of memory cgroups (65,535 at most), after which no command could start. What the
// cgroups told about the job (its pids and memory peaks) is still reported, and its
// output can still be read.
func TestFinishedJobLeavesNoCgroup(t *testing.T) {
	t.Parallel()
	needMemoryCgroup(t)
	if hostCaps().PidsCgroup == "" {
		t.Skipf("no pids cgroup here: %s", hostCaps().PidsCgroupError)
	}
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, bc.cfg)
			if m.cgroupDir == "" || m.memoryDir == "" {
				t.Fatalf("manager without job cgroups (pids %q, memory %q) although the host has both", m.cgroupDir, m.memoryDir)
			}
			sb, _ := newSandbox(t, m, Options{})
			for _, c := range []Cmd{
				{Command: "echo one; sleep 0.1"},
				{Command: "sleep 30 & echo two"},                       // a child the job's end kills
				{Command: "sleep 30", Timeout: 200 * time.Millisecond}, // killed by its timeout
			} {
				j, info := run(t, sb, c)
				for _, dir := range []string{j.cgroup, j.memCgroup} {
					if _, err := os.Stat(dir); !os.IsNotExist(err) {
						t.Errorf("%q: its cgroup %s is still there after it ended: %v", c.Command, dir, err)
					}
				}
				if info.PidsPeak < 1 || info.MemoryPeak <= 0 {
					t.Errorf("%q: pids peak %d, memory peak %d; want both read before the cgroups went", c.Command, info.PidsPeak, info.MemoryPeak)
				}
				j.Kill() // a finished job's cgroups are gone: nothing to signal, no error
			}
			for _, parent := range []string{m.cgroupDir, m.memoryDir} {
				entries, err := os.ReadDir(parent)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if e.IsDir() {
						t.Errorf("instance cgroup %s still holds job cgroup %s", parent, e.Name())
					}
				}
			}
		})
	}
}

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reapChildEnv makes TestReapsDeadInstance run as the instance that gets killed.
const reapChildEnv = "SANDBOX_REAP_CHILD_STATE_DIR"

// A daemon killed with SIGKILL leaves its commands running (in their pids cgroup,
// reparented to init) and its state directory behind. The next Manager on the same
// state dir kills those commands and removes the directory and the cgroup, and
// leaves a live instance's alone.
func TestReapsDeadInstance(t *testing.T) {
	if dir := os.Getenv(reapChildEnv); dir != "" {
		m, err := NewManager(Config{Mode: ModeLocal, StateDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		sb, err := m.New(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The job's own process dies with its daemon (parent-death signal); what it
		// started does not.
		if _, err := sb.Start(context.Background(), Cmd{Command: "sleep 300 & echo $! > pid.tmp && mv pid.tmp pid; wait", Timeout: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		var pid []byte
		if !eventually(10*time.Second, func() bool { pid, err = os.ReadFile(filepath.Join(root, "pid")); return err == nil }) {
			t.Fatal("the job wrote no pid")
		}
		fmt.Printf("JOB %s %s %v\n", strings.TrimSpace(string(pid)), m.dir, m.PidsLimited())
		select {} // until the parent kills this process
	}
	t.Parallel()
	stateDir := t.TempDir()
	live := newManager(t, Config{Mode: ModeLocal, StateDir: stateDir}) // a live instance beside the dead one

	child := exec.Command(os.Args[0], "-test.run", "^TestReapsDeadInstance$")
	child.Env = append(os.Environ(), reapChildEnv+"="+stateDir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("the child said nothing: %v", err)
	}
	var pid int
	var deadDir string
	var limited bool
	if _, err := fmt.Sscanf(line, "JOB %d %s %t", &pid, &deadDir, &limited); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	time.Sleep(100 * time.Millisecond) // what dies with the daemon has died
	if !alive(pid) {
		t.Fatal("the job's child died with its daemon: nothing to reap")
	}
	cgroup := filepath.Join(hostCaps().PidsCgroup, "toolserverd-"+filepath.Base(deadDir))

	m, err := NewManager(Config{Mode: ModeLocal, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	if _, err := os.Stat(deadDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead instance's state dir is still there: %v", err)
	}
	if _, err := os.Stat(live.dir); err != nil {
		t.Errorf("the live instance's state dir was removed: %v", err)
	}
	if !limited {
		if os.Getenv("CI") == "true" {
			t.Fatal("no pids cgroup here: the dead instance's commands cannot be found")
		}
		t.Skip("no pids cgroup here: the dead instance's commands cannot be found")
	}
	if !eventually(20*time.Second, func() bool { return !alive(pid) }) {
		t.Errorf("the dead instance's job (pid %d) still runs", pid)
	}
	if _, err := os.Stat(cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead instance's cgroup %s is still there: %v", cgroup, err)
	}
	if hostCaps().MemoryCgroup != "" {
		memory := filepath.Join(hostCaps().MemoryCgroup, "toolserverd-"+filepath.Base(deadDir))
		if _, err := os.Stat(memory); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dead instance's memory cgroup %s is still there: %v", memory, err)
		}
	}
	for _, dir := range []string{live.cgroupDir, live.memoryDir} {
		if _, err := os.Stat(dir); dir != "" && err != nil {
			t.Errorf("the live instance's cgroup was removed: %v", err)
		}
	}
}

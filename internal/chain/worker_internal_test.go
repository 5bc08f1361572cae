package chain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toolserverd/toolserverd/internal/sandbox"
)

// TestRemoveStaleCgroups: the cgroup a killed daemon's worker left is removed when the
// next daemon first starts a worker; this daemon's are not touched.
func TestRemoveStaleCgroups(t *testing.T) {
	parent, err := sandbox.MemoryCgroupParent()
	if err != nil {
		t.Skipf("no memory cgroup can be made here: %v", err)
	}
	// A pid no process has: one that has exited (and been reaped).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(parent, fmt.Sprintf("%s%d-1", workerCgroupPrefix, cmd.Process.Pid))
	own := filepath.Join(parent, fmt.Sprintf("%s%d-999999", workerCgroupPrefix, os.Getpid()))
	for _, dir := range []string{dead, own} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = os.Remove(dead), os.Remove(own) })
	(&workers{}).cgroupParent()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead daemon's worker cgroup is still there (%v)", err)
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("this daemon's worker cgroup was removed: %v", err)
	}
}

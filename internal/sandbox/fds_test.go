package sandbox

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A descriptor the daemon inherited from whatever started it without close-on-exec
// (a shell's, a supervisor's pipe) must not reach commands: in the isolated modes
// it would be a way out of the sandbox (a pipe to the launcher, a file of the host
// opened for writing), and a command holding a pipe's write end keeps its reader
// waiting for an end of file after the daemon is gone.
func TestInheritedDescriptorsNotPassed(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // no O_CLOEXEC, as a launcher leaves them
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	var st unix.Stat_t
	if err := unix.Fstat(p[1], &st); err != nil {
		t.Fatal(err)
	}
	pipe := fmt.Sprintf("pipe:[%d]", st.Ino)
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			m := newManager(t, bc.cfg)
			sb, _ := newSandbox(t, m, Options{})
			j, info := run(t, sb, Cmd{Command: `ls -l /proc/$$/fd`})
			out := output(t, j, Stdout)
			if info.Status != StatusExited || j.ExitCode() != 0 {
				t.Fatalf("ls: %+v %q", info, output(t, j, Stderr))
			}
			for _, fd := range p {
				if strings.Contains(out, fmt.Sprintf(" %d -> ", fd)) {
					t.Errorf("the command has the daemon's inherited descriptor %d (%s):\n%s", fd, pipe, out)
				}
			}
		})
	}
}

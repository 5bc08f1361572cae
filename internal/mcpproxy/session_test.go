//go:build linux

package mcpproxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStdioServerRunsApart: a stdio server leads a session of its own, and so has no
// controlling terminal: started in the daemon's session, a server run by a daemon
// started in a terminal could open /dev/tty and push input into the operator's shell
// (TIOCSTI), as commands could (see the sandbox's TestCommandsHaveNoTerminal). Nor
// does it get the descriptors the daemon inherited without close-on-exec (a
// launcher's pipe, whose reader would wait for the server to end).
func TestStdioServerRunsApart(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // no O_CLOEXEC, as a launcher leaves them
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	script := npmPackage(t, "server-everything")
	dir := t.TempDir()
	session, fdList := filepath.Join(dir, "session"), filepath.Join(dir, "fds")
	h := newHarness(t, Config{Servers: []ServerConfig{
		{Name: "s", Transport: TransportStdio, Command: "sh", Enabled: true,
			Args: []string{"-c", `echo "$$ $(cut -d' ' -f6 /proc/$$/stat)" > "$1"; ls -l /proc/$$/fd > "$2"; exec node "$0" stdio`, script, session, fdList}},
	}})
	h.start(t)
	h.waitState(t, "s", StateReady, 30*time.Second)
	b, err := os.ReadFile(session)
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(b)); len(f) != 2 || f[0] != f[1] {
		t.Errorf("the server's pid and session: %q; want it to lead its own session", b)
	}
	if b, err = os.ReadFile(fdList); err != nil {
		t.Fatal(err)
	}
	for _, fd := range p {
		if strings.Contains(string(b), fmt.Sprintf(" %d -> ", fd)) {
			t.Errorf("the server has the daemon's inherited descriptor %d:\n%s", fd, b)
		}
	}
}

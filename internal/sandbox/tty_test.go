package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ttyChildEnv makes TestCommandsHaveNoTerminal run as the child it starts: a
// daemon with a controlling terminal, running one command of the backend named.
const ttyChildEnv = "TOOLSERVERD_TEST_TTY_CHILD"

// TestCommandsHaveNoTerminal: a daemon started in a terminal (the README's first
// steps) must not lend it to commands. One that can open /dev/tty reads what the
// operator types there and, where TIOCSTI is allowed (dev.tty.legacy_tiocsti),
// pushes input into it that the operator's shell runs once the daemon exits: out
// of any sandbox, bubblewrap's included (CVE-2017-5226, why it has --new-session).
// Every command starts in a session of its own, without a controlling terminal.
func TestCommandsHaveNoTerminal(t *testing.T) {
	if name := os.Getenv(ttyChildEnv); name != "" {
		ttyChild(t, name)
		return
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	for _, bc := range allBackends() {
		t.Run(bc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := exec.Command(os.Args[0], "-test.run=^TestCommandsHaveNoTerminal$", "-test.count=1")
			cmd.Env = append(os.Environ(), ttyChildEnv+"="+bc.name)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v\n%s", err, out.String())
			}
			switch s := out.String(); {
			case strings.Contains(s, "RESULT: skip"):
				t.Skip(s)
			case strings.Contains(s, "RESULT: parent has no terminal"):
				t.Fatalf("the child daemon got no controlling terminal:\n%s", s)
			case !strings.Contains(s, "RESULT: no terminal"):
				t.Errorf("a command could open the daemon's terminal:\n%s", s)
			}
		})
	}
}

// ttyChild runs in the child: it has the pseudo-terminal as its controlling
// terminal, and reports whether a command can open it.
func ttyChild(t *testing.T, name string) {
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
		fmt.Println("RESULT: parent has no terminal:", err)
		return
	} else {
		f.Close()
	}
	var cfg Config
	for _, bc := range allBackends() {
		if bc.name == name {
			cfg = bc.cfg
		}
	}
	if cfg.Mode == ModeIsolated {
		if _, err := hostCaps().backend(cfg.WithDefaults().Backend); err != nil {
			fmt.Println("RESULT: skip:", err)
			return
		}
	}
	m := newManager(t, cfg)
	sb, _ := newSandbox(t, m, Options{})
	j, _ := run(t, sb, Cmd{Command: `if exec 3<>/dev/tty; then echo "RESULT: opened /dev/tty"; else echo "RESULT: no terminal"; fi`})
	fmt.Print(output(t, j, Stdout), output(t, j, Stderr))
}

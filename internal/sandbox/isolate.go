package sandbox

import (
	"encoding/json"
	"os"
	"syscall"
)

// nsCloneFlags puts a command in new user, mount, pid, ipc and uts namespaces, and a
// new network namespace (only its own loopback) unless network is allowed.
func nsCloneFlags(network bool) uintptr {
	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
		syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if !network {
		flags |= syscall.CLONE_NEWNET
	}
	return flags
}

// nsAttr starts a process in new namespaces as uid/gid 0 of its user namespace,
// mapped to the daemon's own ids (so it writes the root as the daemon would).
func nsAttr(network bool) *syscall.SysProcAttr {
	attr := groupAttr()
	attr.Cloneflags = nsCloneFlags(network)
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	return attr
}

// groupAttr starts the command as the leader of a new session, and so of a new
// process group (the whole group can be signalled), and kills it if the daemon's
// launching thread dies. The new session has no controlling terminal: with the
// daemon's (one started in a terminal), a command could open /dev/tty, read what
// the operator types and push input there with TIOCSTI that the operator's shell
// runs, out of any sandbox (CVE-2017-5226, why bubblewrap has --new-session).
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// localLaunch runs bash -c command with the daemon's rights.
func localLaunch(bash, dir, command string, env []string) launch {
	return launch{argv: []string{bash, "-c", command}, env: env, dir: dir, attr: groupAttr()}
}

// nsInit is the first process of a new pid namespace: a shell that runs the command's
// shell as its child and exits with its status. The command's shell must not be pid 1
// itself, because the kernel does not deliver SIGTERM to a namespace's init from
// outside: on a timeout it would go on with its next command. The trailing exit keeps
// bash from exec'ing the child in place of the init; the init's own stderr goes to
// /dev/null so that its "Killed" notices do not mix with the command's output.
const nsInit = `exec 3>&2 2>/dev/null; "$0" -c "$1" 2>&3 3>&-; exit $?`

// namespacesLaunch runs bash -c command in new namespaces through the init helper
// (helper.go): read-only host, writable rw (the root and the session's temp dir), no
// capabilities, Landlock. A command whose shell dies of a signal shows as exit code
// 128+n, like in bwrap.
func namespacesLaunch(bash, dir, command string, env []string, rw, hide, hideFiles []string, network bool, abi int) (launch, error) {
	spec, err := json.Marshal(helperSpec{RW: rw, Hide: hide, HideFiles: hideFiles, Dir: dir, LandlockABI: abi, Network: network, MaskRun: maskRun(rw, network)})
	if err != nil {
		return launch{}, err
	}
	return launch{
		path: helperExe,
		argv: []string{helperArg0, string(spec), bash, "-c", nsInit, bash, command},
		env:  env, dir: dir, attr: nsAttr(network),
	}, nil
}

// maskRun reports whether /run should be hidden behind an empty read-only tmpfs: it
// holds the host's privileged Unix sockets (docker, systemd, D-Bus), which read-only
// mounts do not protect. It stays visible when the network is allowed (resolv.conf
// may point into it) or when a writable dir lies inside it.
func maskRun(rw []string, network bool) bool {
	if network {
		return false
	}
	if fi, err := os.Stat("/run"); err != nil || !fi.IsDir() {
		return false
	}
	for _, p := range rw {
		if within(p, "/run") {
			return false
		}
	}
	return true
}

// bwrapLaunch runs bash -c command under bubblewrap: a read-only bind of the host, a
// fresh /dev, a fresh read-only /proc (bwrap alone leaves /proc/sys writable, and
// the command is uid 0), the rw directories bound writable at the same paths, every
// namespace unshared (the network too unless allowed) and no capabilities. Hidden dirs
// are covered by empty tmpfs and hidden files by /dev/null.
func bwrapLaunch(bwrap, bash, dir, command string, env []string, rw, hide, hideFiles []string, network bool) launch {
	argv := []string{bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc"}
	if maskRun(rw, network) {
		argv = append(argv, "--tmpfs", "/run", "--remount-ro", "/run")
	}
	// Hidden dirs: an empty tmpfs over each, the writable dirs inside bound back on top
	// (bwrap takes bind sources from the host), then the tmpfs made read-only. One
	// inside a writable dir is covered after that dir's bind, and the writable dirs
	// inside it bound back on top.
	outer, inner := splitHidden(hide, rw)
	for _, h := range outer {
		argv = append(argv, "--tmpfs", h)
	}
	for _, p := range rw {
		argv = append(argv, "--bind", p, p)
	}
	for _, h := range inner {
		argv = append(argv, "--tmpfs", h)
	}
	for _, p := range rw {
		if insideAny(p, inner) {
			argv = append(argv, "--bind", p, p) // TMPDIR and HOME in a covered state dir
		}
	}
	for _, h := range outer {
		argv = append(argv, "--remount-ro", h)
	}
	// Hidden files (the daemon's config): the host's /dev/null bound read-only over
	// each, last, so that no writable bind uncovers one (coveredFiles left out those
	// under a tmpfs already).
	for _, f := range hideFiles {
		argv = append(argv, "--ro-bind", "/dev/null", f)
	}
	argv = append(argv, "--unshare-all")
	if network {
		argv = append(argv, "--share-net")
	}
	argv = append(argv, "--die-with-parent", "--cap-drop", "ALL", "--chdir", dir, "--", bash, "-c", command)
	return launch{argv: argv, env: env, dir: dir, attr: groupAttr()}
}

// splitHidden sorts the hidden dirs: those inside no writable dir (covered first, the
// writable dirs inside them bound back) and those inside one (covered after it).
func splitHidden(hide, rw []string) (outer, inner []string) {
	for _, h := range hide {
		if insideAny(h, rw) {
			inner = append(inner, h)
		} else {
			outer = append(outer, h)
		}
	}
	return outer, inner
}

func insideAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

package sandbox

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is applied by the namespaces init helper to its own thread only
// (landlock_restrict_self without TSYNC), right before it execs the command, which
// inherits the domain and can never leave it. Libraries such as go-landlock restrict
// every thread of a process through psx; a single thread is all that is needed here,
// so the raw system calls from x/sys/unix do.

// minLandlockABI: read-only mounts already stop writes, truncation and chmod of host
// files; Landlock is what stops writes to host device nodes (a read-only mount does
// not), which every ABI covers.
const minLandlockABI = 1

const (
	llRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// llFileRights are the rights that may be granted on a non-directory.
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV | unix.LANDLOCK_ACCESS_FS_READ_DIR
)

// landlockABI returns the kernel's Landlock ABI version, 0 when it has none.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Errorf("landlock: %w", errno)
	}
	return int(v), nil
}

// handledFS is every file-system right the given ABI knows.
func handledFS(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// landlockPolicy is what a sandboxed command may touch: everything readable and
// executable, writable only below rw, and the usual character devices.
type landlockPolicy struct {
	abi int
	rw  []string
	// denyAbstractUnix also cuts abstract unix sockets outside the sandbox (ABI 6).
	denyAbstractUnix bool
}

// devices a shell needs to write to; missing ones are skipped.
var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// restrictThread applies the policy to the calling OS thread. The caller must hold
// the thread (runtime.LockOSThread) and never release it.
func (p landlockPolicy) restrictThread() error {
	handled := handledFS(p.abi)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	if p.abi >= 6 {
		// Signals may not leave the sandbox (pid namespaces already hide the host).
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL
		if p.denyAbstractUnix {
			attr.Scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	}
	// Older kernels accept the full struct as long as the fields they do not know are zero.
	size := unsafe.Sizeof(attr)
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock create ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if err := addPathRule(int(fd), "/", llRead&handled); err != nil {
		return err
	}
	for _, path := range p.rw {
		if err := addPathRule(int(fd), path, handled); err != nil {
			return err
		}
	}
	for _, path := range landlockDevices {
		if _, err := os.Lstat(path); err == nil {
			if err := addPathRule(int(fd), path, llDevice&handled); err != nil {
				return err
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock restrict self: %w", errno)
	}
	return nil
}

func addPathRule(rulesetFD int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock rule %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock rule %s: %w", path, errno)
	}
	return nil
}

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// The namespaces backend re-executes the daemon's own binary (/proc/self/exe) as the
// first process of the new namespaces, under the name helperArg0. Before main runs,
// the init function below recognises that name, prepares the namespaces (which needs
// code between clone and the exec of bash, something os/exec cannot run) and execs
// the command. In any other process it does nothing.
//
// Inside, the helper is root of its own user namespace (uid 0 mapped to the daemon's
// uid), so it may mount in its own mount namespace:
//
//  1. every mount becomes private, so nothing propagates back to the host;
//  2. the hidden directories (the daemon's data and state) are covered by an empty
//     tmpfs, and the writable directories (the root, the session's temp dir) are
//     bind-mounted onto themselves (those inside a hidden one from a descriptor
//     opened before it was covered); then the hidden files (the daemon's config)
//     are covered by a bind of /dev/null;
//  3. a fresh /proc is mounted for the new pid namespace and, without network, an
//     empty tmpfs hides /run and the host's privileged Unix sockets in it;
//  4. every mount is made read-only, recursively, then the writable binds are made
//     writable again, and the hidden files' covers in them read-only once more: the
//     host cannot be written, chmod-ed, touched or truncated;
//  5. the loopback device of the new network namespace is brought up (it is not
//     the host's: the host's listeners stay unreachable);
//  6. every capability is dropped (bounding, inheritable and ambient sets) and
//     Landlock allows writes only below the writable dirs and to a few devices (a
//     read-only mount does not stop writes to device nodes);
//
// then bash is exec'd. Landlock also forbids any later mount, so the read-only flags
// cannot be undone even by a process that regains capabilities in a nested namespace.
const helperArg0 = "toolserverd-sandbox-init"

// helperExe is what the forking thread executes: the running binary.
const helperExe = "/proc/self/exe"

// helperSpec is handed to the helper in argv[1].
type helperSpec struct {
	RW          []string `json:"rw"`
	Hide        []string `json:"hide"`
	HideFiles   []string `json:"hide_files"`
	Dir         string   `json:"dir"`
	LandlockABI int      `json:"landlock_abi"`
	Network     bool     `json:"network"`
	MaskRun     bool     `json:"mask_run"`
}

func init() {
	if len(os.Args) < 3 || os.Args[0] != helperArg0 {
		return
	}
	err := runHelper(os.Args[1], os.Args[2:])
	fmt.Fprintf(os.Stderr, "toolserverd sandbox init: %v\n", err)
	os.Exit(126)
}

// runHelper prepares the namespaces and execs argv; it only returns on failure.
func runHelper(specJSON string, argv []string) error {
	runtime.LockOSThread() // capabilities and Landlock are per thread; exec from this one
	// Before /proc is read-only, and before anything forks: see commandOOMScoreAdj.
	_ = setOOMScoreAdj("self")
	var spec helperSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Hidden dirs (the daemon's data): each is covered by an empty tmpfs; a writable
	// dir inside one is opened before and bound back from its descriptor. One inside
	// a writable dir (the data dir in a checkout) is covered after that dir's bind, and
	// the writable dirs inside it (the session's TMPDIR and HOME, in the daemon's
	// state dir) bound back after that.
	outer, inner := splitHidden(spec.Hide, spec.RW)
	fds := map[string]int{}
	for _, p := range spec.RW {
		if insideAny(p, spec.Hide) {
			fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", p, err)
			}
			fds[p] = fd
		}
	}
	hide := func(dirs []string) error {
		for _, h := range dirs {
			if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k,mode=755"); err != nil {
				return fmt.Errorf("hide %s: %w", h, err)
			}
		}
		return nil
	}
	bind := func(underInner bool) error {
		for _, p := range spec.RW {
			if insideAny(p, inner) != underInner {
				continue
			}
			src := p
			if fd, ok := fds[p]; ok {
				if err := os.MkdirAll(p, 0o755); err != nil {
					return fmt.Errorf("mount point %s: %w", p, err)
				}
				src = fmt.Sprintf("/proc/self/fd/%d", fd)
			}
			if err := unix.Mount(src, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s: %w", p, err)
			}
		}
		return nil
	}
	for _, step := range []func() error{
		func() error { return hide(outer) },
		func() error { return bind(false) },
		func() error { return hide(inner) },
		func() error { return bind(true) },
		func() error {
			for _, f := range spec.HideFiles {
				err := unix.Mount("/dev/null", f, "", unix.MS_BIND, "")
				if errors.Is(err, unix.ENOENT) {
					continue // gone since the daemon looked: nothing to hide
				}
				if err != nil {
					return fmt.Errorf("hide %s: %w", f, err)
				}
			}
			return nil
		},
	} {
		if err := step(); err != nil {
			return err
		}
	}
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if spec.MaskRun {
		if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=16k,mode=755"); err != nil {
			return fmt.Errorf("mask /run: %w", err)
		}
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, ro); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	for _, p := range spec.RW {
		if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, rw); err != nil {
			return fmt.Errorf("make %s writable: %w", p, err)
		}
	}
	for _, f := range spec.HideFiles {
		if err := unix.MountSetattr(unix.AT_FDCWD, f, 0, ro); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("make %s read-only: %w", f, err)
		}
	}
	// The cwd still points into the mount that was there before the bind.
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("chdir %s: %w", spec.Dir, err)
	}
	if !spec.Network {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := (landlockPolicy{abi: spec.LandlockABI, rw: spec.RW, denyAbstractUnix: !spec.Network}).restrictThread(); err != nil {
		return err
	}
	return unix.Exec(argv[0], argv, os.Environ())
}

// loopbackUp brings up "lo" in the (new) network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropCapabilities empties the calling thread's bounding, inheritable and ambient
// sets, so the command gets no capability even though it runs as uid 0 of its
// namespace.
func dropCapabilities() error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

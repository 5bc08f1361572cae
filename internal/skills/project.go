package skills

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ProjectionDir is the folder, inside a sandbox root, that holds projected skills:
// skill "pdf" lands in <root>/.skills/pdf/.
const ProjectionDir = ".skills"

// A projection's marker lies beside it, .skills/.<name>.hash, not inside it: the
// skill's own scripts walk their folder (skill-creator's package_skill.py zips it),
// and should find only the skill's files there. The marker holds the content hash of
// what was copied, so that a later Project with the same hash copies nothing, and
// the identity (device and inode) of the folder it was copied into: a marker vouches
// for no other folder that takes that place (a concurrent projection of another
// process that won the race, a session's own), which keeps marker and folder as
// consistent as when the marker was inside.
func markerName(name string) string { return "." + name + ".hash" }

// legacyMarker is where earlier versions put the marker: inside the projection.
// Project still recognises it (and moves it out), and a scan ignores it.
const legacyMarker = ".skill-hash"

// ignoreFile keeps the projections out of a git checkout's changes: the session's
// working directory is often one, and an agent's `git add -A` would commit them.
const ignoreFile = "# Skills toolserverd copied here for the session; not part of the project.\n*\n"

// ignoreProjections writes .skills/.gitignore unless there is one (the session's own
// is left alone). A failure only leaves the copies visible to git.
func ignoreProjections(dst *os.Root) {
	f, err := dst.OpenFile(path.Join(ProjectionDir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString(ignoreFile)
	_ = f.Close()
}

// projecting serialises the projections of one skill into one sandbox root within
// this process: two sessions sharing a working directory otherwise race on the swap,
// each renaming the other's copy aside. Locks are striped by target path so the set
// stays bounded however many roots the daemon serves.
var projecting struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
}

func init() { projecting.seed = maphash.MakeSeed() }

func lockProjection(target string) func() {
	if abs, err := filepath.Abs(target); err == nil {
		target = abs
	}
	mu := &projecting.locks[maphash.String(projecting.seed, target)%uint64(len(projecting.locks))]
	mu.Lock()
	return mu.Unlock
}

// ProjectedPath returns where Project puts the skill called name inside sandboxRoot.
func ProjectedPath(sandboxRoot, name string) string {
	return filepath.Join(sandboxRoot, ProjectionDir, name)
}

// Project copies a skill's folder to <sandboxRoot>/.skills/<name>/ and returns that
// path. It copies only when the projection is missing, or its marker
// (.skills/.<name>.hash) holds another hash than skill.Hash or names another folder;
// a projection that is current is left as it is, including any change the session
// made to files in it. A projection of an earlier version, marker inside, is taken
// over when current (see migrateLegacy).
//
// Only the skill's Files are copied, each read through an os.Root of the skill folder
// (a symlink that leads out of it is never followed) and written through an os.Root
// of the sandbox (a symlink the sandbox planted at .skills or .skills/<name> is never
// followed either). Executable bits are kept, and a file that starts with an
// interpreter line (#!/…) is made executable (isScript). The copy is built in a
// temporary folder and renamed into place, so a session never sees half a skill;
// when two sessions project into the same root at once, one copy wins and both get
// its path.
func Project(skill Skill, sandboxRoot string) (string, error) {
	if !ValidName(skill.Name) {
		return "", fmt.Errorf("project skill %q: invalid name", skill.Name)
	}
	if skill.Dir == "" {
		return "", fmt.Errorf("project skill %q: no folder", skill.Name)
	}
	dst, err := os.OpenRoot(sandboxRoot)
	if err != nil {
		return "", fmt.Errorf("project skill %q: %w", skill.Name, err)
	}
	defer dst.Close()
	target := path.Join(ProjectionDir, skill.Name)
	marker := path.Join(ProjectionDir, markerName(skill.Name))
	out := ProjectedPath(sandboxRoot, skill.Name)
	if current(dst, target, marker, skill.Hash) {
		return out, nil
	}
	defer lockProjection(out)()
	if current(dst, target, marker, skill.Hash) || migrateLegacy(dst, target, marker, skill.Hash) {
		return out, nil
	}
	if err := dst.MkdirAll(ProjectionDir, 0o755); err != nil {
		return "", fmt.Errorf("project skill %q: %w", skill.Name, err)
	}
	ignoreProjections(dst)
	tmp := path.Join(ProjectionDir, ".tmp-"+skill.Name+"-"+randomSuffix())
	hash, err := copySkill(skill, dst, tmp)
	var id string
	if err == nil {
		id, err = folderID(dst, tmp)
	}
	if err != nil {
		_ = dst.RemoveAll(tmp)
		return "", fmt.Errorf("project skill %q: %w", skill.Name, err)
	}
	// The old marker goes first: from here until the new one is written, the folder
	// in place is not current, whoever looks.
	_ = dst.Remove(marker)
	// Another process projecting into the same root may still race on the renames; a
	// loser retries unless a winner already installed the same content.
	for attempt := 1; ; attempt++ {
		err := swapIn(dst, tmp, target, skill.Name)
		if err == nil {
			// The rename keeps the folder's identity, so the marker names the copy
			// just installed, even if another process has replaced it meanwhile.
			if err := writeMarker(dst, marker, hash, id); err != nil {
				return "", fmt.Errorf("project skill %q: marker: %w", skill.Name, err)
			}
			return out, nil
		}
		if current(dst, target, marker, hash) || attempt == 3 {
			_ = dst.RemoveAll(tmp)
			if current(dst, target, marker, hash) {
				return out, nil
			}
			return "", fmt.Errorf("project skill %q: %w", skill.Name, err)
		}
	}
}

// current reports whether target is a real folder and marker a regular file naming
// hash and that folder.
func current(root *os.Root, target, marker, hash string) bool {
	if hash == "" {
		return false
	}
	id, err := folderID(root, target)
	if err != nil {
		return false
	}
	info, err := root.Lstat(marker)
	if err != nil || !info.Mode().IsRegular() {
		return false
	}
	got, err := root.ReadFile(marker)
	return err == nil && strings.TrimSpace(string(got)) == hash+" "+id
}

// migrateLegacy takes over a projection an earlier version made, with its marker
// inside: when that marker holds hash, the folder is current, so the marker is
// written beside it and the one inside removed, and the folder (with any change the
// session made) is kept. It reports whether it did; a stale one is copied again.
func migrateLegacy(root *os.Root, target, marker, hash string) bool {
	inner := path.Join(target, legacyMarker)
	id, err := folderID(root, target)
	if err != nil || hash == "" {
		return false
	}
	if info, err := root.Lstat(inner); err != nil || !info.Mode().IsRegular() {
		return false
	}
	got, err := root.ReadFile(inner)
	if err != nil || strings.TrimSpace(string(got)) != hash {
		return false
	}
	if writeMarker(root, marker, hash, id) != nil {
		return false
	}
	_ = root.Remove(inner)
	return true
}

// folderID returns the device and inode of dir, which must be a real folder (not a
// symlink).
func folderID(root *os.Root, dir string) (string, error) {
	info, err := root.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok {
		return "", fmt.Errorf("%s: not a folder", dir)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// writeMarker writes the marker whole and at once (a file renamed into place), so
// that no reader sees half of one; the rename replaces whatever the session may
// have put there, a symlink included, without following it.
func writeMarker(root *os.Root, marker, hash, id string) error {
	tmp := marker + ".tmp-" + randomSuffix()
	if err := root.WriteFile(tmp, []byte(hash+" "+id+"\n"), 0o644); err != nil {
		return err
	}
	err := root.Rename(tmp, marker)
	if err != nil {
		// A folder in the way: remove it and try once more.
		_ = root.RemoveAll(marker)
		err = root.Rename(tmp, marker)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// swapIn replaces target with tmp: the old projection (if any) is first renamed aside,
// so the rename of tmp never lands inside it.
func swapIn(root *os.Root, tmp, target, name string) error {
	var old string
	if _, err := root.Lstat(target); err == nil {
		old = path.Join(ProjectionDir, ".old-"+name+"-"+randomSuffix())
		if err := root.Rename(target, old); err != nil {
			return err
		}
	}
	if err := root.Rename(tmp, target); err != nil {
		// Another projection took the place meanwhile; put the old copy back if the
		// place is still free, else drop it.
		if old != "" && root.Rename(old, target) != nil {
			_ = root.RemoveAll(old)
		}
		return err
	}
	if old != "" {
		_ = root.RemoveAll(old)
	}
	return nil
}

// copySkill copies skill.Files into dst/tmp and returns the content hash of what it
// copied (which differs from skill.Hash when the folder changed since the scan).
func copySkill(skill Skill, dst *os.Root, tmp string) (string, error) {
	src, err := os.OpenRoot(skill.Dir)
	if err != nil {
		return "", err
	}
	defer src.Close()
	if err := dst.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	th := newTreeHash()
	for _, rel := range skill.Files {
		if _, err := cleanRel(rel); err != nil || rel == legacyMarker {
			continue
		}
		sum, exec, err := copyFile(src, rel, dst, path.Join(tmp, rel))
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", rel, err)
		}
		th.add(rel, exec, sum)
	}
	return th.sum(), nil
}

var errSkip = errors.New("skip")

// copyFile copies one regular file. A file that vanished, or is no longer a regular
// file inside the skill folder, is skipped (errSkip).
func copyFile(src *os.Root, rel string, dst *os.Root, to string) ([32]byte, bool, error) {
	var sum [32]byte
	in, info, err := openRegular(src, rel)
	if err != nil {
		return sum, false, errSkip // missing, not regular, or a symlink out of the folder
	}
	defer in.Close()
	r := bufio.NewReader(in)
	head, _ := r.Peek(len(scriptHead) + 1)
	exec := info.Mode()&0o111 != 0 || isScript(head)
	perm := fs.FileMode(0o644)
	if exec {
		perm = 0o755
	}
	if dir := path.Dir(to); dir != "." {
		if err := dst.MkdirAll(dir, 0o755); err != nil {
			return sum, false, err
		}
	}
	out, err := dst.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return sum, false, err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, false, err
	}
	h.Sum(sum[:0])
	return sum, exec, nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

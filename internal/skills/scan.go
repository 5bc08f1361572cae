package skills

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// skipDirs are folders inside a skill that are not part of it.
var skipDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, "__pycache__": true}

// racyWindow: a file modified this close to a scan may change again without its size
// or modification time changing (coarse file system clocks), so a folder holding one
// is read again on the next scan instead of trusting its fingerprint (as git does
// with "racily clean" index entries).
const racyWindow = 2 * time.Second

type fileEntry struct {
	rel   string // slash-separated, relative to the skill folder
	size  int64
	exec  bool
	mtime int64
}

// folder is what a scan learned about one skill folder.
type folder struct {
	fp     [32]byte // fingerprint of the file list and its stat data
	stable bool     // fp may be trusted by the next scan
	skill  Skill
	err    error
	dirs   []string // absolute directories of the folder, for the watcher
	// leftOut lists the folder's symlinks that are not part of the skill: they lead
	// out of the folder, to a folder, or nowhere.
	leftOut []string
}

// walkFolder lists a skill folder's files without reading them. Symlinks are
// followed only while they stay inside the folder and point at regular files; the
// others are returned as leftOut.
func walkFolder(dir string, cfg Config) (files []fileEntry, dirs, leftOut []string, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	defer root.Close()
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // unreadable subfolder: not part of the skill
		}
		if d.IsDir() {
			if p != "." && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			dirs = append(dirs, filepath.Join(dir, filepath.FromSlash(p)))
			return nil
		}
		if p == legacyMarker {
			return nil // a projection's marker, when a projected copy is scanned
		}
		var info fs.FileInfo
		if d.Type()&fs.ModeSymlink != 0 {
			info, err = root.Stat(p) // refuses targets outside the folder
		} else {
			info, err = d.Info()
		}
		if err != nil || !info.Mode().IsRegular() {
			if d.Type()&fs.ModeSymlink != 0 {
				leftOut = append(leftOut, p)
			}
			return nil
		}
		files = append(files, fileEntry{rel: p, size: info.Size(), exec: info.Mode()&0o111 != 0, mtime: info.ModTime().UnixNano()})
		total += info.Size()
		if len(files) > cfg.MaxFiles {
			return fmt.Errorf("more than %d files, the most one skill may hold (%s): keep what its instructions do not use (installed packages such as node_modules or a .venv, build output) out of its folder",
				cfg.MaxFiles, mostFiles(files))
		}
		if total > cfg.MaxSkillBytes {
			return fmt.Errorf("more than %d bytes of files, the most one skill may hold (%s): keep data its instructions do not use out of its folder",
				cfg.MaxSkillBytes, largestFile(files))
		}
		return nil
	})
	slices.SortFunc(files, func(a, b fileEntry) int { return strings.Compare(a.rel, b.rel) })
	slices.Sort(leftOut)
	return files, dirs, leftOut, err
}

// mostFiles says which top-level folder of a skill holds the most of files, the
// files a walk found before it passed the limit.
func mostFiles(files []fileEntry) string {
	count := map[string]int{}
	top, most := "", 0
	for _, f := range files {
		dir, _, nested := strings.Cut(f.rel, "/")
		if !nested {
			continue
		}
		if count[dir]++; count[dir] > most {
			top, most = dir, count[dir]
		}
	}
	if top == "" {
		return fmt.Sprintf("the first %d found are in the folder itself", len(files))
	}
	return fmt.Sprintf("%s/ holds %d of the first %d found", top, most, len(files))
}

// largestFile names the largest of files.
func largestFile(files []fileEntry) string {
	var big fileEntry
	for _, f := range files {
		if f.size > big.size {
			big = f
		}
	}
	return fmt.Sprintf("the largest: %s, %d bytes", big.rel, big.size)
}

func fingerprint(files []fileEntry) [32]byte {
	h := sha256.New()
	var buf [8]byte
	for _, f := range files {
		io.WriteString(h, f.rel)
		h.Write([]byte{0, execByte(f.exec)})
		binary.LittleEndian.PutUint64(buf[:], uint64(f.size))
		h.Write(buf[:])
		binary.LittleEndian.PutUint64(buf[:], uint64(f.mtime))
		h.Write(buf[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func execByte(x bool) byte {
	if x {
		return 'x'
	}
	return '-'
}

// treeHash is the content hash of a skill: for every file in path order, its path,
// its executable bit and the SHA-256 of its content. Project computes the same hash
// over what it copied.
type treeHash struct{ h hash.Hash }

func newTreeHash() *treeHash { return &treeHash{h: sha256.New()} }

func (t *treeHash) add(rel string, exec bool, content [32]byte) {
	io.WriteString(t.h, rel)
	t.h.Write([]byte{0, execByte(exec), 0})
	t.h.Write(content[:])
}

func (t *treeHash) sum() string { return hex.EncodeToString(t.h.Sum(nil)) }

// loadFolder reads one skill folder, reusing prev when its fingerprint is unchanged.
func loadFolder(dir string, prev *folder, cfg Config, scanStart time.Time) *folder {
	if _, err := os.Lstat(filepath.Join(dir, "SKILL.md")); errors.Is(err, fs.ErrNotExist) {
		// No skill: say what would make one without reading its files (all the skills
		// of a repository whose root was named instead of its skills folder). The
		// folder is watched for a SKILL.md to appear.
		return &folder{err: missingSkillMD(dir), dirs: []string{dir}}
	}
	files, dirs, leftOut, err := walkFolder(dir, cfg)
	if err != nil {
		return &folder{err: err, dirs: dirs}
	}
	fp := fingerprint(files)
	if prev != nil && prev.stable && prev.fp == fp {
		return &folder{fp: fp, stable: true, skill: prev.skill, err: prev.err, dirs: dirs, leftOut: leftOut}
	}
	stable := true
	cutoff := scanStart.Add(-racyWindow).UnixNano()
	for _, f := range files {
		if f.mtime >= cutoff {
			stable = false
		}
	}
	s, err := readFolder(dir, files)
	if err == nil && s.Name != filepath.Base(dir) {
		// The Agent Skills format wants a skill's name to be its folder's name. Held to
		// it, a directory cannot hold two skills of one name, and a stray copy of a
		// skill (pdf-old/ naming itself pdf) cannot take the place of pdf/ by sorting
		// first.
		err = fmt.Errorf("name %q does not match its folder name %q: the Agent Skills format wants them equal; rename the folder or the name", s.Name, filepath.Base(dir))
	}
	if err != nil {
		return &folder{fp: fp, stable: stable, err: err, dirs: dirs, leftOut: leftOut}
	}
	return &folder{fp: fp, stable: stable, skill: s, dirs: dirs, leftOut: leftOut}
}

// missingSkillMD explains why the folder dir, which has no SKILL.md of its own, is no
// skill: its SKILL.md is a symlink out of it or no regular file, its
// SKILL.md is spelt in another case, it is a folder of skills, a level too high, or
// a Claude Code plugin, whose skills are in its skills/.
func missingSkillMD(dir string) error {
	md := filepath.Join(dir, "SKILL.md")
	if fi, err := os.Lstat(md); err == nil {
		// There is a SKILL.md, which is not part of the skill (see fileEntry).
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if _, err := os.Stat(md); err != nil {
				return errors.New("missing SKILL.md: SKILL.md is a symlink that leads nowhere")
			}
			return errors.New("missing SKILL.md: SKILL.md is a symlink that leads out of the skill's folder, and a skill is only the files inside its folder: copy the file in")
		case !fi.Mode().IsRegular():
			return errors.New("missing SKILL.md: SKILL.md is not a regular file")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude-plugin", "plugin.json")); err == nil {
		if skills := skillFolders(filepath.Join(dir, "skills")); len(skills) > 0 {
			return fmt.Errorf("missing SKILL.md: this is a Claude Code plugin, whose skills are in its skills folder (%s): list %s in skills.dirs",
				someNames(skills), filepath.Join(dir, "skills"))
		}
	}
	entries, _ := os.ReadDir(dir)
	var skills []string
	for _, e := range entries {
		switch {
		case !e.IsDir() && strings.EqualFold(e.Name(), "SKILL.md"):
			return fmt.Errorf("missing SKILL.md: the file is %s; the Agent Skills format wants the name SKILL.md exactly", e.Name())
		case e.IsDir() && !strings.HasPrefix(e.Name(), "."):
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "SKILL.md")); err == nil {
				skills = append(skills, e.Name())
			}
		}
	}
	if len(skills) == 0 {
		return errors.New("missing SKILL.md")
	}
	return fmt.Errorf("missing SKILL.md: this is no skill but a folder of skills (%s): list it in skills.dirs rather than %s",
		someNames(skills), filepath.Dir(dir))
}

// skillFolders names the folders in dir that hold a SKILL.md.
func skillFolders(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var skills []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "SKILL.md")); err == nil {
				skills = append(skills, e.Name())
			}
		}
	}
	return skills
}

// someNames lists the first three names and how many there are.
func someNames(names []string) string {
	some := strings.Join(names[:min(len(names), 3)], ", ")
	if len(names) > 3 {
		some += fmt.Sprintf(", … %d in all", len(names))
	}
	return some
}

// readFolder hashes every file and parses SKILL.md and skill.yaml.
func readFolder(dir string, files []fileEntry) (Skill, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Skill{}, err
	}
	defer root.Close()
	var skillMD, skillYAML []byte
	hasMD, hasYAML := false, false
	th := newTreeHash()
	rels := make([]string, 0, len(files))
	var scripts []string
	for _, f := range files {
		isYAML := (f.rel == "skill.yaml" || f.rel == "skill.yml") && !hasYAML
		keep := f.rel == "SKILL.md" || isYAML
		sum, data, script, err := hashFile(root, f.rel, f.size, keep)
		if err != nil {
			return Skill{}, fmt.Errorf("%s: %w", f.rel, err)
		}
		th.add(f.rel, f.exec || script, sum)
		rels = append(rels, f.rel)
		if strings.HasPrefix(f.rel, "scripts/") {
			scripts = append(scripts, f.rel)
		}
		if f.rel == "SKILL.md" {
			skillMD, hasMD = data, true
		} else if isYAML {
			skillYAML, hasYAML = data, true
		}
	}
	if !hasMD {
		return Skill{}, missingSkillMD(dir)
	}
	s, err := parseSkillFiles(skillMD, skillYAML, filepath.Base(dir))
	if err != nil {
		return Skill{}, err
	}
	s.Dir, s.Files, s.Scripts, s.Hash = dir, rels, scripts, th.sum()
	s.PluginRoot = pluginRoot(dir)
	return s, nil
}

// pluginLevels is how far above a skill's folder its plugin's root is looked for:
// <root>/skills/<name> is one folder up from the skill's parent, and a plugin.json
// may place its skills a level or two deeper.
const pluginLevels = 3

// pluginRoot returns the root of the Claude Code plugin that the skill folder dir
// belongs to (Skill.PluginRoot), "" when none of the folders above it holds
// .claude-plugin/plugin.json.
func pluginRoot(dir string) string {
	for d, i := filepath.Dir(dir), 0; i < pluginLevels; d, i = filepath.Dir(d), i+1 {
		if info, err := os.Stat(filepath.Join(d, ".claude-plugin", "plugin.json")); err == nil && info.Mode().IsRegular() {
			return d
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return ""
}

// hashFile returns the SHA-256 of a file, whether it is a script (isScript) and,
// when keep is set, its content. It reads at most 1 MiB more than the size seen by
// the walk, so a file that grows meanwhile cannot make the scan unbounded.
func hashFile(root *os.Root, rel string, size int64, keep bool) (sum [32]byte, data []byte, script bool, err error) {
	f, _, err := openRegular(root, rel)
	if err != nil {
		return sum, nil, false, err
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, size+(1<<20)))
	head, _ := r.Peek(len(scriptHead) + 1)
	h := sha256.New()
	var w io.Writer = h
	var buf bytes.Buffer
	if keep {
		w = io.MultiWriter(h, &buf)
	}
	if _, err := io.Copy(w, r); err != nil {
		return sum, nil, false, err
	}
	h.Sum(sum[:0])
	if keep {
		data = buf.Bytes()
	}
	return sum, data, isScript(head), nil
}

const scriptHead = "#! /"

// isScript reports whether a file starting with head has an interpreter line
// ("#!/usr/bin/env bash", "#! /bin/sh"). Such a file is executable in a skill's
// projection whatever its mode in the skill folder: libraries copied without file
// modes (a ConfigMap volume, a zip unpacked without them) lose the executable bits
// their instructions and their other scripts rely on. Making it executable in the
// session's copy gives the session nothing it could not do with chmod.
func isScript(head []byte) bool {
	rest, ok := bytes.CutPrefix(head, []byte("#!"))
	return ok && (bytes.HasPrefix(rest, []byte("/")) || bytes.HasPrefix(rest, []byte(" /")))
}

// openRegular opens a regular file through root. O_NONBLOCK keeps a FIFO swapped in
// since the walk from blocking the open; anything but a regular file is refused.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// candidates lists the skill folders of one configured directory: the directory
// itself when it holds SKILL.md, else its child folders (and symlinks to folders)
// whose names do not start with a dot. A symlink whose target cannot be reached
// (dangling, a loop) is a broken skill, reported, not left out without a word.
func candidates(root string) ([]string, []Problem, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, nil, err
	}
	if !info.IsDir() {
		return nil, nil, errors.New("not a directory")
	}
	if _, err := os.Stat(filepath.Join(root, "SKILL.md")); err == nil {
		return []string{root}, nil, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var broken []Problem
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(root, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			fi, err := os.Stat(p)
			if err != nil {
				target, _ := os.Readlink(p)
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the path is in Dir and the message already
				}
				broken = append(broken, Problem{Dir: p, Error: fmt.Sprintf("symlink to %q, which cannot be reached: %v", target, err)})
				continue
			}
			if !fi.IsDir() {
				continue
			}
		} else if !e.IsDir() {
			continue
		}
		out = append(out, p)
	}
	return out, broken, nil
}

// existingAncestor returns the closest parent folder of dir that exists, or "".
func existingAncestor(dir string) string {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// cleanRel turns a caller's path into a slash-separated path relative to a skill
// folder. The path is cleaned lexically first, so "scripts/../SKILL.md" names
// SKILL.md; absolute paths and paths that leave the folder once cleaned are refused.
// Cleaning before any lookup means a symlinked folder on the way cannot make ".."
// lead elsewhere, and the file is then opened through an os.Root of the folder.
func cleanRel(rel string) (string, error) {
	slashed := filepath.ToSlash(rel)
	if slashed == "" || path.IsAbs(slashed) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("path %q: want a path relative to the skill folder", rel)
	}
	clean := path.Clean(slashed)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q: leads out of the skill folder", rel)
	}
	return clean, nil
}

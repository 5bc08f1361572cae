package approval

import (
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// pathSubject is the path a call works on, seen from the session's working
// directory.
type pathSubject struct {
	raw string
	// rel is the cleaned slash path relative to the working directory when the
	// path is inside it ("." for the directory itself).
	rel string
	// abs is the cleaned absolute path, when it can be known.
	abs    string
	inside bool
}

// newPathSubject resolves p against workdir. `..` is cleaned away; an absolute
// path inside the working directory is made relative. Symbolic links are not
// resolved: the sandbox confines what the path can reach.
func newPathSubject(p, workdir string) pathSubject {
	s := pathSubject{raw: p}
	p = filepath.ToSlash(p)
	root := ""
	if workdir != "" {
		root = path.Clean(filepath.ToSlash(workdir))
	}
	switch {
	case path.IsAbs(p):
		s.abs = path.Clean(p)
	case root != "" && path.IsAbs(root):
		s.abs = path.Join(root, p)
	default:
		c := path.Clean(p)
		if c != ".." && !strings.HasPrefix(c, "../") {
			s.rel, s.inside = c, true
		}
		return s
	}
	if root == "" {
		return s
	}
	switch {
	case s.abs == root:
		s.rel, s.inside = ".", true
	case root == "/":
		s.rel, s.inside = s.abs[1:], true
	case strings.HasPrefix(s.abs, root+"/"):
		s.rel, s.inside = s.abs[len(root)+1:], true
	}
	return s
}

// normalizeGlob reads a path pattern the way .gitignore does: a trailing slash
// means the directory and everything under it, a leading ./ is dropped.
func normalizeGlob(p string) string {
	p = filepath.ToSlash(p)
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	if strings.HasSuffix(p, "/") && p != "/" {
		p += "**"
	}
	return p
}

// matchPath matches a path against a gitignore-style glob:
//
//	/abs/**      an absolute path
//	.env         no slash: a file or directory of that name at any depth
//	src/**       relative to the working directory
//	**/.ssh/**   at any depth, also outside the working directory
func matchPath(glob string, s pathSubject) bool {
	if name, anywhere, ok := literalGlob(glob); ok {
		if !anywhere {
			return s.inside && (s.rel == name || strings.HasPrefix(s.rel, name+"/"))
		}
		for _, t := range s.targets() {
			if hasComponent(t, name) {
				return true
			}
		}
		return false
	}
	switch {
	case glob == "":
		return false
	case strings.HasPrefix(glob, "/"):
		return s.abs != "" && matchTree(glob, s.abs)
	case !strings.Contains(glob, "/"):
		glob = "**/" + glob
		fallthrough
	case strings.HasPrefix(glob, "**/"):
		for _, t := range s.targets() {
			if matchTree(glob, t) {
				return true
			}
		}
		return false
	}
	return s.inside && matchTree(glob, s.rel)
}

// literalGlob recognizes the common globs that need no pattern matching: a plain
// name (".env", "**/.ssh/**": anywhere) or a plain relative path ("src/**",
// ".git/**": from the working directory).
func literalGlob(glob string) (name string, anywhere, ok bool) {
	rest, lead := strings.CutPrefix(glob, "**/")
	rest, tail := strings.CutSuffix(rest, "/**")
	switch {
	case rest == "" || strings.ContainsAny(rest, "*?[]{}\\") || strings.HasPrefix(rest, "/"):
		return "", false, false
	case lead || !tail && !strings.Contains(rest, "/"):
		return rest, true, !strings.Contains(rest, "/")
	case path.Clean(rest) != rest || rest == ".." || strings.HasPrefix(rest, "../"):
		return "", false, false
	}
	return rest, false, true
}

func hasComponent(p, name string) bool {
	for p != "" {
		var head string
		head, p, _ = strings.Cut(p, "/")
		if head == name {
			return true
		}
	}
	return false
}

// matchTree matches name or, as .gitignore does for a directory, anything under it.
func matchTree(glob, name string) bool {
	return globMatch(glob, name) || !strings.HasSuffix(glob, "**") && globMatch(glob+"/**", name)
}

// targets are the forms of the path that unanchored globs are tried on.
func (s pathSubject) targets() []string {
	var out []string
	if s.inside {
		out = append(out, s.rel)
	}
	if s.abs != "" {
		out = append(out, strings.TrimPrefix(s.abs, "/"))
	}
	return out
}

func globMatch(glob, name string) bool {
	ok, _ := doublestar.Match(glob, name)
	return ok
}

// suggestPath proposes a glob for the directory holding the path: src/pkg/** for
// src/pkg/main.go. A file directly in the working directory gets its own name,
// never the whole directory.
func suggestPath(s pathSubject) string {
	var dir string
	switch {
	case s.inside:
		if s.rel == "." {
			return ""
		}
		dir = path.Dir(s.rel)
		if dir == "." {
			return s.rel
		}
	case s.abs != "":
		dir = path.Dir(s.abs)
		if dir == "/" {
			return s.abs
		}
	default:
		return ""
	}
	return escapeGlob(dir) + "/**"
}

func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]{}\`) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]{}\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

package builtin

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	// maxGlobResults is how many matches glob shows.
	maxGlobResults = 200
	// maxGlobCollect bounds the matches kept for sorting; beyond it they are counted.
	maxGlobCollect = 100000
)

type globFiles struct{ m *sandbox.Manager }

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

// globDetails is the Details of a glob result.
type globDetails struct {
	Pattern   string `json:"pattern"`
	Matches   int    `json:"matches"`
	Shown     int    `json:"shown"`
	Truncated bool   `json:"truncated"`
}

func (t *globFiles) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "glob",
		Label: "Find files",
		Description: "Find files whose paths match a glob pattern such as **/*.go or src/**/*.{ts,tsx}. " +
			"Paths are matched relative to path (default: the working directory); * stays within one directory, ** crosses directories. " +
			"Honours .gitignore. Returns paths relative to the working directory, most recently modified first.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "The glob: * ? [abc] {a,b} within a name, ** for any number of directories."},
    "path": {"type": "string", "description": "The directory to search from (default: the working directory)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
		Documentation: globDoc,
		PromptHint:    "Find files by name with glob (e.g. **/*_test.go) and search their content with grep, rather than running find or grep through execute_command.",
		Timeout:       time.Minute,
	}, true)
}

type globMatch struct {
	rel   string
	mtime time.Time
}

func (t *globFiles) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args globArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	pattern := strings.TrimSpace(args.Pattern)
	if pattern == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "pattern is empty")
	}
	if !doublestar.ValidatePattern(pattern) {
		return nil, tool.Errorf(tool.KindInvalidArgs, "pattern %q is not a valid glob (check brackets [] and braces {})", pattern)
	}
	// The literal directories at the start of the pattern are where the walk starts.
	base, rest := doublestar.SplitPattern(pattern)
	dir := args.Path
	switch {
	case strings.HasPrefix(pattern, "/"):
		if dir != "" {
			return nil, tool.Errorf(tool.KindInvalidArgs, "give either an absolute pattern or path, not both")
		}
		dir = base
	case base != ".":
		dir = path.Join(cmp.Or(dir, "."), base)
	}
	w, err := openFileRoot(t.m, ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	tg, err := w.walkStart(dir)
	if err != nil {
		return nil, err
	}
	wk := &treeWalker{w: w, ctx: ctx, ignore: true, hidden: true, stat: true}
	if !strings.Contains(rest, "**") {
		wk.maxDepth = strings.Count(rest, "/") + 1
	}
	start := tg.show()
	var found []globMatch
	total := 0
	err = wk.walk(tg.rel, func(e walkEntry) error {
		if !isFileEntry(e) {
			return nil
		}
		name := e.rel
		if start != "." {
			name = strings.TrimPrefix(e.rel, start+"/")
		}
		if ok, _ := doublestar.Match(rest, name); !ok {
			return nil
		}
		total++
		if len(found) < maxGlobCollect {
			m := globMatch{rel: e.rel}
			if e.info != nil {
				m.mtime = e.info.ModTime()
			}
			found = append(found, m)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, callEndError(ctx)
		}
		return nil, err
	}
	slices.SortFunc(found, func(a, b globMatch) int {
		if c := b.mtime.Compare(a.mtime); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	details := globDetails{Pattern: pattern, Matches: total, Shown: min(len(found), maxGlobResults), Truncated: total > maxGlobResults}
	if total == 0 {
		text := fmt.Sprintf("No files match %q in %s.", pattern, tg.place())
		if !strings.Contains(pattern, "**") && !strings.Contains(pattern, "/") {
			text += fmt.Sprintf(" Note that * does not cross directories: **/%s searches every level.", pattern)
		}
		return fileResult(text+ignoreNote(wk), nil, details)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d file%s match %q (most recently modified first):\n", total, pluralS(total), pattern)
	for _, m := range found[:details.Shown] {
		b.WriteString(m.rel + "\n")
	}
	if details.Truncated {
		fmt.Fprintf(&b, "[showing %d of %d matches; narrow the pattern or the path]", details.Shown, total)
	}
	return fileResult(strings.TrimRight(b.String(), "\n")+ignoreNote(wk), nil, details)
}

// ignoreNote mentions what a search left out.
func ignoreNote(wk *treeWalker) string {
	var notes []string
	if wk.ignoredSkipped > 0 {
		notes = append(notes, fmt.Sprintf("[%s excluded by .gitignore %s not searched]", countOf(wk.ignoredSkipped, "entry", "entries"), wasWere(wk.ignoredSkipped)))
	}
	if wk.unreadable > 0 {
		notes = append(notes, fmt.Sprintf("[%s could not be read]", countOf(wk.unreadable, "directory", "directories")))
	}
	if len(notes) == 0 {
		return ""
	}
	return "\n" + strings.Join(notes, "\n")
}

// isFileEntry reports whether a walk entry is a file whose content can be read.
func isFileEntry(e walkEntry) bool {
	if e.isDir || e.broken != "" {
		return false
	}
	if e.mode&fs.ModeSymlink != 0 {
		return e.info != nil && e.info.Mode().IsRegular()
	}
	return e.mode.IsRegular()
}

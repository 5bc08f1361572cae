package builtin

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// maxListEntries bounds the entries list_dir and tree show.
const maxListEntries = 1000

// listDir is list_dir (an ls-like listing with sizes that ignores .gitignore) or, with
// tree set, tree (an indented drawing that honours .gitignore).
type listDir struct {
	m    *sandbox.Manager
	tree bool
}

type listDirArgs struct {
	Path       string `json:"path"`
	Depth      *int   `json:"depth"`
	ShowHidden bool   `json:"show_hidden"`
}

// listDetails is the Details of a list_dir or tree result.
type listDetails struct {
	Path      string `json:"path"`
	Entries   int    `json:"entries"`
	Truncated bool   `json:"truncated"`
}

func (t *listDir) limits() (def, maxDepth int) {
	if t.tree {
		return 3, 10
	}
	return 1, 5
}

func (t *listDir) Spec() tool.Spec {
	def, maxDepth := t.limits()
	s := tool.Spec{
		Name:  "list_dir",
		Label: "List directory",
		Description: "List a directory: entries sorted by name, directories marked with a trailing /, file sizes, symlinks with their targets. " +
			"depth > 1 also lists subdirectories. Hidden entries (starting with .) only with show_hidden.",
		Documentation: listDirDoc,
	}
	if t.tree {
		s.Name, s.Label = "tree", "Directory tree"
		s.Description = "Show the directory tree below a path as an indented drawing (default depth 3), skipping what .gitignore files exclude, .git and hidden entries (unless show_hidden)."
		s.Documentation = treeDoc
	}
	s.Parameters = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The directory, relative to the working directory (default: the working directory itself)."},
    "depth": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many levels to show (default %d)."},
    "show_hidden": {"type": "boolean", "description": "Include entries whose names start with a dot (default false)."}
  },
  "additionalProperties": false
}`, maxDepth, def))
	s.Timeout = time.Minute
	return fileSpec(s, true)
}

func (t *listDir) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args listDirArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	depth, maxDepth := t.limits()
	if args.Depth != nil {
		if depth = *args.Depth; depth < 1 || depth > maxDepth {
			return nil, tool.Errorf(tool.KindInvalidArgs, "depth %d: must be between 1 and %d", depth, maxDepth)
		}
	}
	w, err := openFileRoot(t.m, ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	tg, err := w.walkStart(args.Path)
	if err != nil {
		return nil, err
	}
	wk := &treeWalker{w: w, ctx: ctx, ignore: t.tree, hidden: args.ShowHidden, maxDepth: depth, stat: !t.tree}
	var b strings.Builder
	count, truncated := 0, false
	// open[d] says whether the directory at depth d still has entries to come, for
	// the tree's vertical lines.
	var open []bool
	err = wk.walk(tg.rel, func(e walkEntry) error {
		if count >= maxListEntries || b.Len() > outputBudget {
			truncated = true
			return errStopWalk
		}
		count++
		if t.tree {
			open = append(open[:e.depth-1], !e.last)
			b.WriteString(treeLine(e, open))
		} else {
			b.WriteString(listLine(e, tg.rel))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, callEndError(ctx)
		}
		return nil, err
	}
	head := tg.show() + "/"
	if tg.rel == "." {
		head = "./"
	}
	var text string
	if t.tree {
		text = head + "\n" + b.String()
	} else {
		text = fmt.Sprintf("%s (%s, depth %d)\n%s", head, countOf(count, "entry", "entries"), depth, b.String())
	}
	if count == 0 {
		text += "(empty)\n"
	}
	if truncated {
		text += fmt.Sprintf("[stopped after %d entries; list a subdirectory or use a smaller depth]\n", count)
	}
	if wk.hiddenSkipped > 0 {
		text += fmt.Sprintf("[%s (names starting with .) not shown; set show_hidden to see them]\n", countOf(wk.hiddenSkipped, "hidden entry", "hidden entries"))
	}
	if wk.ignoredSkipped > 0 {
		text += fmt.Sprintf("[%s excluded by .gitignore not shown]\n", countOf(wk.ignoredSkipped, "entry", "entries"))
	}
	if wk.unreadable > 0 {
		text += fmt.Sprintf("[%s could not be read]\n", countOf(wk.unreadable, "directory", "directories"))
	}
	return fileResult(strings.TrimRight(text, "\n"), nil, listDetails{Path: tg.show(), Entries: count, Truncated: truncated})
}

// listLine is one list_dir line: the path relative to the listed directory, a "/"
// for directories, the size of files, the target of symlinks.
func listLine(e walkEntry, start string) string {
	name := e.rel
	if start != "." {
		name = strings.TrimPrefix(e.rel, start+"/")
	}
	return name + describeEntry(e, true)
}

// treeLine is one tree line, drawn with the box characters of tree(1).
func treeLine(e walkEntry, open []bool) string {
	var b strings.Builder
	for _, more := range open[:len(open)-1] {
		if more {
			b.WriteString("│   ")
		} else {
			b.WriteString("    ")
		}
	}
	if e.last {
		b.WriteString("└── ")
	} else {
		b.WriteString("├── ")
	}
	b.WriteString(e.name + describeEntry(e, false))
	return b.String()
}

// describeEntry is what follows an entry's name: "/" for directories, the target of
// a symlink, the size of a file (when sizes is set).
func describeEntry(e walkEntry, sizes bool) string {
	var b strings.Builder
	if e.mode&fs.ModeSymlink != 0 {
		fmt.Fprintf(&b, " -> %s", e.link)
		switch {
		case e.broken != "":
			fmt.Fprintf(&b, "  [symlink %s; not followed]", e.broken)
			return b.String()
		case e.isDir:
			b.WriteString("/  [symlink to a directory; not followed, list its target instead]")
			return b.String()
		}
	} else if e.isDir {
		return "/"
	}
	switch {
	case e.mode&fs.ModeSymlink == 0 && !e.mode.IsRegular():
		b.WriteString("  [" + describeMode(e.mode) + "]")
	case sizes && e.info != nil:
		b.WriteString("  " + sizeText(e.info.Size()))
	}
	return b.String()
}

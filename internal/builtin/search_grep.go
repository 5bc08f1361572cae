package builtin

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	grepDefaultResults = 200
	grepMaxResults     = 1000
	grepMaxContext     = 10
	// grepMaxFile: larger files are skipped (and counted) in a search of a directory;
	// one named in path is searched whatever its size, within grepBudget.
	grepMaxFile = 20 << 20
	// grepMaxLine is how much of one line is searched.
	grepMaxLine = 1 << 20
	// grepBudget is how long one search may take; it then returns what it found.
	grepBudget = 30 * time.Second
)

type grepFiles struct{ m *sandbox.Manager }

type grepArgs struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Include         string `json:"include"`
	Exclude         string `json:"exclude"`
	CaseInsensitive bool   `json:"case_insensitive"`
	Context         *int   `json:"context"`
	MaxResults      *int   `json:"max_results"`
}

// grepDetails is the Details of a grep result.
type grepDetails struct {
	Matches   int  `json:"matches"`
	Files     int  `json:"files"`
	Searched  int  `json:"files_searched"`
	Truncated bool `json:"truncated"`
}

func (t *grepFiles) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "grep",
		Label: "Search file contents",
		Description: "Search file contents with a regular expression (Go RE2 syntax), line by line, below path (default: the working directory) or in one file. " +
			"Honours .gitignore, skips binary files and .git. Results are path:line: text, in path order; include/exclude filter files by glob.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "The regular expression (RE2: no backreferences or lookaround). Escape regex metacharacters to search literal text."},
    "path": {"type": "string", "description": "A directory to search below, or one file (default: the working directory)."},
    "include": {"type": "string", "description": "Only search files matching this glob, e.g. *.go or src/**/*.{ts,tsx}. Without a / it is matched against file names."},
    "exclude": {"type": "string", "description": "Skip files matching this glob (same rules as include)."},
    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
    "context": {"type": "integer", "minimum": 0, "maximum": %d, "description": "Lines of context to show before and after each match (default 0)."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Stop after this many matching lines (default %d)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`, grepMaxContext, grepMaxResults, grepDefaultResults)),
		Documentation: grepDoc,
		Timeout:       time.Minute,
	}, true)
}

func (t *grepFiles) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args grepArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	s := &grepSearch{ctx: ctx, max: grepDefaultResults, deadline: time.Now().Add(grepBudget)}
	if args.Context != nil {
		if s.context = *args.Context; s.context < 0 || s.context > grepMaxContext {
			return nil, tool.Errorf(tool.KindInvalidArgs, "context %d: must be between 0 and %d", s.context, grepMaxContext)
		}
	}
	if args.MaxResults != nil {
		if s.max = *args.MaxResults; s.max < 1 || s.max > grepMaxResults {
			return nil, tool.Errorf(tool.KindInvalidArgs, "max_results %d: must be between 1 and %d", s.max, grepMaxResults)
		}
	}
	if args.Pattern == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "pattern is empty")
	}
	expr := args.Pattern
	if args.CaseInsensitive {
		expr = "(?i)" + expr
	}
	var err error
	if s.re, err = regexp.Compile(expr); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "pattern %q is not a valid regular expression (Go RE2 syntax): %v", args.Pattern, err)
	}
	for _, g := range []string{args.Include, args.Exclude} {
		if g != "" && !doublestar.ValidatePattern(g) {
			return nil, tool.Errorf(tool.KindInvalidArgs, "%q is not a valid glob (check brackets [] and braces {})", g)
		}
	}
	w, err := openFileRoot(t.m, ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	s.w = w
	tg, err := w.resolve(cmp.Or(args.Path, "."))
	if err != nil {
		return nil, err
	}
	fi, err := w.stat(tg)
	switch {
	case err != nil:
		return nil, err
	case fi == nil:
		return nil, tool.Errorf(tool.KindNotFound, "%q does not exist", tg.given)
	case fi.Mode().IsRegular():
		// One file named explicitly is searched even if .gitignore excludes it, and
		// whatever its size.
		s.named = true
		err = s.file(tg.show(), tg.rel)
	case !fi.IsDir():
		return nil, w.notAFile(tg, fi.Mode())
	default:
		start := tg.show()
		wk := &treeWalker{w: w, ctx: ctx, ignore: true, hidden: true}
		s.treeWalker = wk
		err = wk.walk(tg.rel, func(e walkEntry) error {
			if !isFileEntry(e) {
				return nil
			}
			name := e.rel
			if start != "." {
				name = strings.TrimPrefix(e.rel, start+"/")
			}
			if (args.Include != "" && !globHit(args.Include, name)) || (args.Exclude != "" && globHit(args.Exclude, name)) {
				return nil
			}
			return s.file(e.rel, e.file())
		})
	}
	if ctx.Err() != nil {
		return nil, callEndError(ctx)
	}
	if err != nil {
		return nil, err
	}
	return s.result(args.Pattern, tg)
}

// globHit matches a file's path (relative to the search directory) against an
// include or exclude glob: globs without a "/" are matched against the base name.
func globHit(glob, rel string) bool {
	if !strings.Contains(glob, "/") {
		rel = path.Base(rel)
	}
	ok, _ := doublestar.Match(glob, rel)
	return ok
}

// grepSearch is one grep call in progress.
type grepSearch struct {
	ctx        *tool.Context
	w          *fileRoot
	treeWalker *treeWalker
	re         *regexp.Regexp
	context    int
	max        int
	deadline   time.Time

	out                          strings.Builder
	matches, files, searched     int
	binary, tooLarge, unreadable int
	truncated, timedOut, budget  bool
	printedAny                   bool
	named                        bool // path names the one file searched
	buf                          []byte
}

// heldLine is a line kept as possible context before a match.
type heldLine struct {
	n    int
	text string
}

// file searches one file: display is its name in the output, open the path to read.
func (s *grepSearch) file(display, open string) error {
	if s.truncated {
		return errStopWalk
	}
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	if time.Now().After(s.deadline) {
		s.timedOut, s.truncated = true, true
		return errStopWalk
	}
	f, err := s.w.openNonBlocking(open)
	if err != nil {
		s.unreadable++
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		s.unreadable++
		return nil
	}
	if fi.Size() > grepMaxFile && !s.named {
		s.tooLarge++
		return nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); looksBinary(head) {
		s.binary++
		return nil
	}
	s.searched++
	var before []heldLine
	after, lastPrinted, found := 0, 0, 0
	for n := 1; ; n++ {
		if n%4096 == 0 && (s.ctx.Err() != nil || time.Now().After(s.deadline)) {
			s.timedOut, s.truncated = s.ctx.Err() == nil, true
			break
		}
		line, full, err := nextLine(br, grepMaxLine, s.buf)
		s.buf = line
		if full == 0 && len(line) == 0 && err != nil {
			break
		}
		switch {
		case s.re.Match(line):
			if s.matches >= s.max {
				s.truncated = true
				break
			}
			if s.context > 0 && s.printedAny && (lastPrinted == 0 || n-len(before) > lastPrinted+1) {
				s.out.WriteString("--\n")
			}
			for _, h := range before {
				fmt.Fprintf(&s.out, "%s-%d- %s\n", display, h.n, h.text)
			}
			before = before[:0]
			fmt.Fprintf(&s.out, "%s:%d: %s\n", display, n, showLine(line, full))
			s.matches++
			found++
			s.printedAny, lastPrinted, after = true, n, s.context
		case after > 0:
			fmt.Fprintf(&s.out, "%s-%d- %s\n", display, n, showLine(line, full))
			lastPrinted = n
			after--
		case s.context > 0:
			before = append(before, heldLine{n, showLine(line, full)})
			if len(before) > s.context {
				before = before[1:]
			}
		}
		if s.out.Len() > outputBudget {
			s.truncated, s.budget = true, true
		}
		if s.truncated || err != nil {
			break
		}
	}
	if found > 0 {
		s.files++
	}
	return nil
}

// showLine renders a line for the output: cut to maxLineChars, invalid UTF-8 replaced.
func showLine(line []byte, full int) string {
	text, cut := cutLine(line[:min(len(line), maxLineChars*4)], full)
	text, _ = sanitize([]byte(text))
	if cut > 0 {
		text += fmt.Sprintf(" … [line cut: %d more bytes]", cut)
	}
	return text
}

func (s *grepSearch) result(pattern string, tg fileTarget) (*tool.Result, error) {
	details := grepDetails{Matches: s.matches, Files: s.files, Searched: s.searched, Truncated: s.truncated}
	var b strings.Builder
	if s.matches == 0 {
		fmt.Fprintf(&b, "No matches for %q in %s (%d file%s searched).\n", pattern, tg.place(), s.searched, pluralS(s.searched))
	} else {
		b.WriteString(s.out.String())
		fmt.Fprintf(&b, "[%d matching line%s in %d file%s]\n", s.matches, pluralS(s.matches), s.files, pluralS(s.files))
	}
	switch {
	case s.timedOut:
		fmt.Fprintf(&b, "[the search stopped after %s; the results are incomplete: narrow path or include]\n", grepBudget)
	case s.budget:
		b.WriteString("[the output limit was reached; the results are incomplete: narrow the pattern, path or include]\n")
	case s.truncated:
		fmt.Fprintf(&b, "[stopped at max_results=%d; there are more matches: narrow the search or raise max_results]\n", s.max)
	}
	if s.binary > 0 {
		fmt.Fprintf(&b, "[%d binary file%s skipped]\n", s.binary, pluralS(s.binary))
	}
	if s.tooLarge > 0 {
		fmt.Fprintf(&b, "[%d file%s larger than %s skipped; name one in path to search it]\n", s.tooLarge, pluralS(s.tooLarge), sizeText(grepMaxFile))
	}
	if s.unreadable > 0 {
		fmt.Fprintf(&b, "[%d file%s could not be read]\n", s.unreadable, pluralS(s.unreadable))
	}
	text := strings.TrimRight(b.String(), "\n")
	if s.treeWalker != nil {
		text += ignoreNote(s.treeWalker)
	}
	return fileResult(text, nil, details)
}

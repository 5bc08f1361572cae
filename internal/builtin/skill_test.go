package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestSkillFileReadBounded: the skill viewer shows SKILL.md and a file the way
// read_file does: at
// most outputBudget bytes of text with a note on how to read the rest, a binary file
// as a failure that says what it is, and a path that names no file of the skill as
// not_found with the list of its files. A 4 MiB reference
// or a binary asset of a third-party skill must not become a result of megabytes
// (stored with the call, whatever reaches the model).
func TestSkillFileReadBounded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "ref")
	write := func(rel string, data []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("SKILL.md", []byte("---\nname: ref\ndescription: References.\n---\nRead references/big.md.\n"+strings.Repeat("an instruction\n", 20000)))
	write("references/big.md", []byte(strings.Repeat("line of the reference\n", 200000)))
	write("references/small.md", []byte("small\n"))
	bin := make([]byte, 1<<20)
	for i := range bin {
		bin[i] = byte(i*7 + 0x80)
	}
	write("assets/blob.bin", bin)
	sm, err := skills.NewManager(skills.Config{Dirs: []string{root}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy, _ := skills.NewProxy(sm, nil)
	e := newEnv(t, sandbox.Config{})
	e.tools["skill"] = SkillTool(e.m)
	sess := newSession("s1", t.TempDir())
	sess.State.LoadOrStore(skills.SessionStateKey, func() any { return proxy })

	// Opened, a SKILL.md of 300 KiB shows its start and says where the rest is.
	res := e.mustCall(t, sess, "skill", map[string]any{"name": "ref"})
	if text := res.Text(); len(text) > outputBudget+2048 || !strings.Contains(text, "Read references/big.md.") ||
		!strings.Contains(text, ".skills/ref/SKILL.md with read_file") {
		t.Errorf("open: %d bytes, ending %q", len(text), text[max(0, len(text)-300):])
	}
	// Paths in a skill's instructions are the skill folder's; models ran
	// scripts/x.py from the working directory until told.
	if text := res.Text(); !strings.Contains(text, "relative to it: run its scripts as .skills/ref/scripts/… or with execute_command's cwd .skills/ref") {
		t.Errorf("open does not say where relative paths start: %.400s", text)
	}

	res = e.mustCall(t, sess, "skill", map[string]any{"name": "ref", "file": "references/big.md"})
	text := res.Text()
	if len(text) > outputBudget+1024 || !strings.HasPrefix(text, "line of the reference\n") {
		t.Errorf("big file: %d bytes, starting %.40q", len(text), text)
	}
	if !strings.Contains(text, "read_file") || !strings.Contains(text, ".skills/ref/references/big.md") {
		t.Errorf("big file: no note on reading the rest: %s", text[max(0, len(text)-400):])
	}
	if got := e.mustCall(t, sess, "skill", map[string]any{"name": "ref", "file": "references/small.md"}).Text(); got != "small\n" {
		t.Errorf("small file = %q", got)
	}

	res, _ = e.call(t, t.Context(), sess, "skill", map[string]any{"name": "ref", "file": "assets/blob.bin"})
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "binary") || len(res.Text()) > 2000 {
		t.Errorf("binary file: %s %.300s", res.ErrorKind, res.Text())
	}
	for _, file := range []string{"../other/SKILL.md", "/etc/passwd", "nope.md", "a\x00b"} {
		res, _ := e.call(t, t.Context(), sess, "skill", map[string]any{"name": "ref", "file": file})
		if res.ErrorKind != tool.KindNotFound || !strings.Contains(res.Text(), "references/small.md") {
			t.Errorf("file %q: %s %s, want not_found listing the files", file, res.ErrorKind, res.Text())
		}
	}
}

// referenceSkill is a skill "pdf" laid out as Anthropic's pdf, docx and pptx skills are,
// opened in a session of the skill tool; open reads one of its files.
func referenceSkill(t *testing.T) (open func(file string) *tool.Result) {
	t.Helper()
	call, _ := librarySession(t, map[string]string{
		"pdf/SKILL.md":                  "---\nname: pdf\ndescription: PDFs.\n---\nSee REFERENCE.md, read FORMS.md, run scripts/.\n",
		"pdf/reference.md":              "the reference\n",
		"pdf/forms.md":                  "the forms\n",
		"pdf/scripts/check.py":          "print('check')\n",
		"pdf/scripts/fill.py":           "print('fill')\n",
		"pdf/ooxml/schemas/a.xsd":       "<a/>\n",
		"pdf/ooxml/schemas/deep/b.xsd":  "<b/>\n",
		"pdf/Notes.md":                  "notes\n",
		"pdf/NOTES.md":                  "NOTES\n",
		"pdf/scriptsnot/not-a-child.py": "x\n",
		"pdf/guides/dup.md":             "guide\n",
		"pdf/more/dup.md":               "more\n",
	}, nil)
	return func(file string) *tool.Result { return call("pdf", file) }
}

// TestSkillFileFolder: skills point at folders ("run scripts/", "the schemas in
// ooxml/"); asked for one, the viewer lists the files under it rather than answering
// that no such file exists.
func TestSkillFileFolder(t *testing.T) {
	t.Parallel()
	open := referenceSkill(t)
	for _, file := range []string{"scripts", "scripts/", "./scripts"} {
		res := open(file)
		text := res.Text()
		if res.IsError || !strings.Contains(text, "scripts/check.py") || !strings.Contains(text, "scripts/fill.py") ||
			strings.Contains(text, "not-a-child") || strings.Contains(text, "reference.md") {
			t.Errorf("folder %q: error=%v %q, want its two files", file, res.IsError, text)
		}
	}
	if res := open("ooxml"); res.IsError || !strings.Contains(res.Text(), "ooxml/schemas/a.xsd") || !strings.Contains(res.Text(), "ooxml/schemas/deep/b.xsd") {
		t.Errorf("folder ooxml: error=%v %q", res.IsError, res.Text())
	}
	for _, file := range []string{"script", "scripts/nope", "..", "../nope/scripts"} {
		if res := open(file); res.ErrorKind != tool.KindNotFound {
			t.Errorf("file %q: %s %q, want not_found", file, res.ErrorKind, res.Text())
		}
	}
}

// TestSkillFileCase: Anthropic's pdf skill says "see REFERENCE.md" and "read
// FORMS.md" while its files are reference.md and forms.md (written where file names
// ignore case). A name that differs from exactly one file of the skill only in case
// opens that file and gives its real name, for the working directory, where case
// counts; an exact name wins, and a name two files match is still not_found.
func TestSkillFileCase(t *testing.T) {
	t.Parallel()
	open := referenceSkill(t)
	for _, c := range []struct{ file, real, text string }{
		{"REFERENCE.md", "reference.md", "the reference\n"},
		{"FORMS.md", "forms.md", "the forms\n"},
		{"Scripts/Check.py", "scripts/check.py", "print('check')\n"},
	} {
		res := open(c.file)
		if text := res.Text(); res.IsError || !strings.HasPrefix(text, c.text) || !strings.Contains(text, ".skills/pdf/"+c.real) {
			t.Errorf("file %q: error=%v %q, want %s's text and its real path", c.file, res.IsError, text, c.real)
		}
	}
	if res := open("NOTES.md"); res.IsError || res.Text() != "NOTES\n" {
		t.Errorf("NOTES.md: %q, want the file of that exact name", res.Text())
	}
	for _, file := range []string{"notes.md", "../nope/REFERENCE.md", "/REFERENCE.md"} {
		if res := open(file); res.ErrorKind != tool.KindNotFound {
			t.Errorf("file %q: %s %q, want not_found", file, res.ErrorKind, res.Text())
		}
	}
}

// TestSkillFileBaseName: skills name their scripts by base name ("Analyze template
// with `thumbnail.py`", "Use `comment.py`" in Anthropic's pptx and docx skills, whose
// files are scripts/thumbnail.py and scripts/comment.py), and a model asks for that
// name. A bare name that is the base name of exactly one file of the skill opens that
// file and gives its path; one that several files have is not_found naming those
// files first, before the skill's whole list.
func TestSkillFileBaseName(t *testing.T) {
	t.Parallel()
	open := referenceSkill(t)
	for _, c := range []struct{ file, real, text string }{
		{"check.py", "scripts/check.py", "print('check')\n"},
		{"b.xsd", "ooxml/schemas/deep/b.xsd", "<b/>\n"},
	} {
		res := open(c.file)
		if text := res.Text(); res.IsError || !strings.HasPrefix(text, c.text) || !strings.Contains(text, ".skills/pdf/"+c.real) {
			t.Errorf("file %q: error=%v %q, want %s's text and its path", c.file, res.IsError, text, c.real)
		}
	}
	res := open("dup.md")
	text := res.Text()
	if res.ErrorKind != tool.KindNotFound {
		t.Errorf("dup.md: %s %q, want not_found (two files have that name)", res.ErrorKind, text)
	}
	if i, j := strings.Index(text, "guides/dup.md, more/dup.md"), strings.Index(text, "its files"); i < 0 || j < 0 || i > j {
		t.Errorf("dup.md: %q, want guides/dup.md and more/dup.md named before the whole list", text)
	}
	for _, file := range []string{"nope.py", "scripts/reference.md", "x/check.py"} {
		if res := open(file); res.ErrorKind != tool.KindNotFound {
			t.Errorf("file %q: %s %q, want not_found", file, res.ErrorKind, res.Text())
		}
	}
}

// TestSkillFileDotDot: a path that climbs back into the skill (scripts/../SKILL.md,
// as a model writes it from a script's folder) is cleaned and served; one that
// leaves the skill once cleaned is still not_found, unless it leads into a skill the
// session may see (TestSkillFileOfAnotherSkill).
func TestSkillFileDotDot(t *testing.T) {
	t.Parallel()
	open := referenceSkill(t)
	for _, c := range []struct{ file, text string }{
		{"scripts/../SKILL.md", "---\nname: pdf\n"},
		{"scripts/../reference.md", "the reference\n"},
		{"ooxml/schemas/../../scripts/check.py", "print('check')\n"},
		{"scripts/../REFERENCE.md", "the reference\n"},
	} {
		if res := open(c.file); res.IsError || !strings.HasPrefix(res.Text(), c.text) {
			t.Errorf("file %q: error=%v %q, want %q", c.file, res.IsError, res.Text(), c.text)
		}
	}
	for _, file := range []string{"scripts/../../../pdf/reference.md", "scripts/../..", "./../pdf-old/SKILL.md"} {
		if res := open(file); res.ErrorKind != tool.KindNotFound || strings.Contains(res.Text(), "the reference") {
			t.Errorf("file %q: %s %q, want not_found", file, res.ErrorKind, res.Text())
		}
	}
}

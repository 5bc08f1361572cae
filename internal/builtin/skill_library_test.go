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

// librarySession loads a folder of skills written as files (path → content, or
// "-> target" for a symlink) and
// opens a session on it that may see the skills available names (nil: all). It
// returns a function that calls the skill tool and the session's working directory.
func librarySession(t *testing.T, files map[string]string, available []string) (func(name, file string) *tool.Result, string) {
	t.Helper()
	return librarySessionIn(t, files, "", available)
}

// librarySessionIn is librarySession whose skills directory is the folder sub of the
// files written (a plugin's skills/ beside its .claude-plugin/).
func librarySessionIn(t *testing.T, files map[string]string, sub string, available []string) (func(name, file string) *tool.Result, string) {
	t.Helper()
	root := t.TempDir()
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(data, "-> "); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sm, err := skills.NewManager(skills.Config{Dirs: []string{filepath.Join(root, filepath.FromSlash(sub))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := sm.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	proxy, _ := skills.NewProxy(sm, available)
	e := newEnv(t, sandbox.Config{})
	e.tools["skill"] = SkillTool(e.m)
	workdir := t.TempDir()
	sess := newSession("s1", workdir)
	sess.State.LoadOrStore(skills.SessionStateKey, func() any { return proxy })
	return func(name, file string) *tool.Result {
		args := map[string]any{"name": name}
		if file != "" {
			args["file"] = file
		}
		res, _ := e.call(t, t.Context(), sess, "skill", args)
		return res
	}, workdir
}

// superpowersShape is laid out as obra/superpowers is: skills name each other
// "superpowers:<skill>" (Claude Code's plugin:skill), link to a sibling skill's file
// as ../<skill>/<file>, and to their own as skills/<skill>/<file>, the path in the
// plugin's repository.
var superpowersShape = map[string]string{
	"sdd/SKILL.md": "---\nname: sdd\ndescription: Subagent-driven development.\n---\n" +
		"Then use superpowers:review's [code-reviewer.md](../review/code-reviewer.md).\n" +
		"Read `skills/sdd/companion.md` first.\nTools: [codex](../using/references/codex.md).\n",
	"sdd/companion.md":          "the companion\n",
	"review/SKILL.md":           "---\nname: review\ndescription: Requesting code review.\n---\nDispatch a reviewer.\n",
	"review/code-reviewer.md":   "the reviewer prompt\n",
	"using/SKILL.md":            "---\nname: using\ndescription: Using skills.\n---\nSee references/.\n",
	"using/references/codex.md": "codex tools\n",
	"hidden/SKILL.md":           "---\nname: hidden\ndescription: Not for this session.\n---\nsecret body\n",
	"hidden/notes.md":           "hidden notes\n",
}

// TestSkillPluginPrefixedName: superpowers' instructions say "use
// superpowers:finishing-a-development-branch"; a model asking for that name got
// not_found and a list. A prefix before ":" is a plugin's name (skill names have no
// colon): the skill after it opens, with a note of its name here. A name after the
// prefix that the session may not see, or that does not exist, is still not_found.
func TestSkillPluginPrefixedName(t *testing.T) {
	t.Parallel()
	call, _ := librarySession(t, superpowersShape, []string{"sdd", "review", "using"})
	res := call("superpowers:review", "")
	if text := res.Text(); res.IsError || !strings.Contains(text, "# Skill: review") || !strings.Contains(text, "Dispatch a reviewer.") ||
		!strings.Contains(text, `"superpowers:review" is the skill review`) {
		t.Errorf("superpowers:review: error=%v %.400q", res.IsError, text)
	}
	if res := call("superpowers:review", "code-reviewer.md"); res.IsError || !strings.HasPrefix(res.Text(), "the reviewer prompt\n") {
		t.Errorf("superpowers:review file: error=%v %q", res.IsError, res.Text())
	}
	for _, name := range []string{"superpowers:hidden", "superpowers:nope", "superpowers:", ":"} {
		if res := call(name, ""); res.ErrorKind != tool.KindNotFound || strings.Contains(res.Text(), "secret body") {
			t.Errorf("%q: %s %q, want not_found", name, res.ErrorKind, res.Text())
		}
	}
}

// TestSkillFileOfAnotherSkill: superpowers links from one skill to a file of a
// sibling (../requesting-code-review/code-reviewer.md) and names its own files by
// their path in the repository (skills/brainstorming/visual-companion.md). The viewer
// answered "leads out of the skill folder" and "not found", so the instructions
// could not be followed. Such a path names the file of the skill it goes through
// when the session may see that skill; the answer says which file it is. Paths
// that name no file of a visible skill stay not_found, and a hidden skill's files
// are never shown.
func TestSkillFileOfAnotherSkill(t *testing.T) {
	t.Parallel()
	call, _ := librarySession(t, superpowersShape, []string{"sdd", "review", "using"})
	for _, c := range []struct{ file, text, note string }{
		{"../review/code-reviewer.md", "the reviewer prompt\n", "code-reviewer.md of skill review"},
		{"../using/references/codex.md", "codex tools\n", "references/codex.md of skill using"},
		{"skills/sdd/companion.md", "the companion\n", "companion.md of skill sdd"},
		{"skills/review/code-reviewer.md", "the reviewer prompt\n", "code-reviewer.md of skill review"},
	} {
		res := call("sdd", c.file)
		if text := res.Text(); res.IsError || !strings.HasPrefix(text, c.text) || !strings.Contains(text, c.note) {
			t.Errorf("file %q: error=%v %q, want %q and a note naming %q", c.file, res.IsError, text, c.text, c.note)
		}
	}
	if res := call("sdd", "../using/references"); res.IsError || !strings.Contains(res.Text(), "references/codex.md") {
		t.Errorf("folder of a sibling: error=%v %q", res.IsError, res.Text())
	}
	for _, file := range []string{"../hidden/notes.md", "skills/hidden/notes.md", "../review/nope.md", "../../review/code-reviewer.md",
		"../nope/x.md", "..", "../review", "/review/code-reviewer.md"} {
		if res := call("sdd", file); res.ErrorKind != tool.KindNotFound || strings.Contains(res.Text(), "hidden notes") || strings.Contains(res.Text(), "the reviewer prompt") {
			t.Errorf("file %q: %s %q, want not_found", file, res.ErrorKind, res.Text())
		}
	}
}

// TestSkillBaseDir: Claude Code replaces {baseDir} and ${CLAUDE_SKILL_DIR} in a
// skill's instructions with the skill's folder, and skill libraries rely on it
// (23 of Trail of Bits' 80 skills run `uv run {baseDir}/scripts/x.py`). The viewer
// showed them as written, a path no command can use. They become the projected
// folder's absolute path, in SKILL.md and in the files the viewer reads.
func TestSkillBaseDir(t *testing.T) {
	t.Parallel()
	call, workdir := librarySession(t, map[string]string{
		"ci/SKILL.md": "---\nname: ci\ndescription: Culture index.\n---\nRun `uv run {baseDir}/scripts/extract.py`, then\n" +
			"\"${CLAUDE_SKILL_DIR}/scripts/slice.py\". Keep ${OTHER} and {base} as they are.\n",
		"ci/references/howto.md": "See {baseDir}/references/more.md.\n",
		"ci/scripts/extract.py":  "print('x')\n",
	}, nil)
	dir := filepath.Join(workdir, ".skills", "ci")
	text := call("ci", "").Text()
	for _, want := range []string{"uv run " + dir + "/scripts/extract.py", "\"" + dir + "/scripts/slice.py\"", "${OTHER} and {base}"} {
		if !strings.Contains(text, want) {
			t.Errorf("opened: no %q in %q", want, text)
		}
	}
	if strings.Contains(text, "{baseDir}") || strings.Contains(text, "CLAUDE_SKILL_DIR") {
		t.Errorf("opened: placeholder left: %q", text)
	}
	if got := call("ci", "references/howto.md").Text(); !strings.HasPrefix(got, "See "+dir+"/references/more.md.\n") {
		t.Errorf("file: %q", got)
	}
	// The projected copy itself is the skill's files as they are.
	if b, err := os.ReadFile(filepath.Join(dir, "SKILL.md")); err != nil || !strings.Contains(string(b), "{baseDir}") {
		t.Errorf("projected SKILL.md: %v %q", err, b)
	}
}

// TestSkillPluginRoot: skills of Claude Code plugins write ${CLAUDE_PLUGIN_ROOT} for
// the plugin's root (the folder holding .claude-plugin/plugin.json), mostly as
// ${CLAUDE_PLUGIN_ROOT}/skills/<skill>/scripts/x.sh. It was shown as written. In a
// plugin's skill, a path through its skills folder becomes the skill's projection in
// the working directory and any other use the plugin's root; a skill of no plugin
// keeps the text as written.
func TestSkillPluginRoot(t *testing.T) {
	t.Parallel()
	plugin := map[string]string{
		".claude-plugin/plugin.json": `{"name": "fixer", "version": "1.0.0"}`,
		"guides/style.md":            "style\n",
		"skills/pr-fix/SKILL.md": "---\nname: pr-fix\ndescription: Fixes pull requests.\n---\n" +
			"Run ${CLAUDE_PLUGIN_ROOT}/skills/pr-fix/scripts/poll.sh, read ${CLAUDE_PLUGIN_ROOT}/skills/review/SKILL.md\n" +
			"and \"${CLAUDE_PLUGIN_ROOT}/guides/style.md\"; ${CLAUDE_SKILL_DIR} is here.\n",
		"skills/pr-fix/scripts/poll.sh": "#!/bin/sh\necho ${CLAUDE_PLUGIN_ROOT}/skills/review/x\n",
		"skills/review/SKILL.md":        "---\nname: review\ndescription: Reviews.\n---\nReview.\n",
	}
	call, workdir := librarySessionIn(t, plugin, "skills", nil)
	proj := filepath.Join(workdir, ".skills")
	text := call("pr-fix", "").Text()
	for _, want := range []string{
		"Run " + proj + "/pr-fix/scripts/poll.sh, read " + proj + "/review/SKILL.md",
		"/guides/style.md\"", proj + "/pr-fix is here",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("opened: no %q in %q", want, text)
		}
	}
	if strings.Contains(text, "CLAUDE_PLUGIN_ROOT") {
		t.Errorf("opened: placeholder left: %q", text)
	}
	// The plugin's root is where guides/style.md is on disk.
	i := strings.Index(text, "and \"")
	j := strings.Index(text, "/guides/style.md\"")
	if i < 0 || j < i {
		t.Fatalf("opened: %q", text)
	}
	if b, err := os.ReadFile(text[i+len("and \""):j] + "/guides/style.md"); err != nil || string(b) != "style\n" {
		t.Errorf("plugin root %q: %v %q", text[i+len("and \""):j], err, b)
	}
	if got := call("pr-fix", "scripts/poll.sh").Text(); !strings.Contains(got, "echo "+proj+"/review/x\n") {
		t.Errorf("file: %q", got)
	}

	// The same skill outside a plugin: ${CLAUDE_PLUGIN_ROOT} means nothing there.
	delete(plugin, ".claude-plugin/plugin.json")
	call, workdir = librarySessionIn(t, plugin, "skills", nil)
	text = call("pr-fix", "").Text()
	if !strings.Contains(text, "Run ${CLAUDE_PLUGIN_ROOT}/skills/pr-fix/scripts/poll.sh") || !strings.Contains(text, filepath.Join(workdir, ".skills", "pr-fix")+" is here") {
		t.Errorf("no plugin: %q", text)
	}
}

// TestSkillFileSymlinkOut: a file of a skill that is a symlink leading out of its
// folder (references/common.md -> ../../common.md, a file shared by skills) is not
// part of the skill: neither served nor copied. The model was told only that no such
// file exists while SKILL.md names it; it is told why.
func TestSkillFileSymlinkOut(t *testing.T) {
	t.Parallel()
	call, _ := librarySession(t, map[string]string{
		"linker/SKILL.md":             "---\nname: linker\ndescription: Links a shared file.\n---\nSee references/common.md.\n",
		"linker/references/common.md": "-> ../../common.md",
		"linker/references/inside.md": "-> ../SKILL.md",
		"common.md":                   "common text\n",
	}, nil)
	res := call("linker", "references/common.md")
	if text := res.Text(); res.ErrorKind != tool.KindNotFound || strings.Contains(text, "common text") ||
		!strings.Contains(text, "symlink that leads out of the skill's folder") {
		t.Errorf("symlink out: %s %q", res.ErrorKind, text)
	}
	if res := call("linker", "references/inside.md"); res.IsError || !strings.Contains(res.Text(), "See references/common.md.") {
		t.Errorf("symlink inside: %s %q", res.ErrorKind, res.Text())
	}
	if res := call("linker", "references/nope.md"); res.ErrorKind != tool.KindNotFound || strings.Contains(res.Text(), "symlink") {
		t.Errorf("missing file: %s %q", res.ErrorKind, res.Text())
	}
}

// TestSkillNameCase: a model asking for skill "Review" (as a prompt or a user wrote
// it) got not_found though review exists. Skill names are lowercase, so a name that
// differs only in case names exactly one skill: it opens, with a note of its name,
// its files too; a plugin prefix works the same; a skill the session may not see
// stays not_found.
func TestSkillNameCase(t *testing.T) {
	t.Parallel()
	call, _ := librarySession(t, superpowersShape, []string{"sdd", "review", "using"})
	for _, name := range []string{"Review", "REVIEW", "Superpowers:Review"} {
		res := call(name, "")
		if text := res.Text(); res.IsError || !strings.Contains(text, "# Skill: review") || !strings.Contains(text, "Dispatch a reviewer.") ||
			!strings.Contains(text, "is the skill review") {
			t.Errorf("%q: error=%v %.400q", name, res.IsError, text)
		}
	}
	if res := call("Review", "code-reviewer.md"); res.IsError || !strings.HasPrefix(res.Text(), "the reviewer prompt\n") {
		t.Errorf("Review file: error=%v %q", res.IsError, res.Text())
	}
	if res := call("Hidden", ""); res.ErrorKind != tool.KindNotFound || strings.Contains(res.Text(), "secret body") {
		t.Errorf("Hidden: %s %q, want not_found", res.ErrorKind, res.Text())
	}
}

// TestSkillFolderLineNamesOnlyTheSessionsTools: an opened skill told a session without
// execute_command to run the skill's scripts "with execute_command's cwd", a call
// that would be refused as not available. The line names execute_command only when
// the session has it.
func TestSkillFolderLineNamesOnlyTheSessionsTools(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "csv", "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "csv", "SKILL.md"), []byte("---\nname: csv\ndescription: CSVs.\n---\nRun scripts/x.py.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "csv", "scripts", "x.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sm, err := skills.NewManager(skills.Config{Dirs: []string{root}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, sandbox.Config{})
	e.tools["skill"] = SkillTool(e.m)
	for _, tc := range []struct {
		tools   catalogOf
		mention bool
	}{
		{catalogOf{"skill", "execute_command"}, true},
		{catalogOf{"skill", "read_file"}, false},
	} {
		proxy, _ := skills.NewProxy(sm, nil)
		sess := newSession("s-"+strings.Join(tc.tools, "-"), t.TempDir())
		sess.Tools = tc.tools
		sess.State.LoadOrStore(skills.SessionStateKey, func() any { return proxy })
		res := e.mustCall(t, sess, "skill", map[string]any{"name": "csv"})
		text := res.Text()
		if !strings.Contains(text, ".skills/csv") || strings.Contains(text, "execute_command") != tc.mention {
			t.Errorf("session with %v: %q; want execute_command named: %v", tc.tools, text, tc.mention)
		}
	}
}

// TestSkillBaseDirInDescription: a skill's description may use {baseDir} too
// ("Use {baseDir}/scripts/x.sh"), and the skill tool shows it at the top of its
// answer. The body's placeholders were replaced but the description's were shown
// as written, a path no command can use; both become the skill's folder, "." in a
// session that may change nothing.
func TestSkillBaseDirInDescription(t *testing.T) {
	t.Parallel()
	call, workdir := librarySession(t, map[string]string{
		"pdf/SKILL.md":        "---\nname: pdf\ndescription: Fill PDF forms with {baseDir}/scripts/fill.sh or ${CLAUDE_SKILL_DIR}/scripts/x.sh.\n---\nBody.\n",
		"pdf/scripts/fill.sh": "#!/bin/sh\n",
	}, nil)
	dir := filepath.Join(workdir, ".skills", "pdf")
	text := call("pdf", "").Text()
	if want := "Fill PDF forms with " + dir + "/scripts/fill.sh or " + dir + "/scripts/x.sh."; !strings.Contains(text, want) {
		t.Errorf("opened: no %q in %q", want, text)
	}
	if strings.Contains(text, "{baseDir}") || strings.Contains(text, "CLAUDE_SKILL_DIR") {
		t.Errorf("opened: placeholder left: %q", text)
	}
	sk := skills.Skill{Name: "pdf", Description: "Use {baseDir}/scripts/fill.sh.", Body: "Body.\n", Files: []string{"SKILL.md", "scripts/fill.sh"}}
	if got := showSkillReadOnly(sk, "pdf").Text(); !strings.Contains(got, "Use ./scripts/fill.sh.") || strings.Contains(got, "{baseDir}") {
		t.Errorf("read-only: %q", got)
	}
}

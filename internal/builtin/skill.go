package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolserverd/toolserverd/internal/rank"
	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// SkillTool shows the session's skills: a skill's SKILL.md and file list, or one of
// its files. Opening a skill copies (projects) its folder into the session's working
// directory at .skills/<name>/, so its scripts run there with execute_command;
// in a session that may change nothing (explore mode) it is only shown.
func SkillTool(m *sandbox.Manager) tool.Tool { return skillTool{m: m} }

type skillTool struct{ m *sandbox.Manager }

func (skillTool) Spec() tool.Spec {
	return tool.Spec{
		Name:  "skill",
		Label: "Open a skill",
		Description: "Open one of your skills (packaged instructions, scripts and assets for a kind of task): returns its " +
			"full instructions and file list and makes its folder available at .skills/<name>/ in your working directory (not in explore mode, which changes nothing). " +
			"With file, returns that file of the skill (a folder of it, such as scripts, lists its files). " +
			"With query instead of name, finds the skills that fit a task, with their descriptions.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
  "name":{"type":"string","minLength":1,"description":"The skill's name."},
  "file":{"type":"string","description":"A file of the skill to read, relative to its folder (e.g. scripts/run.sh); a folder (e.g. scripts) lists its files."},
  "query":{"type":"string","description":"Without name: words for a task (e.g. 'fill a PDF form'); returns the skills that fit best, with their descriptions."}}}`),
		PromptHint: "Before doing a task one of your skills covers, open it with the skill tool and follow its instructions.",
		Documentation: "skill {query}: the skills of this session that best fit the words of query (ranked by their names and descriptions, at most " + strconv.Itoa(skillSearchLimit) + " of them, each with its whole description, and how many matched); the prompt lists only as many skills as fit its budget, so this finds the others. skill {name, file?}: without file, returns the skill's SKILL.md (instructions), its files and the path " +
			"where its folder was copied into your working directory (.skills/<name>/; refreshed when the skill changes); run " +
			"its scripts from there with execute_command, for example `bash .skills/<name>/scripts/run.sh`. With file, returns " +
			"that file's text, at most 48 KiB of it (a longer file says how to read the rest with read_file; a binary one is refused); file naming a folder of the skill (scripts, scripts/) lists the files under it, and a name that differs from one file only in case (REFERENCE.md for reference.md) opens that file and says its real name, and a bare name that is the name of exactly one file in a folder of the skill (thumbnail.py for scripts/thumbnail.py) opens that file and says its path (of several, the answer names them). A path is cleaned first (scripts/../SKILL.md is SKILL.md); one that leaves the skill's folder, and an absolute one, names no file of it, except that a path into another of your skills (../review/code-reviewer.md, or skills/review/code-reviewer.md as a skill library's repository names it) returns that skill's file and says so. {baseDir} and ${CLAUDE_SKILL_DIR} in the text returned are replaced with the path of the skill's folder in your working directory; in a skill of a Claude Code plugin, ${CLAUDE_PLUGIN_ROOT}/skills/<skill>/ becomes the path of that skill's folder in your working directory (there once that skill is opened) and any other ${CLAUDE_PLUGIN_ROOT} the plugin's root folder on the server (its files outside skills are not copied into your working directory); in other skills ${CLAUDE_PLUGIN_ROOT} is left as written. A name plugin:skill (superpowers:brainstorming) opens the skill named after the colon. In a session that may change nothing (explore mode) the skill is shown without being copied: the answer says so, names its files relative to the skill's folder (read each with skill {name, file}), {baseDir} and ${CLAUDE_SKILL_DIR} become \".\" (so {baseDir}/scripts/x.py reads ./scripts/x.py), and its allowed-tools do not apply. Skill names are lowercase: a name in other case (PDF) opens the skill it names (pdf). Only skills of this session can be opened; an unknown name is answered not_found with the list of skills (of more than 50, the names nearest it and how many there are), and a skill whose folder is there but does not load is answered not_found saying why it is not loaded.",
		Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:  tool.RiskSafe,
	}
}

func (t skillTool) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		Name  string `json:"name"`
		File  string `json:"file"`
		Query string `json:"query"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	if strings.TrimSpace(args.Name) == "" && strings.TrimSpace(args.Query) == "" {
		return nil, tool.Errorf(tool.KindInvalidArgs, "give name (the skill to open) or query (words for a task, to find skills)")
	}
	if ctx.Session == nil || ctx.Session.State == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "skills are not available outside a session")
	}
	proxy, _ := ctx.Session.State.LoadOrStore(skills.SessionStateKey, func() any { return (*skills.Proxy)(nil) }).(*skills.Proxy)
	if proxy == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "no skills are configured on this server")
	}
	if strings.TrimSpace(args.Name) == "" {
		return searchSkills(proxy, args.Query), nil
	}
	asked := strings.TrimSpace(args.Name)
	name, prefixed := pluginSkillName(proxy, asked)
	sk, ok := proxy.Get(name)
	if _, broken := proxy.NotLoaded(name); !ok && !broken { // NotLoaded: a broken pdf is answered as itself
		// Skill names are lowercase (a-z, 0-9, -), so a name that differs only in
		// case ("PDF", "Superpowers:Review") names one skill at most.
		if n, _ := pluginSkillName(proxy, strings.ToLower(asked)); n != name {
			if s, found := proxy.Get(n); found {
				name, sk, ok, prefixed = n, s, true, asked
			} else if _, broken := proxy.NotLoaded(n); broken {
				name = n
			}
		}
	}
	if !ok {
		available := availableSkills(proxy, name)
		if why, broken := proxy.NotLoaded(name); broken {
			return nil, tool.Errorf(tool.KindNotFound, "skill %s is not loaded: %s (its folder is there but could not be loaded; the server's operator can fix it); %s",
				name, why, available)
		}
		return nil, tool.Errorf(tool.KindNotFound, "no skill named %q in this session; %s", args.Name, available)
	}
	if ctx.ReadOnly {
		// A session that may change nothing (explore) gets the skill shown from
		// the library, its folder not copied into the working directory.
		if args.File != "" {
			return readSkillFile(proxy, sk, args.File, "", true)
		}
		return showSkillReadOnly(sk, prefixed), nil
	}
	box, err := t.m.For(ctx.Session)
	if args.File != "" {
		root := "" // placeholders become .skills/<name> without a sandbox
		if err == nil {
			root = box.Root()
		}
		return readSkillFile(proxy, sk, args.File, root, false)
	}
	if err != nil {
		return nil, tool.Errorf(tool.KindUnavailable, "the session's sandbox is not available: %v", err)
	}
	path, err := skills.Project(sk, box.Root())
	if err != nil {
		return nil, tool.Errorf(tool.KindFailed, "skill %s could not be copied into the working directory: %v", sk.Name, err)
	}
	// Active (its allowed-tools apply) only once it is there to be used.
	active, _ := ctx.Session.State.LoadOrStore(skills.ActiveStateKey, func() any { return &skills.Active{} }).(*skills.Active)
	active.Set(sk)
	rel, _ := filepath.Rel(box.Root(), path)
	var b strings.Builder
	// execute_command is named only to a session that may call it.
	run := fmt.Sprintf("run its scripts as %s/scripts/…", rel)
	if hasTool(ctx, "execute_command") {
		run += " or with execute_command's cwd " + rel
	}
	fmt.Fprintf(&b, "# Skill: %s\n%s\n\nFolder: %s/ (in your working directory; paths in the instructions below are relative to it: "+
		"%s)\nFiles: %s\n", sk.Name, expandSkillDir(sk.Description, sk, path), rel, run, strings.Join(sk.Files, ", "))
	if len(sk.AllowedTools) > 0 {
		fmt.Fprintf(&b, "Tools this skill expects: %s\n", strings.Join(sk.AllowedTools, ", "))
	}
	b.WriteString(aliasNote(prefixed, sk.Name))
	b.WriteString("\n")
	body := expandSkillDir(sk.Body, sk, path)
	if body, cut := budgetHead([]byte(body)); cut {
		b.WriteString(body)
		fmt.Fprintf(&b, "\n[showing the first %s of the instructions' %s; read the rest of %s/SKILL.md with read_file, using offset and limit]",
			sizeText(int64(len(body))), sizeText(int64(len(sk.Body))), filepath.ToSlash(rel))
	} else {
		b.WriteString(body)
	}
	structured, _ := json.Marshal(map[string]any{"name": sk.Name, "folder": rel, "files": sk.Files, "version": sk.Version})
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: b.String()}}, Structured: structured}, nil
}

// notCopiedNote says why a read-only session's skill is not in its working directory.
const notCopiedNote = "the skill's files are not copied into your working directory, because this session may change nothing (explore mode)"

// showSkillReadOnly is the skill tool's answer to opening sk in a session that may
// change nothing: SKILL.md and the file list as the library holds them. Nothing is
// copied, so no path may point into the working directory: the skill's folder is
// "." in its instructions ({baseDir}/scripts/x.py reads ./scripts/x.py), its files
// are named relative to it, and each is read with skill {name, file}. The skill is
// not made active (its allowed-tools do not apply): it is not there to be used.
func showSkillReadOnly(sk skills.Skill, prefixed string) *tool.Result {
	var b strings.Builder
	fmt.Fprintf(&b, "# Skill: %s\n%s\n\nFolder: none: %s. Paths in the instructions below are relative to the skill's folder; "+
		"read a file of it with skill (name %s, file its path, e.g. %s)\nFiles: %s\n",
		sk.Name, expandSkillDir(sk.Description, sk, "."), notCopiedNote, sk.Name, exampleFile(sk), strings.Join(sk.Files, ", "))
	if len(sk.AllowedTools) > 0 {
		fmt.Fprintf(&b, "Tools this skill expects: %s\n", strings.Join(sk.AllowedTools, ", "))
	}
	b.WriteString(aliasNote(prefixed, sk.Name))
	b.WriteString("\n")
	body := expandSkillDir(sk.Body, sk, ".")
	if body, cut := budgetHead([]byte(body)); cut {
		b.WriteString(body)
		fmt.Fprintf(&b, "\n[showing the first %s of the instructions' %s; the rest cannot be shown in this session: %s]",
			sizeText(int64(len(body))), sizeText(int64(len(sk.Body))), notCopiedNote)
	} else {
		b.WriteString(body)
	}
	structured, _ := json.Marshal(map[string]any{"name": sk.Name, "folder": nil, "files": sk.Files, "version": sk.Version})
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: b.String()}}, Structured: structured}
}

// exampleFile is a file of sk to show how one is read: the first besides SKILL.md.
func exampleFile(sk skills.Skill) string {
	for _, f := range sk.Files {
		if f != "SKILL.md" {
			return f
		}
	}
	return "SKILL.md"
}

// maxNamesListed is how many skills an unknown name is answered with, all of them up
// to it; past it, the names nearest the one asked for.
const maxNamesListed = 50

// availableSkills says which skills there are, for an answer to a name that is none:
// every name of a small library; of a large one (a thousand skills would be 20 KB of
// names) the few ranked nearest to name, and how to find the others.
func availableSkills(proxy *skills.Proxy, name string) string {
	list := proxy.List()
	names := make([]string, 0, len(list))
	docs := make([]rank.Doc, 0, len(list))
	for _, s := range list {
		names = append(names, s.Name)
		docs = append(docs, rank.Doc{Name: s.Name, Description: s.Description})
	}
	if len(names) <= maxNamesListed {
		return "available skills: " + strings.Join(names, ", ")
	}
	var near []string
	for _, h := range rank.NewIndex(docs).Rank(name, skillSearchLimit) {
		near = append(near, h.Name)
	}
	text := fmt.Sprintf("there are %d skills; find one for a task with skill and query", len(names))
	if len(near) > 0 {
		text += "; the names nearest this one: " + strings.Join(near, ", ")
	}
	return text
}

// skillSearchLimit is how many skills a query shows.
const skillSearchLimit = 10

// searchSkills answers skill {query}: the skills the model may pick (not those for a
// person to ask for, as the prompt fragment leaves them out too) ranked by how well
// their names and descriptions fit the query (BM25, as tools are ranked), the best
// skillSearchLimit with their descriptions.
func searchSkills(proxy *skills.Proxy, query string) *tool.Result {
	list := proxy.List()
	docs := make([]rank.Doc, 0, len(list))
	desc := make(map[string]string, len(list))
	for _, sk := range list {
		if !sk.ManualOnly {
			docs = append(docs, rank.Doc{Name: sk.Name, Description: sk.Description})
			desc[sk.Name] = sk.Description
		}
	}
	hits := rank.NewIndex(docs).Rank(query, 0)
	if len(hits) == 0 {
		return tool.TextResult(fmt.Sprintf("no skill of the %d here matches %q: try other words (what the task does, the kind of file or the tool it involves)", len(docs), quotedQuery(query)))
	}
	var b strings.Builder
	shown := hits[:min(len(hits), skillSearchLimit)]
	fmt.Fprintf(&b, "%d of the %d skills match %q", len(hits), len(docs), quotedQuery(query))
	if len(hits) > len(shown) {
		fmt.Fprintf(&b, "; the best %d", len(shown))
	}
	b.WriteString(" (open one with skill and its name):\n")
	names := make([]string, len(shown))
	for i, h := range shown {
		fmt.Fprintf(&b, "- %s: %s\n", h.Name, desc[h.Name])
		names[i] = h.Name
	}
	structured, _ := json.Marshal(map[string]any{"skills": names, "matched": len(hits)})
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: b.String()}}, Structured: structured}
}

// quotedQueryRunes is how much of a query its answer quotes: a query as long as a
// document would otherwise fill the result's token budget with itself.
const quotedQueryRunes = 100

// quotedQuery is the head of query that its answer quotes.
func quotedQuery(query string) string {
	n := 0
	for i := range query {
		if n == quotedQueryRunes {
			return query[:i] + "…"
		}
		n++
	}
	return query
}

// readSkillFile shows one file of a skill as read_file would: text up to outputBudget
// with a note on reading the rest from the projected folder, a binary file refused
// with what it is. sandboxRoot is where the session's skills are projected ("" when
// unknown), for the placeholders of the skill's folder (expandSkillDir). readOnly is
// a session that may change nothing, where skills are not copied: then no path
// shown points into the working directory (the skill's folder is ".").
func readSkillFile(proxy *skills.Proxy, sk skills.Skill, file, sandboxRoot string, readOnly bool) (*tool.Result, error) {
	text, err := skillFileText(proxy, sk, file, sandboxRoot, readOnly)
	if err != nil {
		other, rel, ok := otherSkillFile(proxy, file)
		if !ok {
			return nil, err
		}
		// A file of a skill beside this one (../review/code-reviewer.md), or a
		// path in the skill library's repository (skills/review/code-reviewer.md).
		if text, err = skillFileText(proxy, other, rel, sandboxRoot, readOnly); err != nil {
			return nil, err
		}
		if readOnly {
			text += fmt.Sprintf("\n[%s is %s of skill %s (skill with name %s and file %s)]", file, rel, other.Name, other.Name, rel)
			return tool.TextResult(text), nil
		}
		text += fmt.Sprintf("\n[%s is %s of skill %s (skill with name %s and file %s); in your working directory it is %s once skill %s is opened]",
			file, rel, other.Name, other.Name, rel, path.Join(skills.ProjectionDir, other.Name, rel), other.Name)
	}
	return tool.TextResult(text), nil
}

// skillFileText is readSkillFile for a path of sk's own.
func skillFileText(proxy *skills.Proxy, sk skills.Skill, file, sandboxRoot string, readOnly bool) (string, error) {
	if dir, files := skillFolder(sk, file); len(files) > 0 {
		list, cut := budgetHead([]byte(strings.Join(files, "\n") + "\n"))
		they := "they are"
		if len(files) == 1 {
			they = "it is"
		}
		where := fmt.Sprintf("once the skill is opened %s in %s/ of your working directory", they, path.Join(skills.ProjectionDir, sk.Name, dir))
		if readOnly {
			where = notCopiedNote
		}
		text := fmt.Sprintf("%s/ of skill %s holds %s (read one with skill and its path as file; %s):\n%s",
			dir, sk.Name, countOf(len(files), "file", "files"), where, list)
		if readOnly && cut {
			return text + "[list cut]", nil
		}
		if cut {
			text += "[list cut; open the skill and list the folder with glob]"
		}
		return text, nil
	}
	name := file
	sameBase := skillFilesByBase(sk, file)
	if real, ok := skillFileByCase(sk, file); ok {
		name = real
	} else if len(sameBase) == 1 {
		name = sameBase[0]
	}
	b, err := proxy.Read(sk.Name, name)
	if err != nil {
		if linkOut(sk, name) {
			return "", tool.Errorf(tool.KindNotFound, "skill %s has no readable file %q: it is a symlink that leads out of the skill's folder (or to a folder), "+
				"and a skill is only the files inside its folder; its files: %s", sk.Name, file, strings.Join(sk.Files, ", "))
		}
		named := ""
		if len(sameBase) > 1 {
			named = fmt.Sprintf("; files of that name: %s", strings.Join(sameBase, ", "))
		}
		// A path with ".." or an absolute one names no file of the skill either.
		return "", tool.Errorf(tool.KindNotFound, "skill %s has no readable file %q (%v)%s; its files: %s", sk.Name, file, err, named, strings.Join(sk.Files, ", "))
	}
	projected := path.Join(skills.ProjectionDir, sk.Name, path.Clean(filepath.ToSlash(name)))
	if readOnly {
		return readOnlyFileText(sk, file, name, b)
	}
	if looksBinary(b[:min(len(b), sniffLen)]) {
		return "", tool.Errorf(tool.KindFailed, "%s of skill %s is a binary file (%s, detected type %s); open the skill (skill with only its name) "+
			"and use it at %s in your working directory with execute_command", file, sk.Name, sizeText(int64(len(b))), http.DetectContentType(b), projected)
	}
	dir := path.Join(skills.ProjectionDir, sk.Name)
	if sandboxRoot != "" {
		dir = skills.ProjectedPath(sandboxRoot, sk.Name)
	}
	text, cut := budgetHead([]byte(expandSkillDir(string(b), sk, dir)))
	if cut {
		text += fmt.Sprintf("\n[showing the first %s of %s; open the skill (skill with only its name) and read the rest of %s in your working directory with read_file, using offset and limit]",
			sizeText(int64(len(text))), sizeText(int64(len(b))), projected)
	}
	switch {
	case name == file:
	case !strings.EqualFold(name, path.Clean(filepath.ToSlash(file))):
		text += fmt.Sprintf("\n[the skill has no %s at its top; this is %s, its one file of that name (in your working directory: %s)]", file, name, projected)
	default:
		text += fmt.Sprintf("\n[the skill has no %s; this is %s (the names differ in case, which counts in your working directory: use %s there)]", file, name, projected)
	}
	return text, nil
}

// readOnlyFileText is skillFileText's answer in a session that may change nothing:
// the file b (name, asked for as file) as the library holds it, with nothing that
// points into the working directory.
func readOnlyFileText(sk skills.Skill, file, name string, b []byte) (string, error) {
	if looksBinary(b[:min(len(b), sniffLen)]) {
		return "", tool.Errorf(tool.KindFailed, "%s of skill %s is a binary file (%s, detected type %s), which cannot be shown; %s",
			file, sk.Name, sizeText(int64(len(b))), http.DetectContentType(b), notCopiedNote)
	}
	text, cut := budgetHead([]byte(expandSkillDir(string(b), sk, ".")))
	if cut {
		text += fmt.Sprintf("\n[showing the first %s of %s; the rest cannot be shown in this session: %s]",
			sizeText(int64(len(text))), sizeText(int64(len(b))), notCopiedNote)
	}
	switch {
	case name == file:
	case !strings.EqualFold(name, path.Clean(filepath.ToSlash(file))):
		text += fmt.Sprintf("\n[the skill has no %s at its top; this is %s, its one file of that name]", file, name)
	default:
		text += fmt.Sprintf("\n[the skill has no %s; this is %s (the names differ in case)]", file, name)
	}
	return text, nil
}

// linkOut reports whether file, not one of the skill's files, is a symlink in the
// skill's folder: one the scan left out because it leads out of the folder or to a
// folder. The folder is looked at through an os.Root, so nothing outside it is.
func linkOut(sk skills.Skill, file string) bool {
	rel := path.Clean(filepath.ToSlash(file))
	if rel == "." || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	root, err := os.OpenRoot(sk.Dir)
	if err != nil {
		return false
	}
	defer root.Close()
	info, err := root.Lstat(rel)
	return err == nil && info.Mode()&fs.ModeSymlink != 0
}

// pluginSkillName returns the name to look the skill up by: name itself, or, for
// "plugin:skill" (Claude Code's name of a plugin's skill, which libraries such as
// superpowers use to point at each other's skills) naming no skill while the part
// after the colon names one the session may see, that part. prefixed is then the
// name as given. Skill names have no colon, so no skill is hidden by this.
func pluginSkillName(proxy *skills.Proxy, name string) (lookup, prefixed string) {
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return name, ""
	}
	if _, ok := proxy.Get(name); ok {
		return name, ""
	}
	bare := strings.TrimSpace(name[i+1:])
	if _, ok := proxy.Get(bare); ok {
		return bare, name
	}
	if _, ok := proxy.NotLoaded(bare); ok {
		return bare, "" // answered as that skill: not loaded, and why
	}
	return name, ""
}

// aliasNote says which skill a name asked for (with a plugin prefix, or in other
// case) is; "" for none.
func aliasNote(asked, name string) string {
	if asked == "" || asked == name {
		return ""
	}
	var why []string
	if strings.Contains(asked, ":") {
		why = append(why, "have no plugin prefix")
	}
	if asked != strings.ToLower(asked) {
		why = append(why, "are lowercase")
	}
	return fmt.Sprintf("(%q is the skill %s: skill names here %s)\n", asked, name, strings.Join(why, " and "))
}

// otherSkillFile finds the skill that a path of a skill's instructions leads to
// when it names no file of that skill: "../review/code-reviewer.md" (skills lie side
// by side in their library) or "skills/review/code-reviewer.md" (the path in the
// library's repository) name code-reviewer.md of skill review, when the session may
// see review and it has such a file or folder. Nothing is looked up on disk: the
// file is then read through the skill review, confined to its folder.
func otherSkillFile(proxy *skills.Proxy, file string) (skills.Skill, string, bool) {
	clean := path.Clean(filepath.ToSlash(file))
	if path.IsAbs(clean) {
		return skills.Skill{}, "", false
	}
	parts := strings.Split(clean, "/")
	first, last := 0, len(parts)-2
	if parts[0] == ".." {
		if len(parts) < 3 {
			return skills.Skill{}, "", false
		}
		first, last = 1, 1 // ../<skill>/…; ../../ leaves the skills' folder
	}
	for i := first; i <= last; i++ {
		if parts[i] == ".." {
			return skills.Skill{}, "", false
		}
		other, ok := proxy.Get(parts[i])
		if !ok {
			continue
		}
		rel := strings.Join(parts[i+1:], "/")
		if _, found := slices.BinarySearch(other.Files, rel); found {
			return other, rel, true
		}
		if _, files := skillFolder(other, rel); len(files) > 0 {
			return other, rel, true
		}
		if real, ok := skillFileByCase(other, rel); ok {
			return other, real, true
		}
	}
	return skills.Skill{}, "", false
}

// skillDirPlaceholders are what skills write for their own folder: Claude Code
// replaces {baseDir} and ${CLAUDE_SKILL_DIR} in a skill's instructions with it.
var skillDirPlaceholders = []string{"{baseDir}", "${CLAUDE_SKILL_DIR}"}

// pluginRootPlaceholder is what a Claude Code plugin's skills write for the plugin's
// root folder: ${CLAUDE_PLUGIN_ROOT}/skills/pdf/scripts/x.py, ${CLAUDE_PLUGIN_ROOT}/guides/y.md.
const pluginRootPlaceholder = "${CLAUDE_PLUGIN_ROOT}"

// expandSkillDir replaces the placeholders of a skill's folder in text with dir, the
// folder the skill is projected to. For a skill of a plugin (Skill.PluginRoot), a
// path through the plugin's skills folder (${CLAUDE_PLUGIN_ROOT}/skills/other/…)
// becomes the path of that skill's projection beside dir, where the session reaches
// it, and ${CLAUDE_PLUGIN_ROOT} anywhere else the plugin's root folder; for any other
// skill ${CLAUDE_PLUGIN_ROOT} means nothing and is left as written.
func expandSkillDir(text string, sk skills.Skill, dir string) string {
	var pairs []string
	if sk.PluginRoot != "" && strings.Contains(text, pluginRootPlaceholder) {
		if rel, err := filepath.Rel(sk.PluginRoot, filepath.Dir(sk.Dir)); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			pairs = append(pairs, pluginRootPlaceholder+"/"+filepath.ToSlash(rel)+"/", filepath.Dir(dir)+"/")
		}
		pairs = append(pairs, pluginRootPlaceholder, sk.PluginRoot)
	}
	if strings.Contains(text, "{baseDir}") || strings.Contains(text, "${CLAUDE_SKILL_DIR}") {
		for _, p := range skillDirPlaceholders {
			pairs = append(pairs, p, dir)
		}
	}
	if pairs == nil {
		return text
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// skillFileByCase returns the one file of the skill whose path differs from file only
// in case, when file names none exactly: skills written where names ignore case refer
// to reference.md as REFERENCE.md.
func skillFileByCase(sk skills.Skill, file string) (string, bool) {
	rel := path.Clean(filepath.ToSlash(file))
	if _, exact := slices.BinarySearch(sk.Files, rel); exact {
		return "", false
	}
	match := ""
	for _, f := range sk.Files {
		if strings.EqualFold(f, rel) {
			if match != "" {
				return "", false // two files: which one is meant is unknown
			}
			match = f
		}
	}
	return match, match != ""
}

// skillFilesByBase returns the files of the skill whose base name is file, when
// file is a bare name (no folder) that names no file at the skill's top, in any
// case: skills name their scripts so ("Analyze template with `thumbnail.py`" for
// scripts/thumbnail.py). One such file is the one meant; of several, none is.
func skillFilesByBase(sk skills.Skill, file string) []string {
	base := filepath.ToSlash(file)
	if base == "" || strings.Contains(base, "/") || base == "." || base == ".." {
		return nil
	}
	var out []string
	for _, f := range sk.Files {
		if strings.EqualFold(f, base) {
			return nil // a top-level file, exactly or in other case (skillFileByCase)
		}
		if path.Base(f) == base && strings.Contains(f, "/") {
			out = append(out, f)
		}
	}
	return out
}

// skillFolder returns the folder of the skill that file names (relative to the skill,
// as "scripts" or "scripts/") and the skill's files under it, or no files when file
// names no folder of the skill.
func skillFolder(sk skills.Skill, file string) (string, []string) {
	dir := path.Clean(filepath.ToSlash(file))
	if dir == "." || path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
		return "", nil
	}
	var files []string
	for _, f := range sk.Files {
		if strings.HasPrefix(f, dir+"/") {
			files = append(files, f)
		}
	}
	return dir, files
}

// budgetHead returns b as text, cut to outputBudget at a line end (or a character
// boundary) when longer, and whether it was cut.
func budgetHead(b []byte) (string, bool) {
	if len(b) <= outputBudget {
		text, _ := sanitize(b)
		return text, false
	}
	head := b[:outputBudget]
	if i := bytes.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i+1]
	} else {
		head = head[:len(head)-incompleteTail(head)]
	}
	text, _ := sanitize(head)
	return text, true
}

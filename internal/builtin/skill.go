package builtin

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// SkillTool shows the session's skills: a skill's SKILL.md and file list, or one of
// its files. Opening a skill copies (projects) its folder into the session's working
// directory at .skills/<name>/, so its scripts run there with execute_command.
func SkillTool(m *sandbox.Manager) tool.Tool { return skillTool{m: m} }

type skillTool struct{ m *sandbox.Manager }

func (skillTool) Spec() tool.Spec {
	return tool.Spec{
		Name:  "skill",
		Label: "Open a skill",
		Description: "Open one of your skills (packaged instructions, scripts and assets for a kind of task): returns its " +
			"full instructions and file list and makes its folder available at .skills/<name>/ in your working directory. " +
			"With file, returns that file of the skill.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["name"],"properties":{
  "name":{"type":"string","minLength":1,"description":"The skill's name."},
  "file":{"type":"string","description":"A file of the skill to read, relative to its folder (e.g. scripts/run.sh)."}}}`),
		PromptHint: "Before doing a task one of your skills covers, open it with the skill tool and follow its instructions.",
		Documentation: "skill {name, file?}: without file, returns the skill's SKILL.md (instructions), its files and the path " +
			"where its folder was copied into your working directory (.skills/<name>/; refreshed when the skill changes); run " +
			"its scripts from there with execute_command, for example `bash .skills/<name>/scripts/run.sh`. With file, returns " +
			"that file's text. Only skills of this session can be opened; an unknown name is answered not_found with the list.",
		Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:  tool.RiskSafe,
	}
}

func (t skillTool) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		Name string `json:"name"`
		File string `json:"file"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	if ctx.Session == nil || ctx.Session.State == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "skills are not available outside a session")
	}
	proxy, _ := ctx.Session.State.LoadOrStore(skills.SessionStateKey, func() any { return (*skills.Proxy)(nil) }).(*skills.Proxy)
	if proxy == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "no skills are configured on this server")
	}
	sk, ok := proxy.Get(strings.TrimSpace(args.Name))
	if !ok {
		var names []string
		for _, s := range proxy.List() {
			names = append(names, s.Name)
		}
		return nil, tool.Errorf(tool.KindNotFound, "no skill named %q in this session; available skills: %s", args.Name, strings.Join(names, ", "))
	}
	if args.File != "" {
		b, err := proxy.Read(sk.Name, args.File)
		if err != nil {
			return nil, tool.Errorf(tool.KindNotFound, "skill %s has no readable file %q: %v", sk.Name, args.File, err)
		}
		text, _ := sanitize(b)
		return tool.TextResult(text), nil
	}
	box, err := t.m.For(ctx.Session)
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
	fmt.Fprintf(&b, "# Skill: %s\n%s\n\nFolder: %s/ (in your working directory)\nFiles: %s\n", sk.Name, sk.Description, rel, strings.Join(sk.Files, ", "))
	if len(sk.AllowedTools) > 0 {
		fmt.Fprintf(&b, "Tools this skill expects: %s\n", strings.Join(sk.AllowedTools, ", "))
	}
	b.WriteString("\n")
	b.WriteString(sk.Body)
	structured, _ := json.Marshal(map[string]any{"name": sk.Name, "folder": rel, "files": sk.Files, "version": sk.Version})
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: b.String()}}, Structured: structured}, nil
}

package skills

import (
	"path"
	"strings"
	"sync"
)

// ActiveStateKey is where a session keeps its *Active (the skill it opened last).
const ActiveStateKey = "skills.active"

// Active is the skill a session is working with. While it has allowed tools, the
// session may call only those (and the meta tools).
type Active struct {
	mu      sync.Mutex
	name    string
	allowed []string
}

// Set makes sk the active skill.
func (a *Active) Set(sk Skill) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.name, a.allowed = sk.Name, sk.AllowedTools
}

// Current returns the active skill's name and the tools it allows ("" and nil when no
// skill is active).
func (a *Active) Current() (name string, allowed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.name, append([]string(nil), a.allowed...)
}

// agentSkillTools maps the tool names skills write in allowed-tools (Claude Code's,
// which public skill libraries use) to toolserverd's. TaskCreate … TaskGet are
// Claude Code's current names for its task list, TodoWrite and TodoRead its older
// ones.
var agentSkillTools = map[string][]string{
	"Bash": {"execute_command", "await_job", "read_job_output", "kill_job"}, "Read": {"read_file"},
	"Write": {"write_file"}, "Edit": {"edit_file"}, "MultiEdit": {"multi_edit"}, "Glob": {"glob"},
	"Grep": {"grep"}, "LS": {"list_dir", "tree"}, "WebFetch": {"web_fetch"}, "WebSearch": {"web_search"},
	"AskUserQuestion": {"ask_user"},
	"TodoWrite":       {"task_create", "task_update", "task_list", "task_get"}, "TodoRead": {"task_list", "task_get"},
	"TaskCreate": {"task_create"}, "TaskUpdate": {"task_update"}, "TaskList": {"task_list"}, "TaskGet": {"task_get"},
}

// Allows reports whether the active skill permits calling tool, and if not, which
// skill refuses and what it allows. Argument patterns such as Bash(git diff:*) are
// matched on the tool only: permission rules judge the arguments.
func (a *Active) Allows(tool string) (ok bool, skill string, allowed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.allowed) == 0 {
		return true, "", nil
	}
	for _, entry := range a.allowed {
		name, _, _ := strings.Cut(entry, "(")
		name = strings.TrimSpace(name)
		for _, n := range append(agentSkillTools[name], name) {
			if m, _ := path.Match(n, tool); m {
				return true, "", nil
			}
		}
	}
	return false, a.name, a.allowed
}

package skills

import "testing"

// TestActiveAllowsClaudeCodeToolNames: skills written for Claude Code list its tool
// names in allowed-tools. Trail of Bits' c-review lists "AskUserQuestion TaskCreate
// TaskUpdate TaskList Read Write Bash"; opened, it must leave the session ask_user and
// the task tools, not only read_file, write_file and execute_command. A tool the list
// does not name stays refused.
func TestActiveAllowsClaudeCodeToolNames(t *testing.T) {
	t.Parallel()
	var a Active
	a.Set(Skill{Name: "c-review", AllowedTools: []string{"Agent", "AskUserQuestion", "SendMessage", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "Read", "Write", "Bash(git:*)"}})
	for _, tool := range []string{"ask_user", "task_create", "task_update", "task_list", "task_get", "read_file", "write_file", "execute_command", "await_job"} {
		if ok, _, _ := a.Allows(tool); !ok {
			t.Errorf("%s refused, want allowed", tool)
		}
	}
	for _, tool := range []string{"edit_file", "web_fetch", "memory_save", "grep"} {
		if ok, sk, _ := a.Allows(tool); ok || sk != "c-review" {
			t.Errorf("%s: allowed=%v skill=%q, want refused by c-review", tool, ok, sk)
		}
	}

	// TodoRead is the older name of the task list's reading side: it does not
	// write.
	a.Set(Skill{Name: "dimensional-analysis", AllowedTools: []string{"Read", "TodoRead"}})
	for tool, want := range map[string]bool{"task_list": true, "task_get": true, "task_create": false, "task_update": false} {
		if ok, _, _ := a.Allows(tool); ok != want {
			t.Errorf("%s under TodoRead: allowed=%v, want %v", tool, ok, want)
		}
	}
}

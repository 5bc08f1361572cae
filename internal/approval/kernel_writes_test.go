package approval

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// TestKernelControlWritesAsk: a command that writes one of the kernel's control
// files (a pid into a cgroup's cgroup.procs, which takes it out of its pids and
// memory cgroups: a fork bomb then passes pids_limit; a /proc/sys or /sys/kernel
// setting) asks, immune, in every mode and whatever the allow rules say, however
// the path is reached; reading them does not.
func TestKernelControlWritesAsk(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	e := testEngine(t, DefaultConfig())
	rules := mustRules(t, Allow, "execute_command(echo:*)", "execute_command(tee:*)", "execute_command(cp:*)",
		"execute_command(dd:*)", "execute_command(cd:*)", "execute_command(sh:*)", "execute_command(cat:*)")
	for _, tc := range []struct {
		command string
		asks    bool
	}{
		{"echo $$ > /sys/fs/cgroup/pids/cgroup.procs", true},
		{"echo $$ > /sys/fs/cgroup/cgroup.procs", true},
		{"echo $$ | tee /sys/fs/cgroup/memory/cgroup.procs", true},
		{"cp pid /sys/fs/cgroup/pids/tasks", true},
		{"dd if=pid of=/sys/fs/cgroup/pids/cgroup.procs", true},
		{"cd /sys/fs/cgroup/pids && echo $$ > cgroup.procs", true},
		{"cd ../../../../../../../../sys/fs/cgroup/pids && echo $$ > cgroup.procs", true},
		{"echo $$ > ../../../../../../../../sys/fs/cgroup/pids/cgroup.procs", true},
		{"sh -c 'echo $$ > /sys/fs/cgroup/pids/cgroup.procs'", true},
		{"echo 1 > /proc/sys/kernel/sysrq", true},
		{"echo 1 | tee /sys/kernel/mm/ksm/run", true},
		{"cp -t /sys/fs/cgroup/pids pid", true},
		// A parameter expansion's default or alternative value is the path written.
		{"echo $$ > ${X:-/sys/fs/cgroup/pids/cgroup.procs}", true},
		{`echo $$ > "${X:-/sys/fs/cgroup/pids}/cgroup.procs"`, true},
		{"echo $$ > ${X:+/sys/fs/cgroup/pids}/cgroup.procs", true},
		{"echo $$ | tee ${D=/proc/sys/kernel}/sysrq", true},
		{"echo hi > ${OUT:-out.txt}", false},
		{"cat /sys/fs/cgroup/pids/pids.max", false},
		// A copy reads its sources: only its last path is written.
		{"cp /proc/cpuinfo cpuinfo.txt", false},
		{"cp /sys/fs/cgroup/pids/pids.max limits.txt", false},
		{"echo hi > out.txt", false},
	} {
		for _, mode := range Modes() {
			d := e.Check(Request{Tool: toolFor(t, "execute_command"), Mode: mode, Workdir: work, Args: commandArgs(tc.command), SessionRules: rules})
			// Modes that never ask (explore, dont_ask) deny what must be asked.
			asked := d.Immune && d.Outcome == Ask || d.Outcome == Deny && (mode == ModeExplore || mode == ModeDontAsk)
			if tc.asks && (!asked || d.Risk != tool.RiskCritical) || !tc.asks && (d.Immune || mode == ModeBypass && d.Outcome != Allow) {
				t.Errorf("%s mode, %q: %s (immune %v, risk %s): %s; want an immune ask at critical risk: %v", mode, tc.command, d.Outcome, d.Immune, d.Risk, d.Reason, tc.asks)
			}
		}
	}
}

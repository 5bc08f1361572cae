package chain

import "github.com/toolserverd/toolserverd/internal/tool"

// WithoutCgroups makes a tool_chain start its workers in no memory cgroup, bounded by
// RLIMIT_AS alone, as on a host where none can be made.
func WithoutCgroups(t tool.Tool) {
	t.(*chainTool).workers.once.Do(func() {})
}

// WorkerArg0 is the name a worker process runs under.
const WorkerArg0 = workerArg0

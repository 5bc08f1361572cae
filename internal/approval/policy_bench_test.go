package approval

import (
	"testing"
)

// A typical agent command line: read-only parts, an allowed build step, a pipe,
// a redirection and an env prefix.
const benchCommand = `cd internal && CGO_ENABLED=0 go test ./... 2>&1 | tail -n 40 && git status --short && git diff --stat`

func benchEngine(b *testing.B) *Engine {
	cfg := DefaultConfig()
	cfg.Rules = append(mustRules(b, Allow, "execute_command(go test:*)", "execute_command(npm run:*)", "write_file(src/**)"),
		mustRules(b, Deny, "execute_command(rm -rf:*)", "execute_command(git push --force:*)")...)
	return testEngine(b, cfg)
}

func BenchmarkCheckCompoundCommand(b *testing.B) {
	e := benchEngine(b)
	req := Request{Tool: toolFor(b, "execute_command"), Args: commandArgs(benchCommand), Mode: ModeDefault, Workdir: testWorkdir,
		SessionRules: mustRules(b, Allow, "execute_command(make:*)")}
	if d := e.Check(req); d.Outcome != Allow {
		b.Fatalf("benchmark command not allowed: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Check(req)
	}
}

func BenchmarkCheckPathTool(b *testing.B) {
	e := benchEngine(b)
	req := Request{Tool: toolFor(b, "write_file"), Args: pathArgs1("src/pkg/main.go"), Mode: ModeDefault, Workdir: testWorkdir}
	if d := e.Check(req); d.Outcome != Allow {
		b.Fatalf("not allowed: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Check(req)
	}
}

func BenchmarkAnalyzeCommand(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		AnalyzeCommand(benchCommand)
	}
}

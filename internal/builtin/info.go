package builtin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// InfoTool returns the full documentation of a tool the session may call.
func InfoTool() tool.Tool { return infoTool{} }

type infoTool struct{}

func (infoTool) Spec() tool.Spec {
	return tool.Spec{
		Name:  "info",
		Label: "Tool documentation",
		Description: "Show the full documentation of one of your tools: what it does, every argument, " +
			"limits, error cases and examples. Use it before calling a tool whose short description leaves you unsure.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["tool"],
  "properties":{"tool":{"type":"string","minLength":1,"description":"The exact name of the tool."}}}`),
		Documentation: "info {tool}: returns the named tool's full documentation, its argument schema and its flags " +
			"(read-only, concurrency-safe, risk). Only tools this session may call can be looked up; an unknown name " +
			"is answered not_found with the list of available tools.",
		Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:  tool.RiskSafe,
	}
}

func (infoTool) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		Tool string `json:"tool"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	if ctx.Session == nil || ctx.Session.Tools == nil {
		return nil, tool.Errorf(tool.KindUnavailable, "info is not available outside a session")
	}
	name := strings.TrimSpace(args.Tool)
	spec, ok := ctx.Session.Tools.Lookup(name)
	if !ok {
		return nil, tool.Errorf(tool.KindNotFound, "no tool named %q is available in this session; available tools: %s",
			name, strings.Join(ctx.Session.Tools.Names(), ", "))
	}
	doc := spec.Documentation
	if doc == "" {
		doc = spec.Description
	}
	var params any
	_ = json.Unmarshal(spec.Parameters, &params)
	pretty, _ := json.MarshalIndent(params, "", "  ")
	text := fmt.Sprintf("# %s\n\n%s\n\nArguments (JSON Schema):\n%s\n\nread-only: %v · concurrency-safe: %v · risk: %s · mode: %s",
		spec.Name, doc, pretty, spec.ReadOnly, spec.ConcurrencySafe, spec.Risk, spec.Mode)
	return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: text}}}, nil
}

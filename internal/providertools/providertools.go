// Package providertools declares tools that belong to a model provider: hosted tools,
// which the provider runs itself (OpenAI web_search, Anthropic web_search,
// code_interpreter), and provider-defined tools, which the provider declares in its
// own format (Anthropic bash_20250124, computer_20250124) but which run here through a
// handler. Both are registry entries like any tool: whitelisted, listed, exported
// per provider in the provider's native shape.
package providertools

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Kinds of provider tools.
const (
	KindHosted          = "hosted"
	KindProviderDefined = "provider_defined"
)

// Handlers of provider-defined tools.
const (
	// HandlerExecuteCommand runs {command} with the built-in execute_command
	// (Anthropic's bash tool: {command, restart}).
	HandlerExecuteCommand = "execute_command"
	// HandlerExternal waits for an answer posted from outside, like external_tools
	// (a computer-use tool whose screen is the client's).
	HandlerExternal = "external"
)

// Providers whose native declarations are understood.
var providers = map[string]bool{"openai": true, "anthropic": true}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Config declares one provider tool.
type Config struct {
	Name        string
	Kind        string
	Description string
	// Specs are the native declarations by provider.
	Specs map[string]map[string]any
	// Handler runs a provider-defined tool.
	Handler string
	// Parameters is the JSON Schema of the arguments (for validation and for formats
	// without a native declaration); handlers have a default.
	Parameters map[string]any
}

// Validate checks one declaration.
func (c Config) Validate() error {
	if !validName.MatchString(c.Name) {
		return fmt.Errorf("name %q must be 1-64 letters, digits, _ or -", c.Name)
	}
	if c.Kind != KindHosted && c.Kind != KindProviderDefined {
		return fmt.Errorf("%s: kind %q is not hosted or provider_defined", c.Name, c.Kind)
	}
	if len(c.Specs) == 0 {
		return fmt.Errorf("%s: specs needs the native declaration for at least one provider (openai, anthropic)", c.Name)
	}
	for p, s := range c.Specs {
		if !providers[p] {
			return fmt.Errorf("%s: specs: unknown provider %q (use openai or anthropic)", c.Name, p)
		}
		if t, _ := s["type"].(string); t == "" {
			return fmt.Errorf("%s: specs.%s needs a type (such as web_search or bash_20250124)", c.Name, p)
		}
		if t, _ := s["type"].(string); p == "openai" && t == "function" {
			return fmt.Errorf("%s: specs.openai: a function needs no native declaration; leave it out", c.Name)
		}
		if n, ok := s["name"].(string); ok && n != c.Name {
			return fmt.Errorf("%s: specs.%s.name is %q; the model calls the tool by that name, so it must equal the tool's name", c.Name, p, n)
		}
	}
	switch {
	case c.Kind == KindHosted && c.Handler != "":
		return fmt.Errorf("%s: a hosted tool runs at the provider and takes no handler", c.Name)
	case c.Kind == KindProviderDefined && c.Handler != HandlerExecuteCommand && c.Handler != HandlerExternal:
		return fmt.Errorf("%s: handler %q is not execute_command or external", c.Name, c.Handler)
	}
	return nil
}

// Build makes the tools of cfgs. lookup finds the built-in tool a handler delegates to.
func Build(cfgs []Config, lookup func(name string) (tool.Tool, bool)) ([]tool.Tool, error) {
	var out []tool.Tool
	var errs []error
	for i, c := range cfgs {
		t, err := build(c, lookup)
		if err != nil {
			errs = append(errs, fmt.Errorf("[%d] %w", i, err))
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

func build(c Config, lookup func(string) (tool.Tool, bool)) (tool.Tool, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	specs := map[string]json.RawMessage{}
	names := make([]string, 0, len(c.Specs))
	for p, s := range c.Specs {
		decl := make(map[string]any, len(s)+1)
		for k, v := range s {
			decl[k] = v
		}
		// Anthropic calls tools by name, so its declarations always carry one.
		if _, ok := decl["name"]; !ok && p == "anthropic" {
			decl["name"] = c.Name
		}
		b, err := json.Marshal(decl)
		if err != nil {
			return nil, fmt.Errorf("%s: specs.%s: %w", c.Name, p, err)
		}
		specs[p] = b
		names = append(names, p)
	}
	sort.Strings(names)
	params, err := parameters(c)
	if err != nil {
		return nil, err
	}
	spec := tool.Spec{Name: c.Name, Description: c.Description, Parameters: params, ProviderSpecs: specs, Mode: tool.ModeDirect}
	switch {
	case c.Kind == KindHosted:
		if spec.Description == "" {
			spec.Description = fmt.Sprintf("Executed by the model provider (%s).", strings.Join(names, ", "))
		}
		// Nothing runs here, so there is nothing to approve: a call only gets the
		// explanation.
		spec.Flags = tool.Flags{Hosted: true, ReadOnly: true, ConcurrencySafe: true}
		spec.Risk, spec.Source = tool.RiskSafe, "hosted:"+strings.Join(names, ",")
		return hosted{spec: spec}, nil
	case c.Handler == HandlerExternal:
		if spec.Description == "" {
			spec.Description = fmt.Sprintf("Provider-defined tool (%s), answered by the client.", strings.Join(names, ", "))
		}
		spec.Flags = tool.Flags{External: true, ConcurrencySafe: true}
		spec.Risk, spec.Timeout, spec.Source = tool.RiskLow, 24*time.Hour, "provider:"+strings.Join(names, ",")
		return external{spec: spec}, nil
	default:
		delegate, ok := lookup(HandlerExecuteCommand)
		if !ok {
			return nil, fmt.Errorf("%s: handler execute_command: there is no execute_command tool", c.Name)
		}
		ds := delegate.Spec()
		if spec.Description == "" {
			spec.Description = "Run a bash command in the session's working directory (provider-defined; runs as execute_command)."
		}
		spec.Flags, spec.Risk, spec.Timeout = ds.Flags, ds.Risk, ds.Timeout
		spec.Source = "provider:" + strings.Join(names, ",")
		return command{spec: spec, delegate: delegate}, nil
	}
}

func parameters(c Config) (json.RawMessage, error) {
	if len(c.Parameters) > 0 {
		b, err := json.Marshal(c.Parameters)
		if err != nil {
			return nil, fmt.Errorf("%s: parameters: %w", c.Name, err)
		}
		return b, nil
	}
	if c.Handler == HandlerExecuteCommand {
		return json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","description":"The bash command to run."},` +
			`"restart":{"type":"boolean","description":"Restart the shell. Every command already runs in a fresh shell, so this only acknowledges."}}}`), nil
	}
	return json.RawMessage(`{"type":"object","properties":{}}`), nil
}

// hosted is a tool the provider runs; a call that reaches the daemon is a mistake of
// the agent loop, answered with an explanation.
type hosted struct{ spec tool.Spec }

func (h hosted) Spec() tool.Spec { return h.spec }

// Run never executes anything. The kind is failed, not denied: denied means a
// permission decision a rule or a person could change, and no decision here would
// make the daemon run a provider's tool.
func (h hosted) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return tool.ErrorResult(tool.KindFailed,
		"%s is a hosted tool: the model provider (%s) executes it and returns its result in the model's response. "+
			"toolserverd does not run it; do not send its calls here.", h.spec.Name, strings.Join(h.spec.HostedBy(), ", ")), nil
}

// external is a provider-defined tool answered from outside (the executor waits for
// the answer; Run is never reached on that path).
type external struct{ spec tool.Spec }

func (e external) Spec() tool.Spec { return e.spec }

func (e external) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return nil, tool.Errorf(tool.KindUnavailable, "%s is answered from outside the daemon and cannot run here", e.spec.Name)
}

// command runs Anthropic-style bash calls ({command, restart}) with execute_command.
type command struct {
	spec     tool.Spec
	delegate tool.Tool
}

func (c command) Spec() tool.Spec { return c.spec }

func (c command) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	// Arguments are read by their exact names, as the permission check reads
	// "command": decoding into a struct would also take "Command" (the last of the
	// two winning) and run a command nobody checked.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "arguments: %v", err)
	}
	var args struct {
		Command string
		Restart bool
	}
	for name, dst := range map[string]any{"command": &args.Command, "restart": &args.Restart} {
		if v, ok := fields[name]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, tool.Errorf(tool.KindInvalidArgs, "arguments: %s: %v", name, err)
			}
		}
	}
	if strings.TrimSpace(args.Command) == "" {
		if args.Restart {
			return tool.TextResult("The shell was restarted (every command runs in a fresh shell)."), nil
		}
		return nil, tool.Errorf(tool.KindInvalidArgs, "command is required")
	}
	b, err := json.Marshal(map[string]string{"command": args.Command})
	if err != nil {
		return nil, err
	}
	return c.delegate.Run(ctx, b)
}

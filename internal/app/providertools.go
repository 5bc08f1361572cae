package app

import (
	"fmt"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/providertools"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// registerProviderTools registers the hosted and provider-defined tools of the config.
func (a *App) registerProviderTools() error {
	if len(a.Config.ProviderTools) == 0 {
		return nil
	}
	cfgs := make([]providertools.Config, len(a.Config.ProviderTools))
	for i, c := range a.Config.ProviderTools {
		cfgs[i] = providertools.Config{Name: c.Name, Kind: c.Kind, Description: c.Description, Specs: c.Specs, Handler: c.Handler, Parameters: c.Parameters}
	}
	tools, err := providertools.Build(cfgs, func(name string) (tool.Tool, bool) {
		e, ok := a.Tools.Lookup(name)
		if !ok {
			return nil, false
		}
		return e.Tool, true
	})
	if err != nil {
		return fmt.Errorf("config: provider_tools%w", err)
	}
	if err := a.Tools.Register(tools...); err != nil {
		return fmt.Errorf("config: provider_tools: %w", err)
	}
	return nil
}

// providerSubjects makes permission rules and command analysis read provider-defined
// command tools the way they read execute_command.
func (a *App) providerSubjects(subjects map[string]approval.Subject) {
	for _, c := range a.Config.ProviderTools {
		if c.Kind == providertools.KindProviderDefined && c.Handler == providertools.HandlerExecuteCommand {
			subjects[c.Name] = approval.Subject{Kind: approval.SubjectCommand, Arg: "command"}
		}
	}
}

package app

import (
	"context"
	"fmt"

	"github.com/toolserverd/toolserverd/internal/openapi"
)

// registerOpenAPI loads every configured OpenAPI document and registers its operations
// as tools. A document that cannot be read or parsed stops start-up, naming it; an
// operation whose argument schema cannot be used is left out with a warning.
func (a *App) registerOpenAPI(ctx context.Context) error {
	for i, c := range a.Config.OpenAPI {
		src, err := openapi.Load(ctx, openapi.Config{
			Name: c.Name, Prefix: c.Prefix, Spec: c.Spec, BaseURL: c.BaseURL,
			Auth: openapi.Auth{BearerTokenEnv: c.Auth.BearerTokenEnv, APIKeyEnv: c.Auth.APIKeyEnv, APIKeyHeader: c.Auth.APIKeyHeader, APIKeyQuery: c.Auth.APIKeyQuery,
				BasicUsernameEnv: c.Auth.BasicUsernameEnv, BasicPasswordEnv: c.Auth.BasicPasswordEnv,
				OAuth2: openapi.OAuth2{TokenURL: c.Auth.OAuth2.TokenURL, ClientIDEnv: c.Auth.OAuth2.ClientIDEnv,
					ClientSecretEnv: c.Auth.OAuth2.ClientSecretEnv, Scopes: c.Auth.OAuth2.Scopes}},
			Include: c.Include, Exclude: c.Exclude,
			Timeout: c.Timeout, FetchTimeout: c.FetchTimeout, MaxResponseBytes: c.MaxResponseBytes,
			MaxFileBytes: c.MaxFileBytes, Workspaces: a.Sandbox,
		})
		if err != nil {
			return fmt.Errorf("config: openapi[%d]: %w", i, err)
		}
		n, err := src.Register(a.Tools)
		if err != nil {
			return fmt.Errorf("config: openapi[%d] %q: %w (set another prefix, or exclude the operation)", i, c.Name, err)
		}
		for _, w := range src.Warnings {
			a.Log.Warn("openapi source", "source", c.Name, "problem", w)
		}
		a.Log.Info("openapi source loaded", "source", c.Name, "spec", src.Spec, "tools", n)
	}
	return nil
}

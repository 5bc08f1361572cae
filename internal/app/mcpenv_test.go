package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
)

// TestMCPServerEnvUnset: a variable that ${NAME} names and that is not set stops
// start-up with an error naming the server, the key and the variable; a disabled
// server's does not.
func TestMCPServerEnvUnset(t *testing.T) {
	t.Parallel()
	const unset = "TEST_MCPENV_SURELY_UNSET_VARIABLE"
	for _, tc := range []struct {
		name    string
		enabled bool
		wantErr bool
	}{{"enabled", true, true}, {"disabled", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Defaults()
			cfg.Addr = "127.0.0.1:0"
			cfg.Auth.Unauthenticated = true
			cfg.DataDir = t.TempDir()
			cfg.MCPServers = []config.MCPServerConfig{{Name: "github", Transport: "streamable_http", URL: "http://127.0.0.1:1/mcp",
				Headers: map[string]string{"Authorization": "Bearer ${" + unset + "}"}, Enabled: &tc.enabled}}
			a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				a.Close()
				if tc.wantErr {
					t.Fatal("the daemon started without the variable")
				}
				return
			}
			if !tc.wantErr {
				t.Fatalf("a disabled server's variable stopped start-up: %v", err)
			}
			for _, w := range []string{"mcp_servers", "mcp server github", "headers.Authorization", unset, "not set"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/client"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestConfigFileKeepsCaseOfData starts the real binary with a YAML file whose maps hold
// data in mixed case: an stdio MCP server's environment and an external tool's JSON
// Schema must reach the server process and the model as written.
func TestConfigFileKeepsCaseOfData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env.txt")
	yaml := fmt.Sprintf(`auth: {unauthenticated: true}
mcp_servers:
  - name: envdump
    transport: stdio
    command: sh
    args: ["-c", 'printf %%s "$GITHUB_TOKEN" > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 60', %q]
    env: {GITHUB_TOKEN: s3cret}
    connect_timeout: 10m
external_tools:
  - name: request_review
    description: Ask a reviewer.
    parameters: {type: object, required: [prURL], additionalProperties: false, properties: {prURL: {type: string}}}
`, envFile)
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	url := testdaemon.Exec(t, exec.Command(bin, "--config", cfgFile, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")))
	tools, err := client.New(url).Tools(context.Background(), "", "openai")
	if err != nil {
		t.Fatal(err)
	}
	var schema string
	for _, raw := range tools {
		if strings.Contains(string(raw), `"request_review"`) {
			schema = string(raw)
		}
	}
	for _, want := range []string{`"required":["prURL"]`, `"prURL":{`, `"additionalProperties":false`} {
		if !strings.Contains(strings.ReplaceAll(schema, " ", ""), want) {
			t.Errorf("external tool schema lacks %s: %s", want, schema)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(envFile)
		if err == nil {
			if string(b) != "s3cret" {
				t.Errorf("the MCP server saw GITHUB_TOKEN=%q, want s3cret", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stdio MCP server never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnreachableStoreIsAnError: a store that cannot be opened stops start-up with a
// message naming it, not with a panic.
func TestUnreachableStoreIsAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, store := range []string{"postgres://u:pw@127.0.0.1:1/db?connect_timeout=5", "sqlite:" + filepath.Join(dir, "file", "x.db")} {
		if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--store", store)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Contains(string(out), "panic") || !strings.Contains(string(out), "toolserverd: store: open") {
			t.Errorf("%s: %v\n%s", store, err, out)
		}
	}
}

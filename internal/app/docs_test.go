package app_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/toolserverd/toolserverd/internal/app"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

// TestDocumentedMetricsExist: every toolserverd_* metric README.md and docs/config.md
// name is registered by the code (a metric name given as a string literal outside
// tests), and every one the code registers is documented in one of them.
func TestDocumentedMetricsExist(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`toolserverd_[a-z_]+[a-z]`)
	documented := map[string]string{}
	for _, f := range []string{"../../README.md", "../../docs/config.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllString(string(b), -1) {
			documented[m] = f
		}
	}
	literal := regexp.MustCompile(`"(toolserverd_[a-z_]+)"`)
	registered := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			registered[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(registered) < 20 {
		t.Fatalf("found only %d metric names in the code: %v", len(registered), registered)
	}
	for m, f := range documented {
		if registered[m] == "" {
			t.Errorf("%s names metric %s, which no code registers", f, m)
		}
	}
	for m, f := range registered {
		if documented[m] == "" {
			t.Errorf("metric %s (%s) is in neither README.md nor docs/config.md", m, f)
		}
	}
}

// TestMetricsPassPromlint: README says the registry passes promlint.
func TestMetricsPassPromlint(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Addr = "127.0.0.1:0"
	cfg.Auth.Unauthenticated = true
	cfg.DataDir = t.TempDir()
	// A webhook, so that its metric is registered too; nothing is delivered.
	cfg.ApprovalWebhook.URL = "http://" + testnet.RefusedAddr(t) + "/hook"
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mfs, err := a.Registry.Gather()
	if err != nil || len(mfs) < 10 {
		t.Fatalf("%d metric families gathered: %v", len(mfs), err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

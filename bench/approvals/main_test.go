package main

import (
	"context"
	"os"
	"testing"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestScenarios runs both scenarios a few times: every call asks, is approved and
// succeeds. It asserts nothing about speed.
func TestScenarios(t *testing.T) {
	for name, url := range map[string]string{"sqlite": "", "postgres": pgtest.URL(t)} {
		r, err := Scenario(context.Background(), 3, url)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Result) != 3 {
			t.Fatalf("%s: %d results", name, len(r.Result))
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

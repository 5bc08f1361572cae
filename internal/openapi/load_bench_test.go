package openapi

import (
	"context"
	"os"
	"testing"
)

// BenchmarkLoadLarge loads the document TOOLSERVERD_BENCH_SPEC names (a large real
// one, such as Stripe's spec3.json, which is not in the repository) as start-up does.
// It is skipped when the variable is not set; the other tests load fixtures through
// the same Load (TestValidateDocAsKin checks its validation).
func BenchmarkLoadLarge(b *testing.B) {
	spec := os.Getenv("TOOLSERVERD_BENCH_SPEC")
	if spec == "" {
		b.Skip("set TOOLSERVERD_BENCH_SPEC to a large OpenAPI document's path")
	}
	// TOOLSERVERD_BENCH_BASE_URL: base_url, for a document whose servers cannot serve.
	cfg := Config{Name: "large", Spec: spec, BaseURL: os.Getenv("TOOLSERVERD_BENCH_BASE_URL")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		src, err := Load(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.ReportMetric(float64(len(src.Tools)), "tools")
		}
	}
}

// TestLoadLargeValidatesAsKin checks validateDoc against kin-openapi's own Validate on
// the document TOOLSERVERD_BENCH_SPEC names (TestValidateDocAsKin does on fixtures).
func TestLoadLargeValidatesAsKin(t *testing.T) {
	spec := os.Getenv("TOOLSERVERD_BENCH_SPEC")
	if spec == "" {
		t.Skip("set TOOLSERVERD_BENCH_SPEC to a large OpenAPI document's path")
	}
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	checkValidatesAsKin(t, data)
}

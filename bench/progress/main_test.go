package main

import (
	"context"
	"testing"
)

// TestRunShort runs the benchmark small: everything written arrives, and latency
// samples are collected. It asserts nothing about speed.
func TestRunShort(t *testing.T) {
	r, err := Run(context.Background(), Options{MB: 4, Lines: 20, WindowMS: 50})
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 4<<20 || r.Samples != 20 {
		t.Fatalf("bytes %d samples %d", r.Bytes, r.Samples)
	}
}

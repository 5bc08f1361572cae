package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunShort runs the benchmark briefly: it must complete without errors and record
// every call. It asserts nothing about speed.
func TestRunShort(t *testing.T) {
	res, err := Run(context.Background(), Options{Clients: 4, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Toolsrv.Rounds != 2 || res.Floor.Rounds != 2 || res.Bare.Rounds != 2 {
		t.Fatalf("rounds: bare %d, floor %d, toolserverd %d; want 2 each", res.Bare.Rounds, res.Floor.Rounds, res.Toolsrv.Rounds)
	}
	if res.Bare.Errors+res.Floor.Errors+res.Toolsrv.Errors != 0 || res.Toolsrv.Requests == 0 || res.Bare.Requests == 0 || res.Floor.Requests == 0 {
		t.Fatalf("errors or no requests: %+v", res)
	}
	if res.Recorded != res.RecordsExpected {
		t.Fatalf("recorded %d calls of %d", res.Recorded, res.RecordsExpected)
	}
	var b bytes.Buffer
	res.Print(&b)
	if !strings.Contains(b.String(), "throughput ratio") {
		t.Fatal(b.String())
	}
}

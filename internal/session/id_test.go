package session

import (
	"strings"
	"testing"
	"time"
)

// TestNewTimeID checks the format (NewID's) and that the leading 48 bits are the time
// in milliseconds, which is what keeps a store's index on call ids append-only.
func TestNewTimeID(t *testing.T) {
	before := time.Now().UnixMilli()
	id := NewTimeID("tc_")
	after := time.Now().UnixMilli()
	if len(id) != len(NewID("tc_")) || !strings.HasPrefix(id, "tc_") {
		t.Fatalf("id %q: want NewID's format", id)
	}
	b, err := idEncoding.DecodeString(strings.TrimPrefix(id, "tc_"))
	if err != nil || len(b) != 16 {
		t.Fatalf("id %q does not decode to 16 bytes: %v", id, err)
	}
	var ms int64
	for _, c := range b[:6] {
		ms = ms<<8 | int64(c)
	}
	if ms < before || ms > after {
		t.Fatalf("id %q carries %d ms, want between %d and %d", id, ms, before, after)
	}
	if at, ok := TimeOfID("tc_", id); !ok || at.UnixMilli() != ms {
		t.Fatalf("TimeOfID(%q) = %v, %v; want %d ms", id, at, ok, ms)
	}
	for _, bad := range []string{"", "tc_", "ses_" + strings.TrimPrefix(id, "tc_"), "tc_x", id + "a"} {
		if _, ok := TimeOfID("tc_", bad); ok {
			t.Errorf("TimeOfID(%q) accepted", bad)
		}
	}
	if NewTimeID("tc_") == NewTimeID("tc_") {
		t.Fatal("two ids are equal")
	}
}

func BenchmarkNewTimeID(b *testing.B) {
	for b.Loop() {
		_ = NewTimeID("tc_")
	}
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		_ = NewID("req_")
	}
}

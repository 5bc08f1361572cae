package leakcheck

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// windingDown is a goroutine that ends after d, like a connection still closing
// when the tests are over.
func windingDown(d time.Duration) {
	<-time.After(d)
}

// TestFindWaitsForGoroutinesWindingDown: a goroutine that ends 2 s after the
// check starts is a leak to goleak's own budget (~0.43 s), not to Find.
func TestFindWaitsForGoroutinesWindingDown(t *testing.T) {
	before := goleak.IgnoreCurrent()
	go windingDown(2 * time.Second)
	if err := goleak.Find(before); err == nil {
		t.Fatal("goleak.Find saw no goroutine winding down; the test shows nothing")
	}
	if err := Find(before); err != nil {
		t.Errorf("Find reported a goroutine that ended within its budget: %v", err)
	}
}

// TestFindStillReportsLeaks: a goroutine that never ends is reported.
func TestFindStillReportsLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	stop := make(chan struct{})
	go func() { <-stop }()
	err := FindWithin(time.Second, before)
	close(stop)
	if err == nil {
		t.Fatal("FindWithin missed a goroutine that never ended")
	}
	if err := Find(before); err != nil {
		t.Errorf("after it ended: %v", err)
	}
}

// Package leakcheck is goleak's goroutine-leak check with a retry budget fit for a
// loaded CI machine, for tests only.
//
// goleak v1.3.0 retries its check for about 0.43 s in total and offers no option
// to wait longer; a goroutine still winding down (a connection closing, a timer
// firing) on a machine running every package at once can take more. Find repeats
// goleak's check, unchanged, until it passes or Budget has passed: a goroutine
// that never ends is still reported.
package leakcheck

import (
	"fmt"
	"os"
	"time"

	"go.uber.org/goleak"
)

// Budget is how long Find keeps looking before it reports the goroutines left.
const Budget = 10 * time.Second

// Find is goleak.Find retried for up to Budget.
func Find(opts ...goleak.Option) error { return FindWithin(Budget, opts...) }

// FindWithin is goleak.Find retried until it finds no leak or d has passed.
func FindWithin(d time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(d)
	for {
		err := goleak.Find(opts...) // itself retries for ~0.43 s
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestingM is the part of *testing.M that VerifyTestMain uses.
type TestingM interface{ Run() int }

// VerifyTestMain is goleak.VerifyTestMain with Find's budget: it runs the tests
// and, if they passed, fails the run on goroutines left over.
func VerifyTestMain(m TestingM, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TB is the part of testing.TB that VerifyNone uses.
type TB interface {
	Helper()
	Error(args ...any)
}

// VerifyNone is goleak.VerifyNone with Find's budget.
func VerifyNone(t TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}

package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// notifyWait bounds every wait for a notification; it only matters when a test fails.
const notifyWait = 10 * time.Second

// RunNotifier runs the conformance suite of store.Notifier. pair returns two started
// notifiers whose subscribers get channels of capacity buffer, such that a Notify on
// from reaches the subscribers of to (for an in-process notifier, the same one twice;
// for PostgreSQL, two instances on one database). They are stopped in t.Cleanup.
func RunNotifier(t *testing.T, pair func(t *testing.T, buffer int) (from, to store.Notifier)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, pair func(t *testing.T, buffer int) (store.Notifier, store.Notifier))
	}{
		{"Delivery", testNotifyDelivery},
		{"Topics", testNotifyTopics},
		{"Order", testNotifyOrder},
		{"Unsubscribe", testNotifyUnsubscribe},
		{"SlowSubscriberDrops", testNotifySlowSubscriber},
		{"Invalid", testNotifyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, pair)
		})
	}
}

// Receive returns the next payload from ch, failing the test after a while or when ch
// is closed.
func Receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return p
	case <-time.After(notifyWait):
		t.Fatal("no notification within the wait limit")
	}
	return ""
}

func testNotifyDelivery(t *testing.T, pair func(*testing.T, int) (store.Notifier, store.Notifier)) {
	from, to := pair(t, 0)
	a, stopA := to.Subscribe(store.TopicApproval)
	defer stopA()
	b, stopB := to.Subscribe(store.TopicApproval)
	defer stopB()
	payload := "apr_1 with spaces, | pipes and ü"
	if err := from.Notify(t.Context(), store.TopicApproval, payload); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	for _, ch := range []<-chan string{a, b} {
		if got := Receive(t, ch); got != payload {
			t.Errorf("received %q, want %q", got, payload)
		}
	}
	// Empty payloads travel too (they mean "re-check").
	if err := from.Notify(t.Context(), store.TopicApproval, ""); err != nil {
		t.Fatal(err)
	}
	if got := Receive(t, a); got != "" {
		t.Errorf("received %q, want the empty payload", got)
	}
}

func testNotifyTopics(t *testing.T, pair func(*testing.T, int) (store.Notifier, store.Notifier)) {
	from, to := pair(t, 0)
	calls, stop := to.Subscribe(store.TopicCall)
	defer stop()
	approvals, stop2 := to.Subscribe(store.TopicApproval)
	defer stop2()
	// A topic that is a prefix of another, and one nobody subscribed to.
	for _, n := range [][2]string{{"cal", "x"}, {"nobody", "y"}, {store.TopicApproval, "apr_1"}, {store.TopicCall, "tc_1"}} {
		if err := from.Notify(t.Context(), n[0], n[1]); err != nil {
			t.Fatalf("Notify(%s): %v", n[0], err)
		}
	}
	// Notifications arrive in order, so anything misrouted would come first.
	if got := Receive(t, calls); got != "tc_1" {
		t.Errorf("call subscriber got %q first, want tc_1", got)
	}
	if got := Receive(t, approvals); got != "apr_1" {
		t.Errorf("approval subscriber got %q first, want apr_1", got)
	}
}

func testNotifyOrder(t *testing.T, pair func(*testing.T, int) (store.Notifier, store.Notifier)) {
	const n = 50
	from, to := pair(t, n)
	ch, stop := to.Subscribe(store.TopicCall)
	defer stop()
	for i := range n {
		if err := from.Notify(t.Context(), store.TopicCall, fmt.Sprintf("tc_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if got, want := Receive(t, ch), fmt.Sprintf("tc_%d", i); got != want {
			t.Fatalf("notification %d = %q, want %q", i, got, want)
		}
	}
}

func testNotifyUnsubscribe(t *testing.T, pair func(*testing.T, int) (store.Notifier, store.Notifier)) {
	from, to := pair(t, 0)
	gone, stopGone := to.Subscribe(store.TopicCall)
	stays, stopStays := to.Subscribe(store.TopicCall)
	defer stopStays()
	stopGone()
	stopGone() // twice is fine
	if _, ok := <-gone; ok {
		t.Fatalf("channel still open after unsubscribe")
	}
	// Sending to the topic after an unsubscribe must neither panic nor block.
	if err := from.Notify(t.Context(), store.TopicCall, "tc_1"); err != nil {
		t.Fatal(err)
	}
	if got := Receive(t, stays); got != "tc_1" {
		t.Errorf("remaining subscriber got %q, want tc_1", got)
	}
	// Re-subscribing works.
	again, stopAgain := to.Subscribe(store.TopicCall)
	defer stopAgain()
	if err := from.Notify(t.Context(), store.TopicCall, "tc_2"); err != nil {
		t.Fatal(err)
	}
	if got := Receive(t, again); got != "tc_2" {
		t.Errorf("new subscriber got %q, want tc_2", got)
	}
}

// testNotifySlowSubscriber: a subscriber that does not read loses notifications but
// never blocks Notify, nor other subscribers, and is then sent an empty payload (it
// missed some: re-check everything).
func testNotifySlowSubscriber(t *testing.T, pair func(*testing.T, int) (store.Notifier, store.Notifier)) {
	const buffer, sent = 4, 40
	from, to := pair(t, buffer)
	slow, stopSlow := to.Subscribe(store.TopicCall)
	defer stopSlow()
	fast, stopFast := to.Subscribe(store.TopicCall)
	defer stopFast()
	// The sender waits for the fast subscriber after each notification, so only the
	// slow one (which never reads) can fall behind.
	done := make(chan error, 1)
	go func() {
		for i := range sent {
			want := fmt.Sprintf("tc_%d", i)
			if err := from.Notify(t.Context(), store.TopicCall, want); err != nil {
				done <- err
				return
			}
			select {
			case got := <-fast:
				if got != want {
					done <- fmt.Errorf("fast subscriber: notification %d = %q, want %q", i, got, want)
					return
				}
			case <-time.After(notifyWait):
				done <- fmt.Errorf("fast subscriber: notification %d did not arrive", i)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * notifyWait):
		t.Fatal("Notify blocked on a subscriber that does not read")
	}
	if len(slow) != buffer+1 {
		t.Errorf("slow subscriber holds %d, want its buffer full (%d) and the empty payload", len(slow), buffer)
	}
	for i := range buffer { // the oldest were kept, the rest dropped
		if got, want := <-slow, fmt.Sprintf("tc_%d", i); got != want {
			t.Errorf("slow subscriber %d = %q, want %q", i, got, want)
		}
	}
	// Then it is told it missed some: re-check everything.
	if got := Receive(t, slow); got != "" {
		t.Errorf("slow subscriber after its buffer got %q, want the empty payload", got)
	}
	// Once it reads again, it receives again.
	if err := from.Notify(t.Context(), store.TopicCall, "after"); err != nil {
		t.Fatal(err)
	}
	if got := Receive(t, slow); got != "after" {
		t.Errorf("slow subscriber after draining got %q, want after", got)
	}
	if d, ok := to.(interface{ Dropped() uint64 }); ok && d.Dropped() != sent-buffer {
		t.Errorf("Dropped = %d, want %d", d.Dropped(), sent-buffer)
	}
}

func testNotifyInvalid(t *testing.T, pair func(*testing.T, int) (store.Notifier, store.Notifier)) {
	from, _ := pair(t, 0)
	for _, tc := range []struct{ topic, payload string }{
		{"", "x"},
		{"a|b", "x"},
		{store.TopicCall, strings.Repeat("x", 8000)},
	} {
		err := from.Notify(t.Context(), tc.topic, tc.payload)
		wantErrIs(t, fmt.Sprintf("Notify(%q, %d bytes)", tc.topic, len(tc.payload)), err, store.ErrInvalid)
	}
	if err := from.Notify(t.Context(), store.TopicCall, strings.Repeat("x", 7999-len(store.TopicCall)-1)); err != nil {
		t.Errorf("Notify at the size limit: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	wantErrIs(t, "Notify with a cancelled context", from.Notify(ctx, store.TopicCall, "tc_1"), context.Canceled)
}

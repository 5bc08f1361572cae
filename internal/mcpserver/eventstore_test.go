package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	mcpsrv "github.com/mark3labs/mcp-go/server"
)

// replayAll returns the ids and messages replayed after id, or the error.
func replayAll(s *replayStore, session, id string) (stream string, ids, msgs []string, err error) {
	stream, err = s.ReplayEventsAfter(context.Background(), session, id, func(eid string, m json.RawMessage) error {
		ids = append(ids, eid)
		msgs = append(msgs, string(m))
		return nil
	})
	return stream, ids, msgs, err
}

// TestReplayStoreKeepsTheNewest: a session that emits past the cap keeps its newest
// events only, the store's size stays at the cap, a Last-Event-ID older than what is
// kept is unknown (and says why), and replay follows the stream of the id given.
func TestReplayStoreKeepsTheNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newReplayStore(10, 1<<20, 64<<20, nil)
	var ids []string
	for i := range 1000 {
		stream := "post"
		if i%2 == 1 {
			stream = "get"
		}
		id, err := s.StoreEvent(ctx, "a", stream, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if n, _ := s.size(); n != 10 {
		t.Fatalf("kept %d events, want 10", n)
	}
	_, _, _, err := replayAll(s, "a", ids[989])
	if !errors.Is(err, mcpsrv.ErrUnknownEventID) || !strings.Contains(err.Error(), "older than the last 10 events") {
		t.Fatalf("replay after a dropped event: %v", err)
	}
	stream, got, msgs, err := replayAll(s, "a", ids[990])
	if err != nil || stream != "post" {
		t.Fatalf("replay after the oldest kept: %q %v", stream, err)
	}
	if want := []string{ids[992], ids[994], ids[996], ids[998]}; fmt.Sprint(got) != fmt.Sprint(want) || msgs[3] != `{"n":998}` {
		t.Fatalf("replayed %v %v, want %v", got, msgs, want)
	}
	if _, _, _, err := replayAll(s, "b", ids[999]); !errors.Is(err, mcpsrv.ErrUnknownEventID) {
		t.Fatalf("another session's id: %v", err)
	}
	for _, bad := range []string{"nope", "", "99999"} {
		if _, _, _, err := replayAll(s, "a", bad); !errors.Is(err, mcpsrv.ErrUnknownEventID) {
			t.Fatalf("id %q: %v", bad, err)
		}
	}
}

// TestReplayStoreByteCaps: the per-session and the global byte caps drop the oldest
// events (of any session, for the global one); a message larger than the cap is kept
// alone, as the newest; memory stays bounded.
func TestReplayStoreByteCaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	big := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
	s := newReplayStore(1000, 10*(len(big)+eventOverhead), 25*(len(big)+eventOverhead), nil)
	for i := range 100 {
		if _, err := s.StoreEvent(ctx, "a", "st", big); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.size(); n > 10 {
			t.Fatalf("after %d events session a keeps %d, more than its 10", i+1, n)
		}
	}
	var last string
	for i := range 100 {
		last, _ = s.StoreEvent(ctx, fmt.Sprint("s", i), "st", big)
	}
	n, bytes := s.size()
	if n != 25 || bytes != 25*(len(big)+eventOverhead) {
		t.Fatalf("kept %d events, %d bytes; want the global cap of 25", n, bytes)
	}
	if _, _, _, err := replayAll(s, "a", "1"); !errors.Is(err, mcpsrv.ErrUnknownEventID) {
		t.Fatalf("session a's events survived the global cap: %v", err)
	}
	if _, got, _, err := replayAll(s, "s99", last); err != nil || len(got) != 0 {
		t.Fatalf("the newest event is not kept: %v %v", got, err)
	}
	huge := json.RawMessage(`"` + strings.Repeat("y", 100_000) + `"`)
	id, _ := s.StoreEvent(ctx, "h", "st", huge)
	if _, err := s.streamOf("h", id); err != nil {
		t.Fatalf("an event larger than the caps is not kept as the newest: %v", err)
	}
	if n, _ := s.size(); n != 1 {
		t.Fatalf("kept %d events besides one larger than the global cap", n-1)
	}
}

// TestReplayStorePurgeAndEndedSessions: a purged session's ids are unknown and its
// bytes freed; a session that is not live keeps nothing.
func TestReplayStorePurgeAndEndedSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ended := map[string]bool{"gone": true}
	s := newReplayStore(1000, 1<<20, 1<<30, func(id string) bool { return !ended[id] })
	id, _ := s.StoreEvent(ctx, "a", "st", json.RawMessage(`1`))
	if _, err := s.StoreEvent(ctx, "b", "st", json.RawMessage(`2`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PurgeSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := replayAll(s, "a", id); !errors.Is(err, mcpsrv.ErrUnknownEventID) {
		t.Fatalf("a purged session's id: %v", err)
	}
	if n, bytes := s.size(); n != 1 || bytes != 1+eventOverhead {
		t.Fatalf("after the purge: %d events, %d bytes", n, bytes)
	}
	if id, err := s.StoreEvent(ctx, "gone", "st", json.RawMessage(`3`)); id != "" || err != nil {
		t.Fatalf("an ended session's event got id %q (%v)", id, err)
	}
	if n, _ := s.size(); n != 1 {
		t.Fatalf("an ended session's event is kept: %d events", n)
	}
}

// TestReplayStoreConcurrent: stores, replays and purges from many goroutines (run
// with -race) leave the store consistent and within its caps.
func TestReplayStoreConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newReplayStore(50, 1<<20, 100*(10+eventOverhead), nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprint("s", g%4)
			for i := range 500 {
				id, err := s.StoreEvent(ctx, session, "st", json.RawMessage(`"123456789"`[:10]))
				if err != nil {
					t.Error(err)
					return
				}
				_, _, _, _ = replayAll(s, session, id)
				if i%100 == 99 {
					_ = s.PurgeSession(ctx, session)
				}
			}
		}()
	}
	wg.Wait()
	n, bytes := s.size()
	if n > 100 || bytes != n*(10+eventOverhead) {
		t.Fatalf("kept %d events, %d bytes", n, bytes)
	}
	// The global list holds exactly the kept events.
	listed := 0
	for ev := s.oldest; ev != nil; ev = ev.next {
		listed++
	}
	if listed != n {
		t.Fatalf("global list has %d events, sessions %d", listed, n)
	}
}

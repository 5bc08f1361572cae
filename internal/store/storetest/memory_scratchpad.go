package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// RunScratchpad runs the conformance suite of store.ScratchpadStore. open is called
// once per subtest and must return an empty store closed in t.Cleanup.
func RunScratchpad(t *testing.T, open func(t *testing.T) store.ScratchpadStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.ScratchpadStore)
	}{
		{"RoundTrip", testScratchpadRoundTrip},
		{"Missing", testScratchpadMissing},
		{"SessionIsolation", testScratchpadSessions},
		{"List", testScratchpadList},
		{"KeyLimit", testScratchpadKeyLimit},
		{"KeyLimitConcurrent", testScratchpadKeyLimitConcurrent},
		{"Invalid", testScratchpadInvalid},
		{"ContextCancelled", testScratchpadContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

func mustScratchSet(t *testing.T, s store.ScratchpadStore, session, key, value string) bool {
	t.Helper()
	created, err := s.ScratchpadSet(t.Context(), session, key, value, 0)
	if err != nil {
		t.Fatalf("ScratchpadSet(%s, %q): %v", session, key, err)
	}
	return created
}

func mustScratchGet(t *testing.T, s store.ScratchpadStore, session, key string) string {
	t.Helper()
	e, err := s.ScratchpadGet(t.Context(), session, key)
	if err != nil {
		t.Fatalf("ScratchpadGet(%s, %q): %v", session, key, err)
	}
	if e.Key != key {
		t.Errorf("entry key %q, want %q", e.Key, key)
	}
	return e.Value
}

func scratchKeys(keys []store.ScratchpadKey) []string {
	out := []string{}
	for _, k := range keys {
		out = append(out, k.Key)
	}
	return out
}

func testScratchpadRoundTrip(t *testing.T, s store.ScratchpadStore) {
	before := time.Now().Add(-time.Second)
	values := []string{"plain", "multi\nline\r\n\ttabs <b>&amp;</b> ü 🍌 \u2028", "", `{"json": [1, 2]}`}
	for i, v := range values {
		key := fmt.Sprintf("k%d", i)
		if !mustScratchSet(t, s, "ses_1", key, v) {
			t.Errorf("first set of %s: created = false", key)
		}
		if got := mustScratchGet(t, s, "ses_1", key); got != v {
			t.Errorf("%s = %q, want %q", key, got, v)
		}
	}
	e, err := s.ScratchpadGet(t.Context(), "ses_1", "k0")
	if err != nil {
		t.Fatal(err)
	}
	if e.UpdatedAt.Before(before) || e.UpdatedAt.After(time.Now().Add(time.Second)) || e.UpdatedAt.Location() != time.UTC {
		t.Errorf("UpdatedAt = %s, want about now in UTC", e.UpdatedAt)
	}
	if mustScratchSet(t, s, "ses_1", "k0", "replaced") {
		t.Error("replacing k0: created = true, want false")
	}
	if got := mustScratchGet(t, s, "ses_1", "k0"); got != "replaced" {
		t.Errorf("k0 = %q after replace", got)
	}
	if err := s.ScratchpadDelete(t.Context(), "ses_1", "k0"); err != nil {
		t.Fatalf("ScratchpadDelete: %v", err)
	}
	if _, err := s.ScratchpadGet(t.Context(), "ses_1", "k0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if !mustScratchSet(t, s, "ses_1", "k0", "again") {
		t.Error("set after delete: created = false, want true")
	}
}

func testScratchpadMissing(t *testing.T, s store.ScratchpadStore) {
	mustScratchSet(t, s, "ses_1", "present", "x")
	e, err := s.ScratchpadGet(t.Context(), "ses_1", "absent")
	wantErrIs(t, "ScratchpadGet(missing)", err, store.ErrNotFound)
	if e != nil {
		t.Errorf("entry %+v with ErrNotFound", e)
	}
	wantErrIs(t, "ScratchpadDelete(missing)", s.ScratchpadDelete(t.Context(), "ses_1", "absent"), store.ErrNotFound)
	wantErrIs(t, "ScratchpadDelete(other session)", s.ScratchpadDelete(t.Context(), "ses_2", "present"), store.ErrNotFound)
	if got := mustScratchGet(t, s, "ses_1", "present"); got != "x" {
		t.Errorf("present = %q", got)
	}
}

func testScratchpadSessions(t *testing.T, s store.ScratchpadStore) {
	mustScratchSet(t, s, "ses_1", "plan", "one")
	mustScratchSet(t, s, "ses_2", "plan", "two")
	if a, b := mustScratchGet(t, s, "ses_1", "plan"), mustScratchGet(t, s, "ses_2", "plan"); a != "one" || b != "two" {
		t.Errorf("plan = %q / %q, want one / two", a, b)
	}
	if err := s.ScratchpadDelete(t.Context(), "ses_2", "plan"); err != nil {
		t.Fatal(err)
	}
	if got := mustScratchGet(t, s, "ses_1", "plan"); got != "one" {
		t.Errorf("ses_1 plan = %q after ses_2 deleted its own", got)
	}
	if _, err := s.ScratchpadGet(t.Context(), "ses_3", "plan"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a third session sees plan: %v", err)
	}
}

func testScratchpadList(t *testing.T, s store.ScratchpadStore) {
	empty, err := s.ScratchpadList(t.Context(), "ses_1")
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("ScratchpadList(empty) = %v, %v; want an empty slice", empty, err)
	}
	for k, v := range map[string]string{"b": "xx", "B": "", "a": "é", "é": "🍌", "a.b": "1234567890", "_": "z"} {
		mustScratchSet(t, s, "ses_1", k, v)
	}
	mustScratchSet(t, s, "ses_2", "other", "x")
	keys, err := s.ScratchpadList(t.Context(), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	// Byte order of the UTF-8 keys.
	if got, want := scratchKeys(keys), []string{"B", "_", "a", "a.b", "b", "é"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
	sizes := map[string]int{}
	for _, k := range keys {
		sizes[k.Key] = k.Size
		if k.UpdatedAt.IsZero() {
			t.Errorf("%q: zero UpdatedAt", k.Key)
		}
	}
	if want := map[string]int{"b": 2, "B": 0, "a": 2, "é": 4, "a.b": 10, "_": 1}; !reflect.DeepEqual(sizes, want) {
		t.Errorf("sizes = %v, want %v (bytes)", sizes, want)
	}
}

func testScratchpadKeyLimit(t *testing.T, s store.ScratchpadStore) {
	set := func(session, key string) error {
		_, err := s.ScratchpadSet(t.Context(), session, key, "v-"+key, 3)
		return err
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := set("ses_1", k); err != nil {
			t.Fatalf("set %s within the limit: %v", k, err)
		}
	}
	err := set("ses_1", "d")
	wantErrIs(t, "a fourth key", err, store.ErrScratchpadFull)
	wantErrIs(t, "a fourth key", err, store.ErrConflict)
	if _, err := s.ScratchpadGet(t.Context(), "ses_1", "d"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused key was written: %v", err)
	}
	if err := set("ses_1", "b"); err != nil {
		t.Errorf("replacing a key at the limit: %v", err)
	}
	if err := set("ses_2", "d"); err != nil {
		t.Errorf("another session is not limited by this one: %v", err)
	}
	if err := s.ScratchpadDelete(t.Context(), "ses_1", "a"); err != nil {
		t.Fatal(err)
	}
	if err := set("ses_1", "d"); err != nil {
		t.Errorf("a new key after a delete made room: %v", err)
	}
}

func testScratchpadKeyLimitConcurrent(t *testing.T, s store.ScratchpadStore) {
	const workers, limit = 16, 5
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ok, bad int
	)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.ScratchpadSet(t.Context(), "ses_1", fmt.Sprintf("k%02d", i), "v", limit)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrScratchpadFull):
				bad++
			default:
				t.Errorf("set k%02d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	keys, err := s.ScratchpadList(t.Context(), "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	if ok != limit || bad != workers-limit || len(keys) != limit {
		t.Errorf("%d sets succeeded, %d refused, %d keys stored; want %d, %d, %d", ok, bad, len(keys), limit, workers-limit, limit)
	}
}

func testScratchpadInvalid(t *testing.T, s store.ScratchpadStore) {
	tests := []struct{ name, session, key, value string }{
		{"empty key", "ses_1", "", "x"},
		{"empty session", "", "k", "x"},
		{"NUL in value", "ses_1", "k", "a\x00b"},
		{"NUL in key", "ses_1", "k\x00", "x"},
		{"invalid UTF-8 value", "ses_1", "k", "\xff\xfe"},
	}
	for _, tt := range tests {
		_, err := s.ScratchpadSet(t.Context(), tt.session, tt.key, tt.value, 0)
		wantErrIs(t, "ScratchpadSet("+tt.name+")", err, store.ErrInvalid)
	}
	if keys, err := s.ScratchpadList(t.Context(), "ses_1"); err != nil || len(keys) != 0 {
		t.Errorf("refused sets wrote %v (%v)", scratchKeys(keys), err)
	}
}

func testScratchpadContextCancelled(t *testing.T, s store.ScratchpadStore) {
	mustScratchSet(t, s, "ses_1", "k", "v")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"ScratchpadSet":    func() error { _, err := s.ScratchpadSet(ctx, "ses_1", "k", "changed", 10); return err },
		"ScratchpadGet":    func() error { _, err := s.ScratchpadGet(ctx, "ses_1", "k"); return err },
		"ScratchpadDelete": func() error { return s.ScratchpadDelete(ctx, "ses_1", "k") },
		"ScratchpadList":   func() error { _, err := s.ScratchpadList(ctx, "ses_1"); return err },
	}
	for name, call := range calls {
		wantErrIs(t, name+" with a cancelled context", call(), context.Canceled)
	}
	if got := mustScratchGet(t, s, "ses_1", "k"); got != "v" {
		t.Errorf("k = %q after cancelled calls", got)
	}
}

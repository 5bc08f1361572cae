package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// RunMemory runs the conformance suite of store.MemoryStore. open is called once per
// subtest and must return an empty store closed in t.Cleanup.
func RunMemory(t *testing.T, open func(t *testing.T) store.MemoryStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.MemoryStore)
	}{
		{"RoundTrip", testMemoryRoundTrip},
		{"Defaults", testMemoryDefaults},
		{"ReplaceByKey", testMemoryReplaceByKey},
		{"Invalid", testMemoryInvalid},
		{"Duplicate", testMemoryDuplicate},
		{"TenantIsolation", testMemoryTenantIsolation},
		{"Ranking", testMemoryRanking},
		{"Stemming", testMemoryStemming},
		{"KeyAndTagsSearched", testMemoryKeyAndTags},
		{"HostileQueries", testMemoryHostileQueries},
		{"Limit", testMemoryLimit},
		{"Delete", testMemoryDelete},
		{"ContextCancelled", testMemoryContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

func newTestMemory(id, tenant, content string) *store.Memory {
	return &store.Memory{ID: id, Tenant: tenant, SessionID: "ses_1", Content: content, CreatedAt: base, UpdatedAt: base}
}

func mustSaveMemory(t *testing.T, s store.MemoryStore, m *store.Memory) *store.Memory {
	t.Helper()
	if _, err := s.SaveMemory(t.Context(), m); err != nil {
		t.Fatalf("SaveMemory(%s): %v", m.ID, err)
	}
	return m
}

func mustSearchMemory(t *testing.T, s store.MemoryStore, tenant, query string, limit int) []store.MemoryHit {
	t.Helper()
	hits, err := s.SearchMemory(t.Context(), tenant, query, limit)
	if err != nil {
		t.Fatalf("SearchMemory(%q, %q): %v", tenant, query, err)
	}
	if hits == nil {
		t.Fatalf("SearchMemory(%q, %q) returned nil, want a (possibly empty) slice", tenant, query)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("SearchMemory(%q): hit %d scores %v, more than hit %d (%v): not best first", query, i, hits[i].Score, i-1, hits[i-1].Score)
		}
	}
	return hits
}

func memoryHitIDs(hits []store.MemoryHit) []string {
	ids := []string{}
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	return ids
}

func checkMemory(t *testing.T, got, want *store.Memory) {
	t.Helper()
	if got.ID != want.ID || got.Tenant != want.Tenant || got.SessionID != want.SessionID || got.Key != want.Key ||
		got.Content != want.Content {
		t.Errorf("memory = %+v, want %+v", got, want)
	}
	wantTags := want.Tags
	if wantTags == nil {
		wantTags = []string{}
	}
	if got.Tags == nil || !reflect.DeepEqual(got.Tags, wantTags) {
		t.Errorf("%s Tags = %#v, want %#v", want.ID, got.Tags, wantTags)
	}
	checkTime(t, want.ID+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, want.ID+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

func testMemoryRoundTrip(t *testing.T, s store.MemoryStore) {
	m := &store.Memory{ID: "mem_1", Tenant: "acme", SessionID: "ses_9", Key: "deploy-notes",
		Content: "Deploys go through the <staging> cluster & need approval from Zoë.\nSecond line.",
		Tags:    []string{"ops", "deploy"}, CreatedAt: base, UpdatedAt: at(time.Second)}
	want := *m
	replaced, err := s.SaveMemory(t.Context(), m)
	if err != nil || replaced {
		t.Fatalf("SaveMemory = %v, %v; want a new memory", replaced, err)
	}
	checkMemory(t, m, &want)
	hits := mustSearchMemory(t, s, "acme", "staging approval", 0)
	if len(hits) != 1 {
		t.Fatalf("search found %v, want mem_1", memoryHitIDs(hits))
	}
	checkMemory(t, &hits[0].Memory, &want)
	if hits[0].Score <= 0 {
		t.Errorf("Score = %v, want > 0", hits[0].Score)
	}
}

func testMemoryDefaults(t *testing.T, s store.MemoryStore) {
	before := time.Now().Add(-time.Second)
	m := &store.Memory{Tenant: "acme", SessionID: "ses_1", Content: "the build cache lives in /var/cache"}
	mustSaveMemory(t, s, m)
	if !strings.HasPrefix(m.ID, "mem_") || len(m.ID) < len("mem_")+10 {
		t.Errorf("generated id %q, want mem_ and random characters", m.ID)
	}
	if m.CreatedAt.Before(before) || !m.UpdatedAt.Equal(m.CreatedAt) || m.Tags == nil {
		t.Errorf("defaults: created %s updated %s tags %#v", m.CreatedAt, m.UpdatedAt, m.Tags)
	}
	hits := mustSearchMemory(t, s, "acme", "cache", 0)
	if len(hits) != 1 {
		t.Fatalf("search found %v", memoryHitIDs(hits))
	}
	checkMemory(t, &hits[0].Memory, m)
	// Memories without a key never collide with each other.
	other := &store.Memory{Tenant: "acme", SessionID: "ses_1", Content: "the build cache is shared"}
	mustSaveMemory(t, s, other)
	if got := memoryHitIDs(mustSearchMemory(t, s, "acme", "cache", 0)); len(got) != 2 {
		t.Errorf("two keyless memories: search found %v", got)
	}
}

func testMemoryReplaceByKey(t *testing.T, s store.MemoryStore) {
	first := &store.Memory{ID: "mem_1", Tenant: "acme", SessionID: "ses_1", Key: "editor",
		Content: "the user prefers vim", Tags: []string{"prefs"}, CreatedAt: base, UpdatedAt: base}
	mustSaveMemory(t, s, first)
	second := &store.Memory{ID: "mem_2", Tenant: "acme", SessionID: "ses_2", Key: "editor",
		Content: "the user switched to helix", CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)}
	replaced, err := s.SaveMemory(t.Context(), second)
	if err != nil || !replaced {
		t.Fatalf("SaveMemory(same key) = %v, %v; want replaced", replaced, err)
	}
	if second.ID != "mem_1" {
		t.Errorf("replacement id = %s, want the existing mem_1", second.ID)
	}
	checkTime(t, "CreatedAt of the replacement", second.CreatedAt, base)
	want := &store.Memory{ID: "mem_1", Tenant: "acme", SessionID: "ses_2", Key: "editor",
		Content: "the user switched to helix", CreatedAt: base, UpdatedAt: at(time.Hour)}
	hits := mustSearchMemory(t, s, "acme", "helix", 0)
	if len(hits) != 1 {
		t.Fatalf("search for the new content found %v", memoryHitIDs(hits))
	}
	checkMemory(t, &hits[0].Memory, want)
	if got := mustSearchMemory(t, s, "acme", "vim prefs", 0); len(got) != 0 {
		t.Errorf("the replaced content or tags are still found: %v", memoryHitIDs(got))
	}
	// The same key in another tenant is another memory.
	mustSaveMemory(t, s, &store.Memory{ID: "mem_3", Tenant: "globex", SessionID: "ses_3", Key: "editor", Content: "helix too"})
	if got := memoryHitIDs(mustSearchMemory(t, s, "acme", "helix", 0)); !reflect.DeepEqual(got, []string{"mem_1"}) {
		t.Errorf("acme finds %v, want [mem_1]", got)
	}
	if got := memoryHitIDs(mustSearchMemory(t, s, "globex", "helix", 0)); !reflect.DeepEqual(got, []string{"mem_3"}) {
		t.Errorf("globex finds %v, want [mem_3]", got)
	}
}

func testMemoryInvalid(t *testing.T, s store.MemoryStore) {
	tests := []struct {
		name string
		m    *store.Memory
	}{
		{"nil", nil},
		{"blank content", &store.Memory{ID: "mem_x", SessionID: "ses_1", Content: " \t\n"}},
		{"no session", &store.Memory{ID: "mem_x", Content: "x"}},
		{"blank tag", &store.Memory{ID: "mem_x", SessionID: "ses_1", Content: "x", Tags: []string{"a", " "}}},
		{"NUL in content", &store.Memory{ID: "mem_x", SessionID: "ses_1", Content: "zebra\x00"}},
		{"NUL in tag", &store.Memory{ID: "mem_x", SessionID: "ses_1", Content: "zebra", Tags: []string{"a\x00"}}},
		{"invalid UTF-8 key", &store.Memory{ID: "mem_x", SessionID: "ses_1", Content: "zebra", Key: "\xc3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.SaveMemory(t.Context(), tt.m)
			wantErrIs(t, "SaveMemory", err, store.ErrInvalid)
		})
	}
	if got := mustSearchMemory(t, s, "", "zebra", 0); len(got) != 0 {
		t.Errorf("refused memories were written: %v", memoryHitIDs(got))
	}
}

func testMemoryDuplicate(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, newTestMemory("mem_1", "acme", "original walrus"))
	_, err := s.SaveMemory(t.Context(), newTestMemory("mem_1", "acme", "impostor walrus"))
	wantErrIs(t, "SaveMemory(duplicate id)", err, store.ErrConflict)
	hits := mustSearchMemory(t, s, "acme", "walrus", 0)
	if len(hits) != 1 || hits[0].Content != "original walrus" {
		t.Errorf("after a refused duplicate: %+v", hits)
	}
}

func testMemoryTenantIsolation(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, newTestMemory("mem_a", "acme", "the launch code is banana"))
	mustSaveMemory(t, s, newTestMemory("mem_g", "globex", "globex also likes banana bread"))
	mustSaveMemory(t, s, newTestMemory("mem_e", "", "the default tenant has a banana too"))
	for tenant, want := range map[string][]string{"acme": {"mem_a"}, "globex": {"mem_g"}, "": {"mem_e"}, "initech": {}} {
		if got := memoryHitIDs(mustSearchMemory(t, s, tenant, "banana launch bread", 0)); !reflect.DeepEqual(got, want) {
			t.Errorf("tenant %q finds %v, want %v", tenant, got, want)
		}
	}
}

func testMemoryRanking(t *testing.T, s store.MemoryStore) {
	// Same length, same words but for the ones the query asks for.
	mustSaveMemory(t, s, newTestMemory("mem_1", "acme", "the deploy pipeline uses mysql and kafka queues"))
	mustSaveMemory(t, s, newTestMemory("mem_3", "acme", "the deploy pipeline uses postgres and redis queues"))
	mustSaveMemory(t, s, newTestMemory("mem_0", "acme", "the lunch menu lists soup and bread on fridays"))
	mustSaveMemory(t, s, newTestMemory("mem_2", "acme", "the deploy pipeline uses postgres and kafka queues"))
	got := memoryHitIDs(mustSearchMemory(t, s, "acme", "deploy postgres redis", 0))
	if want := []string{"mem_3", "mem_2", "mem_1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ranking = %v, want %v (more matching words first; no match left out)", got, want)
	}
	got = memoryHitIDs(mustSearchMemory(t, s, "acme", "REDIS Postgres", 0))
	if want := []string{"mem_3", "mem_2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("case-insensitive ranking = %v, want %v", got, want)
	}
}

func testMemoryStemming(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, newTestMemory("mem_1", "acme", "The migrations were running slowly"))
	for _, q := range []string{"migration", "MIGRATIONS", "run", "runs"} {
		if got := memoryHitIDs(mustSearchMemory(t, s, "acme", q, 0)); !reflect.DeepEqual(got, []string{"mem_1"}) {
			t.Errorf("search %q found %v, want [mem_1]", q, got)
		}
	}
}

func testMemoryKeyAndTags(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, &store.Memory{ID: "mem_k", Tenant: "acme", SessionID: "ses_1", Key: "kubernetes",
		Content: "cluster notes", Tags: []string{"infrastructure", "oncall"}})
	for _, q := range []string{"kubernetes", "oncall", "infrastructure"} {
		if got := memoryHitIDs(mustSearchMemory(t, s, "acme", q, 0)); !reflect.DeepEqual(got, []string{"mem_k"}) {
			t.Errorf("search %q found %v, want [mem_k] (key and tags are searched)", q, got)
		}
	}
}

func testMemoryHostileQueries(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, newTestMemory("mem_1", "acme", "remember the banana: it is (very) important"))
	mustSaveMemory(t, s, newTestMemory("mem_2", "acme", "nothing to see here"))
	withBanana := []string{
		`"banana`, `banana"`, `"banana"`, `banana*`, `*banana`, `banana OR`, `OR banana`, `banana AND NOT`,
		`content:banana`, `key:banana`, `banana:`, `(banana`, `banana)`, `NEAR(banana important)`,
		`-banana`, `^banana`, `banana & | ! <-> :*`, `banana' OR '1'='1`, `banana\`, `banana%_`,
		`banana; DROP TABLE memories; --`, "banana\u0000", "🍌 banana", `{banana}`, `banana NOT`,
	}
	for _, q := range withBanana {
		hits, err := s.SearchMemory(t.Context(), "acme", q, 0)
		if err != nil {
			t.Errorf("SearchMemory(%q): %v", q, err)
			continue
		}
		if len(hits) == 0 || hits[0].ID != "mem_1" {
			t.Errorf("SearchMemory(%q) = %v, want mem_1 first", q, memoryHitIDs(hits))
		}
	}
	for _, q := range []string{``, ` `, `"`, `""`, `*`, `OR`, `AND`, `NOT`, `:`, `()`, `(`, `)`, `-`, `'`, `\`, `"*"`, `🍌`, "\x00", `the`} {
		hits, err := s.SearchMemory(t.Context(), "acme", q, 0)
		if err != nil {
			t.Errorf("SearchMemory(%q): %v", q, err)
		} else if hits == nil {
			t.Errorf("SearchMemory(%q) returned nil, want an empty or filled slice", q)
		}
	}
	if got := mustSearchMemory(t, s, "acme", "banana", 0); len(got) != 1 {
		t.Errorf("the store is not intact after the hostile queries: %v", memoryHitIDs(got))
	}
}

func testMemoryLimit(t *testing.T, s store.MemoryStore) {
	for i := range 15 {
		mustSaveMemory(t, s, newTestMemory(fmt.Sprintf("mem_%02d", i), "acme", fmt.Sprintf("note %d about the heron", i)))
	}
	if got := mustSearchMemory(t, s, "acme", "heron", 3); len(got) != 3 {
		t.Errorf("limit 3: %d hits", len(got))
	}
	if got := mustSearchMemory(t, s, "acme", "heron", 0); len(got) != store.DefaultMemorySearchLimit {
		t.Errorf("limit 0: %d hits, want the default %d", len(got), store.DefaultMemorySearchLimit)
	}
	if got := mustSearchMemory(t, s, "acme", "heron", 100); len(got) != 15 {
		t.Errorf("limit 100: %d hits, want all 15", len(got))
	}
}

func testMemoryDelete(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, &store.Memory{ID: "mem_1", Tenant: "acme", SessionID: "ses_1", Key: "k", Content: "the ocelot sleeps"})
	err := s.DeleteMemory(t.Context(), "globex", "mem_1")
	wantErrIs(t, "DeleteMemory(another tenant)", err, store.ErrNotFound)
	if got := mustSearchMemory(t, s, "acme", "ocelot", 0); len(got) != 1 {
		t.Fatalf("another tenant's delete removed the memory: %v", memoryHitIDs(got))
	}
	if err := s.DeleteMemory(t.Context(), "acme", "mem_1"); err != nil {
		t.Fatalf("DeleteMemory: %v", err)
	}
	if got := mustSearchMemory(t, s, "acme", "ocelot", 0); len(got) != 0 {
		t.Errorf("deleted memory still found: %v", memoryHitIDs(got))
	}
	err = s.DeleteMemory(t.Context(), "acme", "mem_1")
	wantErrIs(t, "DeleteMemory twice", err, store.ErrNotFound)
	// Its key is free again: saving it makes a new memory.
	m := &store.Memory{ID: "mem_2", Tenant: "acme", SessionID: "ses_1", Key: "k", Content: "the ocelot woke up"}
	if replaced, err := s.SaveMemory(t.Context(), m); err != nil || replaced || m.ID != "mem_2" {
		t.Errorf("SaveMemory after delete = %v, %v, id %s; want a new mem_2", replaced, err, m.ID)
	}
}

func testMemoryContextCancelled(t *testing.T, s store.MemoryStore) {
	mustSaveMemory(t, s, newTestMemory("mem_1", "acme", "the tapir"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"SaveMemory":   func() error { _, err := s.SaveMemory(ctx, newTestMemory("mem_2", "acme", "another tapir")); return err },
		"SearchMemory": func() error { _, err := s.SearchMemory(ctx, "acme", "tapir", 0); return err },
		"DeleteMemory": func() error { return s.DeleteMemory(ctx, "acme", "mem_1") },
	}
	for name, call := range calls {
		wantErrIs(t, name+" with a cancelled context", call(), context.Canceled)
	}
	if got := memoryHitIDs(mustSearchMemory(t, s, "acme", "tapir", 0)); !reflect.DeepEqual(got, []string{"mem_1"}) {
		t.Errorf("after cancelled calls: %v, want [mem_1]", got)
	}
}

package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// FileStamps checks a store's file stamps (store.FileStampStore), which a and b,
// two stores open on one database, must keep: a stamp put through a is read through
// b, to the nanosecond of its modification time and with or without its hash; a
// second put replaces the first; stamps are per session and per path (a path that is
// not UTF-8 included) and listed per session (FileStampPaths); deleting a session (retention, DELETE /v1/sessions) deletes its
// stamps and no other session's.
func FileStamps(t *testing.T, a, b store.Store) {
	t.Helper()
	ctx := t.Context()
	wa, ok := a.(store.FileStampStore)
	if !ok {
		t.Fatalf("%T does not keep file stamps", a)
	}
	rb, ok := b.(store.FileStampStore)
	if !ok {
		t.Fatalf("%T does not keep file stamps", b)
	}

	long := time.Now().Add(-48 * time.Hour).UTC()
	for _, id := range []string{"ses_old", "ses_kept"} {
		if err := a.CreateSession(ctx, &store.Session{ID: id, Tenant: "t", CreatedAt: long, UpdatedAt: long}); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Unix(1795814000, 123456789)
	sum := bytes.Repeat([]byte{0xab}, 32)
	odd := "/w/caf\xe9.txt" // Latin-1, not UTF-8
	puts := []struct {
		session, path string
		s             store.FileStamp
	}{
		{"ses_old", "/w/a.txt", store.FileStamp{Size: 1, ModTime: mtime}},
		{"ses_old", "/w/a.txt", store.FileStamp{Size: 12, ModTime: mtime.Add(time.Nanosecond), SHA256: sum}},
		{"ses_old", odd, store.FileStamp{Size: 3, ModTime: mtime}},
		{"ses_kept", "/w/a.txt", store.FileStamp{Size: 7, ModTime: mtime}},
	}
	for _, p := range puts {
		if err := wa.PutFileStamp(ctx, p.session, p.path, p.s); err != nil {
			t.Fatalf("put %s %q: %v", p.session, p.path, err)
		}
	}
	for _, want := range puts[1:] {
		got, err := rb.GetFileStamp(ctx, want.session, want.path)
		if err != nil {
			t.Fatalf("get %s %q: %v", want.session, want.path, err)
		}
		if got.Size != want.s.Size || !got.ModTime.Equal(want.s.ModTime) || !bytes.Equal(got.SHA256, want.s.SHA256) {
			t.Errorf("get %s %q = %+v, want %+v", want.session, want.path, got, want.s)
		}
	}
	paths, err := rb.FileStampPaths(ctx, "ses_old")
	slices.Sort(paths)
	if err != nil || !slices.Equal(paths, []string{"/w/a.txt", odd}) {
		t.Errorf("FileStampPaths(ses_old) = %q, %v; want the two paths", paths, err)
	}
	if paths, err := rb.FileStampPaths(ctx, "ses_none"); err != nil || len(paths) != 0 {
		t.Errorf("FileStampPaths of a session without stamps = %q, %v", paths, err)
	}
	if _, err := rb.GetFileStamp(ctx, "ses_kept", odd); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another session's path: %v, want ErrNotFound", err)
	}
	if err := wa.PutFileStamp(ctx, "", "/w/a.txt", store.FileStamp{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no session: %v, want ErrInvalid", err)
	}

	if _, gone, err := a.DeleteUnusedSession(ctx, "ses_old", time.Now().Add(-time.Hour), 0); err != nil || !gone {
		t.Fatalf("DeleteUnusedSession = %v, %v; want it gone", gone, err)
	}
	for _, path := range []string{"/w/a.txt", odd} {
		if s, err := rb.GetFileStamp(ctx, "ses_old", path); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("stamp %q of the deleted session: %+v, %v; want it deleted", path, s, err)
		}
	}
	if _, err := rb.GetFileStamp(ctx, "ses_kept", "/w/a.txt"); err != nil {
		t.Errorf("the other session's stamp: %v", err)
	}
}

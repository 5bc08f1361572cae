package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/store"
)

// The listings of calls and approvals are ordered by (created_at, id), newest first,
// and page back from the last item of the previous page: ?before= names it, either by
// its id or by the listing's next_before, which is the id with its created_at
// ("tc_…~" and the time in base-36 microseconds). An id has to be looked up, so once
// retention deletes the record it names no place in the listing any more; next_before
// carries the place itself and goes on working after the record is gone.

const cursorSep = "~"

// nextBefore is the cursor of the page after one that ends with the record (id, at).
func nextBefore(id string, at time.Time) string {
	return id + cursorSep + strconv.FormatInt(at.UnixMicro(), 36)
}

// wantNext reports whether a page of n items, asked for at most limit, may have more
// after it: it is full, or it stopped at its byte budget (Config.ListBytes).
func wantNext(n, limit int, truncated bool) bool {
	return n > 0 && (n >= limit || truncated)
}

// listing names what a listing pages through, for before's errors.
type listing struct {
	noun   string // "call"
	prefix string // "tc_"
	// find returns the created_at of the record id if the caller may page from it;
	// store.ErrNotFound if there is none (deleted, never made, another tenant's).
	find func(ctx context.Context, id string) (time.Time, error)
}

// before resolves ?before=v of a listing: the place (created_at, id) its page starts
// after. A value that is neither an id of the listing's kind nor a next_before is a
// 400; an id that names nothing the caller may list is a 404 that says how to go on.
func (l listing) before(ctx context.Context, v string) (time.Time, string, error) {
	id, at, hasAt := strings.Cut(v, cursorSep)
	if !strings.HasPrefix(id, l.prefix) || len(id) == len(l.prefix) {
		return time.Time{}, "", errorf(CodeBadRequest, "before must be the next_before of the previous page, or the id ("+l.prefix+"…) of its last "+l.noun)
	}
	if hasAt {
		us, err := strconv.ParseInt(at, 36, 64)
		if err != nil || us <= 0 {
			return time.Time{}, "", errorf(CodeBadRequest, "before: "+v+" is not a next_before this listing gave (pass it unchanged)")
		}
		return time.UnixMicro(us).UTC(), id, nil
	}
	created, err := l.find(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, "", errorf(CodeNotFound, "before: there is no "+l.noun+" "+id+" to page from (it may have been deleted since it was listed, such as by retention). "+
			"Go on with the previous page's next_before, which outlives the records it names, or start again without before")
	}
	if err != nil {
		return time.Time{}, "", err
	}
	return created, id, nil
}

package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/auth"
)

// FuzzCreateKeyBody feeds arbitrary bodies and Content-Types to the API-key creation
// decoder: it never panics, every rejection is an API error with a known code and a
// message, and an accepted request always names valid roles (sorted, no duplicates),
// a tenant without spaces or commas of at most 128 bytes, and a name of at most 200.
func FuzzCreateKeyBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"ci","roles":["agent"]}`, `{"tenant":"acme","roles":["admin","agent","agent"]}`,
		`{"roles":[]}`, `{"roles":["root"]}`, `{"tenant":"a b","roles":["agent"]}`, `{"roles":"agent"}`,
		`{"name":1}`, `{"unknown":true}`, `{} {}`, `{`, ``, `null`, "\xff",
	} {
		f.Add([]byte(s), "application/json", uint16(1<<12))
		f.Add([]byte(s), "", uint16(16))
	}
	f.Add([]byte(`{"roles":["agent"]}`), "text/plain", uint16(1<<12))
	f.Fuzz(func(t *testing.T, body []byte, contentType string, limit uint16) {
		lim := int64(limit) + 1
		req, err := decodeCreateKey(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), lim), lim, contentType, "caller")
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("non-API error %T: %v", err, err)
			}
			if _, ok := statusOf[ae.Code]; !ok || ae.Message == "" {
				t.Fatalf("bad API error %+v", ae)
			}
			return
		}
		if int64(len(body)) > lim {
			t.Fatalf("a body of %d bytes was accepted with limit %d", len(body), lim)
		}
		if len(req.Roles) == 0 || !slices.IsSorted(req.Roles) || len(slices.Compact(slices.Clone(req.Roles))) != len(req.Roles) {
			t.Fatalf("accepted roles %q", req.Roles)
		}
		for _, r := range req.Roles {
			if !auth.ValidRole(r) {
				t.Fatalf("accepted role %q", r)
			}
		}
		if req.Tenant == "" || len(req.Tenant) > 128 || strings.ContainsAny(req.Tenant, " \t\r\n,") || len(req.Name) > 200 {
			t.Fatalf("accepted tenant %q name %q", req.Tenant, req.Name)
		}
	})
}

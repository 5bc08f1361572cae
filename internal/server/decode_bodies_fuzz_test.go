package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/session"
)

// FuzzDecodeBodies feeds arbitrary bodies to the shared JSON decoder with the request
// types of the other routes (session specs, approval decisions, forwarded job calls): it must never panic,
// every rejection must be an API error with a known code and a message, and a body
// over the limit is never accepted.
func FuzzDecodeBodies(f *testing.F) {
	for _, s := range []string{
		`{"available_tools":["read_file","mcp__github__*"],"permission_mode":"default","metadata":{"a":1}}`,
		`{"available_tools":"read_file"}`, `{"workdir":"../x","rules":[{"tool":"x","action":"allow"}]}`,
		`{"decision":"approve","rule":"execute_command(git *)","reason":"ok"}`, `{"decision":1}`,
		`{"name":"read_job_output","arguments":{"job_id":"job_1"}}`, `{"unknown":true}`, `{} {}`, `{`, ``, `null`, `[]`, "\xff",
	} {
		f.Add([]byte(s), uint16(1<<12))
		f.Add([]byte(s), uint16(8))
	}
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		lim := int64(limit) + 1
		var spec session.Spec
		var dec decisionRequest
		var job cluster.JobCallRequest
		for _, v := range []any{&spec, &dec, &job} {
			// decodeJSON's cap: MaxBytesReader in front of decodeBody.
			err := decodeBody(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), lim), lim, v)
			if err == nil {
				if int64(len(body)) > lim {
					t.Fatalf("a body of %d bytes was accepted with limit %d", len(body), lim)
				}
				continue
			}
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("non-API error %T: %v", err, err)
			}
			if _, ok := statusOf[ae.Code]; !ok || ae.Message == "" {
				t.Fatalf("bad API error %+v", ae)
			}
		}
	})
}

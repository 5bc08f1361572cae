package server

import (
	"bytes"
	"errors"
	"testing"

	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// FuzzDecodeToolCalls feeds arbitrary bodies to the tool-calls decoder: it must never
// panic, every rejection must be an API error with a known code, and every accepted
// call must carry either arguments that are a JSON object or an ArgError.
func FuzzDecodeToolCalls(f *testing.F) {
	seeds := []string{
		`{"calls":[{"id":"a","name":"echo","arguments":{"text":"x"}}]}`,
		`{"calls":[{"id":"a","type":"function","function":{"name":"echo","arguments":"{\"text\":1}"}}]}`,
		`{"calls":[{"id":"a","type":"function","function":{"name":"echo","arguments":"{bad"}}]}`,
		`{"calls":[{"type":"tool_use","id":"t","name":"x","input":{}}],"strategy":"batched","batch_size":2}`,
		`{"calls":[{"id":"a","name":"x","arguments":[1]}]}`, `{"calls":null}`, `[]`, `{`, `{"calls":[]} x`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req toolCallsRequest
		err := decodeBody(bytes.NewReader(body), 1<<20, &req)
		if err == nil {
			var b interface{}
			b, err = req.toBatch(toolmgr.FormatNative)
			_ = b
		}
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
		for _, format := range []toolmgr.Format{toolmgr.FormatNative, toolmgr.FormatGemini} {
			batch, _ := req.toBatch(format)
			for _, c := range batch.Calls {
				if c.ArgError == "" && (len(c.Arguments) == 0 || c.Arguments[0] != '{') {
					t.Fatalf("%s: call %+v has neither object arguments nor an ArgError", format, c)
				}
			}
		}
	})
}

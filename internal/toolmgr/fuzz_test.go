package toolmgr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzPrepare feeds arbitrary bytes as arguments: validation must never panic, and
// whatever it accepts must be a JSON object the tool can decode.
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"a","age":1}`, `[]`, `null`, `"x"`, `{"name":"a","age":1e400}`, `{"session_id":1}`, "\xff"} {
		f.Add([]byte(s))
	}
	m := New()
	m.MustRegister(echoTool("person"))
	e, _ := m.Lookup("person")
	f.Fuzz(func(t *testing.T, data []byte) {
		args, res := e.Prepare(data)
		if res != nil {
			if !res.IsError || res.ErrorKind != "invalid_args" {
				t.Fatalf("rejection is not invalid_args: %+v", res)
			}
			return
		}
		var obj map[string]any
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		if err := d.Decode(&obj); err != nil || obj == nil {
			t.Fatalf("accepted arguments are not an object: %q: %v", args, err)
		}
	})
}

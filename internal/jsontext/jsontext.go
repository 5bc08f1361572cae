// Package jsontext shows JSON to people: what Go's encoders escape for HTML is put
// back as written.
package jsontext

import "strings"

// UnescapeHTML turns JSON's \u0026, \u003c and \u003e (which Go's JSON encoders,
// the daemon's and its clients', write for &, < and >) back into &, < and >. A
// backslash only occurs in a JSON string, as the start of an escape, so every escape
// is read as a pair: an escaped backslash before "u0026" stays as it is, and so does
// every other escape.
func UnescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			if c, ok := htmlEscapes[strings.ToLower(string(b[i+2:i+6]))]; ok {
				out = append(out, c)
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

var htmlEscapes = map[string]byte{"0026": '&', "003c": '<', "003e": '>'}

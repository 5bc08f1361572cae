// Package jsontext helps with JSON text: showing it to people (what Go's encoders
// escape for HTML put back as written), making what YAML decodes into values JSON
// can hold, and finding what encoding/json lets pass silently (a key twice).
package jsontext

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FromYAML makes what a YAML decoder gave into values encoding/json can write:
// mappings whose keys are not all strings ({1: one}, response codes written as
// numbers) get string keys, and an infinite number or NaN (.inf, .nan), which JSON
// has no word for, becomes its text. Maps and slices are changed in place.
func FromYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = FromYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = FromYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = FromYAML(e)
		}
		return x
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	return v
}

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

// Deeper reports whether JSON text b nests arrays and objects more than max deep. It
// reads the text once, without decoding it or recursing, so that a value too deep
// for a recursive decoder can be refused before one reads it. b need not be valid.
func Deeper[T ~string | ~[]byte](b T, max int) bool {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

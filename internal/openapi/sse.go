package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// sseEvent is one server-sent event: its name ("message" unless the stream says) and
// its data lines joined by newlines.
type sseEvent struct {
	name, data string
}

// parseEventStream splits a text/event-stream body into its events, as the WHATWG
// parser does: a blank line ends an event, a line starting with ":" is a comment, an
// event without data is dropped. An event the body ends in the middle of (a stream cut
// or still arriving) is kept: it is what came.
func parseEventStream(data []byte) []sseEvent {
	var events []sseEvent
	var name string
	var lines []string
	dispatch := func() {
		if lines != nil {
			if name == "" {
				name = "message"
			}
			events = append(events, sseEvent{name: name, data: strings.Join(lines, "\n")})
		}
		name, lines = "", nil
	}
	text := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			dispatch()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			lines = append(lines, value)
		}
	}
	dispatch()
	return events
}

// eventStreamText is a text/event-stream body as the model reads it: one event a line,
// its name when not "message", then its data; JSON data compact, other data with line
// breaks as a JSON string. The top-level fields that every JSON object of one event
// name has, with the same value, are given once above rather than on every line: a
// stream of chunks (OpenAI's chat completions) repeats its id, model and the like in
// each, several times the size of the token it carries. It returns the text and the
// number of events.
func eventStreamText(data []byte) (string, int) {
	events := parseEventStream(data)
	objs := make([][]jsonField, len(events))
	byName := map[string][]int{}
	var names []string
	for i, e := range events {
		if fields, ok := objectFields(e.data); ok {
			objs[i] = fields
			if byName[e.name] == nil {
				names = append(names, e.name)
			}
			byName[e.name] = append(byName[e.name], i)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[text/event-stream: %d events, one a line: its name when not \"message\", then its data]", len(events))
	common := map[string]map[string]string{}
	for _, name := range names {
		idx := byName[name]
		if len(idx) < 2 {
			continue
		}
		shared := map[string]string{}
		for _, f := range objs[idx[0]] {
			shared[f.key] = f.value
		}
		for _, i := range idx[1:] {
			seen := map[string]bool{}
			for _, f := range objs[i] {
				if v, ok := shared[f.key]; ok && v == f.value {
					seen[f.key] = true
				}
			}
			for k := range shared {
				if !seen[k] {
					delete(shared, k)
				}
			}
		}
		if len(shared) == 0 {
			continue
		}
		common[name] = shared
		var kept []jsonField
		for _, f := range objs[idx[0]] {
			if _, ok := shared[f.key]; ok {
				kept = append(kept, f)
			}
		}
		fmt.Fprintf(&b, "\n[every %q event's JSON object also has: %s]", name, joinFields(kept))
	}
	for i, e := range events {
		b.WriteByte('\n')
		if e.name != "message" {
			b.WriteString(e.name + ": ")
		}
		switch {
		case objs[i] != nil:
			var rest []jsonField
			for _, f := range objs[i] {
				if _, ok := common[e.name][f.key]; !ok {
					rest = append(rest, f)
				}
			}
			b.WriteString(joinFields(rest))
		case json.Valid([]byte(e.data)):
			var c bytes.Buffer
			_ = json.Compact(&c, []byte(e.data))
			b.Write(c.Bytes())
		case strings.Contains(e.data, "\n"):
			b.WriteString(quoteJSON(e.data))
		default:
			b.WriteString(e.data)
		}
	}
	return b.String(), len(events)
}

// jsonField is a top-level field of a JSON object, its value compact.
type jsonField struct {
	key, value string
}

// objectFields are the fields of a JSON object in their order, or false when data is
// not one (or repeats a key, which could not be told apart once left out).
func objectFields(data string) ([]jsonField, bool) {
	dec := json.NewDecoder(strings.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	fields := []jsonField{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok || seen[key] {
			return nil, false
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, false
		}
		fields = append(fields, jsonField{key: key, value: c.String()})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // trailing data
	}
	return fields, true
}

func joinFields(fields []jsonField) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quoteJSON(f.key))
		b.WriteByte(':')
		b.WriteString(f.value)
	}
	b.WriteByte('}')
	return b.String()
}

// quoteJSON is s as a JSON string, with <, > and & as they are.
func quoteJSON(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

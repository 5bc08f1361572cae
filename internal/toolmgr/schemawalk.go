package toolmgr

import (
	"bytes"
	"encoding/json"
	"slices"
)

// member is one member of a JSON object, its value as written.
type member struct {
	key string
	val json.RawMessage
}

// rewriteSchemas applies fix to every schema in raw: raw itself and every schema it
// holds, at any depth (items, properties, anyOf, $defs …; not default, const, enum
// or examples, which hold values). Members keep their order and a schema fix leaves
// alone keeps its bytes; it reports false when nothing changed (and for schemas that
// are not objects, such as boolean schemas).
func rewriteSchemas(raw json.RawMessage, fix func([]member) ([]member, bool)) (json.RawMessage, bool) {
	members, ok := objectMembers(raw)
	if !ok {
		return raw, false
	}
	changed := false
	each := func(val json.RawMessage, rewrite func(json.RawMessage, func([]member) ([]member, bool)) (json.RawMessage, bool)) json.RawMessage {
		if out, ok := rewrite(val, fix); ok {
			changed = true
			return out
		}
		return val
	}
	for i, m := range members {
		switch m.key {
		case "items":
			members[i].val = each(m.val, func(v json.RawMessage, fix func([]member) ([]member, bool)) (json.RawMessage, bool) {
				if out, ok := schemaList(v, fix); ok {
					return out, true
				}
				return rewriteSchemas(v, fix)
			})
		case "prefixItems", "anyOf", "oneOf", "allOf":
			members[i].val = each(m.val, schemaList)
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			members[i].val = each(m.val, schemaMap)
		case "not", "if", "then", "else", "additionalProperties", "additionalItems", "contains",
			"propertyNames", "unevaluatedItems", "unevaluatedProperties":
			members[i].val = each(m.val, rewriteSchemas)
		}
	}
	if out, ok := fix(members); ok {
		members, changed = out, true
	}
	if !changed {
		return raw, false
	}
	return writeMembers(members), true
}

// schemaList rewrites an array of schemas.
func schemaList(raw json.RawMessage, fix func([]member) ([]member, bool)) (json.RawMessage, bool) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return raw, false
	}
	changed := false
	for i, v := range list {
		if out, ok := rewriteSchemas(v, fix); ok {
			list[i], changed = out, true
		}
	}
	if !changed {
		return raw, false
	}
	out, err := json.Marshal(list)
	return out, err == nil
}

// schemaMap rewrites an object whose values are schemas (properties, $defs).
func schemaMap(raw json.RawMessage, fix func([]member) ([]member, bool)) (json.RawMessage, bool) {
	members, ok := objectMembers(raw)
	if !ok {
		return raw, false
	}
	changed := false
	for i, m := range members {
		if out, ok := rewriteSchemas(m.val, fix); ok {
			members[i].val, changed = out, true
		}
	}
	if !changed {
		return raw, false
	}
	return writeMembers(members), true
}

// writeMembers writes an object of members, in order.
func writeMembers(members []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// objectMembers splits a JSON object into its members, in order.
func objectMembers(raw json.RawMessage) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		out = append(out, member{key: key, val: val})
	}
	return out, true
}

// OptionalDefaults takes out of every "required" list of a schema the properties
// whose own schema gives a "default": a server fills those in when they are missing.
// Schemas made from zod with .default() (zod 4's JSON Schema of a parsed value, as
// @playwright/mcp publishes) list them as required, and a call without them, which
// the server takes, would be refused before it was sent and a model told to invent
// them. It reports false when nothing changed.
func OptionalDefaults(raw json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(raw, []byte(`"default"`)) {
		return raw, false
	}
	return rewriteSchemas(raw, dropDefaultedRequired)
}

func dropDefaultedRequired(members []member) ([]member, bool) {
	ri, pi := -1, -1
	for i, m := range members {
		switch m.key {
		case "required":
			ri = i
		case "properties":
			pi = i
		}
	}
	if ri < 0 || pi < 0 {
		return members, false
	}
	var required []string
	props, ok := objectMembers(members[pi].val)
	if json.Unmarshal(members[ri].val, &required) != nil || !ok {
		return members, false
	}
	defaulted := map[string]bool{}
	for _, p := range props {
		if ms, ok := objectMembers(p.val); ok && slices.ContainsFunc(ms, func(m member) bool { return m.key == "default" }) {
			defaulted[p.key] = true
		}
	}
	kept := slices.DeleteFunc(slices.Clone(required), func(name string) bool { return defaulted[name] })
	if len(kept) == len(required) {
		return members, false
	}
	out := slices.Clone(members)
	if len(kept) == 0 {
		return slices.Delete(out, ri, ri+1), true
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return members, false
	}
	out[ri].val = b
	return out, true
}

package toolmgr

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// rootRefused are the keywords the model providers refuse at the root of a
// function's parameters, each refusing the whole request over one tool holding
// one: OpenAI ("schema must have type 'object' and not have
// 'oneOf'/'anyOf'/'allOf'/'enum'/'const'/'not' at the top level", Chat Completions
// and Responses), Anthropic ("input_schema does not support oneOf, allOf, or anyOf
// at the top level"), and Gemini, whose parametersJsonSchema must describe an
// object by its properties. MCP servers publish such schemas (a zod union at the
// root, "one of these arguments is required" as a root anyOf); MCP clients and the
// daemon's own validation take them as they are.
var rootRefused = []string{"anyOf", "oneOf", "allOf", "not", "enum", "const"}

// forProviders returns a parameters schema without the root keywords providers
// refuse (rootRefused). What they said is not lost on the model: the properties
// of the alternatives (inline ones, and those a local $ref names, as
// zod-to-json-schema writes a union of named schemas) join the root's, and allOf's required, which
// holds whichever alternative, joins its required. The arguments are still checked
// against the whole schema before a call runs, and a call that misses what an
// alternative demanded comes back as invalid_args saying what. A schema with
// nothing to take out is returned as it is. A root without a type gets "type":
// "object", which OpenAI demands (Register accepts a schema without one, as JSON
// Schema does: arguments are always an object).
func forProviders(raw json.RawMessage) json.RawMessage {
	if !mayHaveRootRefused(raw) && hasRootType(raw) {
		return raw
	}
	if out, ok := rootFlattened.get(raw); ok {
		return out
	}
	out := raw
	if fixed, changed := flattenRoot(raw); changed {
		out = fixed
	}
	if members, ok := objectMembers(out); ok && !slices.ContainsFunc(members, func(m member) bool { return m.key == "type" }) {
		out = writeMembers(append([]member{{key: "type", val: json.RawMessage(`"object"`)}}, members...))
	}
	rootFlattened.put(raw, out)
	return out
}

// hasRootType reports whether the schema raw surely names a type at its root: it
// starts with "type", as every schema the daemon builds or an SDK writes does. Any
// other schema goes the slow way, through the cache.
func hasRootType(raw json.RawMessage) bool {
	return bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n{"), []byte(`"type"`))
}

// rootFlattened keeps forProviders' answers by schema, as arrayItems does.
var rootFlattened = schemaCache{max: 16 << 20}

func mayHaveRootRefused(raw json.RawMessage) bool {
	for _, k := range rootRefused {
		if bytes.Contains(raw, []byte(`"`+k+`"`)) {
			return true
		}
	}
	return false
}

// flattenRoot does forProviders' work; false when the root holds none of
// rootRefused.
func flattenRoot(raw json.RawMessage) (json.RawMessage, bool) {
	members, ok := objectMembers(raw)
	if !ok {
		return raw, false
	}
	refs := newRawDoc(raw)
	var kept []member
	var props []member    // from the alternatives, in order (addAlternative)
	var required []string // from allOf
	found := false
	for _, m := range members {
		if !slices.Contains(rootRefused, m.key) {
			kept = append(kept, m)
			continue
		}
		found = true
		switch m.key {
		case "anyOf", "oneOf", "allOf":
			var list []json.RawMessage
			if json.Unmarshal(m.val, &list) != nil {
				continue
			}
			for _, alt := range list {
				for _, sch := range refChain(refs, alt) {
					var s struct {
						Properties json.RawMessage `json:"properties"`
						Required   []string        `json:"required"`
					}
					if json.Unmarshal(sch, &s) != nil {
						continue
					}
					if p, ok := objectMembers(s.Properties); ok {
						for _, m := range p {
							props = addAlternative(props, m)
						}
					}
					if m.key == "allOf" {
						required = append(required, s.Required...)
					}
				}
			}
		}
	}
	if !found {
		return raw, false
	}
	if len(props) > 0 {
		kept = mergeMember(kept, "properties", func(val json.RawMessage) json.RawMessage {
			own, _ := objectMembers(val)
			for _, p := range props {
				if !slices.ContainsFunc(own, func(o member) bool { return o.key == p.key }) {
					own = append(own, member{key: p.key, val: anyOfSchemas(p.val)})
				}
			}
			return writeMembers(own)
		})
	}
	if len(required) > 0 {
		kept = mergeMember(kept, "required", func(val json.RawMessage) json.RawMessage {
			var own []string
			_ = json.Unmarshal(val, &own)
			for _, r := range required {
				if !slices.Contains(own, r) {
					own = append(own, r)
				}
			}
			b, _ := json.Marshal(own)
			return b
		})
	}
	return writeMembers(kept), true
}

// addAlternative adds to props (whose values are JSON arrays of the distinct
// schemas given for the name) property m of an alternative. Alternatives declare a
// property differently, a discriminated union's tag most of all ({"const":"create"},
// {"const":"delete"}): the model is shown any of them, not the first alone.
func addAlternative(props []member, m member) []member {
	var compact bytes.Buffer
	if json.Compact(&compact, m.val) != nil {
		return props
	}
	schema := json.RawMessage(compact.Bytes())
	for i, p := range props {
		if p.key != m.key {
			continue
		}
		var list []json.RawMessage
		_ = json.Unmarshal(p.val, &list)
		if !slices.ContainsFunc(list, func(s json.RawMessage) bool { return bytes.Equal(s, schema) }) {
			list = append(list, schema)
			props[i].val, _ = json.Marshal(list)
		}
		return props
	}
	list, _ := json.Marshal([]json.RawMessage{schema})
	return append(props, member{key: m.key, val: list})
}

// anyOfSchemas is the property schema for a JSON array of schemas (addAlternative):
// the one, or an anyOf of them.
func anyOfSchemas(list json.RawMessage) json.RawMessage {
	var schemas []json.RawMessage
	_ = json.Unmarshal(list, &schemas)
	if len(schemas) == 1 {
		return schemas[0]
	}
	return writeMembers([]member{{key: "anyOf", val: list}})
}

// mergeMember replaces the value of members' key with merge of it (nil when there
// is none, then added at the end).
func mergeMember(members []member, key string, merge func(json.RawMessage) json.RawMessage) []member {
	for i, m := range members {
		if m.key == key {
			members[i].val = merge(m.val)
			return members
		}
	}
	return append(members, member{key: key, val: merge(nil)})
}

// rootDeclared is the property names a parameters schema (decoded) declares at its
// root: its properties, and those of the alternatives of a root anyOf, oneOf or
// allOf, inline or named by a local $ref ("#/$defs/…", "#/definitions/…"), which
// forProviders shows the model as the root's own. A tool whose server declares
// "tenant" in one of its alternatives takes it as a parameter, and stripIdentity
// must leave it.
func rootDeclared(doc map[string]any) map[string]bool {
	declared := map[string]bool{}
	add := func(schema any) {
		obj, _ := schema.(map[string]any)
		props, _ := obj["properties"].(map[string]any)
		for k := range props {
			declared[k] = true
		}
	}
	add(doc)
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		alts, _ := doc[key].([]any)
		for _, alt := range alts {
			// The alternative, then what its $ref names, and so on.
			for range maxRefHops {
				add(alt)
				obj, _ := alt.(map[string]any)
				ref, _ := obj["$ref"].(string)
				var ok bool
				if alt, ok = localRef(ref, stepDecoded, any(doc)); !ok {
					break
				}
			}
		}
	}
	return declared
}

// maxRefHops bounds the $refs followed from one root alternative ($ref to $ref …).
const maxRefHops = 8

// localRef resolves ref, a JSON pointer into the schema document ("#/$defs/a",
// "#/definitions/a%20b", "#/$defs/a~1b"), from root, stepping with step; false for
// a ref that is empty, the whole document, elsewhere (another document) or leads
// nowhere.
func localRef[T any](ref string, step func(key string, at T) (T, bool), root T) (T, bool) {
	var zero T
	if !strings.HasPrefix(ref, "#/") {
		return zero, false
	}
	at := root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return zero, false
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var ok bool
		if at, ok = step(tok, at); !ok {
			return zero, false
		}
	}
	return at, true
}

// refChain is alt (a raw alternative of the root schema doc) followed by the
// schemas its local $refs name, in order, up to maxRefHops.
func refChain(doc *rawDoc, alt json.RawMessage) []json.RawMessage {
	chain := []json.RawMessage{alt}
	for len(chain) < maxRefHops {
		var s struct {
			Ref string `json:"$ref"`
		}
		if json.Unmarshal(alt, &s) != nil || s.Ref == "" {
			break
		}
		var ok bool
		if alt, ok = doc.resolve(s.Ref); !ok {
			break
		}
		chain = append(chain, alt)
	}
	return chain
}

// rawDoc resolves local $refs in one raw schema, decoding each object or array a
// ref steps through once: a root with thousands of alternatives, each a $ref into
// the root's own list, decoded the whole schema again at every step of every one
// (2,000 of them, 42 KB, took 19 s to list).
type rawDoc struct {
	root    json.RawMessage
	objects map[string]map[string]json.RawMessage // by the pointer that reached them
	lists   map[string][]json.RawMessage
}

func newRawDoc(root json.RawMessage) *rawDoc {
	return &rawDoc{root: root, objects: map[string]map[string]json.RawMessage{}, lists: map[string][]json.RawMessage{}}
}

// rawAt is a place in a rawDoc: the value and the pointer (its keys joined by NUL) to it.
type rawAt struct {
	ptr string
	val json.RawMessage
}

func (d *rawDoc) resolve(ref string) (json.RawMessage, bool) {
	at, ok := localRef(ref, d.step, rawAt{val: d.root})
	return at.val, ok
}

// step is a JSON pointer's step into the raw document.
func (d *rawDoc) step(key string, at rawAt) (rawAt, bool) {
	next := at.ptr + "\x00" + key
	obj, isObj := d.objects[at.ptr]
	list, isList := d.lists[at.ptr]
	if !isObj && !isList {
		if members, ok := objectMembers(at.val); ok {
			obj, isObj = make(map[string]json.RawMessage, len(members)), true
			for _, m := range members {
				if _, dup := obj[m.key]; !dup { // the first, as a linear search finds
					obj[m.key] = m.val
				}
			}
			d.objects[at.ptr] = obj
		} else if json.Unmarshal(at.val, &list) == nil {
			isList = true
			d.lists[at.ptr] = list
		}
	}
	switch {
	case isObj:
		v, ok := obj[key]
		return rawAt{ptr: next, val: v}, ok
	case isList:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(list) {
			return rawAt{ptr: next, val: list[i]}, true
		}
	}
	return rawAt{}, false
}

// stepDecoded is a JSON pointer's step into a decoded document.
func stepDecoded(key string, at any) (any, bool) {
	switch v := at.(type) {
	case map[string]any:
		next, ok := v[key]
		return next, ok
	case []any:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(v) {
			return v[i], true
		}
	}
	return nil, false
}

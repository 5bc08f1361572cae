package openapi

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Bounds of schema inlining: providers want self-contained schemas, and a recursive or
// hostile document must not make one grow without end.
const (
	// maxRefDepth is how many $refs deep a schema is expanded; deeper, and any ref
	// already being expanded (recursion), becomes an open schema with a note.
	maxRefDepth = 8
	// maxSchemaNodes caps the objects and arrays of one tool's schema.
	maxSchemaNodes = 20000
)

// inliner replaces local $refs by what they point at, converting OpenAPI 3.0 schema
// dialect (nullable, boolean exclusive bounds) to JSON Schema on the way. It does so
// in 3.1 documents too: written there, those keywords are invalid (a boolean bound) or
// ignored (nullable), yet documents labelled 3.1 carry them (the OpenAI API's does), and
// their 3.0 meaning is the only one they can have.
type inliner struct {
	root any // the whole document, as generic JSON
	// files reads the other files a reference leads to; relative references in one
	// of them are relative to it.
	files *specFiles
	nodes int
	notes []string
	md    map[string]string // descMarkdown's memo
}

// dataKeys hold values, not schemas: refs inside them are data.
var dataKeys = map[string]bool{"enum": true, "const": true, "default": true, "examples": true, "example": true}

// dropKeys mean nothing to a JSON Schema validator or a model, or nothing once the
// references are inlined: an anchor copied into every place its schema is used would
// name several schemas (a compile error), and 2019-09's "$recursiveAnchor: true" is not
// even valid in 2020-12, OpenAPI 3.1's dialect (the OpenAI API's own document has it).
var dropKeys = map[string]bool{"example": true, "xml": true, "externalDocs": true, "discriminator": true, "$schema": true, "$id": true,
	"$anchor": true, "$dynamicAnchor": true, "$recursiveAnchor": true, "$comment": true, "$vocabulary": true}

// anchorRefs point at anchors, which inlining drops: what they mean is recursion the
// inlined schema no longer has, so they become open schemas like a recursive $ref.
var anchorRefs = []string{"$dynamicRef", "$recursiveRef"}

// note records a warning once: a schema that hits a bound usually hits it many times.
func (in *inliner) note(format string, args ...any) {
	if n := fmt.Sprintf(format, args...); len(in.notes) < 20 && !slices.Contains(in.notes, n) {
		in.notes = append(in.notes, n)
	}
}

// inline returns a copy of v with refs expanded. stack holds the refs being expanded,
// as absolute locations (file or URL and fragment); the last one's file is the one v
// is in, which relative refs in v are relative to.
func (in *inliner) inline(v any, stack []string) any {
	switch x := v.(type) {
	case map[string]any:
		in.nodes++
		if in.nodes > maxSchemaNodes {
			return map[string]any{"description": "(schema cut: too large)"}
		}
		if ref, ok := x["$ref"].(string); ok {
			return in.ref(ref, x, stack)
		}
		for _, k := range anchorRefs {
			if ref, ok := x[k].(string); ok {
				in.note("%s %s is left open", k, ref)
				return map[string]any{"description": fmt.Sprintf("(recursive reference, not expanded: %s)", ref)}
			}
		}
		out := make(map[string]any, len(x))
		var readOnly []string
		for k, val := range x {
			switch {
			case dropKeys[k] || strings.HasPrefix(k, "x-"):
				continue
			case dataKeys[k]:
				out[k] = val
			case k == "description":
				if d, ok := val.(string); ok {
					val = descMarkdown(d, in.md)
				}
				out[k] = val
			case k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" || k == "dependentSchemas":
				// Keys are names, values schemas.
				if m, ok := val.(map[string]any); ok {
					props := make(map[string]any, len(m))
					for name, s := range m {
						ps := in.inline(s, stack)
						if k == "properties" && isReadOnly(ps) {
							readOnly = append(readOnly, name)
							continue
						}
						props[name] = ps
					}
					out[k] = props
				} else {
					out[k] = val
				}
			default:
				out[k] = in.inline(val, stack)
			}
		}
		dropRequired(out, readOnly)
		nullable := convert30(out)
		keepDiscriminatorValues(x, out)
		oneOfAsAnyOf(out)
		if nullable {
			nullComposition(out)
		}
		return out
	case []any:
		in.nodes++
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = in.inline(e, stack)
		}
		return out
	}
	return v
}

func (in *inliner) ref(ref string, obj map[string]any, stack []string) any {
	open := func(why string) any {
		return map[string]any{"description": fmt.Sprintf("(%s: %s)", why, ref)}
	}
	doc, key, err := in.target(ref, stack)
	if err != nil {
		in.note("%v", err)
		if errors.As(err, new(*errRefused)) {
			return open("reference refused")
		}
		return open("unresolvable reference")
	}
	for _, s := range stack {
		if s == key {
			return open("recursive reference, not expanded further")
		}
	}
	if len(stack) >= maxRefDepth {
		in.note("references nested deeper than %d are left open", maxRefDepth)
		return open("reference nested too deep, not expanded")
	}
	target, err := pointer(doc, "#"+fragmentOf(key))
	if err != nil {
		in.note("%v", err)
		return open("unresolvable reference")
	}
	resolved := in.inline(target, append(stack, key))
	if len(obj) == 1 {
		return resolved
	}
	// 3.1 allows keywords beside $ref; they apply together with the target.
	siblings := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "$ref" {
			siblings[k] = v
		}
	}
	sib, _ := in.inline(siblings, stack).(map[string]any)
	rm, ok := resolved.(map[string]any)
	if !ok {
		return resolved
	}
	merged := make(map[string]any, len(rm)+len(sib))
	for k, v := range rm {
		merged[k] = v
	}
	for k, v := range sib {
		merged[k] = v
	}
	if n, _ := obj["nullable"].(bool); n && obj["type"] == nil {
		// nullable beside a $ref (3.0 ignores keywords there, yet generators write
		// it meaning "this or null"): the target, or null.
		merged["nullable"] = true
		if convert30(merged) {
			nullComposition(merged)
			if !allowsNull(merged) {
				merged = orNull(merged)
			}
		}
	}
	return merged
}

// nullComposition lets s, a schema marked nullable, take null: its allOf and anyOf (a
// oneOf is an anyOf by now) move into one alternative of an anyOf whose other is null.
// 3.0.3 reads nullable without a type as nothing, and with a type as adding null to
// the type only, but that is how generators write a nullable reference (nullable
// beside allOf: [$ref], with or without type: object), and the APIs take null.
func nullComposition(s map[string]any) {
	rest := map[string]any{}
	for _, k := range []string{"allOf", "anyOf"} {
		if v, ok := s[k]; ok {
			rest[k] = v
			delete(s, k)
		}
	}
	if len(rest) > 0 {
		s["anyOf"] = []any{map[string]any{"type": "null"}, rest}
	}
}

// allowsNull reports whether s says outright that null is allowed: a type naming null,
// or an anyOf with a null alternative.
func allowsNull(s map[string]any) bool {
	if t, ok := s["type"].([]any); ok && slices.Contains(t, any("null")) {
		return true
	}
	alts, _ := s["anyOf"].([]any)
	for _, a := range alts {
		if m, ok := a.(map[string]any); ok && m["type"] == "null" {
			return true
		}
	}
	return false
}

// orNull is s, or null: s's description stays on the outside, for the model.
func orNull(s map[string]any) map[string]any {
	inner := make(map[string]any, len(s))
	out := map[string]any{}
	for k, v := range s {
		if k == "description" || k == "title" {
			out[k] = v
			continue
		}
		inner[k] = v
	}
	out["anyOf"] = []any{map[string]any{"type": "null"}, inner}
	return out
}

// target finds the document ref leads to, written in the document of the innermost
// ref being expanded (the main one when none is), and the absolute key of ref.
func (in *inliner) target(ref string, stack []string) (doc any, key string, err error) {
	if in.files == nil {
		if !strings.HasPrefix(ref, "#") {
			return nil, "", fmt.Errorf("reference %s is not in the document and is left open", ref)
		}
		return in.root, ref, nil
	}
	base := in.files.root
	if len(stack) > 0 {
		if base, err = url.Parse(stack[len(stack)-1]); err != nil {
			return nil, "", err
		}
	}
	u, err := in.files.resolve(base, ref)
	if err != nil {
		return nil, "", err
	}
	if in.files.isRoot(u) {
		return in.root, in.files.rootKey + "#" + u.EscapedFragment(), nil
	}
	doc, docKey, err := in.files.json(u)
	if err != nil {
		return nil, "", err
	}
	return doc, docKey + "#" + u.EscapedFragment(), nil
}

// fragmentOf is the escaped fragment of an absolute key, "" without one.
func fragmentOf(key string) string {
	_, frag, _ := strings.Cut(key, "#")
	return frag
}

// pointer resolves a local JSON pointer reference (#/components/schemas/Pet).
func pointer(root any, ref string) (any, error) {
	frag := strings.TrimPrefix(ref, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return root, nil
	}
	cur := root
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("reference %s: %q not found", ref, tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("reference %s: bad index %q", ref, tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("reference %s: cannot descend into %q", ref, tok)
		}
	}
	return cur, nil
}

// isReadOnly reports whether a property's schema is marked readOnly, itself or in one
// of its allOf parts. The inliner expands request schemas only (parameters and
// bodies), and OpenAPI says a read-only property is not sent in a request: it is
// left out of the tool's parameters, where it would only lengthen the prompt and
// invite the model to send it (Asana's task has two dozen: gid, created_by, …).
func isReadOnly(schema any) bool {
	s, ok := schema.(map[string]any)
	if !ok {
		return false
	}
	if ro, _ := s["readOnly"].(bool); ro {
		return true
	}
	parts, _ := s["allOf"].([]any)
	if slices.ContainsFunc(parts, isReadOnly) {
		return true
	}
	// A nullable read-only schema, as nullComposition and orNull write it: null or
	// something read-only.
	alts, _ := s["anyOf"].([]any)
	others := 0
	for _, a := range alts {
		if m, ok := a.(map[string]any); ok && m["type"] == "null" && len(m) == 1 {
			continue
		}
		if !isReadOnly(a) {
			return false
		}
		others++
	}
	return others > 0 && len(alts) > others
}

// dropRequired removes names from s's required list: a read-only property's
// "required" applies to responses only.
func dropRequired(s map[string]any, names []string) {
	req, ok := s["required"].([]any)
	if !ok || len(names) == 0 {
		return
	}
	kept := make([]any, 0, len(req))
	for _, r := range req {
		if n, ok := r.(string); !ok || !slices.Contains(names, n) {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		delete(s, "required")
		return
	}
	s["required"] = kept
}

// convert30 rewrites OpenAPI 3.0 schema keywords to their JSON Schema meaning. It
// reports a schema marked nullable: its type says it takes null, but its allOf or
// anyOf may not, and a schema without a type cannot say it by its type (see
// nullComposition).
func convert30(s map[string]any) (nullable bool) {
	if n, ok := s["nullable"].(bool); ok {
		delete(s, "nullable")
		nullable = n
		if n {
			switch t := s["type"].(type) {
			case string:
				s["type"] = []any{t, "null"}
			case []any:
				if !slices.Contains(t, any("null")) {
					s["type"] = append(append([]any{}, t...), "null")
				}
			}
			if e, ok := s["enum"].([]any); ok {
				s["enum"] = append(append([]any{}, e...), nil)
			}
		}
	}
	for _, k := range []string{"Minimum", "Maximum"} {
		excl, bound := "exclusive"+k, strings.ToLower(k)
		if b, ok := s[excl].(bool); ok {
			delete(s, excl)
			if v, has := s[bound]; b && has {
				s[excl] = v
				delete(s, bound)
			}
		}
	}
	return nullable
}

// keepDiscriminatorValues writes into each alternative of raw's oneOf or anyOf (out is
// raw inlined) the values raw's discriminator mapping gives it: the discriminator is
// dropped, and its mapping alone said that a Cat's petType is "cat". An alternative's
// tag property is then that const (an enum when the mapping gives it several values),
// so the model sends what the API tells apart, and a call with another value is
// refused before it is sent. Alternatives the mapping does not name are left as they
// are.
func keepDiscriminatorValues(raw, out map[string]any) {
	d, _ := raw["discriminator"].(map[string]any)
	tag, _ := d["propertyName"].(string)
	if tag == "" {
		return
	}
	mapping, _ := d["mapping"].(map[string]any)
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, _ := raw[key].([]any)
		done, _ := out[key].([]any)
		if len(alts) != len(done) {
			continue
		}
		for i, a := range alts {
			am, _ := a.(map[string]any)
			ref, _ := am["$ref"].(string)
			alt, ok := done[i].(map[string]any)
			if ref == "" || !ok {
				continue
			}
			var values []any
			for _, v := range slices.Sorted(maps.Keys(mapping)) {
				// A mapping names a schema by reference or, for one of the document's
				// components, by its name alone.
				if t, _ := mapping[v].(string); t == ref || (!strings.Contains(t, "/") && strings.HasSuffix(ref, "/schemas/"+t)) {
					values = append(values, v)
				}
			}
			if len(values) == 0 {
				// The specification's default, the schema's name, is not used: real
				// documents leave the mapping out where their alternatives say the
				// values themselves (OpenAI's input items, whose type is "message",
				// not "EasyInputMessage"), and every call would be refused.
				continue
			}
			alt = maps.Clone(alt)
			props, _ := alt["properties"].(map[string]any)
			props = maps.Clone(props)
			if props == nil {
				props = map[string]any{}
			}
			p, _ := props[tag].(map[string]any)
			p = maps.Clone(p)
			if p == nil {
				p = map[string]any{}
			}
			if len(values) == 1 {
				p["const"] = values[0]
			} else {
				p["enum"] = values
			}
			props[tag], alt["properties"] = p, props
			done[i] = alt
		}
	}
}

// oneOfAsAnyOf makes a schema's oneOf an anyOf. OpenAPI documents write oneOf for
// "one of these shapes", told apart by a discriminator (dropped: it is no JSON
// Schema), not for JSON Schema's "exactly one": OpenAI's input items have two shapes
// that both fit a plain user message, so every such createResponse call was refused
// before it was sent. The API still checks what it takes. A schema with an anyOf of
// its own keeps it, and the oneOf's alternatives go into its allOf as another anyOf.
func oneOfAsAnyOf(s map[string]any) {
	one, ok := s["oneOf"]
	if !ok {
		return
	}
	delete(s, "oneOf")
	if _, both := s["anyOf"]; !both {
		s["anyOf"] = one
		return
	}
	all, _ := s["allOf"].([]any)
	s["allOf"] = append(all, map[string]any{"anyOf": one})
}

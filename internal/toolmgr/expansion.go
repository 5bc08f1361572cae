package toolmgr

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxSchemaExpansion bounds how many subschemas one value of a tool's arguments can
// be checked against. allOf, anyOf, oneOf, not, if/then/else, dependentSchemas,
// dependencies and every kind of reference apply to the same value, so definitions
// that nest them (each level an anyOf of the next, twice) make the validator's work
// and its error report grow exponentially with the depth: 20 levels took 9 s of CPU
// to reject one call's arguments, 30 would take hours, with no deadline to stop it
// (arguments are checked before the call runs). Tools of MCP servers and OpenAPI
// documents bring schemas the operator did not write; ordinary ones apply a few
// dozen subschemas to a value.
const maxSchemaExpansion = 10000

// checkExpansion reports a compiled schema under which some value would be checked
// against more than maxSchemaExpansion subschemas. It works on what the compiler
// resolved, so that no way of referring ($ref by JSON pointer, anchor or an embedded
// resource's $id, $dynamicRef, $recursiveRef) escapes it. Every subschema is
// measured, those that apply to parts of the value (properties, items …) each on
// its own.
func checkExpansion(root *jsonschema.Schema) error {
	e := &expansion{counts: map[*jsonschema.Schema]int{}, busy: map[*jsonschema.Schema]bool{}}
	e.collect(root)
	for _, s := range e.all {
		if e.count(s) > maxSchemaExpansion {
			return fmt.Errorf("it would check one value against more than %d subschemas (anyOf, oneOf, allOf or references nested level after level), which makes checking arguments take exponential time", maxSchemaExpansion)
		}
	}
	return nil
}

type expansion struct {
	all       []*jsonschema.Schema
	seen      map[*jsonschema.Schema]bool
	dynamic   map[string][]*jsonschema.Schema // $dynamicAnchor → the schemas declaring it
	recursive []*jsonschema.Schema            // the schemas with $recursiveAnchor
	counts    map[*jsonschema.Schema]int
	busy      map[*jsonschema.Schema]bool // being counted (a cycle applies at most once more)
}

// collect lists every schema reachable from s, and the dynamic anchors among them.
func (e *expansion) collect(root *jsonschema.Schema) {
	e.seen = map[*jsonschema.Schema]bool{}
	e.dynamic = map[string][]*jsonschema.Schema{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || e.seen[s] {
			continue
		}
		e.seen[s] = true
		e.all = append(e.all, s)
		if s.DynamicAnchor != "" {
			e.dynamic[s.DynamicAnchor] = append(e.dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			e.recursive = append(e.recursive, s)
		}
		stack = append(stack, inPlace(s)...)
		stack = append(stack, s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
		stack = append(stack, s.PrefixItems...)
		for _, p := range s.Properties {
			stack = append(stack, p)
		}
		for _, p := range s.PatternProperties {
			stack = append(stack, p)
		}
		for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
			switch v := v.(type) {
			case *jsonschema.Schema:
				stack = append(stack, v)
			case []*jsonschema.Schema:
				stack = append(stack, v...)
			}
		}
	}
}

// inPlace are the subschemas s applies to the value itself (references by their
// static target).
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return out
}

// count is how many subschemas s applies to one value, itself included, capped
// just above maxSchemaExpansion.
func (e *expansion) count(s *jsonschema.Schema) int {
	if s == nil || e.busy[s] {
		return 0
	}
	if n, ok := e.counts[s]; ok {
		return n
	}
	e.busy[s] = true
	total := 1
	add := func(n int) { total = min(total+n, maxSchemaExpansion+1) }
	for _, sub := range inPlace(s) {
		add(e.count(sub))
	}
	// A dynamic reference may land on any schema declaring its anchor (which one
	// depends on the path the validator took): the largest of them is counted.
	if s.DynamicRef != nil && s.DynamicRef.Anchor != "" {
		add(e.largest(e.dynamic[s.DynamicRef.Anchor]))
	}
	if s.RecursiveRef != nil && s.RecursiveRef.RecursiveAnchor {
		add(e.largest(e.recursive))
	}
	delete(e.busy, s)
	e.counts[s] = total
	return total
}

func (e *expansion) largest(ss []*jsonschema.Schema) int {
	n := 0
	for _, s := range ss {
		n = max(n, e.count(s))
	}
	return n
}

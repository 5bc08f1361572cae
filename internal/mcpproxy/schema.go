package mcpproxy

import (
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// maxSchemaExpansion bounds how many subschemas one value of a tool's arguments can
// be checked against. allOf, anyOf, oneOf, not, if/then/else, dependentSchemas and
// $ref all apply to the same value, so $defs that nest them (each level an anyOf of
// the next, twice) make the validator's work and its error report grow
// exponentially with the depth: 20 levels took 9 s of CPU to reject one call's
// arguments, 30 would take hours, with no deadline to stop it (arguments are checked
// before the call runs). Upstream servers write their schemas; ordinary ones apply a
// few dozen subschemas to a value.
const maxSchemaExpansion = 10000

// inPlace are the keywords whose subschemas apply to the value itself.
var inPlace = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"if": true, "then": true, "else": true, "dependentSchemas": true}

// checkExpansion reports a schema under which some value would be checked against
// more than maxSchemaExpansion subschemas. Every subschema is measured, the ones that
// apply to parts of the value (properties, items …) each on its own.
func checkExpansion(root any) error {
	e := expansion{root: root, memo: map[string]int{}, busy: map[string]bool{}, nodes: map[uintptr]int{}}
	var walk func(node any) error
	walk = func(node any) error {
		switch n := node.(type) {
		case map[string]any:
			if c := e.count(n); c > maxSchemaExpansion {
				return fmt.Errorf("its input schema applies more than %d subschemas to one value (nested anyOf, oneOf, allOf or $ref)", maxSchemaExpansion)
			}
			for _, v := range n {
				if err := walk(v); err != nil {
					return err
				}
			}
		case []any:
			for _, v := range n {
				if err := walk(v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root)
}

type expansion struct {
	root  any
	memo  map[string]int  // $ref → its count
	busy  map[string]bool // $refs being counted (a cycle applies at most once more)
	nodes map[uintptr]int // schema object → its count, so that each is counted once
}

// count is how many subschemas node applies to one value, itself included, capped
// just above maxSchemaExpansion.
func (e *expansion) count(node map[string]any) int {
	id := reflect.ValueOf(node).Pointer()
	if n, ok := e.nodes[id]; ok {
		return n
	}
	total := 1
	defer func() { e.nodes[id] = total }()
	add := func(n int) { total = min(total+n, maxSchemaExpansion+1) }
	for k, v := range node {
		switch {
		case k == "$ref":
			if ref, ok := v.(string); ok {
				add(e.ref(ref))
			}
		case inPlace[k]:
			switch sub := v.(type) {
			case map[string]any:
				if k == "dependentSchemas" {
					for _, s := range sub {
						if m, ok := s.(map[string]any); ok {
							add(e.count(m))
						}
					}
				} else {
					add(e.count(sub))
				}
			case []any:
				for _, s := range sub {
					if m, ok := s.(map[string]any); ok {
						add(e.count(m))
					}
				}
			}
		}
	}
	return total
}

// ref counts a local reference (#/…); others do not compile anyway.
func (e *expansion) ref(ref string) int {
	if n, ok := e.memo[ref]; ok {
		return n
	}
	if e.busy[ref] || !strings.HasPrefix(ref, "#") {
		return 1
	}
	target, ok := pointer(e.root, ref[1:]).(map[string]any)
	if !ok {
		return 1
	}
	e.busy[ref] = true
	n := e.count(target)
	delete(e.busy, ref)
	e.memo[ref] = n
	return n
}

// pointer resolves a JSON pointer (URL-escaped, as in a $ref) in doc, nil if absent.
func pointer(doc any, ptr string) any {
	if p, err := url.PathUnescape(ptr); err == nil {
		ptr = p
	}
	if ptr == "" {
		return doc
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil // an anchor: not followed
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := doc.(type) {
		case map[string]any:
			doc = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			doc = n[i]
		default:
			return nil
		}
	}
	return doc
}

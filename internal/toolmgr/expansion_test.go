package toolmgr

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// schemaBomb is a parameters schema whose property "a" refers, as refer says, to
// definition 0 of depth levels, each an anyOf of the next twice: a value that
// matches none is checked 2^depth times. refer(i) is the reference to level i, and
// anchor(i) what level i declares so that it can be referred to that way.
func schemaBomb(depth int, head string, refer func(i int) string, anchor func(i int) string) string {
	var defs []string
	for i := range depth {
		defs = append(defs, `"L`+strconv.Itoa(i)+`":{`+anchor(i)+`"anyOf":[{`+refer(i+1)+`},{`+refer(i+1)+`}]}`)
	}
	defs = append(defs, `"L`+strconv.Itoa(depth)+`":{`+anchor(depth)+`"type":"string"}`)
	return `{` + head + `"type":"object","properties":{"a":{` + refer(0) + `}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// TestRegisterRefusesSchemaBombs: a parameters schema under which one value would
// be checked against more than maxSchemaExpansion subschemas is refused, whatever
// way its levels refer to each other: a JSON pointer, an anchor, an embedded
// resource's $id, $dynamicRef, $recursiveRef, or draft-07 dependencies. Checking one
// call's arguments against 30 such levels takes hours of CPU with no deadline.
// Recursive schemas that branch only into parts of the value are fine.
func TestRegisterRefusesSchemaBombs(t *testing.T) {
	t.Parallel()
	none := func(int) string { return "" }
	const depth = 30
	bombs := map[string]string{
		"pointer":         schemaBomb(depth, "", func(i int) string { return `"$ref":"#/$defs/L` + strconv.Itoa(i) + `"` }, none),
		"escaped pointer": schemaBomb(depth, "", func(i int) string { return `"$ref":"#/%24defs/L` + strconv.Itoa(i) + `"` }, none),
		"anchor": schemaBomb(depth, "", func(i int) string { return `"$ref":"#a` + strconv.Itoa(i) + `"` },
			func(i int) string { return `"$anchor":"a` + strconv.Itoa(i) + `",` }),
		"embedded $id": schemaBomb(depth, `"$id":"https://example.com/root.json",`, func(i int) string { return `"$ref":"l` + strconv.Itoa(i) + `.json"` },
			func(i int) string { return `"$id":"l` + strconv.Itoa(i) + `.json",` }),
		"$dynamicRef": schemaBomb(depth, "", func(i int) string { return `"$dynamicRef":"#/$defs/L` + strconv.Itoa(i) + `"` }, none),
		"$dynamicRef to an anchor": schemaBomb(depth, "", func(i int) string { return `"$dynamicRef":"#d` + strconv.Itoa(i) + `"` },
			func(i int) string { return `"$dynamicAnchor":"d` + strconv.Itoa(i) + `",` }),
	}
	var deps []string
	for i := range depth {
		next := `{"$ref":"#/definitions/L` + strconv.Itoa(i+1) + `"}`
		deps = append(deps, `"L`+strconv.Itoa(i)+`":{"dependencies":{"x":{"anyOf":[`+next+`,`+next+`]}}}`)
	}
	deps = append(deps, `"L`+strconv.Itoa(depth)+`":{"required":["y"]}`)
	bombs["draft-07 dependencies"] = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/definitions/L0"}},"definitions":{` +
		strings.Join(deps, ",") + `}}`

	for name, schema := range bombs {
		t.Run(name, func(t *testing.T) {
			if !json.Valid([]byte(schema)) {
				t.Fatalf("test schema is not JSON: %s", schema)
			}
			err := New().Register(&fnTool{spec: tool.Spec{Name: "bomb", Description: "d", Parameters: json.RawMessage(schema)}})
			if err == nil || !strings.Contains(err.Error(), "subschemas") {
				t.Errorf("Register = %v, want a refusal naming the subschemas", err)
			}
		})
	}

	fine := map[string]string{
		"tree": `{"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{` +
			`"children":{"type":"array","items":{"$ref":"#/$defs/node"}},"v":{"anyOf":[{"type":"string"},{"type":"number"}]}}}}}`,
		"self": `{"type":"object","properties":{"a":{"$ref":"#"}}}`,
		"shallow anchors": schemaBomb(5, "", func(i int) string { return `"$ref":"#a` + strconv.Itoa(i) + `"` },
			func(i int) string { return `"$anchor":"a` + strconv.Itoa(i) + `",` }),
	}
	for name, schema := range fine {
		if err := New().Register(&fnTool{spec: tool.Spec{Name: "ok", Description: "d", Parameters: json.RawMessage(schema)}}); err != nil {
			t.Errorf("%s: Register = %v", name, err)
		}
	}
}

// TestRegisterRefusesDeepSchemas: a parameters or output schema nested more than
// maxSchemaDepth levels is refused before it is compiled. An MCP server
// listing a tool whose inputSchema nested 3,000 levels kept the daemon compiling it
// (checking it against the meta-schema) for minutes with hundreds of MiB, its
// connection "connecting"; and tool listings would carry it to clients whose JSON
// decoders stop short of 1,000 levels. A schema at the bound registers.
func TestRegisterRefusesDeepSchemas(t *testing.T) {
	t.Parallel()
	nest := func(levels int) string { // JSON depth 2*levels+1
		return strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"object"}` + strings.Repeat("}}", levels)
	}
	deep, atBound := nest(maxSchemaDepth/2), nest(maxSchemaDepth/2-1)
	if err := New().Register(&fnTool{spec: tool.Spec{Name: "deep", Description: "d", Parameters: json.RawMessage(deep)}}); err == nil {
		t.Fatal("parameters 129 levels deep registered")
	}
	err := New().Register(&fnTool{spec: tool.Spec{Name: "deep", Description: "d", Parameters: json.RawMessage(nest(3000))}})
	if err == nil || !strings.Contains(err.Error(), "more than 128 levels deep") {
		t.Fatalf("parameters 6,001 levels deep: Register = %v, want a refusal naming the depth", err)
	}
	if err := CheckOutputSchema(json.RawMessage(deep)); err == nil || !strings.Contains(err.Error(), "levels deep") {
		t.Fatalf("output schema 129 levels deep: %v", err)
	}
	if err := New().Register(&fnTool{spec: tool.Spec{Name: "ok", Description: "d", Parameters: json.RawMessage(atBound), OutputSchema: json.RawMessage(atBound)}}); err != nil {
		t.Fatalf("schemas 127 levels deep: %v", err)
	}
}

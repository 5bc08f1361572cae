package openapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// validateHead starts each document of TestValidateDocAsKin; components follow.
const validateHead = `openapi: 3.0.3
info: {title: v, version: "1"}
servers: [{url: "http://127.0.0.1:1"}]
paths:
  /items/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {$ref: "#/components/schemas/Id"}}
    get:
      operationId: getItem
      parameters:
        - $ref: "#/components/parameters/Limit"
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties:
                  data: {type: array, items: {$ref: "#/components/schemas/Item"}}
                  one: {$ref: "#/components/schemas/Item"}
                  extra: {type: object, additionalProperties: {$ref: "#/components/schemas/Id"}}
        default: {$ref: "#/components/responses/Err"}
    post:
      operationId: putItem
      requestBody:
        content:
          application/json:
            schema: {allOf: [{$ref: "#/components/schemas/Item"}, {type: object, properties: {note: {type: string}}}]}
      responses:
        "201":
          description: made
          headers:
            X-Id: {schema: {$ref: "#/components/schemas/Id"}}
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Item"}
`

// validateComponents is the valid components section; the cases of
// TestValidateDocAsKin break one thing each.
const validateComponents = `components:
  parameters:
    Limit: {name: limit, in: query, schema: {$ref: "#/components/schemas/Count"}}
  responses:
    Err:
      description: error
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Err"}
  schemas:
    Count: {type: integer}
    Err: {type: object, properties: {message: {type: string}, item: {$ref: "#/components/schemas/Item"}}}
    Id: {type: string}
    Item:
      type: object
      required: [id]
      properties:
        id: {$ref: "#/components/schemas/Id"}
        children: {type: array, items: {$ref: "#/components/schemas/Item"}}
        sizes: {type: array, items: {$ref: "#/components/schemas/Count"}}
`

// TestValidateDocAsKin: validateDoc, which validates each component schema once,
// answers what kin-openapi's (*T).Validate does (the same first error, which is the
// start-up warning), and leaves the document as it was.
func TestValidateDocAsKin(t *testing.T) {
	t.Parallel()
	valid := validateHead + validateComponents
	cases := map[string]string{
		"valid": valid,
		// Item is reached from every operation and from the other components.
		"component schema broken": strings.Replace(valid, "sizes: {type: array, items: {$ref: \"#/components/schemas/Count\"}}",
			"sizes: {type: array}", 1),
		// Err is validated as a component after nothing; Item, before it, reaches it:
		// kin-openapi names the error where Item's walk meets it.
		"broken component reached from one validated before it": strings.Replace(valid,
			"children: {type: array, items: {$ref: \"#/components/schemas/Item\"}}",
			"children: {type: array, items: {$ref: \"#/components/schemas/Item\"}}\n        err: {$ref: \"#/components/schemas/Err\"}", 1) +
			"    Zed: {type: object, required: [a, a], properties: {a: {type: string}}}\n" +
			"    Ab: {type: object, properties: {z: {$ref: \"#/components/schemas/Zed\"}}}\n",
		"inline response schema broken": strings.Replace(valid, "extra: {type: object, additionalProperties: {$ref: \"#/components/schemas/Id\"}}",
			"extra: {type: array}", 1),
		"request body broken":        strings.Replace(valid, "note: {type: string}", "note: {type: string, readOnly: true, writeOnly: true}", 1),
		"component parameter broken": strings.Replace(valid, "Limit: {name: limit, in: query,", "Limit: {name: limit, in: bogus,", 1),
		"component name invalid":     valid + "    \"a b\": {type: string}\n",
		"header broken":              strings.Replace(valid, "X-Id: {schema: {$ref: \"#/components/schemas/Id\"}}", "X-Id: {schema: {type: array}}", 1),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			swapped := checkValidatesAsKin(t, []byte(doc))
			if name == "valid" && swapped == 0 {
				t.Error("no reference to a component schema was emptied: validateDoc costs as much as kin-openapi's Validate")
			}
		})
	}
	// Load gives kin-openapi's first error as its warning.
	path := filepath.Join(t.TempDir(), "doc.yaml")
	if err := os.WriteFile(path, []byte(cases["broken component reached from one validated before it"]), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := Load(context.Background(), Config{Name: "v", Spec: path, Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := "document does not validate: " + firstLine(kinValidate(t, []byte(cases["broken component reached from one validated before it"])).Error())
	if !strings.Contains(want, `"Ab"`) {
		t.Fatalf("the case is not what it is meant to be: kin-openapi says %q", want)
	}
	if len(src.Warnings) != 1 || src.Warnings[0] != want {
		t.Errorf("warnings = %q, want [%q]", src.Warnings, want)
	}
}

func loadDoc(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func kinValidate(t *testing.T, data []byte) error {
	return loadDoc(t, data).Validate(context.Background(), validationOptions()...)
}

// checkValidatesAsKin checks that validateDoc gives kin-openapi's error for data and
// leaves the document as it was; it returns how many references the fast way emptied.
func checkValidatesAsKin(t *testing.T, data []byte) int {
	t.Helper()
	want := kinValidate(t, data)
	doc := loadDoc(t, data)
	before, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := validateDoc(context.Background(), doc)
	t.Logf("kin-openapi: %v", want)
	if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
		t.Errorf("validateDoc: %v\nkin-openapi:  %v", got, want)
	}
	after, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	// A reference marshals as its $ref whatever it leads to: count the references
	// that lead to component schemas too.
	if string(before) != string(after) || emptied(doc) != emptied(loadDoc(t, data)) {
		t.Error("validateDoc changed the document")
	}
	return emptied(doc)
}

// emptied is how many references skipComponents empties in doc.
func emptied(doc *openapi3.T) int {
	s := skipComponents(doc)
	defer s.restore()
	return len(s.swapped)
}

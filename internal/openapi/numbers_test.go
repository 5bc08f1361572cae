package openapi

import (
	"fmt"
	"testing"
)

// TestIntegralNumbersInParameters: Gemini gives every number of a functionCall's
// args as a double, so SDKs hand a backend {"id": 5.0}, which JSON Schema counts as
// an integer; the daemon put it in the URL as written, /pets/5.0, and the API
// answered 404 for a pet that exists. An integral number is written as an integer;
// other numbers stay as they came.
func TestIntegralNumbersInParameters(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	doc := `openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets/{id}:
    get:
      operationId: getPet
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
        - {name: limit, in: query, schema: {type: integer}}
        - {name: ids, in: query, schema: {type: array, items: {type: integer}}}
        - {name: ratio, in: query, schema: {type: number}}
      responses: {"200": {description: ok}}
  /pets:
    post:
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                age: {type: integer}
                weight: {type: number}
                vaccines: {type: array, items: {type: object, properties: {year: {type: integer}}}}
      responses: {"200": {description: ok}}
`
	spec := writeSpec(t, "pets.yaml", doc)
	_, m := load(t, Config{Name: "pets", Spec: spec, BaseURL: srv.URL})
	e := echo(t, call(t, m, "pets__getPet", `{"id":5.0,"limit":1e3,"ids":[1.0,-0,2E0],"ratio":1.50}`))
	if e.Path != "/pets/5" {
		t.Errorf("path %s, want /pets/5", e.Path)
	}
	if got := fmt.Sprint(e.Query["limit"], e.Query["ids"], e.Query["ratio"]); got != "[1000] [1 0 2] [1.50]" {
		t.Errorf("query %v, want limit 1000, ids 1 0 2, ratio 1.50", e.Query)
	}
	// A JSON body the same way: Go's encoding/json, for one, refuses 5.0 for an int.
	e = echo(t, call(t, m, "pets__createPet", `{"age":5.0,"weight":4.25,"vaccines":[{"year":2024.0}]}`))
	if e.Body != `{"age":5,"vaccines":[{"year":2024}],"weight":4.25}` {
		t.Errorf("body %s", e.Body)
	}
}

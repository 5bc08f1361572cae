package openapi

import (
	"fmt"
	"strings"
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

// TestLargeIntegersKeptExactly: an integer just past 2^53 (a 64-bit id, say) rounds
// to 2^53 as a double; the integral-number rewrite turned /pets/9007199254740993
// into /pets/9007199254740992, another pet, and did the same in JSON bodies.
func TestLargeIntegersKeptExactly(t *testing.T) {
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
      responses: {"200": {description: ok}}
  /pets:
    post:
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, properties: {owner: {type: integer}, tag: {type: integer}}}
      responses: {"200": {description: ok}}
`
	_, m := load(t, Config{Name: "pets", Spec: writeSpec(t, "pets.yaml", doc), BaseURL: srv.URL})
	e := echo(t, call(t, m, "pets__getPet", `{"id":9007199254740993}`))
	if e.Path != "/pets/9007199254740993" {
		t.Errorf("path %s, want /pets/9007199254740993", e.Path)
	}
	e = echo(t, call(t, m, "pets__createPet", `{"owner":-9007199254740993,"tag":9007199254740993.0}`))
	if e.Body != `{"owner":-9007199254740993,"tag":9007199254740993.0}` {
		t.Errorf("body %s, want the integers as given", e.Body)
	}
}

// TestIntegralNumbersInJSONParameters: a parameter sent as JSON text (content:
// application/json), and an object in a multipart body (a JSON part), kept 5.0 for
// an integer as Gemini gives it, which APIs decoding into an int refuse, as the
// JSON body already had them written as integers.
func TestIntegralNumbersInJSONParameters(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	doc := `openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets:
    get:
      operationId: findPets
      parameters:
        - name: filter
          in: query
          content:
            application/json:
              schema: {type: object, properties: {limit: {type: integer}, tags: {type: array, items: {type: integer}}}}
      responses: {"200": {description: ok}}
    post:
      operationId: uploadPet
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                meta: {type: object, properties: {age: {type: integer}}}
      responses: {"200": {description: ok}}
`
	_, m := load(t, Config{Name: "pets", Spec: writeSpec(t, "pets.yaml", doc), BaseURL: srv.URL})
	e := echo(t, call(t, m, "pets__findPets", `{"filter":{"limit":5.0,"tags":[1.0,2E0]}}`))
	if got := fmt.Sprint(e.Query["filter"]); got != `[{"limit":5,"tags":[1,2]}]` {
		t.Errorf("filter %s, want {\"limit\":5,\"tags\":[1,2]}", got)
	}
	e = echo(t, call(t, m, "pets__uploadPet", `{"meta":{"age":3.0}}`))
	if !strings.Contains(e.Body, `{"age":3}`) {
		t.Errorf("multipart body %s, want the part {\"age\":3}", e.Body)
	}
}

package openapi

import (
	"encoding/json"
	"testing"
)

// TestNullableComposition: nullable beside an allOf (the usual way 3.0 generators write
// a nullable reference, NSwag and springdoc among them), beside a oneOf, and beside a
// $ref (which 3.0 does not allow, yet documents have) lets a call send null, which the
// API takes; without nullable, null is still refused before anything is sent.
func TestNullableComposition(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := writeSpec(t, "nullable.yaml", `openapi: 3.0.3
info: {title: people, version: "1"}
paths:
  /people:
    post:
      operationId: addPerson
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                name: {type: string}
                manager:
                  nullable: true
                  allOf: [{$ref: "#/components/schemas/Person"}]
                  description: The person's manager, null for none.
                contact:
                  nullable: true
                  oneOf:
                    - {$ref: "#/components/schemas/Email"}
                    - {$ref: "#/components/schemas/Phone"}
                team:
                  $ref: "#/components/schemas/Team"
                  nullable: true
                buddy:
                  allOf: [{$ref: "#/components/schemas/Person"}]
                mentor:
                  type: object
                  nullable: true
                  allOf: [{$ref: "#/components/schemas/Person"}]
      responses:
        "200": {description: ok}
components:
  schemas:
    Person:
      type: object
      required: [name]
      properties: {name: {type: string}}
    Email:
      type: object
      required: [email]
      properties: {email: {type: string}}
    Phone:
      type: object
      required: [phone]
      properties: {phone: {type: string}}
    Team:
      type: string
      enum: [red, blue]
`)
	_, m := load(t, Config{Name: "people", Spec: spec, BaseURL: srv.URL})
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{`{"name":"ada","manager":null,"contact":null,"team":null}`, true},
		{`{"name":"ada","manager":{"name":"bob"},"contact":{"phone":"1"},"team":"red"}`, true},
		{`{"name":"ada","manager":{}}`, false},          // a manager must have a name
		{`{"name":"ada","contact":{"fax":"1"}}`, false}, // neither an email nor a phone
		{`{"name":"ada","team":"green"}`, false},
		{`{"name":"ada","buddy":null}`, false}, // not nullable
		// A type beside nullable and the allOf (as some generators write it).
		{`{"name":"ada","mentor":null}`, true},
		{`{"name":"ada","mentor":{"name":"bob"}}`, true},
		{`{"name":"ada","mentor":{}}`, false},
	} {
		res := call(t, m, "people__addPerson", tc.args)
		if tc.ok {
			e := echo(t, res)
			var sent map[string]any
			if err := json.Unmarshal([]byte(e.Body), &sent); err != nil {
				t.Errorf("%s: body sent %q: %v", tc.args, e.Body, err)
			}
			continue
		}
		if !res.IsError || res.ErrorKind != "invalid_args" {
			t.Errorf("%s: %v %s %s; want invalid_args", tc.args, res.IsError, res.ErrorKind, res.Text())
		}
	}
	if d := prop(schemaOf(t, m, "people__addPerson"), "manager")["description"]; d != "The person's manager, null for none." {
		t.Errorf("manager's description: %v", d)
	}
}

// TestNullableReadOnlyLeftOut: a read-only property is left out of the arguments
// (and of required) when it is nullable too: nullable beside an allOf whose part is
// read-only (a component that only responses carry), and nullable beside a $ref to an
// untyped read-only schema. Moving the allOf into an "or null" alternative must not
// hide that it is read-only, or the model is told to send what the API refuses.
func TestNullableReadOnlyLeftOut(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := writeSpec(t, "nullable-ro.yaml", `openapi: 3.0.3
info: {title: docs, version: "1"}
paths:
  /docs:
    post:
      operationId: addDoc
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [title, audit, stamp, plain]
              properties:
                title: {type: string}
                audit:
                  nullable: true
                  allOf: [{$ref: "#/components/schemas/Audit"}]
                stamp:
                  $ref: "#/components/schemas/Stamp"
                  nullable: true
                plain:
                  allOf: [{$ref: "#/components/schemas/Audit"}]
      responses:
        "200": {description: ok}
components:
  schemas:
    Audit:
      type: object
      readOnly: true
      properties: {by: {type: string}}
    Stamp:
      readOnly: true
      properties: {at: {type: string}}
`)
	_, m := load(t, Config{Name: "docs", Spec: spec, BaseURL: srv.URL})
	s := schemaOf(t, m, "docs__addDoc")
	for _, name := range []string{"plain", "audit", "stamp"} {
		if p := prop(s, name); p != nil {
			t.Errorf("read-only %s offered to the model: %v", name, p)
		}
	}
	if req, _ := s["required"].([]any); len(req) != 1 || req[0] != "title" {
		t.Errorf("required %v, want [title]", s["required"])
	}
	res := call(t, m, "docs__addDoc", `{"title":"t"}`)
	if res.IsError {
		t.Errorf("a call without the read-only properties: %s", res.Text())
	}
}

package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// stylesSpec declares parameters in each serialization style OpenAPI 3 defines
// (https://spec.openapis.org/oas/v3.0.3#style-values) and bodies whose schema says more
// than its properties.
const stylesSpec = `openapi: 3.0.3
info: {title: styles, version: "1"}
paths:
  /q:
    get:
      operationId: query
      parameters:
        - {name: point, in: query, explode: false, schema: {type: object, properties: {x: {type: number}, y: {type: number}}}}
        - {name: spread, in: query, schema: {type: object, properties: {a: {type: string}, b: {type: string}}}}
      responses: {"200": {description: ok}}
  /m/{m}/l/{l}/s/{s}:
    get:
      operationId: path
      parameters:
        - {name: m, in: path, required: true, style: matrix, schema: {type: string}}
        - {name: l, in: path, required: true, style: label, schema: {type: string}}
        - {name: s, in: path, required: true, schema: {type: array, items: {type: string}}}
      responses: {"200": {description: ok}}
  /ma/{ma}/me/{me}/mo/{mo}/la/{la}/lo/{lo}/so/{so}/sx/{sx}:
    get:
      operationId: pathComposite
      parameters:
        - {name: ma, in: path, required: true, style: matrix, schema: {type: array, items: {type: string}}}
        - {name: me, in: path, required: true, style: matrix, explode: true, schema: {type: array, items: {type: string}}}
        - {name: mo, in: path, required: true, style: matrix, explode: true, schema: {type: object, properties: {a: {type: string}, b: {type: string}}}}
        - {name: la, in: path, required: true, style: label, explode: true, schema: {type: array, items: {type: string}}}
        - {name: lo, in: path, required: true, style: label, schema: {type: object, properties: {a: {type: string}, b: {type: string}}}}
        - {name: so, in: path, required: true, schema: {type: object, properties: {a: {type: string}, b: {type: string}}}}
        - {name: sx, in: path, required: true, explode: true, schema: {type: object, properties: {a: {type: string}, b: {type: string}}}}
      responses: {"200": {description: ok}}
  /h:
    get:
      operationId: header
      parameters:
        - {name: X-Trace, in: header, schema: {type: object, properties: {a: {type: string}, b: {type: integer}}}}
        - {name: X-Api-Key, in: header, explode: true, schema: {type: object, properties: {a: {type: string}, b: {type: integer}}}}
      responses: {"200": {description: ok}}
`

// TestParameterStyles: each style and explode of a path, query and header parameter
// is sent as the OpenAPI specification's examples show it; before, a query object
// with explode false was repeated (point=x,1&point=y,2), matrix and label path
// parameters were sent as plain values, and objects in paths and headers as JSON.
func TestParameterStyles(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "st", Spec: writeSpec(t, "styles.yaml", stylesSpec), BaseURL: srv.URL})

	e := echo(t, call(t, m, "st__query", `{"point":{"x":1.5,"y":2},"spread":{"a":"1","b":"2 3"}}`))
	if got := fmt.Sprint(e.Query["point"]); got != "[x,1.5,y,2]" {
		t.Errorf("form object, explode false: point=%s, want one value x,1.5,y,2 (query %v)", got, e.Query)
	}
	if fmt.Sprint(e.Query["a"]) != "[1]" || fmt.Sprint(e.Query["b"]) != "[2 3]" {
		t.Errorf("form object, explode true: query %v, want a=1&b=2+3", e.Query)
	}

	e = echo(t, call(t, m, "st__path", `{"m":"x y","l":"a;b","s":["p","q/r"]}`))
	if want := "/m/;m=x%20y/l/.a%3Bb/s/p,q%2Fr"; e.RawPath != want {
		t.Errorf("path styles: %s, want %s", e.RawPath, want)
	}
	e = echo(t, call(t, m, "st__pathComposite", `{"ma":["1","2"],"me":["1","2"],"mo":{"a":"1","b":"2"},"la":["1","2"],"lo":{"a":"1","b":"2"},"so":{"a":"1","b":"2"},"sx":{"a":"1","b":"2"}}`))
	if want := "/ma/;ma=1,2/me/;me=1;me=2/mo/;a=1;b=2/la/.1.2/lo/.a,1,b,2/so/a,1,b,2/sx/a=1,b=2"; e.Path != want {
		t.Errorf("composite path styles: %s, want %s", e.Path, want)
	}
	// A label value of "." makes the segment "..": still refused.
	if res := call(t, m, "st__path", `{"m":"x","l":".","s":["p"]}`); res.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("label . makes a .. segment: %s %s", res.ErrorKind, res.Text())
	}

	e = echo(t, call(t, m, "st__header", `{"X-Trace":{"a":"1","b":2},"X-Api-Key":{"a":"1","b":2}}`))
	if e.Header["X-Trace"] != "a,1,b,2" || e.Header["X-Api-Key"] != "a=1,b=2" {
		t.Errorf("header objects: %v, want X-Trace a,1,b,2 and X-Api-Key a=1,b=2", e.Header)
	}
}

const bodiesSpec = `openapi: 3.1.0
info: {title: bodies, version: "1"}
paths:
  /notes:
    post:
      operationId: createNote
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [title]
              additionalProperties: false
              properties:
                title: {type: string}
                body: {type: string}
      responses: {"201": {description: ok}}
  /form:
    post:
      operationId: postForm
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              required: [name]
              properties:
                name: {type: string}
                tags: {type: array, items: {type: string}}
      responses: {"200": {description: ok}}
`

// TestFlatBodyKeepsItsSchema: a body whose fields are arguments of their own keeps
// what its schema says of them: additionalProperties false refuses a misspelt field
// before the request (it was sent, and the API refused it), and the required fields
// of an optional body are required once any of its fields is given (they were
// dropped with the body's own requiredness).
func TestFlatBodyKeepsItsSchema(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "b", Spec: writeSpec(t, "bodies.yaml", bodiesSpec), BaseURL: srv.URL})

	if s := schemaOf(t, m, "b__createNote"); s["additionalProperties"] != false {
		t.Errorf("createNote schema should refuse other arguments: %v", s)
	}
	if res := call(t, m, "b__createNote", `{"title":"t","titel":"x"}`); res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "titel") {
		t.Errorf("a misspelt field should be invalid_args naming it: %s %s", res.ErrorKind, res.Text())
	}
	e := echo(t, call(t, m, "b__createNote", `{"title":"t","body":"b"}`))
	var got map[string]any
	if err := json.Unmarshal([]byte(e.Body), &got); err != nil || got["title"] != "t" || got["body"] != "b" {
		t.Errorf("createNote body: %s", e.Body)
	}

	res := call(t, m, "b__postForm", `{"tags":["x"]}`)
	if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "name") {
		t.Errorf("an optional body given without its required field should be invalid_args naming it: %s %s", res.ErrorKind, res.Text())
	}
	if e := echo(t, call(t, m, "b__postForm", `{}`)); e.Body != "" {
		t.Errorf("no field given: no body, got %q", e.Body)
	}
	if e := echo(t, call(t, m, "b__postForm", `{"name":"n","tags":["x"]}`)); e.Body != "name=n&tags=x" {
		t.Errorf("postForm body: %q", e.Body)
	}
}

const discriminatorSpec = `openapi: 3.0.3
info: {title: pets, version: "1"}
paths:
  /pets:
    put:
      operationId: updatePet
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                pet:
                  oneOf:
                    - $ref: '#/components/schemas/Cat'
                    - $ref: '#/components/schemas/Dog'
                    - $ref: '#/components/schemas/Lizard'
                  discriminator:
                    propertyName: petType
                    mapping: {cat: '#/components/schemas/Cat', kitty: '#/components/schemas/Cat', dog: Dog}
      responses: {"200": {description: ok}}
components:
  schemas:
    PetBase:
      type: object
      required: [petType]
      properties:
        petType: {type: string, description: what the pet is}
    Cat:
      allOf:
        - $ref: '#/components/schemas/PetBase'
        - {type: object, properties: {huntingSkill: {type: string}}, required: [huntingSkill]}
    Dog:
      type: object
      required: [petType, packSize]
      properties:
        petType: {type: string}
        packSize: {type: integer}
    Lizard:
      type: object
      required: [petType, scales]
      properties:
        petType: {type: string}
        scales: {type: boolean}
`

// TestDiscriminatorValuesKept: the discriminator is dropped (it is no JSON Schema), but
// the values its mapping gives each alternative were the only place the document said
// what petType takes; they stay as the alternatives' petType, so the model sends
// "cat", not "Cat", and a dog's fields under "cat" are refused before they are sent.
func TestDiscriminatorValuesKept(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "d", Spec: writeSpec(t, "disc.yaml", discriminatorSpec), BaseURL: srv.URL})
	s := schemaOf(t, m, "d__updatePet")
	raw, _ := json.Marshal(s)
	for _, want := range []string{`"enum":["cat","kitty"]`, `"const":"dog"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("schema should have %s: %s", want, raw)
		}
	}
	// Without a mapping the specification says the value is the schema's name, but
	// real documents do not mean it (OpenAI's input items): nothing is added.
	if strings.Contains(string(raw), `"Lizard"`) {
		t.Errorf("an alternative the mapping does not name should be left as it is: %s", raw)
	}
	for _, bad := range []string{`{"pet":{"petType":"Cat","huntingSkill":"lazy"}}`, `{"pet":{"petType":"dog","huntingSkill":"lazy"}}`} {
		if res := call(t, m, "d__updatePet", bad); res.ErrorKind != tool.KindInvalidArgs {
			t.Errorf("%s should be invalid_args: %s %s", bad, res.ErrorKind, res.Text())
		}
	}
	for _, good := range []string{`{"pet":{"petType":"kitty","huntingSkill":"lazy"}}`, `{"pet":{"petType":"dog","packSize":3}}`, `{"pet":{"petType":"lizard","scales":true}}`} {
		if e := echo(t, call(t, m, "d__updatePet", good)); !strings.Contains(e.Body, `"petType"`) {
			t.Errorf("%s: body %s", good, e.Body)
		}
	}
}

// TestSpecURLCredentialsNotShown: a private document's URL may carry a credential
// (user info, a ?token=); the source's Spec, which the daemon logs at start, and the
// errors about it show REDACTED instead.
func TestSpecURLCredentialsNotShown(t *testing.T) {
	t.Parallel()
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x:
    get:
      operationId: getX
      responses: {"200": {description: ok}}
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/spec.yaml" {
			w.Write([]byte(spec))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	u := strings.Replace(srv.URL, "http://", "http://bob:spec-password-1@", 1)
	src, _ := load(t, Config{Name: "p", Spec: u + "/spec.yaml?token=spec-token-123456", BaseURL: srv.URL})
	if strings.Contains(src.Spec, "spec-password-1") || strings.Contains(src.Spec, "spec-token-123456") || !strings.Contains(src.Spec, "/spec.yaml") {
		t.Errorf("Spec shows the URL's credentials: %s", src.Spec)
	}
	for _, path := range []string{"/missing.yaml", "/spec.yaml#/paths"} {
		_, err := Load(context.Background(), Config{Name: "p", Spec: u + path + "?token=spec-token-123456", BaseURL: srv.URL})
		if path == "/missing.yaml" && err == nil {
			t.Fatal("a missing document should stop loading")
		}
		if err != nil && (strings.Contains(err.Error(), "spec-password-1") || strings.Contains(err.Error(), "spec-token-123456")) {
			t.Errorf("the error shows the URL's credentials: %v", err)
		}
	}
	dead := u + "/x.yaml?token=spec-token-123456"
	srv2 := httptest.NewServer(http.NotFoundHandler())
	srv2.Close()
	dead = strings.Replace(dead, srv.URL[len("http://"):], srv2.URL[len("http://"):], 1)
	if _, err := Load(context.Background(), Config{Name: "p", Spec: dead}); err == nil || strings.Contains(err.Error(), "spec-token-123456") || strings.Contains(err.Error(), "spec-password-1") {
		t.Errorf("an unreachable document's error shows the URL's credentials: %v", err)
	}
}

// TestTextInItsCharset: a text answer in the charset its Content-Type declares
// (a legacy API's ISO-8859-1, Shift_JIS) reaches the model as text; it was named as
// a binary body, its words lost.
func TestTextInItsCharset(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=ISO-8859-1")
			w.Write([]byte("Caf\xe9 cr\xe8me, d\xe9j\xe0 vu \xe0 Z\xfcrich"))
		case "/sjis":
			w.Header().Set("Content-Type", `application/xml; charset="Shift_JIS"`)
			w.Write([]byte("<a>\x93\xfa\x96\x7b\x8c\xea</a>")) // 日本語
		case "/utf8":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("Café"))
		}
	}))
	t.Cleanup(srv.Close)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /latin1: {get: {operationId: latin1, responses: {"200": {description: ok}}}}
  /sjis: {get: {operationId: sjis, responses: {"200": {description: ok}}}}
  /utf8: {get: {operationId: utf8, responses: {"200": {description: ok}}}}
`
	_, m := load(t, Config{Name: "c", Spec: writeSpec(t, "c.yaml", spec), BaseURL: srv.URL})
	for name, want := range map[string]string{"c__latin1": "Café crème, déjà vu à Zürich", "c__sjis": "<a>日本語</a>", "c__utf8": "Café"} {
		if res := call(t, m, name, `{}`); res.IsError || res.Text() != want {
			t.Errorf("%s: %q, want %q", name, res.Text(), want)
		}
	}
}

// TestRedirectLoopIsTheAPIsAnswer: an API that keeps redirecting on its own host
// answered: past the redirects followed, the call is failed with the last redirect
// and why it was not followed. It was unavailable (so models called again) saying
// the connection failed, and after a POST that the API may have acted on it.
func TestRedirectLoopIsTheAPIsAnswer(t *testing.T) {
	t.Parallel()
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		n := len(r.URL.Query()["n"])
		http.Redirect(w, r, fmt.Sprintf("/loop?%sn=x", strings.Repeat("n=x&", n)), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /loop: {get: {operationId: loop, responses: {"200": {description: ok}}}}
`
	_, m := load(t, Config{Name: "r", Spec: writeSpec(t, "r.yaml", spec), BaseURL: srv.URL})
	res := call(t, m, "r__loop", `{}`)
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "HTTP 302") || !strings.Contains(res.Text(), "at most 5 redirects") ||
		strings.Contains(res.Text(), "connection failed") {
		t.Errorf("redirect loop: %s %s", res.ErrorKind, res.Text())
	}
	if hits != 6 {
		t.Errorf("the API was asked %d times, want 6 (the call and 5 redirects)", hits)
	}
}

// TestOperationServers: a path item's or an operation's own servers (GitHub's release
// asset uploads go to uploads.github.com) are where its calls go; they went to the
// document's first server, which does not serve them. base_url still says where the
// whole API is.
func TestOperationServers(t *testing.T) {
	t.Parallel()
	api, _ := upstream(t)
	uploads, _ := upstream(t)
	spec := fmt.Sprintf(`openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "%s/api"}]
paths:
  /repos/{id}:
    get:
      operationId: getRepo
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /repos/{id}/assets:
    post:
      operationId: uploadAsset
      servers: [{url: "{origin}/up", variables: {origin: {default: "%s"}}}]
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /media/{id}:
    servers: [{url: "%s/media-host/"}]
    get:
      operationId: getMedia
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
`, api.URL, uploads.URL, uploads.URL)
	file := writeSpec(t, "servers.yaml", spec)
	_, m := load(t, Config{Name: "gh", Spec: file})
	for name, want := range map[string]string{"gh__getRepo": api.URL + "/api/repos/r", "gh__uploadAsset": uploads.URL + "/up/repos/r/assets", "gh__getMedia": uploads.URL + "/media-host/media/r"} {
		res := call(t, m, name, `{"id":"r"}`)
		var d struct{ URL string }
		json.Unmarshal(res.Details, &d)
		if e := echo(t, res); d.URL != want {
			t.Errorf("%s went to %s (path %s), want %s", name, d.URL, e.Path, want)
		}
	}
	_, m = load(t, Config{Name: "gh", Spec: file, BaseURL: api.URL + "/v3"})
	for _, name := range []string{"gh__getRepo", "gh__uploadAsset", "gh__getMedia"} {
		var d struct{ URL string }
		json.Unmarshal(call(t, m, name, `{"id":"r"}`).Details, &d)
		if !strings.HasPrefix(d.URL, api.URL+"/v3/") {
			t.Errorf("with base_url, %s went to %s", name, d.URL)
		}
	}
}

// TestUndeclaredPathParameter: a path template parameter the document forgot to
// declare (kin-openapi warns, and real documents do it) is a required string
// argument; the tool was offered but every call was refused, whatever the model gave.
func TestUndeclaredPathParameter(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /orgs/{org}/teams/{team_slug}:
    get:
      operationId: getTeam
      parameters: [{name: org, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
`
	_, m := load(t, Config{Name: "u", Spec: writeSpec(t, "u.yaml", spec), BaseURL: srv.URL})
	s := schemaOf(t, m, "u__getTeam")
	if prop(s, "team_slug") == nil || fmt.Sprint(s["required"]) != "[org team_slug]" {
		t.Errorf("team_slug should be a required argument: %v", s)
	}
	if e := echo(t, call(t, m, "u__getTeam", `{"org":"o","team_slug":"a/b"}`)); e.RawPath != "/orgs/o/teams/a%2Fb" {
		t.Errorf("path: %s", e.RawPath)
	}
}

// TestLocationAndLinkReachTheModel: what a 201's Location says (the new resource) and
// a Link header's pages (GitHub's pagination) are part of the answer; the model saw
// only the body ("HTTP 201 Created (no body)") and could not find what it made or
// the next page. Credentials in them are redacted like the body's.
func TestLocationAndLinkReachTheModel(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pets":
			if r.Method == http.MethodPost {
				w.Header().Set("Location", "/pets/123")
				w.WriteHeader(http.StatusCreated)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Add("Link", `<http://api.test/pets?page=2&api_key=`+r.URL.Query().Get("api_key")+`>; rel="next"`)
			w.Header().Add("Link", `<http://api.test/pets?page=9>; rel="last"`)
			w.Write([]byte(`[{"id":1}]`))
		}
	}))
	t.Cleanup(srv.Close)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /pets:
    get: {operationId: listPets, responses: {"200": {description: ok}}}
    post: {operationId: createPet, responses: {"201": {description: ok}}}
`
	_, m := load(t, Config{Name: "l", Spec: writeSpec(t, "l.yaml", spec), BaseURL: srv.URL,
		Auth: Auth{APIKeyEnv: "K", APIKeyQuery: "api_key"}, Getenv: env(map[string]string{"K": "key-in-the-query-1"})})
	res := call(t, m, "l__createPet", `{}`)
	if res.IsError || !strings.Contains(res.Text(), "201") || !strings.Contains(res.Text(), "Location: /pets/123") {
		t.Errorf("createPet: %s", res.Text())
	}
	res = call(t, m, "l__listPets", `{}`)
	text := res.Text()
	if res.IsError || !strings.HasPrefix(text, `[{"id":1}]`) || !strings.Contains(text, `page=2&api_key=REDACTED>; rel="next"`) || !strings.Contains(text, `page=9>; rel="last"`) ||
		strings.Contains(text, "key-in-the-query-1") || strings.Contains(string(res.Details), "key-in-the-query-1") {
		t.Errorf("listPets: %s %s", text, res.Details)
	}
}

// TestFormDeepObjectFields: a form field whose encoding is deepObject (Stripe's
// metadata, line_items, expand) is sent as bracketed fields,
// metadata[order]=6735&line_items[0][price]=p; it was sent as JSON text, which such
// an API refuses.
func TestFormDeepObjectFields(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /v1/checkout/sessions:
    post:
      operationId: PostCheckoutSessions
      requestBody:
        content:
          application/x-www-form-urlencoded:
            encoding:
              metadata: {explode: true, style: deepObject}
              line_items: {explode: true, style: deepObject}
              expand: {explode: true, style: deepObject}
            schema:
              type: object
              properties:
                mode: {type: string}
                metadata: {type: object, additionalProperties: {type: string}}
                line_items:
                  type: array
                  items: {type: object, properties: {price: {type: string}, quantity: {type: integer}, adjustable_quantity: {type: object, properties: {enabled: {type: boolean}}}}}
                expand: {type: array, items: {type: string}}
      responses: {"200": {description: ok}}
`
	_, m := load(t, Config{Name: "s", Spec: writeSpec(t, "s.yaml", spec), BaseURL: srv.URL})
	e := echo(t, call(t, m, "s__PostCheckoutSessions", `{"mode":"payment","metadata":{"order":"6735","b c":"d&e"},"line_items":[{"price":"p1","quantity":2,"adjustable_quantity":{"enabled":true}},{"price":"p2"}],"expand":["customer"]}`))
	want := "expand%5B0%5D=customer&line_items%5B0%5D%5Badjustable_quantity%5D%5Benabled%5D=true&line_items%5B0%5D%5Bprice%5D=p1&line_items%5B0%5D%5Bquantity%5D=2&line_items%5B1%5D%5Bprice%5D=p2" +
		"&metadata%5Bb+c%5D=d%26e&metadata%5Border%5D=6735&mode=payment"
	if e.Body != want {
		t.Errorf("form body:\n%s\nwant\n%s", e.Body, want)
	}
}

// TestQueryDeepObjectNested: a deepObject query parameter holding an array or a
// nested object (Stripe's expand, created[gte]) is sent in brackets at every depth,
// as Stripe's own clients send it; an array was sent as the plain name repeated and
// a nested object as JSON text.
func TestQueryDeepObjectNested(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /v1/charges:
    get:
      operationId: GetCharges
      parameters:
        - {name: expand, in: query, style: deepObject, explode: true, schema: {type: array, items: {type: string}}}
        - {name: created, in: query, style: deepObject, explode: true, schema: {type: object, properties: {gte: {type: integer}, range: {type: object}}}}
      responses: {"200": {description: ok}}
`
	_, m := load(t, Config{Name: "s", Spec: writeSpec(t, "s.yaml", spec), BaseURL: srv.URL})
	e := echo(t, call(t, m, "s__GetCharges", `{"expand":["customer","invoice"],"created":{"gte":5,"range":{"from":1}}}`))
	if fmt.Sprint(e.Query["expand[0]"]) != "[customer]" || fmt.Sprint(e.Query["expand[1]"]) != "[invoice]" ||
		fmt.Sprint(e.Query["created[gte]"]) != "[5]" || fmt.Sprint(e.Query["created[range][from]"]) != "[1]" || len(e.Query) != 4 {
		t.Errorf("query: %v", e.Query)
	}
}

// TestMediaTypeWithParameters: a body media type written with parameters or in
// capitals (application/x-www-form-urlencoded; charset=UTF-8, as Java generators
// write it) is the same form body; it was sent as JSON under the form type.
func TestMediaTypeWithParameters(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /login:
    post:
      operationId: login
      requestBody:
        content:
          application/x-www-form-urlencoded; charset=UTF-8:
            schema: {type: object, required: [user], properties: {user: {type: string}, scopes: {type: array, items: {type: string}}}}
      responses: {"200": {description: ok}}
  /upload:
    post:
      operationId: upload
      requestBody:
        content:
          Multipart/Form-Data:
            schema: {type: object, properties: {file: {type: string, format: binary}, note: {type: string}}}
      responses: {"200": {description: ok}}
`
	_, m := load(t, Config{Name: "p", Spec: writeSpec(t, "p.yaml", spec), BaseURL: srv.URL})
	e := echo(t, call(t, m, "p__login", `{"user":"a b","scopes":["x","y"]}`))
	if e.Body != "scopes=x&scopes=y&user=a+b" || !strings.HasPrefix(e.CT, "application/x-www-form-urlencoded") {
		t.Errorf("form body: %q as %s", e.Body, e.CT)
	}
	e = echo(t, call(t, m, "p__upload", `{"file":{"filename":"a.txt","content":"hi"},"note":"n"}`))
	if !strings.HasPrefix(e.CT, "multipart/form-data; boundary=") || !strings.Contains(e.Body, `filename="a.txt"`) {
		t.Errorf("multipart body: %q as %s", e.Body, e.CT)
	}
}

// TestAuthParameterNotAnArgument: a document that declares its key as a parameter
// (a required X-API-Key header, an api_key query parameter: Swagger petstore's) made
// it an argument the model had to fill with a key it does not have, to be replaced
// by the configured one; the parameter auth fills is no argument.
func TestAuthParameterNotAnArgument(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /pets/{id}:
    get:
      operationId: getPet
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: x-api-key, in: header, required: true, schema: {type: string}}
        - {name: api_key, in: query, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
`
	file := writeSpec(t, "a.yaml", spec)
	_, m := load(t, Config{Name: "h", Spec: file, BaseURL: srv.URL, Auth: Auth{APIKeyEnv: "K", APIKeyHeader: "X-API-Key"}, Getenv: env(map[string]string{"K": "header-key-123"})})
	if s := schemaOf(t, m, "h__getPet"); prop(s, "x-api-key") != nil || fmt.Sprint(s["required"]) != "[api_key id]" {
		t.Errorf("the header auth fills should be no argument: %v", s)
	}
	if e := echo(t, call(t, m, "h__getPet", `{"id":"1","api_key":"q"}`)); e.Header["X-Api-Key"] != "REDACTED" { // the configured key, echoed and redacted
		t.Errorf("header key: %v", e.Header)
	}
	_, m = load(t, Config{Name: "q", Spec: file, BaseURL: srv.URL, Auth: Auth{APIKeyEnv: "K", APIKeyQuery: "api_key"}, Getenv: env(map[string]string{"K": "query-key-123"})})
	if s := schemaOf(t, m, "q__getPet"); prop(s, "api_key") != nil || fmt.Sprint(s["required"]) != "[id x-api-key]" {
		t.Errorf("the query parameter auth fills should be no argument: %v", s)
	}
	if e := echo(t, call(t, m, "q__getPet", `{"id":"1","x-api-key":"h"}`)); fmt.Sprint(e.Query["api_key"]) != "[REDACTED]" {
		t.Errorf("query key: %v", e.Query)
	}
}

// TestSpecURLUsernameTokenNotShown: a token written as the URL's user name alone
// (https://TOKEN@host/spec.yaml, as GitHub's raw URLs take one) is a credential too:
// Go's URL errors mask only a password, so the error quoted the token whole.
func TestSpecURLUsernameTokenNotShown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // unreachable: the error quotes the URL
	spec := strings.Replace(srv.URL, "http://", "http://ghp-user-token-123456@", 1) + "/spec.yaml"
	_, err := Load(context.Background(), Config{Name: "p", Spec: spec})
	if err == nil || strings.Contains(err.Error(), "ghp-user-token-123456") {
		t.Errorf("an unreachable document's error shows the URL's user name: %v", err)
	}
	srv2 := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv2.Close)
	spec = strings.Replace(srv2.URL, "http://", "http://ghp-user-token-123456@", 1) + "/spec.yaml"
	if _, err := Load(context.Background(), Config{Name: "p", Spec: spec}); err == nil || strings.Contains(err.Error(), "ghp-user-token-123456") {
		t.Errorf("a missing document's error shows the URL's user name: %v", err)
	}
}

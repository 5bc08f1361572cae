package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// sent is one request as the API received it.
type sent struct {
	Method, Path, RawQuery, ContentType string
	Query                               url.Values
	Header                              http.Header
	Body                                []byte
}

// recorder is a loopback API that keeps every request it gets and answers {}.
type recorder struct {
	mu   sync.Mutex
	reqs []sent
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, sent{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"),
		Query: r.URL.Query(), Header: r.Header.Clone(), Body: b})
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}")
}

func (rc *recorder) last(t *testing.T) sent {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) == 0 {
		t.Fatal("the API got no request")
	}
	return rc.reqs[len(rc.reqs)-1]
}

// run calls a tool that must succeed and returns the request the API got.
func (rc *recorder) run(t *testing.T, m *toolmgr.Manager, name, args string) sent {
	t.Helper()
	if res := call(t, m, name, args); res.IsError {
		t.Fatalf("%s: %s: %s", name, res.ErrorKind, res.Text())
	}
	return rc.last(t)
}

func pets20(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pets20.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toJSON re-encodes a YAML document as JSON.
func toJSON(t *testing.T, doc string) []byte {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jsontext.FromYAML(v))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSwagger2Schemas: a Swagger 2.0 document becomes tools whose arguments a model
// sees as for 3.x: parameters of every location, the body parameter flattened or
// whole, formData fields, a file as {filename, content}; readOnly properties left
// out, x-nullable a null type, allOf kept, discriminator dropped.
func TestSwagger2Schemas(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	src, m := load(t, Config{Name: "pets", Spec: filepath.Join("testdata", "pets20.yaml"), BaseURL: srv.URL})
	want := "pets__addNote,pets__addPet,pets__listPets,pets__updatePet,pets__updatePetWithForm,pets__uploadPhoto"
	if got := strings.Join(m.Names(), ","); got != want {
		t.Fatalf("tools:\n got %s\nwant %s", got, want)
	}
	if len(src.Warnings) != 0 {
		t.Errorf("warnings: %v", src.Warnings)
	}

	list := schemaOf(t, m, "pets__listPets")
	if p := prop(list, "limit"); p["type"] != "integer" || p["minimum"] != float64(1) || p["maximum"] != float64(100) {
		t.Errorf("limit (a #/parameters ref): %v", p)
	}
	if p := prop(list, "status", "[]"); fmt.Sprint(p["enum"]) != "[available sold]" {
		t.Errorf("status items: %v", prop(list, "status"))
	}
	if fmt.Sprint(list["required"]) != "[X-Request-Id]" || list["additionalProperties"] != false {
		t.Errorf("listPets: %v", list)
	}

	add := schemaOf(t, m, "pets__addPet")
	if prop(add, "name") == nil || prop(add, "kind") == nil || fmt.Sprint(add["required"]) != "[kind name]" {
		t.Errorf("the body parameter's object should be flat arguments: %v", add)
	}
	if prop(add, "id") != nil {
		t.Errorf("readOnly id should be left out: %v", add)
	}
	if nick := prop(add, "nickname"); fmt.Sprint(nick["type"]) != "[string null]" {
		t.Errorf("x-nullable: %v", nick)
	}
	if strings.Contains(fmt.Sprint(add), "discriminator") || strings.Contains(fmt.Sprint(add), "x-nullable") {
		t.Errorf("discriminator and x- keys should be dropped: %v", add)
	}

	upd := schemaOf(t, m, "pets__updatePet")
	parts, _ := prop(upd, "body")["allOf"].([]any)
	if len(parts) != 2 || fmt.Sprint(upd["required"]) != "[body petId]" {
		t.Fatalf("updatePet: an allOf body is the body argument: %v", upd)
	}
	base, own := parts[0].(map[string]any), parts[1].(map[string]any)
	if prop(base, "id") != nil || prop(own, "created") != nil || prop(own, "owner", "name") == nil || prop(base, "name") == nil {
		t.Errorf("allOf parts: readOnly left out, refs expanded: %v", parts)
	}

	form := schemaOf(t, m, "pets__updatePetWithForm")
	if prop(form, "name") == nil || prop(form, "status") == nil || fmt.Sprint(form["required"]) != "[name petId]" {
		t.Errorf("form fields: %v", form)
	}
	up := schemaOf(t, m, "pets__uploadPhoto")
	if f := prop(up, "file"); f["type"] != "object" || prop(f, "content_base64") == nil || fmt.Sprint(up["required"]) != "[file petId]" {
		t.Errorf("a type: file field should take {filename, content|content_base64}: %v", up)
	}
}

// TestSwagger2Requests: the requests the tools of a Swagger 2.0 document send, checked
// as the API receives them.
func TestSwagger2Requests(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	_, m := load(t, Config{Name: "pets", Spec: filepath.Join("testdata", "pets20.yaml"), BaseURL: srv.URL + "/api"})

	r := rec.run(t, m, "pets__listPets", `{"limit":5,"tags":["a","b"],"ids":[1,2],"status":["available","sold"],"colors":["red","blue"],"sizes":["S","M"],`+
		`"filters":"{\"label\":[\"x=y\"]}","X-Request-Id":"r1"}`)
	if r.Method != "GET" || r.Path != "/api/pets" {
		t.Errorf("listPets went to %s %s", r.Method, r.Path)
	}
	// No collectionFormat means csv in Swagger 2.0; multi repeats the parameter, pipes
	// and ssv join with | and a space.
	q := r.Query
	if fmt.Sprint(q["tags"]) != "[a,b]" || fmt.Sprint(q["ids"]) != "[1,2]" || fmt.Sprint(q["status"]) != "[available sold]" ||
		q.Get("colors") != "red|blue" || q.Get("sizes") != "S M" ||
		fmt.Sprint(q["limit"]) != "[5]" || q.Get("filters") != `{"label":["x=y"]}` {
		t.Errorf("query: %s", r.RawQuery)
	}
	if r.Header.Get("X-Request-Id") != "r1" {
		t.Errorf("header: %v", r.Header)
	}

	r = rec.run(t, m, "pets__addPet", `{"name":"Rex","kind":"dog","nickname":null}`)
	if r.Method != "POST" || r.ContentType != "application/json" || string(r.Body) != `{"kind":"dog","name":"Rex","nickname":null}` {
		t.Errorf("addPet: %s %s %s", r.Method, r.ContentType, r.Body)
	}

	r = rec.run(t, m, "pets__updatePet", `{"petId":"p/1","body":{"name":"Rex","kind":"dog","owner":{"name":"Ann"}}}`)
	if r.Method != "PUT" || r.Path != "/api/pets/p/1" || !strings.Contains(r.RawQuery+string(r.Body), `"owner":{"name":"Ann"}`) {
		t.Errorf("updatePet: %s %s %s", r.Method, r.Path, r.Body)
	}

	// A formData array is csv too unless it says multi.
	r = rec.run(t, m, "pets__updatePetWithForm", `{"petId":"7","name":"Rex","status":"sold","tags":["a","b"],"ids":[1,2]}`)
	if r.ContentType != "application/x-www-form-urlencoded" || string(r.Body) != "ids=1&ids=2&name=Rex&status=sold&tags=a%2Cb" || r.Path != "/api/pets/7" {
		t.Errorf("form: %s %s %s", r.Path, r.ContentType, r.Body)
	}

	// A form whose operation names no consumes is a form, though the document's
	// consumes is JSON: formData is only ever sent as one.
	r = rec.run(t, m, "pets__addNote", `{"petId":"7","text":"a&b"}`)
	if r.ContentType != "application/x-www-form-urlencoded" || string(r.Body) != "text=a%26b" {
		t.Errorf("form without consumes: %s %s", r.ContentType, r.Body)
	}

	r = rec.run(t, m, "pets__uploadPhoto", `{"petId":"7","caption":"at the beach","labels":["dog","sea"],"file":{"filename":"rex.png","content_base64":"iVBORw0KGgo="}}`)
	mt, params, _ := mime.ParseMediaType(r.ContentType)
	if mt != "multipart/form-data" {
		t.Fatalf("upload content type %s", r.ContentType)
	}
	mr := multipart.NewReader(strings.NewReader(string(r.Body)), params["boundary"])
	got := map[string]string{}
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(p)
		got[p.FormName()] = fmt.Sprintf("%s|%s|%q", p.FileName(), p.Header.Get("Content-Type"), b)
	}
	if got["caption"] != `||"at the beach"` || got["labels"] != `||"dog|sea"` || got["file"] != `rex.png|image/png|"\x89PNG\r\n\x1a\n"` {
		t.Errorf("multipart parts: %v", got)
	}
}

// TestSwagger2ServerURL: host, basePath and schemes make the base URL (https when the
// document offers it); base_url still wins; without a host, a document read from a
// URL is served where it was found and one read from a file needs base_url. YAML and
// JSON both load, from a file and from a URL.
func TestSwagger2ServerURL(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	var doc []byte
	mux := http.NewServeMux()
	mux.HandleFunc("/docs/pets.json", func(w http.ResponseWriter, r *http.Request) { w.Write(doc) })
	mux.Handle("/", rec)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	withHost := strings.Replace(pets20(t), "host: 127.0.0.1:1", "host: "+host, 1)
	doc = toJSON(t, withHost)

	// JSON from a URL; of schemes [http, https] the calls use https.
	_, m := load(t, Config{Name: "pets", Spec: srv.URL + "/docs/pets.json", Client: srv.Client()})
	if r := rec.run(t, m, "pets__listPets", `{"X-Request-Id":"r"}`); r.Path != "/v2/pets" {
		t.Errorf("host and basePath: the call went to %s", r.Path)
	}

	// YAML from a file, base_url overriding host and basePath.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"pets.yaml": withHost, "nohost.yaml": strings.Replace(pets20(t), "host: 127.0.0.1:1\n", "", 1)})
	_, m = load(t, Config{Name: "pets", Spec: filepath.Join(dir, "pets.yaml"), BaseURL: srv.URL + "/other", Client: srv.Client()})
	if r := rec.run(t, m, "pets__listPets", `{"X-Request-Id":"r"}`); r.Path != "/other/pets" {
		t.Errorf("base_url: the call went to %s", r.Path)
	}

	// No host, read from a URL: the document's own host, with basePath.
	doc = toJSON(t, strings.Replace(pets20(t), "host: 127.0.0.1:1\n", "", 1))
	_, m = load(t, Config{Name: "pets", Spec: srv.URL + "/docs/pets.json", Client: srv.Client()})
	if r := rec.run(t, m, "pets__listPets", `{"X-Request-Id":"r"}`); r.Path != "/v2/pets" {
		t.Errorf("no host, from a URL: the call went to %s", r.Path)
	}
	// No host, read from a file: there is no server to call.
	_, err := Load(context.Background(), Config{Name: "pets", Spec: filepath.Join(dir, "nohost.yaml")})
	if err == nil || !strings.Contains(err.Error(), "no host") || !strings.Contains(err.Error(), "set base_url") || !strings.Contains(err.Error(), `"/v2"`) {
		t.Errorf("no host, from a file: %v", err)
	}
}

// TestSwagger2SingleFile: a Swagger 2.0 document that refers to another file is
// refused before anything is read, whether the file is beside it or outside its
// directory: the converter turns the main document only.
func TestSwagger2SingleFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pet := "type: object\nproperties: {name: {type: string}}\n"
	doc := func(ref string) string {
		return strings.Replace(pets20(t), `schema: {$ref: "#/definitions/NewPet"}`, `schema: {$ref: "`+ref+`"}`, 1)
	}
	writeFiles(t, dir, map[string]string{"api/pet.yaml": pet, "api/beside.yaml": doc("pet.yaml"), "api/outside.yaml": doc("../secret.yaml"),
		"secret.yaml": pet, "api/abs.yaml": doc("/etc/passwd#/x")})
	for _, c := range []struct{ file, ref string }{{"beside.yaml", "pet.yaml"}, {"outside.yaml", "../secret.yaml"}, {"abs.yaml", "/etc/passwd#/x"}} {
		_, err := Load(context.Background(), Config{Name: "pets", Spec: filepath.Join(dir, "api", c.file), BaseURL: "http://127.0.0.1:9"})
		if err == nil || !strings.Contains(err.Error(), "refers to another file ("+c.ref+" at #/parameters/PetBody/schema)") || !strings.Contains(err.Error(), "single file") {
			t.Errorf("%s: %v", c.file, err)
		}
	}

	// From a URL, nothing but the document is fetched.
	var mu sync.Mutex
	var fetched []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched = append(fetched, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/pets.yaml" {
			io.WriteString(w, doc("pet.yaml#/"))
			return
		}
		io.WriteString(w, pet)
	}))
	t.Cleanup(srv.Close)
	_, err := Load(context.Background(), Config{Name: "pets", Spec: srv.URL + "/pets.yaml", BaseURL: "http://127.0.0.1:9"})
	if err == nil || !strings.Contains(err.Error(), "pet.yaml#/") {
		t.Errorf("from a URL: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(fetched) != "[/pets.yaml]" {
		t.Errorf("fetched %v", fetched)
	}
}

// TestSwagger2Broken: a broken Swagger 2.0 document stops start with an error naming
// what is wrong; an operation Swagger 2.0 does not allow is left out with a warning
// and costs the others nothing.
func TestSwagger2Broken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	head := "swagger: \"2.0\"\ninfo: {title: t, version: \"1\"}\nhost: 127.0.0.1:9\n"
	ok := "  /ok:\n    get:\n      operationId: fine\n      responses: {\"200\": {description: ok}}\n"
	writeFiles(t, dir, map[string]string{
		"host.yaml":    strings.Replace(head, "127.0.0.1:9", "example.com/api", 1) + "paths:\n" + ok,
		"params.yaml":  head + "paths:\n  /x:\n    get:\n      parameters: {name: a, in: query, type: string}\n      responses: {\"200\": {description: ok}}\n",
		"dangle.yaml":  head + "paths:\n  /x:\n    post:\n      parameters: [{name: b, in: body, schema: {$ref: \"#/definitions/Nope\"}}]\n      responses: {\"200\": {description: ok}}\n",
		"version.yaml": "swagger: \"2\"\ninfo: {title: t, version: \"1\"}\npaths:\n" + ok,
		"none.yaml": head + "paths:\n  /empty:\n  /two:\n    post:\n      parameters:\n" +
			"        - {name: a, in: body, schema: {type: object}}\n        - {name: b, in: body, schema: {type: object}}\n      responses: {\"200\": {description: ok}}\n",
		"mixed.yaml": head + "paths:\n" + ok + "  /two:\n    post:\n      operationId: twoBodies\n      parameters:\n" +
			"        - {name: a, in: body, schema: {type: object}}\n        - {name: b, in: body, schema: {type: object}}\n      responses: {\"200\": {description: ok}}\n" +
			"  /both:\n    parameters: [{name: f, in: formData, type: string}]\n    post:\n      operationId: bodyAndForm\n      parameters:\n" +
			"        - {name: a, in: body, schema: {type: object}}\n      responses: {\"200\": {description: ok}}\n" +
			"securityDefinitions:\n  odd: {type: oauth2, flow: device, tokenUrl: \"https://a.example/t\"}\n",
	})
	for _, c := range []struct{ file, want string }{
		{"host.yaml", `could not be converted to OpenAPI 3: invalid host "example.com/api"`},
		{"params.yaml", "the Swagger 2.0 document could not be parsed: json: cannot unmarshal object into"},
		{"dangle.yaml", `the reference at #/paths/~1x/post/parameters/0/schema leads nowhere: reference #/definitions/Nope: "definitions" not found`},
		{"version.yaml", `this is a Swagger "2" document`},
		{"none.yaml", "the document has no operations left: POST /two is left out: it has more than one body parameter, which Swagger 2.0 does not allow; path /empty is empty"},
	} {
		_, err := Load(context.Background(), Config{Name: "b", Spec: filepath.Join(dir, c.file)})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `openapi "b"`) {
			t.Errorf("%s: want an error with %q, got %v", c.file, c.want, err)
		}
	}

	src, m := load(t, Config{Name: "b", Spec: filepath.Join(dir, "mixed.yaml")})
	if got := strings.Join(m.Names(), ","); got != "b__fine" {
		t.Errorf("tools: %s", got)
	}
	w := strings.Join(src.Warnings, "\n")
	for _, want := range []string{"POST /two is left out: it has more than one body parameter", "POST /both is left out: it has both a body parameter and formData",
		`OAuth2 flow "device"`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

// TestSwagger2Auth: as for 3.x, the source's auth says how calls authenticate; the
// document's securityDefinitions (basic, apiKey, oauth2 here) neither stop loading nor
// change where the credentials go.
func TestSwagger2Auth(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"tok-1","token_type":"Bearer","expires_in":3600}`)
	})
	mux.Handle("/", rec)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	vars := env(map[string]string{"TOK": "s3cret", "USER": "ann", "ID": "id", "SECRET": "sec"})
	for _, c := range []struct {
		name  string
		auth  Auth
		check func(r sent) bool
	}{
		{"basic", Auth{BasicUsernameEnv: "USER", BasicPasswordEnv: "TOK"}, func(r sent) bool {
			u, p, ok := (&http.Request{Header: r.Header}).BasicAuth()
			return ok && u == "ann" && p == "s3cret"
		}},
		{"api key header", Auth{APIKeyEnv: "TOK", APIKeyHeader: "X-Api-Key"}, func(r sent) bool { return r.Header.Get("X-Api-Key") == "s3cret" }},
		{"api key query", Auth{APIKeyEnv: "TOK", APIKeyQuery: "api_key"}, func(r sent) bool { return r.Query.Get("api_key") == "s3cret" }},
		{"oauth2", Auth{OAuth2: OAuth2{TokenURL: srv.URL + "/token", ClientIDEnv: "ID", ClientSecretEnv: "SECRET"}}, func(r sent) bool {
			return r.Header.Get("Authorization") == "Bearer tok-1"
		}},
	} {
		_, m := load(t, Config{Name: "pets", Spec: filepath.Join("testdata", "pets20.yaml"), BaseURL: srv.URL, Auth: c.auth, Getenv: vars})
		if r := rec.run(t, m, "pets__listPets", `{"X-Request-Id":"r"}`); !c.check(r) {
			t.Errorf("%s: credentials not where expected: %v ?%s", c.name, r.Header, r.RawQuery)
		}
	}
}

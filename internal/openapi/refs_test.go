package openapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func TestSplitDocumentFromFiles(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	src, m := load(t, Config{Name: "split", Spec: filepath.Join("testdata", "split", "openapi.yaml"), BaseURL: srv.URL})
	assertSplitPets(t, src, m)
}

func TestSplitDocumentFromURL(t *testing.T) {
	t.Parallel()
	api, _ := upstream(t)
	var served atomic.Int32
	files := http.StripPrefix("/spec/", http.FileServer(http.Dir(filepath.Join("testdata", "split"))))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	src, m := load(t, Config{Name: "split", Spec: srv.URL + "/spec/openapi.yaml", BaseURL: api.URL})
	assertSplitPets(t, src, m)
	if n := served.Load(); n != 6 {
		t.Errorf("the document's 6 files were fetched %d times", n)
	}
}

// assertSplitPets checks the tools of testdata/split: every schema comes from another
// file, some through references relative to a file that is not the main one.
func assertSplitPets(t *testing.T, src *Source, m *toolmgr.Manager) {
	t.Helper()
	for _, w := range src.Warnings {
		if strings.Contains(w, "reference") {
			t.Errorf("warning: %s", w)
		}
	}
	create := schemaOf(t, m, "split__createPet")
	if got := prop(create, "name")["minLength"]; got != float64(1) {
		t.Errorf("createPet name (schemas/pet.yaml): %v", prop(create, "name"))
	}
	if got := prop(create, "tag", "label")["maxLength"]; got != float64(20) {
		t.Errorf("createPet tag.label (schemas/tag.yaml, relative to pet.yaml): %v", prop(create, "tag"))
	}
	if got := prop(create, "owner", "address", "city")["minLength"]; got != float64(2) {
		t.Errorf("createPet owner.address.city (common.yaml, a local ref in it): %v", prop(create, "owner"))
	}
	if got := fmt.Sprint(prop(create, "status")["type"]); got != "[string <nil>]" && got != "[string null]" {
		t.Errorf("createPet status is not nullable: %v", prop(create, "status"))
	}
	if prop(create, "id") != nil {
		t.Errorf("createPet id is read-only and should be left out: %v", create)
	}
	list := schemaOf(t, m, "split__listPets")
	if got := prop(list, "limit")["maximum"]; got != float64(100) {
		t.Errorf("listPets limit (common.yaml parameter): %v", prop(list, "limit"))
	}
	if got := prop(list, "tags", "[]", "label")["maxLength"]; got != float64(20) {
		t.Errorf("listPets tags items (schemas/tag.yaml, from paths/pets.yaml): %v", prop(list, "tags"))
	}
	update := schemaOf(t, m, "split__updatePet")
	if got := prop(update, "petId")["pattern"]; got != "^[0-9]+$" {
		t.Errorf("updatePet petId (path-item parameter in common.yaml): %v", prop(update, "petId"))
	}
	if got := prop(update, "tag", "label")["maxLength"]; got != float64(20) {
		t.Errorf("updatePet tag.label (main document's Pet → schemas/pet.yaml → tag.yaml): %v", update)
	}

	e := echo(t, call(t, m, "split__createPet", `{"name":"Rex","tag":{"label":"good"},"owner":{"address":{"city":"Oslo"}}}`))
	if e.Method != http.MethodPost || e.Path != "/pets" || e.Body != `{"name":"Rex","owner":{"address":{"city":"Oslo"}},"tag":{"label":"good"}}` {
		t.Errorf("createPet sent %s %s %s", e.Method, e.Path, e.Body)
	}
	if res := call(t, m, "split__createPet", `{"name":"Rex","tag":{"label":"`+strings.Repeat("x", 21)+`"}}`); !res.IsError {
		t.Errorf("a tag label over 20 characters (the limit in schemas/tag.yaml) was sent: %s", res.Text())
	}
	e = echo(t, call(t, m, "split__updatePet", `{"petId":"7","name":"Rex"}`))
	if e.Method != http.MethodPut || e.Path != "/pets/7" || e.Body != `{"name":"Rex"}` {
		t.Errorf("updatePet sent %s %s %s", e.Method, e.Path, e.Body)
	}
	e = echo(t, call(t, m, "split__listPets", `{"limit":5}`))
	if e.Method != http.MethodGet || e.Path != "/pets" || fmt.Sprint(e.Query["limit"]) != "[5]" {
		t.Errorf("listPets sent %s %s %v", e.Method, e.Path, e.Query)
	}
}

// writeFiles writes name → content under dir, making directories as needed.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// bodyRefDoc is a document whose one operation's body schema is a $ref to ref.
func bodyRefDoc(ref string) string {
	return "openapi: 3.0.0\ninfo: {title: t, version: \"1\"}\nservers: [{url: \"http://127.0.0.1:9\"}]\n" +
		"paths:\n  /x:\n    post:\n      operationId: x\n      requestBody:\n        content:\n          application/json:\n" +
		"            schema: {$ref: \"" + ref + "\"}\n      responses: {\"200\": {description: ok}}\n"
}

func TestRefsLeavingTheDirectoryRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.yaml")
	writeFiles(t, dir, map[string]string{
		"secret.yaml":           "type: object\nproperties: {password: {type: string}}\n",
		"api/ok.yaml":           "type: string\n",
		"api/schemas/deep.yaml": "type: object\nproperties: {a: {$ref: \"../../secret.yaml\"}}\n",
	})
	if err := os.Symlink(secret, filepath.Join(dir, "api", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, ref, names string }{
		{"parent", "../secret.yaml", secret},
		{"absolute", secret, secret},
		{"file URL", "file://" + filepath.ToSlash(secret), secret},
		{"etc", "/etc/passwd#/x", "/etc/passwd"},
		{"from a file in the tree", "./schemas/deep.yaml", secret},
		{"symlink out of the tree", "./link.yaml", "link.yaml"},
		{"another host", "http://127.0.0.1:9/x.yaml", "http://127.0.0.1:9/x.yaml"},
	}
	for i, c := range cases {
		spec := filepath.Join(dir, "api", fmt.Sprintf("doc%d.yaml", i))
		writeFiles(t, filepath.Dir(spec), map[string]string{filepath.Base(spec): bodyRefDoc(c.ref)})
		_, err := Load(context.Background(), Config{Name: "h", Spec: spec, Getenv: env(nil)})
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), c.names) ||
			!strings.Contains(err.Error(), "directory "+filepath.Join(dir, "api")) {
			t.Errorf("%s: want a refusal naming %s, got %v", c.name, c.names, err)
		}
	}
	// A file in the tree is fine, reached through a parent that stays inside.
	spec := filepath.Join(dir, "api", "fine.yaml")
	writeFiles(t, filepath.Dir(spec), map[string]string{"fine.yaml": bodyRefDoc("./schemas/../ok.yaml")})
	if _, err := Load(context.Background(), Config{Name: "ok", Spec: spec, Getenv: env(nil)}); err != nil {
		t.Errorf("a ref inside the tree: %v", err)
	}
}

func TestURLRefsToOtherHostsRefused(t *testing.T) {
	t.Parallel()
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		w.Write([]byte("type: string\n"))
	}))
	t.Cleanup(other.Close)
	docs := map[string]string{
		"/api/other.yaml":       bodyRefDoc(other.URL + "/s.yaml"),
		"/api/file.yaml":        bodyRefDoc("file:///etc/passwd"),
		"/api/rooted.yaml":      bodyRefDoc("/schemas/s.yaml"),
		"/api/nested.yaml":      bodyRefDoc("./schemas/hop.yaml"),
		"/api/schemas/hop.yaml": "type: object\nproperties: {a: {$ref: \"" + other.URL + "/s.yaml\"}}\n",
		"/schemas/s.yaml":       "type: string\nmaxLength: 3\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := docs[r.URL.Path]; ok {
			w.Write([]byte(d))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct{ doc, names string }{
		{"/api/other.yaml", other.URL + "/s.yaml"},
		{"/api/file.yaml", "file:///etc/passwd"},
		{"/api/nested.yaml", other.URL + "/s.yaml"},
	} {
		_, err := Load(context.Background(), Config{Name: "h", Spec: srv.URL + c.doc, Getenv: env(nil)})
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), c.names) ||
			!strings.Contains(err.Error(), "only to URLs on that scheme, host and port") {
			t.Errorf("%s: want a refusal naming %s, got %v", c.doc, c.names, err)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other host was asked %d times", n)
	}
	// A path-absolute reference stays on the document's server.
	_, m := load(t, Config{Name: "rooted", Spec: srv.URL + "/api/rooted.yaml"})
	if got := schemaOf(t, m, "rooted__x"); fmt.Sprint(prop(got, "body")["maxLength"]) != "3" {
		t.Errorf("path-absolute ref: %v", got)
	}
}

func TestSplitDocumentBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A schema whose properties are files of their own, one more than the bound.
	var props strings.Builder
	many := map[string]string{"many/openapi.yaml": bodyRefDoc("./s.yaml")}
	for i := 0; i < MaxSpecFiles; i++ {
		fmt.Fprintf(&props, "  p%d: {$ref: \"./p%d.yaml\"}\n", i, i)
		many[fmt.Sprintf("many/p%d.yaml", i)] = "type: string\n"
	}
	many["many/s.yaml"] = "type: object\nproperties:\n" + props.String()
	writeFiles(t, dir, many)
	// Files of a size each allowed alone but too big together: mostly a YAML comment.
	filler := "#" + strings.Repeat("x", MaxSpecTotalBytes/3) + "\n"
	writeFiles(t, dir, map[string]string{
		"big/openapi.yaml":  bodyRefDoc("./a.yaml"),
		"big/a.yaml":        "type: object\nproperties: {b: {$ref: \"./b.yaml\"}}\n" + filler,
		"big/b.yaml":        "type: object\nproperties: {c: {$ref: \"./c.yaml\"}}\n" + filler,
		"big/c.yaml":        "type: object\nproperties: {d: {$ref: \"./d.yaml\"}}\n" + filler,
		"big/d.yaml":        "type: string\n",
		"huge/openapi.yaml": bodyRefDoc("./a.yaml"),
		"huge/a.yaml":       "type: string\n#" + strings.Repeat("x", MaxSpecBytes) + "\n",
	})
	for _, c := range []struct{ doc, want string }{
		{"many", fmt.Sprintf("span more than %d files", MaxSpecFiles)},
		{"big", fmt.Sprintf("come to more than %d MiB", MaxSpecTotalBytes>>20)},
		{"huge", fmt.Sprintf("a.yaml is larger than %d MiB", MaxSpecBytes>>20)},
	} {
		_, err := Load(context.Background(), Config{Name: "h", Spec: filepath.Join(dir, c.doc, "openapi.yaml"), Getenv: env(nil)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error with %q, got %v", c.doc, c.want, err)
		}
	}
}

// TestOperationRefs loads a document laid out as DigitalOcean's: every operation a
// $ref to a file of its own (`get: {$ref: resources/droplets/droplets_list.yml}`), with
// references relative to that file, and a tag description that is a $ref. kin-openapi
// reads such an operation as empty, which made tools named from method and path
// that took no argument at all; the tag description stopped start-up.
func TestOperationRefs(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "do", Spec: filepath.Join("testdata", "oprefs", "openapi.yaml"), BaseURL: srv.URL})
	assertOperationRefs(t, m)
}

func TestOperationRefsFromURL(t *testing.T) {
	t.Parallel()
	api, _ := upstream(t)
	files := httptest.NewServer(http.StripPrefix("/spec/", http.FileServer(http.Dir(filepath.Join("testdata", "oprefs")))))
	t.Cleanup(files.Close)
	_, m := load(t, Config{Name: "do", Spec: files.URL + "/spec/openapi.yaml", BaseURL: api.URL})
	assertOperationRefs(t, m)
}

func assertOperationRefs(t *testing.T, m *toolmgr.Manager) {
	t.Helper()
	list := schemaOf(t, m, "do__droplets_list")
	if got := prop(list, "per_page")["maximum"]; got != float64(200) {
		t.Errorf("droplets_list per_page (shared/parameters.yml, relative to the operation's file): %v", prop(list, "per_page"))
	}
	create := schemaOf(t, m, "do__droplets_create")
	if got := prop(create, "name")["minLength"]; got != float64(1) {
		t.Errorf("droplets_create name (models/droplet_create.yml): %v", create)
	}
	if got := fmt.Sprint(prop(create, "region")["enum"]); got != "[nyc1 ams3 fra1]" {
		t.Errorf("droplets_create region (the main document's components, from the model's file): %v", prop(create, "region"))
	}
	e := echo(t, call(t, m, "do__droplets_create", `{"name":"web-1","size":"s-1vcpu-1gb","region":"ams3"}`))
	if e.Method != "POST" || e.Path != "/v2/droplets" || !strings.Contains(e.Body, `"region":"ams3"`) {
		t.Errorf("droplets_create sent %+v", e)
	}
	if res := call(t, m, "do__droplets_create", `{"name":"web-1"}`); !res.IsError || !strings.Contains(res.Text(), "size") {
		t.Errorf("droplets_create without size: %s", res.Text())
	}
	e = echo(t, call(t, m, "do__droplets_list", `{"per_page":50,"tag_name":"web"}`))
	if fmt.Sprint(e.Query["per_page"], e.Query["tag_name"]) != "[50] [web]" {
		t.Errorf("droplets_list sent %+v", e)
	}
	// properties written as a $ref to an object of properties in another file
	add := schemaOf(t, m, "do__loadBalancers_add_droplets")
	if got := prop(add, "droplet_ids")["maxItems"]; got != float64(10) {
		t.Errorf("loadBalancers_add_droplets droplet_ids (properties: {$ref: …}): %v", add)
	}
	e = echo(t, call(t, m, "do__loadBalancers_add_droplets", `{"lb_id":"lb1","droplet_ids":[3,4]}`))
	if e.Path != "/v2/load_balancers/lb1/droplets" || e.Body != `{"droplet_ids":[3,4]}` {
		t.Errorf("loadBalancers_add_droplets sent %+v", e)
	}
	// a discriminator mapping relative to the operation's file
	rec := schemaOf(t, m, "do__domains_create_record")
	if !strings.Contains(fmt.Sprint(rec), "const:MX") {
		t.Errorf("domains_create_record: the mapping's tag is not told: %v", rec)
	}
	e = echo(t, call(t, m, "do__domains_create_record", `{"domain":"example.com","body":{"type":"MX","data":"mx.example.com","priority":10}}`))
	if e.Path != "/v2/domains/example.com/records" || !strings.Contains(e.Body, `"priority":10`) {
		t.Errorf("domains_create_record sent %+v", e)
	}
	e = echo(t, call(t, m, "do__droplets_destroy", `{"droplet_id":7}`))
	if e.Method != "DELETE" || e.Path != "/v2/droplets/7" {
		t.Errorf("droplets_destroy sent %+v", e)
	}
}

// TestOperationRefOutsideMainDocument: an operation written as a $ref in a path item
// of another file is not rewritten; it stops start-up naming it rather than make a
// tool that takes no argument.
func TestOperationRefOutsideMainDocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"openapi.yaml":      "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /things:\n    $ref: paths/things.yaml\n",
		"paths/things.yaml": "get:\n  $ref: ../ops/list.yaml\n",
		"ops/list.yaml":     "operationId: listThings\nparameters:\n  - {name: q, in: query, schema: {type: string}}\nresponses:\n  '200': {description: ok}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(context.Background(), Config{Name: "x", Spec: filepath.Join(dir, "openapi.yaml"), BaseURL: "http://127.0.0.1:1", Getenv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), "GET /things") || !strings.Contains(err.Error(), "../ops/list.yaml") {
		t.Fatalf("Load: %v", err)
	}
}

// TestSplitDocumentOfManyFiles: DigitalOcean's public API spans about 1,500 files
// (2.7 MB), an operation and each of its schemas a file; the bound on files was 100.
func TestSplitDocumentOfManyFiles(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	dir := t.TempDir()
	var paths strings.Builder
	files := map[string]string{}
	for i := 0; i < 1500; i++ {
		fmt.Fprintf(&paths, "  /things%d:\n    post: {$ref: \"ops/op%d.yaml\"}\n", i, i)
		files[fmt.Sprintf("ops/op%d.yaml", i)] = fmt.Sprintf("operationId: op%d\nrequestBody:\n  content:\n    application/json:\n"+
			"      schema: {$ref: \"models/m%d.yaml\"}\nresponses: {\"204\": {description: done}}\n", i, i)
		files[fmt.Sprintf("ops/models/m%d.yaml", i)] = fmt.Sprintf("type: object\nproperties:\n  n%d: {type: integer}\n", i)
	}
	// 3,001 files; one operation is enough to check.
	files["openapi.yaml"] = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n" + paths.String()
	writeFiles(t, dir, files)
	_, m := load(t, Config{Name: "many", Spec: filepath.Join(dir, "openapi.yaml"), BaseURL: srv.URL, Include: []string{"op1499"}})
	e := echo(t, call(t, m, "many__op1499", `{"n1499":7}`))
	if e.Path != "/things1499" || e.Body != `{"n1499":7}` {
		t.Errorf("op1499 sent %+v", e)
	}
}

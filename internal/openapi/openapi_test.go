package openapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/testnet"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// echoed is what the upstream test server saw.
type echoed struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	RawPath string              `json:"raw_path"`
	Query   map[string][]string `json:"query"`
	Header  map[string]string   `json:"header"`
	Cookies map[string]string   `json:"cookies"`
	Body    string              `json:"body"`
	CT      string              `json:"content_type"`
}

// upstream is a real HTTP API on loopback: it echoes requests, answers /status/{code}
// with that status, holds /slow until the client goes away and serves 10 MiB at /big.
func upstream(t *testing.T) (srv *httptest.Server, slowStarted chan struct{}) {
	t.Helper()
	slowStarted = make(chan struct{}, 4)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/status/"):
			var code int
			fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/status/"), "%d", &code)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":"status body %d"}`, code)
			return
		case r.URL.Path == "/slow":
			slowStarted <- struct{}{}
			<-r.Context().Done()
			return
		case r.URL.Path == "/big":
			w.Header().Set("Content-Type", "text/plain")
			chunk := strings.Repeat("x", 1<<20)
			for i := 0; i < 10; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		e := echoed{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), Query: r.URL.Query(), Header: map[string]string{},
			Cookies: map[string]string{}, Body: string(b), CT: r.Header.Get("Content-Type")}
		for _, h := range []string{"X-Trace", "Authorization", "X-Api-Key"} {
			if v := r.Header.Get(h); v != "" {
				e.Header[h] = v
			}
		}
		for _, c := range r.Cookies() {
			e.Cookies[c.Name] = c.Value
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(e)
	}))
	t.Cleanup(srv.Close)
	return srv, slowStarted
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// writeSpec writes doc to a file named name in a fresh temporary directory and
// returns its path.
func writeSpec(t testing.TB, name, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// load builds a source and registers its tools in a fresh manager.
func load(t *testing.T, cfg Config) (*Source, *toolmgr.Manager) {
	t.Helper()
	if cfg.Getenv == nil {
		cfg.Getenv = env(nil)
	}
	src, err := Load(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m := toolmgr.New()
	if _, err := src.Register(m); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return src, m
}

func call(t *testing.T, m *toolmgr.Manager, name, args string) *tool.Result {
	t.Helper()
	return callCtx(t, context.Background(), m, name, args, 0)
}

func callCtx(t *testing.T, ctx context.Context, m *toolmgr.Manager, name, args string, timeout time.Duration) *tool.Result {
	t.Helper()
	e, ok := m.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s; have %v", name, m.Names())
	}
	return m.Run(e, toolmgr.Invocation{Ctx: &tool.Context{Context: ctx, ToolName: name}, Args: json.RawMessage(args), Timeout: timeout})
}

func echo(t *testing.T, res *tool.Result) echoed {
	t.Helper()
	if res.IsError {
		t.Fatalf("call failed: %s: %s", res.ErrorKind, res.Text())
	}
	var e echoed
	if err := json.Unmarshal([]byte(res.Text()), &e); err != nil {
		t.Fatalf("not an echo: %v: %s", err, res.Text())
	}
	return e
}

func schemaOf(t *testing.T, m *toolmgr.Manager, name string) map[string]any {
	t.Helper()
	e, ok := m.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s; have %v", name, m.Names())
	}
	var s map[string]any
	if err := json.Unmarshal(e.Spec.Parameters, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func prop(s map[string]any, names ...string) map[string]any {
	cur := s
	for _, n := range names {
		props, _ := cur["properties"].(map[string]any)
		next, _ := props[n].(map[string]any)
		if next == nil {
			if n == "[]" {
				next, _ = cur["items"].(map[string]any)
			}
			if next == nil {
				return nil
			}
		}
		cur = next
	}
	return cur
}

func shop(t *testing.T, base string) Config {
	return Config{Name: "shop", Spec: filepath.Join("testdata", "shop30.yaml"), BaseURL: base}
}

func TestOpenAPI30ToolsAndSchemas(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	src, m := load(t, shop(t, srv.URL))
	want := []string{"shop__big", "shop__createItem", "shop__deleteItem", "shop__getItem", "shop__internalDebug", "shop__plantTree",
		"shop__put_items_itemId", "shop__slow", "shop__status"}
	if got := strings.Join(m.Names(), ","); got != strings.Join(want, ",") {
		t.Fatalf("tools:\n got %s\nwant %s", got, strings.Join(want, ","))
	}
	if len(src.Warnings) != 0 {
		t.Errorf("unexpected warnings: %v", src.Warnings)
	}

	get := schemaOf(t, m, "shop__getItem")
	if p := prop(get, "itemId"); p == nil || p["type"] != "string" || p["pattern"] != "^[a-z0-9/ -]+$" {
		t.Errorf("path parameter through two $refs not resolved: %v", p)
	}
	for _, n := range []string{"verbose", "tags", "X-Trace", "session", "filter"} {
		if prop(get, n) == nil {
			t.Errorf("getItem lacks parameter %s: %v", n, get)
		}
	}
	if req := fmt.Sprint(get["required"]); req != "[X-Trace itemId]" {
		t.Errorf("required = %s", req)
	}
	if get["additionalProperties"] != false {
		t.Errorf("a tool without a flat body should refuse unknown arguments")
	}

	// The put body is flattened; nested $refs resolved and 3.0 keywords converted.
	put := schemaOf(t, m, "shop__put_items_itemId")
	amount := prop(put, "price", "amount")
	if amount == nil || amount["exclusiveMinimum"] != float64(0) || amount["minimum"] != nil {
		t.Errorf("exclusiveMinimum: true with minimum 0 should become exclusiveMinimum: 0: %v", amount)
	}
	cur := prop(put, "price", "currency")
	if cur == nil || fmt.Sprint(cur["type"]) != "[string <nil>]" && fmt.Sprint(cur["type"]) != "[string null]" || fmt.Sprint(cur["enum"]) != "[EUR USD <nil>]" {
		t.Errorf("nullable enum not converted: %v", cur)
	}
	if put["x-go-type"] != nil || prop(put, "name")["example"] != nil {
		t.Errorf("extensions and examples should be dropped: %v", put)
	}
	if fmt.Sprint(put["required"]) != "[itemId name price]" {
		t.Errorf("put required = %v", put["required"])
	}

	// A recursive schema is expanded to a bound and then left open.
	tree := schemaOf(t, m, "shop__plantTree")
	level := prop(tree, "children", "[]")
	depth := 0
	for level != nil && prop(level, "children") != nil {
		level = prop(level, "children", "[]")
		depth++
	}
	if level == nil || !strings.Contains(fmt.Sprint(level["description"]), "recursive reference") {
		t.Errorf("recursive Tree not bounded with a note: depth %d, last %v", depth, level)
	}
	if depth != 0 {
		t.Errorf("Tree should expand once and stop at the recursion, expanded %d levels", depth)
	}

	// A query parameter named like a body property keeps the body whole under "body".
	create := schemaOf(t, m, "shop__createItem")
	if prop(create, "name") == nil || prop(create, "body", "price", "amount") == nil {
		t.Errorf("createItem should have query name and body.price: %v", create)
	}

	for name, want := range map[string]struct {
		risk     tool.Risk
		readOnly bool
	}{"shop__getItem": {tool.RiskLow, true}, "shop__createItem": {tool.RiskMedium, false}, "shop__deleteItem": {tool.RiskHigh, false}} {
		e, _ := m.Lookup(name)
		if e.Spec.Risk != want.risk || e.Spec.ReadOnly != want.readOnly || e.Spec.Source != "openapi:shop" {
			t.Errorf("%s: risk %s read_only %v source %s", name, e.Spec.Risk, e.Spec.ReadOnly, e.Spec.Source)
		}
	}
}

func TestEveryParameterLocation(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, shop(t, srv.URL))
	e := echo(t, call(t, m, "shop__getItem", `{"itemId":"a b/c","verbose":true,"tags":["x","y"],"sizes":["S","M"],"X-Trace":"t-1","session":"s1","filter":{"color":"red"}}`))
	if e.Method != "GET" || e.RawPath != "/items/a%20b%2Fc" {
		t.Errorf("path: %s %s", e.Method, e.RawPath)
	}
	if fmt.Sprint(e.Query["verbose"]) != "[true]" || fmt.Sprint(e.Query["tags"]) != "[x y]" || fmt.Sprint(e.Query["filter[color]"]) != "[red]" ||
		fmt.Sprint(e.Query["sizes"]) != "[S|M]" {
		t.Errorf("query: %v", e.Query)
	}
	if e.Header["X-Trace"] != "t-1" || e.Cookies["session"] != "s1" {
		t.Errorf("header %v cookies %v", e.Header, e.Cookies)
	}

	// Flat JSON body, path parameter beside it.
	e = echo(t, call(t, m, "shop__put_items_itemId", `{"itemId":"i1","name":"saw","price":{"amount":3.5,"currency":"EUR"}}`))
	if e.Method != "PUT" || e.Path != "/items/i1" || e.CT != "application/json" {
		t.Errorf("put: %+v", e)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(e.Body), &body); err != nil || body["name"] != "saw" || body["itemId"] != nil {
		t.Errorf("flat body: %s", e.Body)
	}
	// Whole body under "body" with a query parameter of the same name beside it.
	e = echo(t, call(t, m, "shop__createItem", `{"name":"q","body":{"name":"b","price":{"amount":1}}}`))
	if fmt.Sprint(e.Query["name"]) != "[q]" || !strings.Contains(e.Body, `"name":"b"`) {
		t.Errorf("createItem: query %v body %s", e.Query, e.Body)
	}
	// Arguments are validated against the merged schema before any request.
	if res := call(t, m, "shop__put_items_itemId", `{"itemId":"i1","name":"saw","price":{"amount":0}}`); res.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("exclusiveMinimum 0 should refuse amount 0: %s %s", res.ErrorKind, res.Text())
	}
	if res := call(t, m, "shop__getItem", `{"itemId":"x"}`); res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "X-Trace") {
		t.Errorf("missing required header should be invalid_args naming it: %s %s", res.ErrorKind, res.Text())
	}
}

// TestPathParameterCannotLeaveTheRoute: a path parameter whose value would make a whole
// segment "." or ".." (or drop it) would reach another route once the server resolves
// dot segments; such values are invalid_args and no request is sent.
func TestPathParameterCannotLeaveTheRoute(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	doc := `openapi: 3.0.3
info: {title: Users, version: "1"}
paths:
  /users/{id}/posts/{post}.json:
    get:
      operationId: post
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: post, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
`
	spec := writeSpec(t, "users.yaml", doc)
	_, m := load(t, Config{Name: "users", Spec: spec, BaseURL: srv.URL + "/api"})
	for _, id := range []string{"..", ".", ""} {
		res := call(t, m, "users__post", `{"id":"`+id+`","post":"p"}`)
		if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "id") {
			t.Errorf("id %q: %s %s", id, res.ErrorKind, res.Text())
		}
	}
	// Dots inside a segment, or beside literal text, stay as they are.
	for id, want := range map[string]string{"...": "/api/users/.../posts/..json", "a.b": "/api/users/a.b/posts/..json"} {
		if e := echo(t, call(t, m, "users__post", `{"id":"`+id+`","post":"."}`)); e.Path != want {
			t.Errorf("id %q: path %s, want %s", id, e.Path, want)
		}
	}
}

// TestPathParameterDotSegmentsRefused: "/" in a path parameter is sent as %2F, but
// many servers and proxies decode it before resolving dot segments (nginx matches and
// forwards the normalized path), so "../admin" would reach /admin; and two parameters
// in one segment can make ".." together. Both are invalid_args and nothing is sent.
func TestPathParameterDotSegmentsRefused(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	doc := `openapi: 3.0.3
info: {title: Files, version: "1"}
paths:
  /users/{id}/files/{a}{b}:
    get:
      operationId: file
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: a, in: path, required: true, schema: {type: string}}
        - {name: b, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
`
	spec := writeSpec(t, "files.yaml", doc)
	_, m := load(t, Config{Name: "files", Spec: spec, BaseURL: srv.URL})
	for _, args := range []string{
		`{"id":"../admin","a":"x","b":"y"}`,
		`{"id":"u/../../admin","a":"x","b":"y"}`,
		`{"id":"u/./x","a":"x","b":"y"}`,
		`{"id":"..\\admin","a":"x","b":"y"}`,
		`{"id":"u","a":".","b":"."}`,
		`{"id":"u","a":"","b":"."}`,
		`{"id":"u","a":"","b":""}`,
	} {
		res := call(t, m, "files__file", args)
		if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "path parameter") {
			t.Errorf("%s: %s %s", args, res.ErrorKind, res.Text())
		}
	}
	// A slash between ordinary names is data (group/project ids), sent as %2F.
	if e := echo(t, call(t, m, "files__file", `{"id":"group/project","a":"..","b":"."}`)); e.RawPath != "/users/group%2Fproject/files/..." {
		t.Errorf("raw path %s", e.RawPath)
	}
}

// TestHeaderValueRefused: a header value the HTTP client cannot send is the model's
// mistake (invalid_args), not an unreachable upstream.
func TestHeaderValueRefused(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, shop(t, srv.URL))
	for _, v := range []string{`t\r\nX-Api-Key: forged`, `a\u0000b`} {
		res := call(t, m, "shop__getItem", `{"itemId":"x","X-Trace":"`+v+`"}`)
		if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "X-Trace") {
			t.Errorf("X-Trace %s: %s %s", v, res.ErrorKind, res.Text())
		}
	}
}

func TestBasePathKept(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, shop(t, srv.URL+"/api/v1/"))
	e := echo(t, call(t, m, "shop__deleteItem", `{"itemId":"z"}`))
	if e.Path != "/api/v1/items/z" || e.Method != "DELETE" {
		t.Errorf("base path lost: %s %s", e.Method, e.Path)
	}
	// A query in the base URL (api-version=… and the like) goes with every call.
	_, m = load(t, shop(t, srv.URL+"/api?api-version=2024-01&tenant=t1"))
	e = echo(t, call(t, m, "shop__getItem", `{"itemId":"z","X-Trace":"t","tags":["a"]}`))
	if e.Path != "/api/items/z" || fmt.Sprint(e.Query) != "map[api-version:[2024-01] tags:[a] tenant:[t1]]" {
		t.Errorf("base query lost: %s %v", e.Path, e.Query)
	}
}

func TestOpenAPI31(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "notes", Spec: filepath.Join("testdata", "notes31.yaml"), BaseURL: srv.URL})
	if got := strings.Join(m.Names(), ","); got != "notes__create_note,notes__get_notes_id" {
		t.Fatalf("tools: %s", got)
	}
	s := schemaOf(t, m, "notes__create_note")
	if prop(s, "text") == nil || prop(s, "kind")["const"] != "plain" || fmt.Sprint(prop(s, "due")["type"]) != "[string null]" {
		t.Errorf("3.1 body schema: %v", s)
	}
	g := schemaOf(t, m, "notes__get_notes_id")
	if prop(g, "fields__") == nil {
		t.Fatalf("fields[] should become the argument fields__: %v", g)
	}
	e := echo(t, call(t, m, "notes__get_notes_id", `{"id":"n1","fields__":["a","b"]}`))
	if e.Path != "/notes/n1" || fmt.Sprint(e.Query["fields[]"]) != "[a b]" {
		t.Errorf("3.1 call: %s %v", e.Path, e.Query)
	}
	e = echo(t, call(t, m, "notes__create_note", `{"text":"hi","due":null}`))
	if e.Body != `{"due":null,"text":"hi"}` {
		t.Errorf("body: %s", e.Body)
	}
}

func TestIncludeExclude(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	cfg := shop(t, srv.URL)
	cfg.Include = []string{"get*", "status", "put_*"}
	cfg.Exclude = []string{"getI*"}
	_, m := load(t, cfg)
	if got := strings.Join(m.Names(), ","); got != "shop__put_items_itemId,shop__status" {
		t.Errorf("include/exclude: %s", got)
	}
	cfg.Include = []string{"nothing*"}
	if _, err := Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no operations left") {
		t.Errorf("empty selection: %v", err)
	}
}

func TestAuthPlacement(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	cases := []struct {
		name  string
		auth  Auth
		check func(e echoed) bool
	}{
		{"bearer", Auth{BearerTokenEnv: "TOK"}, func(e echoed) bool { return e.Header["Authorization"] == "Bearer s3cret" }},
		{"header", Auth{APIKeyEnv: "TOK", APIKeyHeader: "X-Api-Key"}, func(e echoed) bool { return e.Header["X-Api-Key"] == "s3cret" }},
		{"query", Auth{APIKeyEnv: "TOK", APIKeyQuery: "api_key"}, func(e echoed) bool { return fmt.Sprint(e.Query["api_key"]) == "[s3cret]" }},
		{"basic", Auth{BasicUsernameEnv: "USER", BasicPasswordEnv: "TOK"}, func(e echoed) bool {
			r := &http.Request{Header: http.Header{"Authorization": {e.Header["Authorization"]}}}
			u, p, ok := r.BasicAuth()
			return ok && u == "AC42" && p == "s3cret"
		}},
	}
	for _, c := range cases {
		cfg := shop(t, srv.URL)
		cfg.Auth, cfg.Getenv = c.auth, env(map[string]string{"TOK": "s3cret", "USER": "AC42"})
		// What was sent is read on the way out: the result has the credentials the
		// upstream echoes redacted (TestEchoedCredentialsRedacted).
		sent := &requestLog{}
		cfg.Client = &http.Client{Transport: sent}
		_, m := load(t, cfg)
		res := call(t, m, "shop__deleteItem", `{"itemId":"a"}`)
		echo(t, res)
		r := sent.last()
		e := echoed{Header: map[string]string{"Authorization": r.Header.Get("Authorization"), "X-Api-Key": r.Header.Get("X-Api-Key")}, Query: r.URL.Query()}
		if !c.check(e) {
			t.Errorf("%s: credentials not where expected: %+v", c.name, e)
		}
		// Details are persisted and shown in UIs: the credentials stay out of them.
		if strings.Contains(string(res.Details), "s3cret") || !strings.Contains(string(res.Details), "/items/a") {
			t.Errorf("%s: details: %s", c.name, res.Details)
		}
		if strings.Contains(res.Text(), "s3cret") || strings.Contains(res.Text(), "QUM0MjpzM2NyZXQ=") {
			t.Errorf("%s: the echoed credentials reach the model: %s", c.name, res.Text())
		}
	}
	cfg := shop(t, srv.URL)
	cfg.Auth = Auth{BearerTokenEnv: "MISSING_TOKEN"}
	cfg.Getenv = env(nil)
	if _, err := Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "MISSING_TOKEN is not set") || !strings.Contains(err.Error(), `"shop"`) {
		t.Errorf("missing env: %v", err)
	}
	cfg.Auth = Auth{APIKeyEnv: "TOK"}
	if _, err := Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "api_key_header") {
		t.Errorf("api key without placement: %v", err)
	}
	cfg.Auth = Auth{BasicUsernameEnv: "USER"}
	if _, err := Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("basic without a password: %v", err)
	}
	cfg.Auth = Auth{BasicUsernameEnv: "USER", BasicPasswordEnv: "TOK", BearerTokenEnv: "TOK"}
	if _, err := Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "set one of") {
		t.Errorf("basic and bearer: %v", err)
	}
	cfg.Auth, cfg.Getenv = Auth{BasicUsernameEnv: "USER", BasicPasswordEnv: "TOK"}, env(map[string]string{"USER": "a:b", "TOK": "x"})
	if _, err := Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "colon") {
		t.Errorf("basic username with a colon: %v", err)
	}
}

// requestLog is a transport that keeps the requests it sends.
type requestLog struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *requestLog) last() *http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

func TestNon2xxAndUnavailable(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, shop(t, srv.URL))
	res := call(t, m, "shop__status", `{"code":404}`)
	if !res.IsError || res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "HTTP 404 Not Found") || !strings.Contains(res.Text(), "status body 404") {
		t.Errorf("404: %s %s", res.ErrorKind, res.Text())
	}
	var d map[string]any
	_ = json.Unmarshal(res.Details, &d)
	if d["status"] != float64(404) {
		t.Errorf("details: %s", res.Details)
	}
	if res := call(t, m, "shop__status", `{"code":503}`); res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "503") {
		t.Errorf("503: %s %s", res.ErrorKind, res.Text())
	}
	if res := call(t, m, "shop__status", `{"code":201}`); res.IsError || string(res.Structured) != `{"error":"status body 201"}` {
		t.Errorf("201 should succeed with structured JSON: %v %s", res.IsError, res.Structured)
	}

	// A dead upstream: a port nobody listens on any more.
	dead := "http://" + testnet.RefusedAddr(t)
	_, m = load(t, shop(t, dead))
	if res := call(t, m, "shop__deleteItem", `{"itemId":"a"}`); res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "could not be reached") {
		t.Errorf("dead upstream: %s %s", res.ErrorKind, res.Text())
	}
}

func TestTimeoutAndCancellation(t *testing.T) {
	t.Parallel()
	srv, started := upstream(t)
	_, m := load(t, shop(t, srv.URL))
	if res := callCtx(t, context.Background(), m, "shop__slow", `{}`, 300*time.Millisecond); res.ErrorKind != tool.KindTimeout {
		t.Errorf("deadline: %s %s", res.ErrorKind, res.Text())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *tool.Result, 1)
	go func() { done <- callCtx(t, ctx, m, "shop__slow", `{}`, 0) }()
	// Wait until the request reached the server twice (the timed-out one and this one).
	for i := 0; i < 2; i++ {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the request never reached the upstream")
		}
	}
	cancel()
	select {
	case res := <-done:
		if res.ErrorKind != tool.KindCancelled {
			t.Errorf("cancel: %s %s", res.ErrorKind, res.Text())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled call did not return")
	}
}

func TestResponseCapped(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	cfg := shop(t, srv.URL)
	cfg.MaxResponseBytes = 1 << 20
	_, m := load(t, cfg)
	res := call(t, m, "shop__big", `{}`)
	if res.IsError || len(res.Text()) > (1<<20)+200 || !strings.Contains(res.Text(), "response cut") {
		t.Errorf("big response: error %v, %d bytes", res.IsError, len(res.Text()))
	}
}

func TestSpecFromURL(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile(filepath.Join("testdata", "notes31.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	api, _ := upstream(t)
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/spec/openapi.yaml":
			// A relative server URL resolves against the document's own address.
			w.Write([]byte(strings.Replace(string(spec), "paths:", "servers: [{url: /api}]\npaths:", 1)))
		case "/hang.yaml":
			select {
			case <-r.Context().Done():
			case <-hang:
			}
		case "/api/notes/n1":
			api.Config.Handler.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	_, m := load(t, Config{Name: "notes", Spec: srv.URL + "/spec/openapi.yaml"})
	if e := echo(t, call(t, m, "notes__get_notes_id", `{"id":"n1"}`)); e.Path != "/api/notes/n1" {
		t.Errorf("relative server: %s", e.Path)
	}
	_, err = Load(context.Background(), Config{Name: "slow", Spec: srv.URL + "/hang.yaml", FetchTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "longer than 200ms") || !strings.Contains(err.Error(), "hang.yaml") {
		t.Errorf("fetch timeout: %v", err)
	}
	_, err = Load(context.Background(), Config{Name: "gone", Spec: srv.URL + "/missing.yaml"})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing spec: %v", err)
	}
}

func TestNameCollisionsReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := `openapi: 3.0.0
info: {title: t, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /a:
    get: {operationId: "list items", responses: {"200": {description: ok}}}
  /b:
    get: {operationId: "list_items", responses: {"200": {description: ok}}}
  /c:
    get: {operationId: "` + strings.Repeat("verylong", 12) + `", responses: {"200": {description: ok}}}
`
	p := filepath.Join(dir, "dup.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	src, m := load(t, Config{Name: "dup", Spec: p})
	names := m.Names()
	if len(names) != 3 || names[0] != "dup__list_items" || !strings.HasPrefix(names[1], "dup__list_items_") {
		t.Errorf("names: %v", names)
	}
	if len(names[2]) != 64 {
		t.Errorf("long name should be capped to 64: %q", names[2])
	}
	if len(src.Warnings) != 1 || !strings.Contains(src.Warnings[0], "both make tool dup__list_items") {
		t.Errorf("collision not reported: %v", src.Warnings)
	}
}

// TestUncompilableOperationLeftOut: an operation whose argument schema the validator
// cannot take (here a Unicode property Go's and the ECMAScript engine both lack) is
// left out with a warning naming it and the keyword at fault; the document's other
// operations load.
func TestUncompilableOperationLeftOut(t *testing.T) {
	t.Parallel()
	doc := `openapi: 3.0.0
info: {title: t, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /emoji:
    get:
      operationId: react
      parameters:
        - {name: e, in: query, schema: {type: string, pattern: "^\\p{Extended_Pictographic}+$"}}
      responses: {"200": {description: ok}}
  /items:
    get: {operationId: listItems, responses: {"200": {description: ok}}}
`
	p := writeSpec(t, "emoji.yaml", doc)
	src, m := load(t, Config{Name: "e", Spec: p})
	if got := strings.Join(m.Names(), ","); got != "e__listItems" {
		t.Errorf("tools: %s", got)
	}
	if w := strings.Join(src.Warnings, "\n"); !strings.Contains(w, "GET /emoji is left out: its argument schema does not compile: at '/properties/e/pattern'") ||
		!strings.Contains(w, "Extended_Pictographic") {
		t.Errorf("warnings: %s", w)
	}
	// A name that is taken still fails them all.
	if _, err := src.Register(m); !errors.Is(err, toolmgr.ErrAlreadyRegistered) {
		t.Errorf("registered a second time: %v, want ErrAlreadyRegistered", err)
	}
}

func TestHostileSpecs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := "openapi: 3.0.0\ninfo: {title: t, version: \"1\"}\nservers: [{url: \"http://127.0.0.1:9\"}]\n"
	op := func(schema string) string {
		return head + "paths:\n  /x:\n    post:\n      operationId: x\n      requestBody:\n        content:\n          application/json:\n            schema: " + schema + "\n      responses: {\"200\": {description: ok}}\n"
	}
	huge := write("huge.yaml", head+"paths: {}\n#"+strings.Repeat("a", MaxSpecBytes+10))
	bomb := write("bomb.yaml", `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
openapi: 3.0.0
`)
	cases := []struct{ name, path, want string }{
		{"huge", huge, "larger than 16 MiB"},
		{"not yaml", write("bad.yaml", "openapi: [3.0\n  : {"), "could not be parsed"},
		{"swagger 1.2", write("sw.yaml", "swagger: \"1.2\"\ninfo: {title: t, version: \"1\"}\npaths: {/x: {get: {responses: {\"200\": {description: ok}}}}}\n"), `Swagger "1.2" document; only Swagger 2.0`},
		{"swagger no paths", write("sw2.yaml", "swagger: \"2.0\"\ninfo: {title: t, version: \"1\"}\npaths: {}\n"), "no paths"},
		{"future", write("v4.yaml", "openapi: 4.0.0\ninfo: {title: t, version: \"1\"}\npaths: {/x: {get: {responses: {\"200\": {description: ok}}}}}\n"), "not supported"},
		{"no paths", write("empty.yaml", head+"paths: {}\n"), "no paths"},
		{"dangling ref", write("dangle.yaml", op(`{$ref: "#/components/schemas/Nope"}`)), "could not be parsed"},
		{"file ref", write("file.yaml", op(`{$ref: "/etc/passwd#/x"}`)), "/etc/passwd is refused"},
		{"alias bomb", bomb, "could not be parsed"},
		{"missing file", filepath.Join(dir, "nope.yaml"), "no such file"},
	}
	for _, c := range cases {
		_, err := Load(context.Background(), Config{Name: "h", Spec: c.path, Getenv: env(nil)})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `openapi "h"`) {
			t.Errorf("%s: want an error with %q naming the source, got %v", c.name, c.want, err)
		}
	}

	// A long chain of references and mutual recursion stay bounded and compile.
	var chain strings.Builder
	chain.WriteString(op(`{$ref: "#/components/schemas/S0"}`) + "components:\n  schemas:\n")
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&chain, "    S%d: {type: object, properties: {next: {$ref: \"#/components/schemas/S%d\"}, a: {$ref: \"#/components/schemas/A\"}}}\n", i, i+1)
	}
	chain.WriteString("    S60: {type: string}\n    A: {type: object, properties: {b: {$ref: \"#/components/schemas/B\"}}}\n    B: {type: array, items: {$ref: \"#/components/schemas/A\"}}\n")
	src, m := load(t, Config{Name: "deep", Spec: write("deep.yaml", chain.String())})
	if len(src.Warnings) == 0 || !strings.Contains(strings.Join(src.Warnings, ";"), "deeper than") {
		t.Errorf("deep chain should be reported: %v", src.Warnings)
	}
	e, _ := m.Lookup("deep__x")
	if len(e.Spec.Parameters) > 1<<20 {
		t.Errorf("schema of a deep chain is %d bytes", len(e.Spec.Parameters))
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bad := []Config{
		{Name: "", Spec: "x"},
		{Name: "a b", Spec: "x"},
		{Name: "a", Spec: ""},
		{Name: "a", Spec: "x", Prefix: "p/q"},
		{Name: "a", Spec: "x", BaseURL: "ftp://h"},
		{Name: "a", Spec: "x", Auth: Auth{BearerTokenEnv: "A", APIKeyEnv: "B", APIKeyHeader: "H"}},
		{Name: "a", Spec: "x", Auth: Auth{APIKeyHeader: "H"}},
		{Name: "a", Spec: "x", Include: []string{"["}},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("case %d accepted: %+v", i, c)
		}
	}
	if err := (Config{Name: "a", Spec: "x", Auth: Auth{APIKeyEnv: "K", APIKeyQuery: "key"}}).Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

// TestOwnContractLoadsCleanly keeps api/openapi.yaml a document this adapter (and
// kin-openapi's validator) reads without a finding.
func TestOwnContractLoadsCleanly(t *testing.T) {
	t.Parallel()
	src, m := load(t, Config{Name: "self", Spec: filepath.Join("..", "..", "api", "openapi.yaml")})
	if len(src.Warnings) != 0 {
		t.Errorf("api/openapi.yaml: %v", src.Warnings)
	}
	if _, ok := m.Lookup("self__runToolCalls"); !ok || len(m.Names()) < 30 {
		t.Errorf("tools: %v", m.Names())
	}
}

// fanOutSpec is a document of ops operations whose body schema refers to width copies
// of the next level, twelve levels deep. With a width of ten, a few KiB of YAML that
// inlining turns into a schema of the per-tool node cap for every operation; with one,
// a chain deeper than maxRefDepth, which makes a warning per operation.
func fanOutSpec(t *testing.T, ops, width int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("openapi: 3.0.0\ninfo: {title: t, version: \"1\"}\nservers: [{url: \"http://127.0.0.1:9\"}]\npaths:\n")
	for i := range ops {
		fmt.Fprintf(&b, "  /x%d:\n    post:\n      operationId: x%d\n      requestBody: {content: {application/json: {schema: {$ref: '#/components/schemas/S0'}}}}\n      responses: {\"200\": {description: ok}}\n", i, i)
	}
	b.WriteString("components:\n  schemas:\n")
	for l := range 12 {
		fmt.Fprintf(&b, "    S%d: {type: object, properties: {", l)
		for k := range width {
			fmt.Fprintf(&b, "p%d: {$ref: '#/components/schemas/S%d'}, ", k, l+1)
		}
		b.WriteString("}}\n")
	}
	b.WriteString("    S12: {type: string}\n")
	return writeSpec(t, "fan.yaml", b.String())
}

// TestSchemaAmplificationBounded: a small document whose references fan out must not
// make gigabytes of tool schemas (and minutes of start-up): the schemas of one source
// are bounded in all, with an error that says how to narrow it, and its warnings are
// bounded too.
func TestSchemaAmplificationBounded(t *testing.T) {
	t.Parallel()
	_, err := Load(context.Background(), Config{Name: "fan", Spec: fanOutSpec(t, 1000, 10), Getenv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), "argument schemas") || !strings.Contains(err.Error(), "include") {
		t.Fatalf("Load of a fan-out document: err = %v, want one about the schemas' size naming include", err)
	}
	// Narrowed with include, the same document loads.
	src, _ := load(t, Config{Name: "fan", Spec: fanOutSpec(t, 1000, 10), Include: []string{"x1", "x2"}})
	if len(src.Tools) != 2 {
		t.Errorf("tools = %d, want 2", len(src.Tools))
	}
	total := 0
	for _, o := range src.Tools {
		total += len(o.Spec().Parameters)
	}
	if total > MaxSchemaBytes {
		t.Errorf("schemas of two tools are %d bytes", total)
	}
	if len(src.Warnings) != 2 {
		t.Errorf("warnings = %q, want one per tool", src.Warnings)
	}

	// A warning for each of 300 operations: the log gets maxWarnings and a summary.
	src, _ = load(t, Config{Name: "chain", Spec: fanOutSpec(t, 300, 1)})
	if n := len(src.Warnings); n != maxWarnings+1 || !strings.Contains(src.Warnings[n-1], "more warnings") {
		t.Errorf("%d warnings, want %d and a summary; last %q", n, maxWarnings+1, src.Warnings[n-1])
	}
}

// TestRedirectsStayOnTheAPI: a redirect to another host (or from https to http) is not
// followed, so the configured credentials never reach it; one on the same host is.
func TestRedirectsStayOnTheAPI(t *testing.T) {
	t.Parallel()
	other := make(chan *http.Request, 4)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other <- r
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(elsewhere.Close)
	echoSrv, _ := upstream(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/items/away"):
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/items/here"):
			http.Redirect(w, r, "/items/there", http.StatusFound)
		default:
			echoSrv.Config.Handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(api.Close)
	for _, auth := range []Auth{{BearerTokenEnv: "TOK"}, {APIKeyEnv: "TOK", APIKeyHeader: "X-Api-Key"}, {APIKeyEnv: "TOK", APIKeyQuery: "key"}} {
		cfg := shop(t, api.URL)
		cfg.Auth, cfg.Getenv = auth, env(map[string]string{"TOK": "s3cret"})
		_, m := load(t, cfg)
		res := call(t, m, "shop__getItem", `{"itemId":"away","X-Trace":"t"}`)
		if !res.IsError || !strings.Contains(res.Text(), "302") || strings.Contains(res.Text(), "s3cret") ||
			!strings.Contains(res.Text(), "redirected to "+elsewhere.URL+"/steal, which is not followed") {
			t.Errorf("%+v: redirect elsewhere: %s %s", auth, res.ErrorKind, res.Text())
		}
		if strings.Contains(string(res.Details), "s3cret") {
			t.Errorf("%+v: details show the secret: %s", auth, res.Details)
		}
		e := echo(t, call(t, m, "shop__getItem", `{"itemId":"here","X-Trace":"t"}`))
		if e.Path != "/items/there" {
			t.Errorf("%+v: same-host redirect reached %s", auth, e.Path)
		}
	}
	select {
	case r := <-other:
		t.Errorf("the other host got %s %s", r.Method, r.URL)
	default:
	}
}

// TestErrorsNameTheURLCalled: an error used to name the path template
// (/status/{code}), not the URL called, so the model could not tell which of its
// calls failed. It names the URL with the path parameters filled in and the query
// sent, with the API key of api_key_query and the base URL's user info hidden.
func TestErrorsNameTheURLCalled(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	cfg := shop(t, strings.Replace(srv.URL, "http://", "http://user:pw@", 1)+"?api-version=2")
	cfg.Auth, cfg.Getenv = Auth{APIKeyEnv: "TOK", APIKeyQuery: "api_key"}, env(map[string]string{"TOK": "s3cret"})
	_, m := load(t, cfg)
	res := call(t, m, "shop__status", `{"code":404}`)
	text := res.Text()
	if !res.IsError || !strings.Contains(text, "from GET "+srv.URL+"/status/404?api-version=2&api_key=xxxxx:") ||
		strings.Contains(text, "{code}") || strings.Contains(text, "s3cret") || strings.Contains(text, "pw") {
		t.Errorf("404: %s", text)
	}

	dead := "http://" + testnet.RefusedAddr(t)
	cfg = shop(t, dead)
	cfg.Auth, cfg.Getenv = Auth{APIKeyEnv: "TOK", APIKeyQuery: "api_key"}, env(map[string]string{"TOK": "s3cret"})
	_, m = load(t, cfg)
	res = call(t, m, "shop__getItem", `{"itemId":"a b","X-Trace":"t","verbose":true}`)
	if text := res.Text(); !strings.Contains(text, "GET "+dead+"/items/a%20b?api_key=xxxxx&verbose=true could not be reached") || strings.Contains(text, "s3cret") {
		t.Errorf("dead upstream: %s", text)
	}
}

// TestRealDocumentQuirks loads what real documents do and checks where calls go.
func TestRealDocumentQuirks(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	src, m := load(t, Config{Name: "q", Spec: filepath.Join("testdata", "quirks31.yaml"), BaseURL: srv.URL})
	if got := strings.Join(m.Names(), ","); got != "q__CreateMessage,q__beta_createResponse,q__beta_getResponse,q__createFile,q__createResponse,q__createTask" {
		t.Fatalf("tools: %s", got)
	}
	if w := strings.Join(src.Warnings, "\n"); !strings.Contains(w, "$recursiveRef") || !strings.Contains(w, "$dynamicRef") {
		t.Errorf("the references left open should be reported: %s", w)
	}

	// The path key's query is sent as a query, not escaped into the path.
	e := echo(t, call(t, m, "q__beta_createResponse", `{"model":"m"}`))
	if e.Path != "/responses" || fmt.Sprint(e.Query) != "map[beta:[true]]" {
		t.Errorf("beta create went to %s ?%v", e.RawPath, e.Query)
	}
	e = echo(t, call(t, m, "q__createResponse", `{"model":"m"}`))
	if e.Path != "/responses" || len(e.Query) != 0 {
		t.Errorf("create went to %s ?%v", e.RawPath, e.Query)
	}
	e = echo(t, call(t, m, "q__beta_getResponse", `{"id":"r 1","include":"x"}`))
	if e.RawPath != "/responses/r%201" || fmt.Sprint(e.Query) != "map[beta:[true] include:[x] v:[2]]" {
		t.Errorf("beta get went to %s ?%v", e.RawPath, e.Query)
	}

	// Names changed for the model say which parameter they are.
	get := schemaOf(t, m, "q__beta_getResponse")
	if d := prop(get, "after_")["description"]; d != `On or before. (query parameter "after<")` {
		t.Errorf("after<: %v", d)
	}
	if d := prop(get, "query_after_")["description"]; d != `(query parameter "after>")` {
		t.Errorf("after>: %v", d)
	}
	if d := prop(get, "include")["description"]; d != "(query)" {
		t.Errorf("include: %v", d)
	}
	e = echo(t, call(t, m, "q__beta_getResponse", `{"id":"r","after_":"1","query_after_":"2"}`))
	if fmt.Sprint(e.Query) != "map[after<:[1] after>:[2] beta:[true] v:[2]]" {
		t.Errorf("renamed parameters sent as %v", e.Query)
	}

	// 3.0 keywords in a 3.1 document keep their 3.0 meaning.
	temp := prop(schemaOf(t, m, "q__createResponse"), "temperature")
	if temp["exclusiveMinimum"] != float64(0) || temp["minimum"] != nil || fmt.Sprint(temp["type"]) != "[number null]" {
		t.Errorf("temperature: %v", temp)
	}
	if r := call(t, m, "q__createResponse", `{"temperature":0}`); !r.IsError || r.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("temperature 0 is excluded: %v %s", r.IsError, r.Text())
	}
	echo(t, call(t, m, "q__createResponse", `{"temperature":null,"a":{"name":"x","child":{"any":1}},"filters":{"type":"and","filters":["f",{"type":"or"}]}}`))

	// A form body's fields are arguments of their own, like a JSON object body's.
	msg := schemaOf(t, m, "q__CreateMessage")
	if prop(msg, "To") == nil || prop(msg, "body") != nil || fmt.Sprint(msg["required"]) != "[AccountSid Body To]" {
		t.Errorf("form body schema: %v", msg)
	}
	// An array field is repeated, or joined when its encoding says explode: false.
	e = echo(t, call(t, m, "q__CreateMessage", `{"AccountSid":"AC1","To":"+1555","Body":"a & b","MediaUrl":["u1","u2"],"Tags":["x","y"]}`))
	if e.Path != "/Accounts/AC1/Messages.json" || e.CT != "application/x-www-form-urlencoded" || e.Body != "Body=a+%26+b&MediaUrl=u1&MediaUrl=u2&Tags=x%2Cy&To=%2B1555" {
		t.Errorf("form call: %s %s %s", e.Path, e.CT, e.Body)
	}

	// A multipart body is sent as multipart, its files named and filled in by the model.
	file := prop(schemaOf(t, m, "q__createFile"), "file")
	if prop(file, "filename") == nil || prop(file, "content_base64") == nil || !strings.Contains(fmt.Sprint(file["description"]), "The file to upload.") {
		t.Errorf("file argument: %v", file)
	}
	e = echo(t, call(t, m, "q__createFile", `{"file":{"filename":"batch.json","content":"{\"a\":1}\n"},"purpose":"batch",`+
		`"extra":[{"filename":"x.png","content_base64":"aGk="}],"tags":["a","b"],"expires_after":{"seconds":60}}`))
	// Quoted, as most servers' parsers expect (a bare token is valid but not always read).
	for _, h := range []string{`name="file"; filename="batch.json"`, `name="expires_after"`, `name="purpose"`} {
		if !strings.Contains(e.Body, "Content-Disposition: form-data; "+h+"\r\n") {
			t.Errorf("no part with %s in %q", h, e.Body)
		}
	}
	mt, params, err := mime.ParseMediaType(e.CT)
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("multipart call sent %q", e.CT)
	}
	var parts []string
	r := multipart.NewReader(strings.NewReader(e.Body), params["boundary"])
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		parts = append(parts, fmt.Sprintf("%s|%s|%s|%q", p.FormName(), p.FileName(), p.Header.Get("Content-Type"), b))
	}
	want := []string{
		`expires_after||application/json|"{\"seconds\":60}\n"`,
		`extra|x.png|image/png|"hi"`,
		`file|batch.json|application/json|"{\"a\":1}\n"`,
		`purpose|||"batch"`, `tags|||"a"`, `tags|||"b"`,
	}
	if strings.Join(parts, "\n") != strings.Join(want, "\n") {
		t.Errorf("parts:\n%s\nwant:\n%s", strings.Join(parts, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{`{"file":{"filename":"a.txt"},"purpose":"p"}`, `{"file":{"filename":"a.txt","content":"x","content_base64":"eA=="},"purpose":"p"}`,
		`{"file":{"filename":"a.txt","content_base64":"%%%"},"purpose":"p"}`} {
		if r := call(t, m, "q__createFile", bad); r.ErrorKind != tool.KindInvalidArgs {
			t.Errorf("%s: want invalid_args, got %s %s", bad, r.ErrorKind, r.Text())
		}
	}
}

// TestReadOnlyPropertiesLeftOut: a request body's read-only properties (marked on
// the property or in one of its allOf parts) are not parameters of the tool, nor
// required; Asana's task has two dozen. Its backreference pattern (ECMA-262) loads.
func TestReadOnlyPropertiesLeftOut(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "q", Spec: filepath.Join("testdata", "quirks31.yaml"), BaseURL: srv.URL})
	data := prop(schemaOf(t, m, "q__createTask"), "data")
	base, _ := data["allOf"].([]any)
	if len(base) != 2 {
		t.Fatalf("data schema: %v", data)
	}
	first, second := base[0].(map[string]any), base[1].(map[string]any)
	if prop(first, "gid") != nil || prop(first, "created_by") != nil || prop(first, "name") == nil || fmt.Sprint(first["required"]) != "[name]" {
		t.Errorf("task base: %v", first)
	}
	if prop(second, "assigned_by") != nil || prop(second, "notes") == nil {
		t.Errorf("task request part: %v", second)
	}
	e := echo(t, call(t, m, "q__createTask", `{"opt_fields":"notes,notes","data":{"name":"write the report"}}`))
	if e.Body != `{"data":{"name":"write the report"}}` || fmt.Sprint(e.Query) != "map[opt_fields:[notes,notes]]" {
		t.Errorf("create task sent %s ?%v", e.Body, e.Query)
	}
	if r := call(t, m, "q__createTask", `{"opt_fields":"zzz"}`); r.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("opt_fields against the pattern: %s %s", r.ErrorKind, r.Text())
	}
}

// TestOAuth2ClientCredentials: with auth.oauth2 the calls carry a bearer token got by
// the client credentials grant: asked for at the first call (not at start), reused
// while it is valid, asked for again once it expires; a token endpoint that refuses
// makes the call unavailable, saying why, without its secret.
func TestOAuth2ClientCredentials(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	var mu sync.Mutex
	issued, ttl, refuse := 0, 3600, false
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		if refuse || id != "client-1" || secret != "s3cret-value" || r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "items:read items:write" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"unknown client"}`)
			return
		}
		issued++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok%d","token_type":"bearer","expires_in":%d}`, issued, ttl)
	}))
	t.Cleanup(idp.Close)

	cfg := shop(t, srv.URL)
	cfg.Auth = Auth{OAuth2: OAuth2{TokenURL: idp.URL + "/token", ClientIDEnv: "CID", ClientSecretEnv: "CSECRET", Scopes: []string{"items:read", "items:write"}}}
	cfg.Getenv = env(map[string]string{"CID": "client-1", "CSECRET": "s3cret-value"})
	_, m := load(t, cfg)
	mu.Lock()
	if issued != 0 {
		t.Errorf("a token was asked for at start")
	}
	mu.Unlock()
	for i := range 3 {
		if e := echo(t, call(t, m, "shop__deleteItem", `{"itemId":"a"}`)); e.Header["Authorization"] != "Bearer tok1" {
			t.Fatalf("call %d sent %q, want the first token", i, e.Header["Authorization"])
		}
	}
	// A token that expires within the oauth2 package's margin is asked for again.
	mu.Lock()
	ttl = 1
	mu.Unlock()
	cfg2 := cfg
	cfg2.Name = "shop2"
	_, m2 := load(t, cfg2)
	echo(t, call(t, m2, "shop2__deleteItem", `{"itemId":"a"}`))
	if e := echo(t, call(t, m2, "shop2__deleteItem", `{"itemId":"a"}`)); e.Header["Authorization"] != "Bearer tok3" {
		t.Errorf("after expiry sent %q, want a new token (tok3)", e.Header["Authorization"])
	}

	// A token the API refuses (revoked before its expiry) is not sent again.
	mu.Lock()
	ttl = 3600
	mu.Unlock()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer tok4" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"header":{"Authorization":%q}}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(api.Close)
	cfg4 := cfg
	cfg4.Name, cfg4.BaseURL = "shop4", api.URL
	_, m4 := load(t, cfg4)
	if res := call(t, m4, "shop4__deleteItem", `{"itemId":"a"}`); !res.IsError || !strings.Contains(res.Text(), "the next call gets a new one") {
		t.Fatalf("refused token: %v %s", res.IsError, res.Text())
	}
	if e := echo(t, call(t, m4, "shop4__deleteItem", `{"itemId":"a"}`)); e.Header["Authorization"] != "Bearer tok5" {
		t.Errorf("after a 401 sent %q, want a new token (tok5)", e.Header["Authorization"])
	}

	mu.Lock()
	refuse = true
	mu.Unlock()
	cfg3 := cfg
	cfg3.Name = "shop3"
	_, m3 := load(t, cfg3)
	res := call(t, m3, "shop3__deleteItem", `{"itemId":"a"}`)
	if !res.IsError || res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "invalid_client unknown client") ||
		!strings.Contains(res.Text(), idp.URL+"/token") || strings.Contains(res.Text(), "s3cret-value") {
		t.Errorf("refused token: %v %s %s", res.IsError, res.ErrorKind, res.Text())
	}

	for _, c := range []struct {
		auth Auth
		want string
	}{
		{Auth{OAuth2: OAuth2{TokenURL: "http://idp.example/token", ClientIDEnv: "CID", ClientSecretEnv: "CSECRET"}}, "https"},
		{Auth{OAuth2: OAuth2{TokenURL: idp.URL}}, "needs token_url, client_id_env and client_secret_env"},
		{Auth{BearerTokenEnv: "CID", OAuth2: OAuth2{TokenURL: idp.URL, ClientIDEnv: "CID", ClientSecretEnv: "CSECRET"}}, "set one of"},
		{Auth{OAuth2: OAuth2{TokenURL: idp.URL, ClientIDEnv: "CID", ClientSecretEnv: "MISSING"}}, "MISSING is not set"},
	} {
		bad := shop(t, srv.URL)
		bad.Auth, bad.Getenv = c.auth, env(map[string]string{"CID": "client-1"})
		if _, err := Load(context.Background(), bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want an error with %q, got %v", c.auth.OAuth2, c.want, err)
		}
	}
}

// openaiLike is an API shaped like OpenAI's (testdata/openai31.yaml): speech answers
// audio, chat completions answer by model name: "limited" a 429 with Retry-After,
// "echo" the credentials it was sent, in an error and in a success.
func openaiLike(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	audio := append([]byte("ID3\x04\x00"), make([]byte, 2000)...)
	for i := range audio[5:] {
		audio[5+i] = byte(i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/audio/speech" {
			w.Header().Set("Content-Type", "audio/mpeg")
			_, _ = w.Write(audio)
			return
		}
		var req struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		_, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		switch req.Model {
		case "limited":
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
		case "echo-error":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","code":"invalid_api_key"}}`, key)
		case "echo":
			fmt.Fprintf(w, `{"id":"c1","key":%q}`, key)
		default:
			fmt.Fprint(w, `{"id":"c1"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, audio
}

// TestAudioResponseKept: a binary audio answer (OpenAI's speech) is an audio block,
// kept whole in the call's record, not a line saying how many bytes were dropped.
func TestAudioResponseKept(t *testing.T) {
	t.Parallel()
	srv, audio := openaiLike(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL + "/v1"})
	res := call(t, m, "oai__createSpeech", `{"model":"tts-1","input":"hello","voice":"alloy"}`)
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("speech: %v %s", res.IsError, res.Text())
	}
	c := res.Content[0]
	got, err := base64.StdEncoding.DecodeString(c.Data)
	if c.Type != tool.ContentAudio || c.MimeType != "audio/mpeg" || err != nil || !bytes.Equal(got, audio) {
		t.Errorf("speech result: %s %s, %d bytes (%v); want the %d bytes of audio/mpeg", c.Type, c.MimeType, len(got), err, len(audio))
	}
}

// TestRetryAfterReachesTheModel: a 429's Retry-After header, where OpenAI (and most
// APIs) say when to try again, is in the result the model reads and in its details.
func TestRetryAfterReachesTheModel(t *testing.T) {
	t.Parallel()
	srv, _ := openaiLike(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL + "/v1"})
	res := call(t, m, "oai__createChatCompletion", `{"model":"limited","messages":[{"role":"user","content":"hi"}]}`)
	if !res.IsError || res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "rate_limit_exceeded") ||
		!strings.Contains(res.Text(), "retry after 20 seconds") {
		t.Errorf("429: %v %s %s", res.IsError, res.ErrorKind, res.Text())
	}
	var d map[string]any
	_ = json.Unmarshal(res.Details, &d)
	if d["retry_after"] != "20" {
		t.Errorf("details: %s", res.Details)
	}
}

// TestEchoedCredentialsRedacted: an API that quotes the key it was sent (in an error
// about it, or anywhere) does not hand it to the model, the call record or a UI.
func TestEchoedCredentialsRedacted(t *testing.T) {
	t.Parallel()
	srv, _ := openaiLike(t)
	for _, auth := range []Auth{{BearerTokenEnv: "KEY"}, {BasicUsernameEnv: "USER", BasicPasswordEnv: "KEY"}} {
		_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL + "/v1",
			Auth: auth, Getenv: env(map[string]string{"KEY": "sk-proj-0123456789abcdef", "USER": "org-1"})})
		// What was sent: the key, or Basic's base64 of "org-1:" and the key.
		leaked := func(s string) bool {
			return strings.Contains(s, "0123456789abcdef") || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte("org-1:sk-proj-0123456789abcdef")))
		}
		res := call(t, m, "oai__createChatCompletion", `{"model":"echo-error","messages":[{"role":"user","content":"hi"}]}`)
		if !res.IsError || leaked(res.Text()) || !strings.Contains(res.Text(), "Incorrect API key provided: REDACTED") {
			t.Errorf("%+v: 401 quoting the key: %s", auth, res.Text())
		}
		res = call(t, m, "oai__createChatCompletion", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`)
		if res.IsError || leaked(res.Text()+string(res.Structured)) || !strings.Contains(string(res.Structured), `"key":"REDACTED"`) {
			t.Errorf("%+v: 200 quoting the key: %s / %s", auth, res.Text(), res.Structured)
		}
	}
}

// TestFilesGoAsMultipart: an operation that offers a JSON and a multipart body of
// one schema (OpenAI's container files and skills) whose files are binary strings,
// which JSON cannot carry, is sent as multipart, and its files, alone or as the
// alternatives of a oneOf, take {filename, content | content_base64}.
func TestFilesGoAsMultipart(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL})
	parts := func(e echoed) string {
		mt, params, err := mime.ParseMediaType(e.CT)
		if err != nil || mt != "multipart/form-data" {
			return "sent as " + e.CT + ": " + e.Body
		}
		var out []string
		r := multipart.NewReader(strings.NewReader(e.Body), params["boundary"])
		for {
			p, err := r.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			out = append(out, fmt.Sprintf("%s|%s|%q", p.FormName(), p.FileName(), b))
		}
		return strings.Join(out, " ")
	}
	if f := prop(schemaOf(t, m, "oai__CreateContainerFile"), "file"); prop(f, "content_base64") == nil {
		t.Errorf("container file argument: %v", f)
	}
	e := echo(t, call(t, m, "oai__CreateContainerFile", `{"container_id":"c1","file":{"filename":"a.py","content":"print(1)\n"}}`))
	if got := parts(e); e.Path != "/containers/c1/files" || got != `file|a.py|"print(1)\n"` {
		t.Errorf("container file: %s %s", e.Path, got)
	}
	e = echo(t, call(t, m, "oai__CreateContainerFile", `{"container_id":"c1","file_id":"file-1"}`))
	if got := parts(e); got != `file_id||"file-1"` {
		t.Errorf("container file by id: %s", got)
	}

	files := prop(schemaOf(t, m, "oai__CreateSkill"), "files")
	alts, _ := files["anyOf"].([]any)
	if len(alts) != 2 || prop(asMap(alts[0])["items"].(map[string]any), "filename") == nil || prop(asMap(alts[1]), "content") == nil {
		t.Errorf("skill files argument: %v", files)
	}
	e = echo(t, call(t, m, "oai__CreateSkill", `{"files":[{"filename":"SKILL.md","content":"---\nname: x\n---\n"},{"filename":"run.sh","content_base64":"ZWNobw=="}]}`))
	if got := parts(e); got != `files|SKILL.md|"---\nname: x\n---\n" files|run.sh|"echo"` {
		t.Errorf("skill files: %s", got)
	}
	e = echo(t, call(t, m, "oai__CreateSkill", `{"files":{"filename":"s.zip","content_base64":"UEsDBA=="}}`))
	if got := parts(e); got != `files|s.zip|"PK\x03\x04"` {
		t.Errorf("skill zip: %s", got)
	}
}

// TestOneOfMeansOneOfTheseShapes: a oneOf whose alternatives overlap (OpenAI's input
// items: a user message fits the easy and the full message shape) takes a value that
// fits both, as the API does, where JSON Schema's oneOf refuses it; a value that fits
// none is still refused.
func TestOneOfMeansOneOfTheseShapes(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL})
	res := call(t, m, "oai__createResponse", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`)
	if res.IsError {
		t.Fatalf("a user message fitting both shapes: %s: %s", res.ErrorKind, res.Text())
	}
	if e := echo(t, res); e.Path != "/responses" || !strings.Contains(e.Body, `"input_text"`) {
		t.Errorf("sent %s %s", e.Path, e.Body)
	}
	res = call(t, m, "oai__createResponse", `{"model":"m","input":[{"role":"robot","content":"hi"}]}`)
	if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "/input/0/role") {
		t.Errorf("a message fitting no shape: %s: %s", res.ErrorKind, res.Text())
	}
}

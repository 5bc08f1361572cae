package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/config"
)

var (
	specOnce sync.Once
	specDoc  map[string]any
	specErr  error
	compiled sync.Map // schema name → *jsonschema.Schema
	compiler *jsonschema.Compiler
	compMu   sync.Mutex
)

func specPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "api", "openapi.yaml")
}

func loadSpec(t testing.TB) map[string]any {
	t.Helper()
	specOnce.Do(func() {
		var b []byte
		if b, specErr = os.ReadFile(specPath()); specErr != nil {
			return
		}
		specErr = yaml.Unmarshal(b, &specDoc)
		if specErr != nil {
			return
		}
		compiler = jsonschema.NewCompiler()
		compiler.DefaultDraft(jsonschema.Draft2020)
		specErr = compiler.AddResource("mem:///openapi.json", specDoc)
	})
	if specErr != nil {
		t.Fatalf("api/openapi.yaml: %v", specErr)
	}
	return specDoc
}

// validate checks body (JSON) against components/schemas/name of api/openapi.yaml, or
// against the schema at name when it is a JSON pointer (#/paths/…).
func validate(t testing.TB, name string, body []byte) {
	t.Helper()
	loadSpec(t)
	s, ok := compiled.Load(name)
	if !ok {
		ref := "mem:///openapi.json#/components/schemas/" + name
		if strings.HasPrefix(name, "#/") {
			ref = "mem:///openapi.json" + name
		}
		compMu.Lock()
		sch, err := compiler.Compile(ref)
		compMu.Unlock()
		if err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		compiled.Store(name, sch)
		s = sch
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("response is not JSON: %v: %q", err, body)
	}
	if err := s.(*jsonschema.Schema).Validate(v); err != nil {
		t.Fatalf("response does not match %s in api/openapi.yaml:\n%s\nbody: %s", name, err, body)
	}
}

// validateResponse checks body (JSON) against the schema api/openapi.yaml documents for
// one response of an operation: the route's own schema, whatever it refers to.
func validateResponse(t testing.TB, method, path, status, contentType string, body []byte) {
	t.Helper()
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	validate(t, "#/paths/"+esc.Replace(path)+"/"+strings.ToLower(method)+"/responses/"+status+"/content/"+esc.Replace(contentType)+"/schema", body)
}

// documentsHeader reports whether api/openapi.yaml lists the header in the response.
func documentsHeader(t testing.TB, method, route string, status int, header string) bool {
	t.Helper()
	node := any(loadSpec(t))
	for _, k := range []string{"paths", route, strings.ToLower(method), "responses", fmt.Sprint(status), "headers", header} {
		m, ok := node.(map[string]any)
		if !ok {
			return false
		}
		node = m[k]
	}
	return node != nil
}

// TestRouterMatchesSpec keeps the router and api/openapi.yaml in step: every route is
// documented and every documented operation is routed. HEAD is not routed, nor
// documented, per path: every GET answers it (headAsGet), as the contract says once,
// and TestHeadOnEveryGetRoute checks each.
func TestRouterMatchesSpec(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	doc := loadSpec(t)
	documented := map[string]bool{}
	for p, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "post", "put", "patch", "delete":
				documented[strings.ToUpper(method)+" "+p] = true
			}
		}
	}
	routed := map[string]bool{}
	routes, ok := d.app.API.Handler().(chi.Routes)
	if !ok {
		t.Fatal("handler is not a chi router")
	}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		// A trailing wildcard (/ui/*) is documented as one path parameter (/ui/{path}).
		route = strings.TrimSuffix(route, "/")
		if p, ok := strings.CutSuffix(route, "/*"); ok {
			route = p + "/{path}"
		}
		routed[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, extra []string
	for r := range routed {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !routed[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("router and api/openapi.yaml disagree\nrouted but not documented: %v\ndocumented but not routed: %v", missing, extra)
	}
	if len(routed) < 10 {
		t.Fatalf("only %d routes walked: %v", len(routed), routed)
	}
}

// TestErrorCodesDocumented checks every error code the server can produce is in the
// Error schema's enum.
func TestErrorCodesDocumented(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	enum := schemas["Error"].(map[string]any)["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(specPath()), "..", "internal", "server", "errors.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range enum {
		if !strings.Contains(string(src), fmt.Sprintf("= %q", c)) {
			t.Errorf("documented error code %q is not defined in errors.go", c)
		}
	}
}

// TestDiscriminatorsMatchSchemas: a oneOf with a discriminator maps every value of its
// members' discriminating property (a const or an enum), and only those, to the member
// that has it, so that a generated client picks the right type for each event.
func TestDiscriminatorsMatchSchemas(t *testing.T) {
	t.Parallel()
	schemas := loadSpec(t)["components"].(map[string]any)["schemas"].(map[string]any)
	checked := 0
	for name, v := range schemas {
		s, _ := v.(map[string]any)
		d, ok := s["discriminator"].(map[string]any)
		if !ok {
			continue
		}
		checked++
		prop, _ := d["propertyName"].(string)
		mapping, _ := d["mapping"].(map[string]any)
		want := map[string]string{} // discriminating value -> member's $ref
		for _, m := range s["oneOf"].([]any) {
			ref, _ := m.(map[string]any)["$ref"].(string)
			member := schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
			p, _ := member["properties"].(map[string]any)[prop].(map[string]any)
			values, _ := p["enum"].([]any)
			if c, ok := p["const"]; ok {
				values = append(values, c)
			}
			if len(values) == 0 {
				t.Errorf("%s: member %s has no const or enum for %q", name, ref, prop)
			}
			for _, val := range values {
				want[fmt.Sprint(val)] = ref
			}
		}
		for val, ref := range want {
			if mapping[val] != ref {
				t.Errorf("%s: discriminator maps %q to %v, want %s", name, val, mapping[val], ref)
			}
		}
		for val := range mapping {
			if _, ok := want[val]; !ok {
				t.Errorf("%s: discriminator maps %q, which no member's %q takes", name, val, prop)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no schema has a discriminator: StreamEvent should")
	}
}

// TestMethodNotAllowedListsAllow checks a 405 names the path's methods in Allow, as
// RFC 9110 §15.5.6 requires, so a client can tell what the path does take.
func TestMethodNotAllowedListsAllow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, tc := range []struct{ method, path, allow string }{
		{"PUT", "/v1/sessions", "POST"},
		{"HEAD", "/v1/sessions", "POST"},
		{"DELETE", "/v1/tool-calls", "GET, HEAD, POST"},
		{"PATCH", "/v1/sessions/ses_x/mcp", "DELETE, GET, HEAD, POST"},
		{"PATCH", "/mcp", "DELETE, GET, HEAD, POST"},
		{"POST", "/healthz", "GET, HEAD"},
		{"GET", "/v1/keys/key_x/revoke", "POST"},
	} {
		code, hdr, body := d.do(tc.method, tc.path, nil)
		if code != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, code, body)
		}
		if tc.method != http.MethodHead { // a HEAD answer has no body
			validate(t, "Error", body)
		}
		if got := hdr.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

// TestAcceptedRequestsMatchSpec checks request bodies the server accepts, and that
// clients send, are valid against the request schemas of api/openapi.yaml: a client
// generated from the contract must be able to send them.
func TestAcceptedRequestsMatchSpec(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, tc := range []struct{ name, schema, body string }{
		// The Go client sends null for "every tool" and "every skill"; sessions show it.
		{"null whitelists", "SessionSpec", `{"available_tools":null,"available_skills":null}`},
		{"empty whitelists", "SessionSpec", `{"available_tools":[],"available_skills":[]}`},
	} {
		code, _, body := d.do("POST", "/v1/sessions", tc.body)
		if code != http.StatusCreated {
			t.Fatalf("%s: %d %s", tc.name, code, body)
		}
		validate(t, tc.schema, []byte(tc.body))
	}
}

// TestSpecDocumentsCommonErrors checks every operation lists the HTTP errors any
// request to it can get, so a client generated from the contract expects them: 401, 403
// and 429 where a key is needed (authentication, roles and the key's limits come
// before the handler), 400, 408 (read_body_timeout) and 413 where it takes a body, and
// 415 where that body is decoded as the API's JSON (the MCP endpoint answers a wrong
// type with 400).
func TestSpecDocumentsCommonErrors(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	var missing []string
	for p, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			op, ok := o.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			sec, ok := op["security"].([]any)
			if !ok {
				sec = doc["security"].([]any)
			}
			var want []string
			if len(sec) > 0 {
				want = append(want, "401", "403", "429")
			}
			if strings.HasPrefix(p, "/v1/") || strings.HasSuffix(p, "/mcp") {
				want = append(want, "400") // a path or query that is not UTF-8 text (textURLMiddleware)
			}
			if _, ok := op["requestBody"]; ok {
				want = append(want, "400", "408", "413")
				if !strings.HasSuffix(p, "/mcp") {
					want = append(want, "415")
				}
			}
			responses := op["responses"].(map[string]any)
			for _, code := range want {
				if _, ok := responses[code]; !ok {
					missing = append(missing, strings.ToUpper(method)+" "+p+" "+code)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("responses not documented in api/openapi.yaml:\n%s", strings.Join(missing, "\n"))
	}
}

// TestResponsesMatchRouteSchemas sends one successful request to each JSON route and
// checks the answer against the schema that route documents (inline ones included,
// which tests validating a chosen component never reach), and that 201s name the new
// resource in Location where the contract says so.
func TestResponsesMatchRouteSchemas(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	const js = "application/json"
	check := func(method, route, path string, body any, status int) []byte {
		t.Helper()
		code, hdr, out := d.do(method, path, body)
		if code != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, out, status)
		}
		if ct := hdr.Get("Content-Type"); ct != js {
			t.Fatalf("%s %s: Content-Type %q", method, path, ct)
		}
		validateResponse(t, method, route, fmt.Sprint(status), js, out)
		if documentsHeader(t, method, route, status, "Location") {
			if loc := hdr.Get("Location"); !strings.HasPrefix(loc, route) {
				t.Fatalf("%s %s: Location %q", method, path, loc)
			}
		}
		return out
	}
	var sess struct{ ID string }
	_ = json.Unmarshal(check("POST", "/v1/sessions", "/v1/sessions", map[string]any{"available_tools": []string{"echo", "confirm"}, "metadata": map[string]any{"k": "v"}}, 201), &sess)
	s := "/v1/sessions/" + sess.ID
	check("GET", "/v1/sessions/{sessionID}", s, nil, 200)
	check("GET", "/v1/tools", "/v1/tools?format=anthropic", nil, 200)
	check("GET", "/v1/sessions/{sessionID}/tools", s+"/tools?format=mcp&query=echo", nil, 200)
	check("GET", "/v1/sessions/{sessionID}/prompt", s+"/prompt", nil, 200)
	check("POST", "/v1/sessions/{sessionID}/interrupt", s+"/interrupt", map[string]any{"message": "stop"}, 200)
	check("POST", "/v1/sessions/{sessionID}/interrupt", s+"/interrupt", nil, 200)
	_, evs := d.stream(s+"/tool-calls", `{"calls":[{"id":"e","name":"echo","arguments":{"text":"hi"}}]}`)
	callID := evs[0].str("call_id")
	check("GET", "/v1/sessions/{sessionID}/tool-calls", s+"/tool-calls", nil, 200)
	check("GET", "/v1/sessions/{sessionID}/tool-calls/{toolCallID}", s+"/tool-calls/e", nil, 200)
	check("GET", "/v1/tool-calls", "/v1/tool-calls?status=succeeded,failed", nil, 200)
	check("GET", "/v1/tool-calls/{callID}", "/v1/tool-calls/"+callID, nil, 200)
	check("GET", "/v1/tool-calls/{callID}/progress", "/v1/tool-calls/"+callID+"/progress?encoding=base64", nil, 200)
	check("GET", "/v1/skills", "/v1/skills", nil, 200)
	check("GET", "/v1/whoami", "/v1/whoami", nil, 200)
	check("GET", "/v1/approvals", "/v1/approvals?status=pending", nil, 200)
	check("GET", "/v1/mcp/servers", "/v1/mcp/servers", nil, 200)
	var key struct{ ID string }
	_ = json.Unmarshal(check("POST", "/v1/keys", "/v1/keys", map[string]any{"roles": []string{"agent"}, "name": "k"}, 201), &key)
	check("GET", "/v1/keys", "/v1/keys", nil, 200)
	if code, _, out := d.do("POST", "/v1/keys/"+key.ID+"/revoke", nil); code != 204 || len(out) != 0 {
		t.Fatalf("revoke: %d %q", code, out)
	}
	check("POST", "/v1/mcp/servers", "/v1/mcp/servers", map[string]any{"name": "down", "transport": "stdio", "command": "/bin/false"}, 201)
	check("POST", "/v1/mcp/servers/{name}/restart", "/v1/mcp/servers/down/restart", nil, 202)

	// A stateful call: its input answer, and the cancel of a call waiting for one.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.url+s+"/tool-calls", strings.NewReader(`{"calls":[{"id":"c","name":"confirm"}]}`))
	req.Header.Set("Content-Type", js)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	yields := 0
	for yields < 2 {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		var e struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(line, &e)
		if e.Type != "tool_yield" {
			continue
		}
		yields++
		if yields == 1 {
			check("POST", "/v1/tool-calls/{callID}/input", "/v1/tool-calls/"+e.CallID+"/input", map[string]any{"input": "yes"}, 202)
		} else {
			check("POST", "/v1/tool-calls/{callID}/cancel", "/v1/tool-calls/"+e.CallID+"/cancel", nil, 202)
		}
	}
}

// TestCORSExposesDocumentedHeaders: a browser UI on an allowed origin can read every
// response header the contract documents (X-Session-Id of a one-shot call, Location,
// Retry-After …): CORS hides all but a few unless they are exposed.
func TestCORSExposesDocumentedHeaders(t *testing.T) {
	t.Parallel()
	const origin = "https://console.example.com"
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.CORS.AllowedOrigins = []string{origin} }})
	want := map[string]bool{"Retry-After": true, "WWW-Authenticate": true, "X-Request-Id": true}
	for p, item := range loadSpec(t)["paths"].(map[string]any) {
		if !strings.HasPrefix(p, "/v1/") {
			continue
		}
		for _, o := range item.(map[string]any) {
			op, _ := o.(map[string]any)
			responses, _ := op["responses"].(map[string]any)
			for _, r := range responses {
				headers, _ := r.(map[string]any)["headers"].(map[string]any)
				for h := range headers {
					want[h] = true
				}
			}
		}
	}
	code, hdr, body := send(t, http.DefaultClient, "POST", d.url+"/v1/sessions", http.Header{"Origin": {origin}}, `{}`)
	if code != http.StatusCreated || hdr.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("%d %v %s", code, hdr, body)
	}
	exposed := map[string]bool{}
	for _, v := range hdr.Values("Access-Control-Expose-Headers") {
		for _, h := range strings.Split(v, ",") {
			exposed[http.CanonicalHeaderKey(strings.TrimSpace(h))] = true
		}
	}
	for h := range want {
		if !exposed[http.CanonicalHeaderKey(h)] {
			t.Errorf("%s is not exposed to browsers (Access-Control-Expose-Headers: %q)", h, hdr.Values("Access-Control-Expose-Headers"))
		}
	}
}

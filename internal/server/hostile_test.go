package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// hostileOp is one operation of api/openapi.yaml, with what the sweep needs of it.
type hostileOp struct {
	method, route string
	op            map[string]any
	query         []string       // documented query parameters
	body          map[string]any // the JSON request body's schema, resolved; nil without one
}

// specOps lists the operations of api/openapi.yaml, those that change or end what
// later requests use (DELETE, revoke) last.
func specOps(t *testing.T) []hostileOp {
	doc := loadSpec(t)
	var ops []hostileOp
	for route, it := range doc["paths"].(map[string]any) {
		item := it.(map[string]any)
		for method, o := range item {
			op, ok := o.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			h := hostileOp{method: strings.ToUpper(method), route: route, op: op}
			params, _ := op["parameters"].([]any)
			if shared, ok := item["parameters"].([]any); ok {
				params = append(params, shared...)
			}
			for _, p := range params {
				p := resolveRef(doc, p.(map[string]any))
				if p["in"] == "query" {
					h.query = append(h.query, p["name"].(string))
				}
			}
			if rb, ok := op["requestBody"].(map[string]any); ok {
				rb = resolveRef(doc, rb)
				if c, ok := rb["content"].(map[string]any)["application/json"].(map[string]any); ok {
					if s, ok := c["schema"].(map[string]any); ok {
						h.body = resolveRef(doc, s)
					}
				}
				if h.body == nil {
					h.body = map[string]any{}
				}
			}
			ops = append(ops, h)
		}
	}
	last := func(o hostileOp) bool { return o.method == "DELETE" || strings.HasSuffix(o.route, "/revoke") }
	sort.Slice(ops, func(i, j int) bool {
		if last(ops[i]) != last(ops[j]) {
			return !last(ops[i])
		}
		return ops[i].route+ops[i].method < ops[j].route+ops[j].method
	})
	return ops
}

// resolveRef follows a local $ref ("#/components/…") until it reaches an object that
// is not one.
func resolveRef(doc map[string]any, m map[string]any) map[string]any {
	for i := 0; i < 10; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var node any = doc
		for _, k := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			node = node.(map[string]any)[k]
		}
		m = node.(map[string]any)
	}
	return m
}

// wrongValue is a JSON value of another type than the schema's.
func wrongValue(schema map[string]any) any {
	switch schema["type"] {
	case "string":
		return 12345
	case "integer", "number":
		return "12"
	case "boolean":
		return "true"
	case "array":
		return map[string]any{"0": "x"}
	case "object":
		return []any{"x"}
	}
	return []any{[]any{}}
}

// hostileBodies are request bodies a careless or malicious client sends: not JSON, not
// an object, cut off, nested past any parser's patience, over the size limit, with
// trailing data, with a key twice, and the schema's properties each of a wrong type.
func hostileBodies(doc map[string]any, schema map[string]any, limit int64) map[string]string {
	b := map[string]string{
		"empty":       "",
		"null":        "null",
		"array":       `[]`,
		"string":      `"x"`,
		"number":      `1e999`,
		"cut":         `{"a":`,
		"trailing":    `{} {}`,
		"nested":      strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
		"nested-obj":  strings.Repeat(`{"a":`, 50000) + "1" + strings.Repeat("}", 50000),
		"bad-utf8":    "{\"a\":\"\xff\xfe\"}",
		"nul":         "{\"a\":\"\x00\"}",
		"dup-key":     `{"a":1,"a":2}`,
		"huge":        `{"a":"` + strings.Repeat("x", int(limit)+1) + `"}`,
		"huge-number": `{"a":` + strings.Repeat("9", 100000) + `}`,
	}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		ps := resolveRef(doc, p.(map[string]any))
		b["wrong-"+name] = string(mustJSON(map[string]any{name: wrongValue(ps)}))
		b["dup-"+name] = fmt.Sprintf(`{%q:null,%q:null}`, name, name)
	}
	return b
}

// hostilePathValues stand in for a path parameter: unknown, traversal, not text, huge,
// and quotes.
var hostilePathValues = []string{"nope", "..", "%2e%2e", "a%2Fb", "%ff%fe", "a%00b", strings.Repeat("x", 8192), "x'%20OR%20'1'='1", "%C3%BC", "%25"}

// hostileQueryValues stand in for a query parameter.
var hostileQueryValues = []string{"", "x", "-1", "0", "99999999999999999999999", "1e3", "%ff", "a%00b", strings.Repeat("9", 5000), "true,false,,"}

// TestHostileRequestsToEveryRoute sends hostile requests to every operation of
// api/openapi.yaml: wrong path values, wrong query values and hostile bodies. Every
// answer must be one the contract documents for that operation, never a 5xx it does
// not document, an error must be the API's error body with a documented code and a
// message (validated against the operation's documented response), and the daemon must
// log no panic and keep no goroutine for the requests afterwards.
func TestHostileRequestsToEveryRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a few thousand requests")
	}
	var logs syncBuffer
	d := startDaemon(t, daemonOpts{errorLog: &logs, mutate: func(c *config.Config) { c.MaxBodyBytes = 1 << 20 }})
	doc := loadSpec(t)

	// Real values for the path parameters, so that query and body variants reach the
	// handlers' own checks.
	var sess struct{ ID string }
	if code, _, out := d.do("POST", "/v1/sessions", map[string]any{"available_tools": []string{"echo"}}); code != 201 || json.Unmarshal(out, &sess) != nil {
		t.Fatalf("session: %d %s", code, out)
	}
	_, evs := d.stream("/v1/sessions/"+sess.ID+"/tool-calls", `{"calls":[{"id":"e","name":"echo","arguments":{"text":"hi"}}]}`)
	var key struct{ ID string }
	if code, _, out := d.do("POST", "/v1/keys", map[string]any{"roles": []string{"agent"}, "name": "k"}); code != 201 || json.Unmarshal(out, &key) != nil {
		t.Fatalf("key: %d %s", code, out)
	}
	real := map[string]string{"sessionID": sess.ID, "callID": evs[0].str("call_id"), "toolCallID": "e", "keyID": key.ID,
		"name": "nope", "approvalID": "ap_nope", "path": "index.html"}

	client := &http.Client{Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	runtime.GC()
	before := runtime.NumGoroutine()
	requests := 0
	send := func(h hostileOp, label, path string, body *string, contentType string) {
		t.Helper()
		var r io.Reader
		if body != nil {
			r = strings.NewReader(*body)
		}
		req, err := http.NewRequest(h.method, d.url+path, r)
		if err != nil {
			t.Errorf("%s %s (%s): %v", h.method, h.route, label, err)
			return
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		requests++
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s (%s): %v", h.method, h.route, label, err)
			return
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode < 300 && (strings.HasPrefix(ct, "text/event-stream") || strings.HasSuffix(h.route, "/events")) {
			resp.Body.Close() // a subscription: it stays open; the client leaving must end it
			checkHostileAnswer(t, h, label, resp, nil)
			return
		}
		out, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if err != nil {
			t.Errorf("%s %s (%s): reading the answer: %v", h.method, h.route, label, err)
			return
		}
		checkHostileAnswer(t, h, label, resp, out)
	}
	for _, h := range specOps(t) {
		fill := func(override string, value string) string {
			p := h.route
			for name, v := range real {
				if name == override {
					v = value
				}
				p = strings.ReplaceAll(p, "{"+name+"}", v)
			}
			return p
		}
		base := fill("", "")
		if strings.Contains(base, "{") {
			t.Fatalf("%s %s: no value for a path parameter; add it to the sweep", h.method, h.route)
		}
		for name := range real {
			if !strings.Contains(h.route, "{"+name+"}") {
				continue
			}
			for _, v := range hostilePathValues {
				send(h, "path "+name+"="+shorten(v), fill(name, v), nil, "")
			}
		}
		for _, q := range h.query {
			for _, v := range hostileQueryValues {
				send(h, "query "+q+"="+shorten(v), base+"?"+url.QueryEscape(q)+"="+v, nil, "")
			}
			send(h, "query "+q+" twice", base+"?"+q+"=1&"+q+"=2", nil, "")
		}
		send(h, "unknown query", base+"?zzz=1&%ff=%ff", nil, "")
		if h.body == nil {
			continue
		}
		names := make([]string, 0)
		bodies := hostileBodies(doc, h.body, 1<<20)
		for n := range bodies {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			b := bodies[n]
			send(h, "body "+n, base, &b, "application/json")
		}
		ok := `{}`
		send(h, "text/plain body", base, &ok, "text/plain")
		send(h, "no content type", base, &ok, "")
	}
	t.Logf("%d hostile requests", requests)
	if strings.Contains(logs.String(), "panic") {
		t.Errorf("the daemon logged a panic:\n%s", logs.String())
	}
	// Every request's goroutines end with it (streams included).
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before the sweep, %d after it\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func shorten(s string) string {
	if len(s) > 24 {
		return fmt.Sprintf("%s…(%d bytes)", s[:12], len(s))
	}
	return s
}

// checkHostileAnswer checks one answer against what the contract documents.
func checkHostileAnswer(t *testing.T, h hostileOp, label string, resp *http.Response, out []byte) {
	t.Helper()
	what := fmt.Sprintf("%s %s (%s): %d %s", h.method, h.route, label, resp.StatusCode, shorten(string(out)))
	status := fmt.Sprint(resp.StatusCode)
	responses := h.op["responses"].(map[string]any)
	documented, ok := responses[status].(map[string]any)
	if !ok {
		t.Errorf("%s: status not documented for the operation", what)
		return
	}
	if resp.StatusCode < 400 || strings.HasSuffix(h.route, "/mcp") && resp.StatusCode < 500 {
		return // a JSON-RPC error travels in a 200 or a 4xx of its own shape, checked by the MCP tests
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	content, _ := documented["content"].(map[string]any)
	if _, ok := content[ct]; !ok && len(content) > 0 {
		t.Errorf("%s: Content-Type %q, not one documented for the status", what, ct)
		return
	}
	if ct != "application/json" {
		if strings.HasPrefix(h.route, "/v1/") {
			t.Errorf("%s: error with Content-Type %q, want application/json", what, ct)
		}
		return // the console's files answer as a file server does
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(out, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Errorf("%s: not the API's error body (%v)", what, err)
		return
	}
	if _, ok := content["application/json"]; ok {
		validateResponse(t, h.method, h.route, status, "application/json", out)
	}
}

package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// chunk is one of OpenAI's chat completion chunks, as its API streams them.
func chunk(content string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06",`+
		`"service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":null}]}`, content)
}

// streamer is an API shaped like OpenAI's that answers chat completions as server-sent
// events: model "stall" sends three chunks then holds the stream open until the client
// goes away, "hang" never answers, "long" streams 500 chunks and [DONE].
func streamer(t *testing.T) (srv *httptest.Server, arrived chan struct{}) {
	t.Helper()
	arrived = make(chan struct{}, 4)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Model == "hang" {
			arrived <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		switch req.Model {
		case "stall":
			for _, c := range []string{"Hel", "lo, ", "wor"} {
				fmt.Fprintf(w, "data: %s\n\n", chunk(c))
			}
			_ = http.NewResponseController(w).Flush()
			arrived <- struct{}{}
			<-r.Context().Done()
		case "long":
			fmt.Fprint(w, longStream())
		}
	}))
	t.Cleanup(srv.Close)
	return srv, arrived
}

// longStream is a 500-token answer streamed the way OpenAI's API streams it.
func longStream() string {
	var b strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "data: %s\n\n", chunk(fmt.Sprintf(" w%d", i)))
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// TestStreamKeptWhenTimeRunsOut: a streamed answer still arriving when the call's time
// runs out, or when it is cancelled, is not lost: the result is a timeout (cancelled)
// whose text shows what came, and, since the request was a POST, says the API may have
// acted on it.
func TestStreamKeptWhenTimeRunsOut(t *testing.T) {
	t.Parallel()
	srv, arrived := streamer(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL})
	res := callCtx(t, context.Background(), m, "oai__createChatCompletion", `{"model":"stall","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 3*time.Second)
	text := res.Text()
	if !res.IsError || res.ErrorKind != tool.KindTimeout || !strings.Contains(text, "still arriving") ||
		!strings.Contains(text, `"content":"Hel"`) || !strings.Contains(text, `"content":"wor"`) || !strings.Contains(text, "the API may have acted on it") {
		t.Errorf("timed out stream: %v %s %s", res.IsError, res.ErrorKind, text)
	}

	// Cancelled once the answer began to arrive: the tool's own result (the dispatcher
	// answers for a cancelled call at once).
	<-arrived
	reading := make(chan struct{})
	cfg := Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL,
		Client: &http.Client{Transport: firstRead{reading}}}
	src, _ := load(t, cfg)
	var op *Operation
	for _, o := range src.Tools {
		if o.Spec().Name == "oai__createChatCompletion" {
			op = o
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-reading
		cancel()
	}()
	res, err := op.Run(&tool.Context{Context: ctx}, json.RawMessage(`{"model":"stall","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	cancel()
	if err != nil {
		res = tool.FromError(err)
	}
	if text := res.Text(); res.ErrorKind != tool.KindCancelled || !strings.Contains(text, "still arriving") || !strings.Contains(text, `"content":"Hel"`) {
		t.Errorf("cancelled stream: %s %s", res.ErrorKind, text)
	}
}

// firstRead is a transport that closes reading once a response body gave its first bytes.
type firstRead struct{ reading chan struct{} }

func (f firstRead) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body = &signalBody{ReadCloser: resp.Body, reading: f.reading}
	}
	return resp, err
}

type signalBody struct {
	io.ReadCloser
	reading chan struct{}
	once    sync.Once
}

func (b *signalBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.once.Do(func() { close(b.reading) })
	}
	return n, err
}

// TestMayHaveActed: a POST that times out once sent says the API may have acted on it;
// a GET does not.
func TestMayHaveActed(t *testing.T) {
	t.Parallel()
	srv, _ := streamer(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL})
	res := callCtx(t, context.Background(), m, "oai__createChatCompletion", `{"model":"hang","messages":[{"role":"user","content":"hi"}]}`, 2*time.Second)
	if res.ErrorKind != tool.KindTimeout || !strings.Contains(res.Text(), "the request was sent; the API may have acted on it: check before calling again") {
		t.Errorf("POST timed out: %s %s", res.ErrorKind, res.Text())
	}
	up, _ := upstream(t)
	_, m = load(t, shop(t, up.URL))
	if res := callCtx(t, context.Background(), m, "shop__slow", `{}`, 2*time.Second); res.ErrorKind != tool.KindTimeout || strings.Contains(res.Text(), "may have acted") {
		t.Errorf("GET timed out: %s %s", res.ErrorKind, res.Text())
	}
}

// TestEventStreamCompact: a text/event-stream answer is shown one event a line, the
// fields every event's JSON has in common once, not as raw SSE framing.
func TestEventStreamCompact(t *testing.T) {
	t.Parallel()
	srv, _ := streamer(t)
	_, m := load(t, Config{Name: "oai", Spec: filepath.Join("testdata", "openai31.yaml"), BaseURL: srv.URL})
	res := call(t, m, "oai__createChatCompletion", `{"model":"long","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	text, raw := res.Text(), longStream()
	if res.IsError || strings.Contains(text, "data: ") || strings.Count(text, "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT") != 1 ||
		!strings.Contains(text, `"content":" w0"`) || !strings.Contains(text, `"content":" w499"`) || !strings.Contains(text, "\n[DONE]") {
		t.Fatalf("stream: %v %.2000s", res.IsError, text)
	}
	t.Logf("500-chunk stream: %d bytes raw, %d bytes shown", len(raw), len(text))
	if len(text) > len(raw)/2 {
		t.Errorf("stream shown in %d bytes, raw %d", len(text), len(raw))
	}
}

func TestEventStreamText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"named events, comments, multi-line data",
			": ping\n\nevent: message_start\ndata: {\"type\": \"message_start\"}\n\nevent: delta\r\ndata:a\r\ndata: b\r\n\r\nid: 7\nretry: 10\ndata: plain\n\n",
			"[text/event-stream: 3 events, one a line: its name when not \"message\", then its data]\n" +
				"message_start: {\"type\":\"message_start\"}\ndelta: \"a\\nb\"\nplain"},
		{"common fields once, the last event unfinished",
			"data: {\"id\":1,\"v\":\"a\"}\n\ndata: {\"id\":1,\"v\":\"b\"}\n\ndata: [DONE]\n\ndata: {\"id\":1,\"v\"",
			"[text/event-stream: 4 events, one a line: its name when not \"message\", then its data]\n" +
				"[every \"message\" event's JSON object also has: {\"id\":1}]\n" +
				"{\"v\":\"a\"}\n{\"v\":\"b\"}\n[DONE]\n{\"id\":1,\"v\""},
	} {
		if got, _ := eventStreamText([]byte(c.in)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestBinaryRawBody: a raw body that is a binary string (Docker's build context and
// archives) takes {filename, content | content_base64}, so bytes can be sent.
func TestBinaryRawBody(t *testing.T) {
	t.Parallel()
	type got struct {
		ct   string
		body []byte
	}
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Header.Get("Content-Type"), b}
	}))
	t.Cleanup(srv.Close)
	_, m := load(t, Config{Name: "docker", Spec: filepath.Join("testdata", "uploads20.yaml"), BaseURL: srv.URL})
	b := prop(schemaOf(t, m, "docker__ImageBuild"), "body")
	if prop(b, "content_base64") == nil || !strings.Contains(fmt.Sprint(b["description"]), "content_base64") {
		t.Errorf("binary body argument: %v", b)
	}
	for _, c := range []struct{ tool, args, ct, body string }{
		{"docker__ImageBuild", `{"t":"x","body":{"content_base64":"H4sIAAD/"}}`, "application/octet-stream", "\x1f\x8b\x08\x00\x00\xff"},
		{"docker__PutContainerArchive", `{"id":"c1","body":{"filename":"a.tar","content":"hello"}}`, "application/octet-stream", "hello"},
		{"docker__PutBlob", `{"key":"k","body":{"filename":"a.png","content_base64":"iVBORw=="}}`, "image/png", "\x89PNG"},
		{"docker__PutBlob", `{"key":"k","body":{"content":"x"}}`, "application/octet-stream", "x"},
	} {
		res := call(t, m, c.tool, c.args)
		if res.IsError {
			t.Errorf("%s %s: %s", c.tool, c.args, res.Text())
			continue
		}
		g := <-seen
		if g.ct != c.ct || string(g.body) != c.body {
			t.Errorf("%s %s: sent %s %q; want %s %q", c.tool, c.args, g.ct, g.body, c.ct, c.body)
		}
	}
	res := call(t, m, "docker__ImageBuild", `{"body":{"content":"a","content_base64":"YQ=="}}`)
	if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "one of content, content_base64 and path") {
		t.Errorf("both contents: %s %s", res.ErrorKind, res.Text())
	}
}

// TestBodyWithPropertiesAndNoType: a JSON body schema that lists properties but says
// no type (twelve of DigitalOcean's operations: loadBalancers_add_droplets,
// kubernetes_upgrade_cluster, …) is an object of fields all the same; it was taken as
// one opaque `body` argument.
func TestBodyWithPropertiesAndNoType(t *testing.T) {
	t.Parallel()
	srv, _ := upstream(t)
	spec := writeSpec(t, "lb.yaml", `openapi: 3.0.0
info: {title: lb, version: "1"}
paths:
  /v2/load_balancers/{lb_id}/droplets:
    post:
      operationId: loadBalancers_add_droplets
      parameters:
        - {name: lb_id, in: path, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              properties:
                droplet_ids: {type: array, items: {type: integer}}
              required: [droplet_ids]
      responses: {"204": {description: added}}
`)
	_, m := load(t, Config{Name: "do", Spec: spec, BaseURL: srv.URL})
	s := schemaOf(t, m, "do__loadBalancers_add_droplets")
	if prop(s, "droplet_ids")["type"] != "array" || !strings.Contains(fmt.Sprint(s["required"]), "droplet_ids") {
		t.Fatalf("droplet_ids is not an argument of its own: %v", s)
	}
	e := echo(t, call(t, m, "do__loadBalancers_add_droplets", `{"lb_id":"lb1","droplet_ids":[3,4]}`))
	if e.Body != `{"droplet_ids":[3,4]}` || e.CT != "application/json" {
		t.Errorf("sent %+v", e)
	}
}

package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Every server in these tests listens on the loopback network; the guard is told to
// allow 127.0.0.1 where a test needs to reach one.

type fetchOut struct {
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	Truncated   bool   `json:"truncated"`
	Title       string `json:"title"`
	Format      string `json:"format"`
	Redirects   int    `json:"redirects"`
}

func newWebFetch(t *testing.T, cfg FetchConfig) tool.Tool {
	t.Helper()
	tl, err := WebFetch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// allowLoopback is the configuration that lets web_fetch reach httptest servers.
var allowLoopback = FetchConfig{AllowCIDRs: []string{"127.0.0.1"}}

// runWeb calls a tool the way the dispatcher does: a returned error becomes an
// error result.
func runWeb(t *testing.T, ctx context.Context, tl tool.Tool, args any) *tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	tctx := &tool.Context{Context: ctx, CallID: "tc_web", ToolName: tl.Spec().Name, Progress: newRecorder()}
	res, err := tl.Run(tctx, raw)
	if err != nil {
		res = tool.FromError(err)
	}
	if res == nil {
		t.Fatal("no result and no error")
	}
	return res
}

func wantKind(t *testing.T, res *tool.Result, kind tool.ErrorKind, texts ...string) {
	t.Helper()
	if res.IsError != (kind != "") || res.ErrorKind != kind {
		t.Fatalf("is_error %v kind %q, want %q: %s", res.IsError, res.ErrorKind, kind, res.Text())
	}
	for _, s := range texts {
		if !strings.Contains(res.Text(), s) {
			t.Errorf("result lacks %q:\n%s", s, res.Text())
		}
	}
}

// webServer is an httptest server that closes with the test.
func webServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func TestWebFetchSpec(t *testing.T) {
	t.Parallel()
	spec := newWebFetch(t, FetchConfig{}).Spec()
	if spec.Name != "web_fetch" || !spec.ReadOnly || !spec.ConcurrencySafe || spec.Risk != tool.RiskLow ||
		spec.Documentation == "" || spec.PromptHint == "" || spec.Timeout <= 2*time.Minute {
		t.Fatalf("spec %+v", spec)
	}
	schema := compileSchema(t, spec.Parameters)
	for args, valid := range map[string]bool{
		`{"url":"https://example.com"}`: true,
		`{"url":"https://example.com","format":"text","max_bytes":1048576,"timeout_ms":5000}`: true,
		`{}`:                                   false,
		`{"url":""}`:                           false,
		`{"url":"x","format":"pdf"}`:           false,
		`{"url":"x","max_bytes":0}`:            false,
		`{"url":"x","max_bytes":10485761}`:     false,
		`{"url":"x","timeout_ms":120001}`:      false,
		`{"url":"x","headers":{"Cookie":"a"}}`: false,
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err := schema.Validate(v); (err == nil) != valid {
			t.Errorf("%s: valid=%v, want %v (%v)", args, err == nil, valid, err)
		}
	}
}

func compileSchema(t *testing.T, params json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///web.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///web.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const testPage = `<!DOCTYPE html><html><head><title> Test  Page </title>
<script>alert("no")</script><style>p{color:red}</style></head>
<body><h1>Main Heading</h1>
<p>Some <strong>bold</strong> text and a <a href="/rel/path?x=1">relative link</a>.</p>
<ul><li>item one</li><li>item two</li></ul>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>1</td></tr></table>
<img alt="inline chart" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==">
<svg><text>vector junk</text></svg>
<pre>  indented
    code</pre>
</body></html>`

func TestWebFetchHTML(t *testing.T) {
	t.Parallel()
	srv := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != fetchUserAgent {
			http.Error(w, "bad agent "+r.Header.Get("User-Agent"), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, testPage)
	}))
	tl := newWebFetch(t, allowLoopback)
	tests := []struct {
		format    string
		want, not []string
	}{
		{"", []string{"# Main Heading", "**bold**", "[relative link](" + srv.URL + "/rel/path?x=1)", "- item one", "| Name  | Value |",
			"| alpha | 1     |", "inline chart", "  indented\n    code"}, []string{"alert", "color:red", "base64", "vector junk", "<h1>"}},
		{"text", []string{"Main Heading\n", "Some bold text and a relative link.", "item one\nitem two", "Name\tValue", "alpha\t1",
			"  indented\n    code"}, []string{"#", "**", "alert", "vector junk", "<"}},
		{"raw", []string{"<h1>Main Heading</h1>", "<script>alert"}, nil},
	}
	for _, tt := range tests {
		res := runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/page", "format": tt.format})
		wantKind(t, res, "", "URL: "+srv.URL+"/page\n", "Status: 200 OK\n", "Content-Type: text/html; charset=utf-8\n", "Title: Test Page\n")
		for _, s := range tt.want {
			if !strings.Contains(res.Text(), s) {
				t.Errorf("format %q: lacks %q:\n%s", tt.format, s, res.Text())
			}
		}
		body := res.Text()[strings.Index(res.Text(), "\n\n"):]
		for _, s := range tt.not {
			if strings.Contains(body, s) {
				t.Errorf("format %q: has %q:\n%s", tt.format, s, body)
			}
		}
		out := decode[fetchOut](t, res)
		want := fetchOut{URL: srv.URL + "/page", FinalURL: srv.URL + "/page", Status: 200, ContentType: "text/html; charset=utf-8",
			Bytes: int64(len(testPage)), Title: "Test Page", Format: cmpOr(tt.format, "markdown")}
		if out != want {
			t.Errorf("format %q: structured %+v, want %+v", tt.format, out, want)
		}
	}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func TestWebFetchContentTypes(t *testing.T) {
	t.Parallel()
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 2040)...)
	mux := http.NewServeMux()
	serve := func(path, ctype string, body []byte) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if ctype != "-" {
				w.Header().Set("Content-Type", ctype)
			} else {
				w.Header()["Content-Type"] = nil // no sniffing by the server
			}
			_, _ = w.Write(body)
		})
	}
	serve("/plain", "text/plain", []byte("line one\n  <b>not html</b>\n"))
	serve("/json", "application/json", []byte(`{"a": [1, 2], "b": "x"}`))
	serve("/problem", "application/problem+json", []byte(`{"title":"x"}`))
	serve("/latin1", "text/plain; charset=iso-8859-1", []byte("caf\xe9"))
	serve("/meta", "text/html", []byte(`<html><head><meta charset="windows-1252"><title>caf`+"\xe9"+`</title></head><body>na`+"\xef"+`ve</body></html>`))
	serve("/png", "image/png", png)
	serve("/pdf", "application/pdf", []byte("%PDF-1.4 ..."))
	serve("/octet-bin", "application/octet-stream", png)
	serve("/octet-text", "application/octet-stream", []byte("just text\n"))
	serve("/untyped-html", "-", []byte("<!DOCTYPE html><html><head><title>Sniffed</title></head><body><h2>Hi</h2></body></html>"))
	serve("/invalid-utf8", "text/plain; charset=utf-8", []byte("ok \xff\x00 end"))
	srv := webServer(t, mux)
	tl := newWebFetch(t, allowLoopback)
	tests := []struct {
		path string
		kind tool.ErrorKind
		want []string
	}{
		{"/plain", "", []string{"\n\nline one\n  <b>not html</b>"}},
		{"/json", "", []string{"\n\n" + `{"a": [1, 2], "b": "x"}`}},
		{"/problem", "", []string{`{"title":"x"}`}},
		{"/latin1", "", []string{"\n\ncafé"}},
		{"/meta", "", []string{"Title: café", "naïve"}},
		{"/png", tool.KindFailed, []string{"is image/png (2.0 KiB), not text"}},
		{"/pdf", tool.KindFailed, []string{"application/pdf (12 bytes)"}},
		{"/octet-bin", tool.KindFailed, []string{"is image/png", "not text"}},
		{"/octet-text", "", []string{"\n\njust text"}},
		{"/untyped-html", "", []string{"Title: Sniffed", "## Hi"}},
		{"/invalid-utf8", "", []string{"ok \uFFFD\uFFFD end"}},
	}
	for _, tt := range tests {
		res := runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + tt.path})
		t.Run(tt.path, func(t *testing.T) { wantKind(t, res, tt.kind, tt.want...) })
	}
}

func TestWebFetchLimits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte("abcdefghij"), 1000))
	})
	mux.HandleFunc("/slow-head", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat("x", 600))
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := webServer(t, mux)
	tl := newWebFetch(t, allowLoopback)

	res := runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/big", "max_bytes": 1000})
	wantKind(t, res, "", "Truncated: only the first 1000 bytes were read")
	if out := decode[fetchOut](t, res); !out.Truncated || out.Bytes != 1000 {
		t.Errorf("structured %+v", out)
	}
	if body := res.Text()[strings.Index(res.Text(), "\n\n")+2:]; len(body) != 1000 {
		t.Errorf("body of %d bytes", len(body))
	}
	res = runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/big", "max_bytes": 10000})
	if out := decode[fetchOut](t, res); out.Truncated || out.Bytes != 10000 {
		t.Errorf("exact size: structured %+v", out)
	}

	for _, path := range []string{"/slow-head", "/slow-body"} {
		start := time.Now()
		res = runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + path, "timeout_ms": 300})
		// The 300ms timeout ended it (kind and text); the bound is a hang guard, as
		// the handler answers only when the test ends.
		wantKind(t, res, tool.KindTimeout, "no complete response within 300ms")
		t.Logf("%s: timed out after %s", path, time.Since(start))
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s: timed out after %s", path, d)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res = runWeb(t, ctx, tl, map[string]any{"url": srv.URL + "/slow-head"})
	wantKind(t, res, tool.KindCancelled, "cancelled")
}

func TestWebFetchRedirects(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		_, _ = fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			_, _ = io.WriteString(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	srv := webServer(t, mux)
	tl := newWebFetch(t, allowLoopback)
	res := runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/hop/5"})
	wantKind(t, res, "", "URL: "+srv.URL+"/hop/0\n", "Requested: "+srv.URL+"/hop/5 (5 redirect(s))", "arrived")
	if out := decode[fetchOut](t, res); out.Redirects != 5 || out.FinalURL != srv.URL+"/hop/0" || out.URL != srv.URL+"/hop/5" {
		t.Errorf("structured %+v", out)
	}
	res = runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/hop/6"})
	wantKind(t, res, tool.KindFailed, "stopped after 5 redirects (the next one went to "+srv.URL+"/hop/0)")

	two := newWebFetch(t, FetchConfig{AllowCIDRs: []string{"127.0.0.1"}, MaxRedirects: 2})
	res = runWeb(t, context.Background(), two, map[string]any{"url": srv.URL + "/hop/3"})
	wantKind(t, res, tool.KindFailed, "stopped after 2 redirects")
}

func TestWebFetchHTTPErrors(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<html><head><title>Nope</title></head><body><h1>Not here</h1>"+strings.Repeat("<p>filler</p>", 2000)+"</body></html>")
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"database down"}`)
	})
	mux.HandleFunc("/forbidden-image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/gif")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "GIF89a")
	})
	srv := webServer(t, mux)
	tl := newWebFetch(t, allowLoopback)
	res := runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/missing"})
	wantKind(t, res, tool.KindFailed, "HTTP 404 Not Found from "+srv.URL+"/missing.", "Status: 404 Not Found", "Title: Nope", "# Not here", "[…]")
	if n := len([]rune(res.Text())); n > fetchExcerpt+500 {
		t.Errorf("the excerpt is %d characters long", n)
	}
	if out := decode[fetchOut](t, res); out.Status != 404 {
		t.Errorf("structured %+v", out)
	}
	res = runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/broken"})
	wantKind(t, res, tool.KindFailed, "HTTP 500 Internal Server Error", `{"error":"database down"}`)
	res = runWeb(t, context.Background(), tl, map[string]any{"url": srv.URL + "/forbidden-image"})
	wantKind(t, res, tool.KindFailed, "HTTP 403 Forbidden", "content type image/gif")
	// Nothing listens on a closed server's port.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	res = runWeb(t, context.Background(), tl, map[string]any{"url": closed.URL})
	wantKind(t, res, tool.KindFailed, "connection refused")
}

func TestWebFetchArgs(t *testing.T) {
	t.Parallel()
	tl := newWebFetch(t, FetchConfig{MaxBytes: 1000, MaxTimeout: time.Second})
	for _, args := range []map[string]any{
		{"url": "http://example.com", "max_bytes": 1001},
		{"url": "http://example.com", "max_bytes": 0},
		{"url": "http://example.com", "timeout_ms": 1001},
		{"url": "http://example.com", "format": "pdf"},
		{"url": "http://[::1"},
		{"url": "http://example.com", "method": "POST"},
	} {
		wantKind(t, runWeb(t, context.Background(), tl, args), tool.KindInvalidArgs)
	}
}

// Calls share one transport: run several at once under the race detector.
func TestWebFetchConcurrent(t *testing.T) {
	t.Parallel()
	srv := webServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<title>%s</title><p>%s</p>", r.URL.Path[1:], r.URL.Path[1:])
	}))
	tl := newWebFetch(t, allowLoopback)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			raw, _ := json.Marshal(map[string]any{"url": fmt.Sprintf("%s/p%d", srv.URL, i)})
			res, err := tl.Run(&tool.Context{Context: context.Background(), Progress: tool.NoProgress}, raw)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			var out fetchOut
			if err := json.Unmarshal(res.Structured, &out); err != nil || res.IsError || out.Title != fmt.Sprintf("p%d", i) {
				t.Errorf("call %d: %+v %v %s", i, out, err, res.Text())
			}
		})
	}
	wg.Wait()
}

// reportRecorder is a recorder whose emitter carries numeric progress.
type reportRecorder struct {
	*recorder
	mu      sync.Mutex
	reports [][2]float64
}

func (r *reportRecorder) Report(progress, total float64, message string) {
	r.mu.Lock()
	r.reports = append(r.reports, [2]float64{progress, total})
	r.mu.Unlock()
	r.Emit("info", tool.ProgressLine(progress, total, message))
}

// TestWebFetchReportsDownloadProgress: a body that takes a while reports the bytes
// received of its Content-Length (or of the call's limit, when smaller), rising to
// where the read ended; a body that arrives at once reports nothing.
func TestWebFetchReportsDownloadProgress(t *testing.T) {
	t.Parallel()
	const chunk, chunks = 16 << 10, 8
	mux := http.NewServeMux()
	slow := func(withLength bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			if withLength {
				w.Header().Set("Content-Length", strconv.Itoa(chunk*chunks))
			}
			for range chunks {
				_, _ = w.Write(bytes.Repeat([]byte("z"), chunk))
				http.NewResponseController(w).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	mux.HandleFunc("/slow", slow(true))
	mux.HandleFunc("/slow-unknown", slow(false))
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte("f"), 4096))
	})
	srv := webServer(t, mux)
	tl := newWebFetch(t, allowLoopback)
	fetch := func(path string, maxBytes int) *reportRecorder {
		rec := &reportRecorder{recorder: newRecorder()}
		tctx := &tool.Context{Context: context.Background(), CallID: "tc_web", ToolName: "web_fetch", Progress: rec}
		raw, _ := json.Marshal(map[string]any{"url": srv.URL + path, "max_bytes": maxBytes, "format": "raw"})
		res, err := tl.Run(tctx, raw)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", path, err, res)
		}
		return rec
	}
	for _, tc := range []struct {
		path      string
		max       int
		wantTotal float64
		wantLast  float64
	}{
		{"/slow", 1 << 20, chunk * chunks, chunk * chunks},
		{"/slow", 5 * chunk, 5 * chunk, 5 * chunk},
		{"/slow-unknown", 1 << 20, 0, chunk * chunks},
	} {
		rec := fetch(tc.path, tc.max)
		if len(rec.reports) < 2 {
			t.Fatalf("%s (max %d): reports %v, want several", tc.path, tc.max, rec.reports)
		}
		for i, r := range rec.reports {
			if r[1] != tc.wantTotal || (i > 0 && r[0] < rec.reports[i-1][0]) {
				t.Fatalf("%s (max %d): reports %v, want rising of total %v", tc.path, tc.max, rec.reports, tc.wantTotal)
			}
		}
		if last := rec.reports[len(rec.reports)-1]; last[0] != tc.wantLast {
			t.Fatalf("%s (max %d): last report %v, want %v", tc.path, tc.max, last, tc.wantLast)
		}
		if !strings.Contains(rec.text("info"), "bytes received (") && tc.wantTotal > 0 {
			t.Fatalf("%s: info %q", tc.path, rec.text("info"))
		}
	}
	if rec := fetch("/fast", 1<<20); len(rec.reports) != 0 {
		t.Fatalf("a fast body reported %v", rec.reports)
	}
}

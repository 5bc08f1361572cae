package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/netguard"
	"github.com/toolserverd/toolserverd/internal/tool"
)

const (
	// fetchErrorBody is how much of a non-2xx body is read for the excerpt, and
	// fetchExcerpt how many characters of it the result shows.
	fetchErrorBody = 64 << 10
	fetchExcerpt   = 2000
	// fetchSniff is how much of a body of unknown type is looked at to guess it.
	fetchSniff = 512
)

// WebFetch returns the web_fetch tool.
func WebFetch(cfg FetchConfig) (tool.Tool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g, err := netguard.New(netguard.Config{AllowHosts: cfg.AllowHosts, AllowCIDRs: cfg.AllowCIDRs, Resolver: cfg.resolver})
	if err != nil {
		return nil, err
	}
	var proxy *url.URL
	if cfg.Proxy != "" {
		if proxy, err = url.Parse(cfg.Proxy); err != nil {
			return nil, err
		}
	}
	return &webFetch{cfg: cfg, guard: g, rt: g.NewTransport(proxy)}, nil
}

type webFetch struct {
	cfg   FetchConfig
	guard *netguard.Guard
	rt    *netguard.Transport
}

type fetchArgs struct {
	URL       string `json:"url"`
	MaxBytes  *int64 `json:"max_bytes"`
	TimeoutMS *int64 `json:"timeout_ms"`
	Format    string `json:"format"`
}

// fetchOutput is the structured result of web_fetch; the body is in the text only.
type fetchOutput struct {
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	Truncated   bool   `json:"truncated"`
	Title       string `json:"title,omitempty"`
	Format      string `json:"format"`
	Redirects   int    `json:"redirects"`
}

func (t *webFetch) Spec() tool.Spec {
	return tool.Spec{
		Name:  "web_fetch",
		Label: "Fetch URL",
		Description: "Fetch a URL with HTTP GET and return its content: HTML pages as Markdown (or plain text, or raw HTML), " +
			"plain text, JSON and XML as they are. Only public http(s) addresses; binary files (images, PDFs, archives) are refused.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The absolute http:// or https:// URL to fetch."},
    "format": {"type": "string", "enum": ["markdown", "text", "raw"], "description": "How to return an HTML page: markdown (default), text (visible text only) or raw (the HTML source). Other content is always returned as it is."},
    "max_bytes": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Read at most this many bytes of the body (default %d); the result says when the body was longer."},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Give up after this many milliseconds (default %d)."}
  },
  "required": ["url"],
  "additionalProperties": false
}`, t.cfg.MaxBytes, t.cfg.DefaultBytes, t.cfg.MaxTimeout.Milliseconds(), t.cfg.Timeout.Milliseconds())),
		Documentation: webFetchDoc,
		PromptHint: "Use web_fetch to read a web page or an API response by URL (HTML comes back as Markdown). " +
			"It cannot reach internal or private addresses.",
		Flags:   tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:    tool.RiskLow,
		Mode:    tool.ModeDirect,
		Timeout: t.cfg.MaxTimeout + 5*time.Second,
		Source:  "builtin",
	}
}

func (t *webFetch) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args fetchArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	limit, timeout := t.cfg.DefaultBytes, t.cfg.Timeout
	if args.MaxBytes != nil {
		if *args.MaxBytes < 1 || *args.MaxBytes > t.cfg.MaxBytes {
			return nil, tool.Errorf(tool.KindInvalidArgs, "max_bytes %d: must be between 1 and %d", *args.MaxBytes, t.cfg.MaxBytes)
		}
		limit = *args.MaxBytes
	}
	if args.TimeoutMS != nil {
		if *args.TimeoutMS < 1 || *args.TimeoutMS > t.cfg.MaxTimeout.Milliseconds() {
			return nil, tool.Errorf(tool.KindInvalidArgs, "timeout_ms %d: must be between 1 and %d", *args.TimeoutMS, t.cfg.MaxTimeout.Milliseconds())
		}
		timeout = time.Duration(*args.TimeoutMS) * time.Millisecond
	}
	switch args.Format {
	case "":
		args.Format = fetchMarkdown
	case fetchMarkdown, fetchText, fetchRaw:
	default:
		return nil, tool.Errorf(tool.KindInvalidArgs, "format %q: must be markdown, text or raw", args.Format)
	}
	u, err := url.Parse(strings.TrimSpace(args.URL))
	if err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "url %q: %v", args.URL, err)
	}
	if err := t.guard.CheckURL(u); err != nil {
		return nil, tool.Errorf(tool.KindDenied, "%v", err)
	}

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Connections are not kept between calls: nothing lingers after the call, and a
	// connection is only ever reused within the redirects of one call.
	defer t.rt.CloseIdleConnections()
	out := fetchOutput{URL: u.String(), Format: args.Format}
	client := &http.Client{Transport: t.rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > t.cfg.MaxRedirects {
			return &redirectLimitError{max: t.cfg.MaxRedirects, next: req.URL.String()}
		}
		if err := t.guard.CheckURL(req.URL); err != nil {
			return err
		}
		out.Redirects = len(via)
		ctx.Emit("info", fmt.Sprintf("redirect %d: %s\n", len(via), req.URL))
		return nil
	}}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "url %q: %v", args.URL, err)
	}
	req.Header.Set("User-Agent", t.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5")
	ctx.Emit("info", "GET "+u.String()+"\n")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fetchError(ctx, cctx, err, u.String(), timeout)
	}
	defer func() { _ = resp.Body.Close() }()
	readLimit := limit
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		readLimit = min(limit, fetchErrorBody) // as result reads it
	}
	resp.Body = newFetchProgress(ctx, resp.Body, resp.ContentLength, readLimit)
	out.FinalURL = resp.Request.URL.String()
	out.Status = resp.StatusCode
	out.ContentType = resp.Header.Get("Content-Type")
	return t.result(ctx, cctx, resp, &out, limit, timeout)
}

// result reads and converts the body of resp into the call's result.
func (t *webFetch) result(ctx, cctx context.Context, resp *http.Response, out *fetchOutput, limit int64, timeout time.Duration) (*tool.Result, error) {
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if !ok {
		limit = min(limit, fetchErrorBody)
	}
	head := make([]byte, fetchSniff)
	n, err := io.ReadFull(resp.Body, head)
	head = head[:n]
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fetchError(ctx, cctx, err, out.FinalURL, timeout)
	}
	mt := webMediaType(out.ContentType)
	if mt == "" || mt == "application/octet-stream" {
		mt = webSniff(head)
		if out.ContentType == "" {
			out.ContentType = mt
		}
	}
	if !webIsText(mt) {
		size := "size not given"
		if resp.ContentLength >= 0 {
			size = sizeText(resp.ContentLength)
		}
		if !ok {
			return fetchResult(out, fmt.Sprintf("HTTP %s from %s (content type %s, %s).", resp.Status, out.FinalURL, out.ContentType, size), "", tool.KindFailed)
		}
		return nil, tool.Errorf(tool.KindFailed, "%s is %s (%s), not text; web_fetch returns only HTML, text, JSON and XML", out.FinalURL, mt, size)
	}
	body, err := io.ReadAll(io.LimitReader(io.MultiReader(bytes.NewReader(head), resp.Body), limit+1))
	if err != nil {
		return nil, fetchError(ctx, cctx, err, out.FinalURL, timeout)
	}
	if int64(len(body)) > limit {
		body, out.Truncated = body[:limit], true
	}
	out.Bytes = int64(len(body))
	p, err := webConvert(webDecode(body, out.ContentType, out.Truncated), mt, out.Format, out.FinalURL)
	if err != nil {
		return nil, tool.Errorf(tool.KindFailed, "converting %s: %v", out.FinalURL, err)
	}
	out.Title = p.title
	if !ok {
		excerpt := p.text
		if r := []rune(excerpt); len(r) > fetchExcerpt {
			excerpt = string(r[:fetchExcerpt]) + "\n[…]"
		}
		return fetchResult(out, fmt.Sprintf("HTTP %s from %s.", resp.Status, out.FinalURL), excerpt, tool.KindFailed)
	}
	return fetchResult(out, "", p.text, "")
}

// fetchResult writes the header lines and the body; kind "" is a success.
func fetchResult(out *fetchOutput, lead, body string, kind tool.ErrorKind) (*tool.Result, error) {
	var w strings.Builder
	if lead != "" {
		w.WriteString(lead + "\n")
	}
	fmt.Fprintf(&w, "URL: %s\n", out.FinalURL)
	if out.FinalURL != out.URL {
		fmt.Fprintf(&w, "Requested: %s (%d redirect(s))\n", out.URL, out.Redirects)
	}
	fmt.Fprintf(&w, "Status: %d %s\nContent-Type: %s\n", out.Status, http.StatusText(out.Status), out.ContentType)
	if out.Title != "" {
		fmt.Fprintf(&w, "Title: %s\n", out.Title)
	}
	if out.Truncated {
		fmt.Fprintf(&w, "Truncated: only the first %d bytes were read; the body is longer.\n", out.Bytes)
	}
	switch {
	case body != "":
		w.WriteString("\n" + body)
	case kind == "":
		w.WriteString("\n(empty body)")
	}
	structured, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &tool.Result{
		Content:    []tool.Content{{Type: tool.ContentText, Text: strings.TrimRight(w.String(), "\n")}},
		Structured: structured,
		IsError:    kind != "",
		ErrorKind:  kind,
	}, nil
}

// redirectLimitError stops a chain of redirects that is too long.
type redirectLimitError struct {
	max  int
	next string
}

func (e *redirectLimitError) Error() string {
	return fmt.Sprintf("stopped after %d redirects (the next one went to %s)", e.max, e.next)
}

// fetchError classifies a failed request or body read.
func fetchError(ctx, cctx context.Context, err error, target string, timeout time.Duration) error {
	var denied *netguard.DeniedError
	var redirects *redirectLimitError
	switch {
	case errors.As(err, &denied):
		return tool.Errorf(tool.KindDenied, "%s: %v", target, denied)
	case errors.As(err, &redirects):
		return tool.Errorf(tool.KindFailed, "%s: %v", target, redirects)
	case errors.Is(ctx.Err(), context.Canceled):
		return tool.Errorf(tool.KindCancelled, "fetching %s was cancelled", target)
	case cctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err):
		return tool.Errorf(tool.KindTimeout, "%s: no complete response within %s", target, timeout)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return tool.Errorf(tool.KindFailed, "fetching %s: %v", target, err)
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fetchReportEvery is how often a download reports the bytes received: a body that
// arrives within it reports nothing.
const fetchReportEvery = 250 * time.Millisecond

// fetchProgress reports a download's bytes received as numeric progress, of the
// body's Content-Length (capped at what the call reads) when the server sent one.
type fetchProgress struct {
	io.ReadCloser
	tc       *tool.Context
	total    int64 // 0: unknown
	read     int64
	start    time.Time
	last     time.Time // of the last report; zero before the first
	finished bool
}

func newFetchProgress(tc *tool.Context, body io.ReadCloser, length, limit int64) *fetchProgress {
	total := int64(0)
	if length > 0 {
		total = min(length, limit)
	}
	return &fetchProgress{ReadCloser: body, tc: tc, total: total, start: time.Now()}
}

func (f *fetchProgress) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	f.read += int64(n)
	if f.finished {
		return n, err
	}
	now := time.Now()
	switch {
	case err != nil || (f.total > 0 && f.read >= f.total):
		// The end of what is read: a download that reported says where it ended.
		f.finished = true
		if !f.last.IsZero() {
			f.report(now)
		}
	case now.Sub(f.start) >= fetchReportEvery && now.Sub(f.last) >= fetchReportEvery:
		f.report(now)
	}
	return n, err
}

func (f *fetchProgress) report(now time.Time) {
	f.last = now
	got := f.read
	if f.total > 0 {
		got = min(got, f.total) // result reads one byte past its limit to see a cut
	}
	f.tc.Report(float64(got), float64(f.total), "bytes received")
}

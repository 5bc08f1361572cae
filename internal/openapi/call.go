package openapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2"
	"golang.org/x/text/encoding/htmlindex"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Operation is the tool of one API operation.
type Operation struct {
	spec   tool.Spec
	method string
	route  string // the path template, without a query the document's path key had
	// fixedQuery is that query: sent with every call.
	fixedQuery url.Values
	params     []param
	body       *body
	base       *url.URL
	auth       Auth
	secret     string
	tokens     *tokens // OAuth2 bearer tokens; nil without
	client     *http.Client
	maxBytes   int64
	// workspaces finds the calling session's working directory, for {path} file
	// arguments and answers saved as files; nil: neither.
	workspaces   Workspaces
	maxFileBytes int64
}

// Spec describes the tool.
func (o *Operation) Spec() tool.Spec { return o.spec }

// Run sends the request and turns the response into a result: 2xx is the body, any
// other status an is_error result with the status and body.
func (o *Operation) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "arguments must be a JSON object: %v", err)
	}
	callCtx, budget, cancel := answerEarly(ctx)
	defer cancel()
	ws := o.workspace(ctx)
	defer ws.Close()
	req, err := o.request(callCtx, args, ws)
	if err != nil {
		return nil, err
	}
	var sent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(callCtx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				sent.Store(true)
			}
		},
	}))
	resp, err := o.client.Do(req)
	if err != nil {
		if callCtx.Err() != nil {
			return o.unfinished(stopKind(ctx), stopped(ctx, budget), req, nil, nil, sent.Load()), nil
		}
		if sent.Load() {
			return o.unfinished(tool.KindUnavailable, fmt.Sprintf("the connection failed (%v)", unwrapURLError(err)), req, nil, nil, true), nil
		}
		return nil, tool.Errorf(tool.KindUnavailable, "%s %s could not be reached: %v", o.method, o.redacted(req.URL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, o.maxBytes+1))
	if err != nil {
		why := fmt.Sprintf("the connection failed (%v)", err)
		kind := tool.KindUnavailable
		if callCtx.Err() != nil {
			kind, why = stopKind(ctx), stopped(ctx, budget)
		}
		return o.unfinished(kind, why, req, resp, data, true), nil
	}
	if ws.available() && o.isFileAnswer(resp, data) {
		if ctx.ReadOnly {
			return o.unsavedAnswer(resp, data), nil
		}
		return o.saveAnswer(ctx, callCtx, budget, ws, req, resp, data), nil
	}
	cut := int64(len(data)) > o.maxBytes
	if cut {
		data = data[:o.maxBytes]
	}
	return o.result(resp, data, cut), nil
}

// answerEarly is the context a call's request runs under: it ends a little before
// ctx's deadline (a tenth of the time, at most a second), so that the call answers
// with what came by then (a stream still arriving, the note that the request was
// sent) before the dispatcher answers for it with a bare timeout. budget is the time
// the call had, zero without a deadline.
func answerEarly(ctx context.Context) (c context.Context, budget time.Duration, cancel context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		c, cancel = context.WithCancel(ctx)
		return c, 0, cancel
	}
	budget = time.Until(dl)
	c, cancel = context.WithDeadline(ctx, dl.Add(-min(budget/10, time.Second)))
	return c, budget, cancel
}

// stopKind is timeout, or cancelled when the call was cancelled before its time ran out.
func stopKind(ctx context.Context) tool.ErrorKind {
	if errors.Is(ctx.Err(), context.Canceled) {
		return tool.KindCancelled
	}
	return tool.KindTimeout
}

// stopped says what stopped a call whose context ended.
func stopped(ctx context.Context, budget time.Duration) string {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return "the call was cancelled"
	case budget >= 10*time.Second:
		budget = budget.Round(time.Second)
	default:
		budget = budget.Round(100 * time.Millisecond)
	}
	return fmt.Sprintf("the call's time (%s) ran out", budget)
}

// mayAct reports whether the API may have acted on a request it did not finish
// answering: any method but the safe ones (RFC 9110), whose repeat is harmless.
func (o *Operation) mayAct() bool {
	switch o.method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// unfinished is the result of a call stopped before its answer was whole: why says
// what stopped it ("the call's time (30s) ran out"); resp and data are what came of
// the answer (nil when none had). What came is shown like any body, and a request
// that was sent and may change something says so, or the model may send it again.
func (o *Operation) unfinished(kind tool.ErrorKind, why string, req *http.Request, resp *http.Response, data []byte, sent bool) *tool.Result {
	info := map[string]any{"method": o.method, "url": o.redacted(req.URL), "unfinished": true, "request_sent": sent}
	var text string
	if resp == nil {
		text = fmt.Sprintf("%s %s had not answered when %s", o.method, o.redacted(req.URL), why)
	} else {
		cut := int64(len(data)) > o.maxBytes
		if cut {
			data = data[:o.maxBytes]
		}
		mediaType, body := o.responseText(resp, data, info)
		info["status"], info["bytes"], info["cut"] = resp.StatusCode, len(data), cut
		text = fmt.Sprintf("HTTP %d %s from %s %s: the answer was still arriving when %s; what came (%d bytes of %s):\n%s",
			resp.StatusCode, http.StatusText(resp.StatusCode), o.method, o.redacted(resp.Request.URL), why, len(data), mediaType, body)
		if cut {
			text += fmt.Sprintf("\n[response cut: only the first %d bytes were read]", o.maxBytes)
		}
	}
	if sent && o.mayAct() {
		text += "\n[the request was sent; the API may have acted on it: check before calling again]"
	}
	res := tool.ErrorResult(kind, "%s", text)
	res.Details, _ = json.Marshal(info)
	return res
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// request builds the HTTP request from the arguments.
func (o *Operation) request(ctx context.Context, args map[string]any, ws *workspace) (*http.Request, error) {
	route := o.route
	query := o.base.Query() // a base URL may carry a query (api-version=…) for every call
	for k, vs := range o.fixedQuery {
		query[k] = append(query[k], vs...)
	}
	header := http.Header{}
	var cookies []*http.Cookie
	used := map[string]bool{}
	for _, p := range o.params {
		v, ok := args[p.arg]
		used[p.arg] = true
		if !ok || v == nil {
			if p.in == "path" {
				return nil, tool.Errorf(tool.KindInvalidArgs, "path parameter %s is required", p.arg)
			}
			continue
		}
		switch p.in {
		case "path":
			s := scalar(v, p.jsonText, ",")
			if hasDotSegment(s) {
				// Sent as %2F, but servers and proxies that decode it before resolving
				// dot segments would take the request to another route.
				return nil, tool.Errorf(tool.KindInvalidArgs, "path parameter %s cannot have . or .. between slashes: %q", p.arg, s)
			}
			route = strings.ReplaceAll(route, "{"+p.name+"}", styled(p, v, url.PathEscape))
		case "query":
			addQuery(query, p, v)
		case "header":
			s := styled(p, v, func(s string) string { return s })
			if !httpguts.ValidHeaderFieldValue(s) {
				return nil, tool.Errorf(tool.KindInvalidArgs, "header parameter %s: line breaks and control characters cannot be sent in a header", p.arg)
			}
			header.Set(p.name, s)
		case "cookie":
			cookies = append(cookies, &http.Cookie{Name: p.name, Value: url.QueryEscape(scalar(v, p.jsonText, ","))})
		}
	}
	if strings.Contains(route, "{") {
		return nil, tool.Errorf(tool.KindInvalidArgs, "the path %s has parameters the document does not declare", o.route)
	}
	if err := o.checkSegments(route); err != nil {
		return nil, err
	}
	u := *o.base
	u.Path = o.base.Path + route
	u.RawPath = ""
	if o.base.RawPath != "" || strings.Contains(route, "%") {
		u.RawPath = o.base.EscapedPath() + route
		if p, err := url.PathUnescape(u.RawPath); err == nil {
			u.Path = p
		}
	}

	var bodyReader io.Reader
	if o.body != nil {
		var payload any
		present := false
		if o.body.flat {
			obj := map[string]any{}
			for k, v := range args {
				if !used[k] {
					obj[k] = v
				}
			}
			payload, present = obj, len(obj) > 0 || o.body.required
			if present {
				// An optional body is sent once any of its fields is given, and then
				// needs its required ones, which the tool's schema cannot require.
				var missing []string
				for _, k := range o.body.needs {
					if _, ok := obj[k]; !ok {
						missing = append(missing, k)
					}
				}
				if len(missing) > 0 {
					return nil, tool.Errorf(tool.KindInvalidArgs, "the request body is sent when any of its fields is given, and then needs %s: give %s too, or none of the body's fields",
						strings.Join(missing, ", "), strings.Join(missing, ", "))
				}
			}
		} else {
			payload, present = args[o.body.arg]
		}
		if present {
			b, ct, err := encodeBody(o.body, payload, files{ws, o.maxFileBytes})
			if err != nil {
				// A file of the working directory keeps its kind (denied: outside it).
				var te *tool.Error
				if errors.As(err, &te) {
					return nil, tool.Errorf(te.Kind, "the request body: %s", strings.Replace(err.Error(), te.Error(), te.Message, 1))
				}
				return nil, tool.Errorf(tool.KindInvalidArgs, "the request body: %v", err)
			}
			bodyReader = bytes.NewReader(b)
			header.Set("Content-Type", ct)
		}
	}
	switch {
	case o.auth.BearerTokenEnv != "":
		header.Set("Authorization", "Bearer "+o.secret)
	case o.auth.APIKeyHeader != "":
		header.Set(o.auth.APIKeyHeader, o.secret)
	case o.auth.APIKeyQuery != "":
		query.Set(o.auth.APIKeyQuery, o.secret)
	case o.auth.basic():
		header.Set("Authorization", "Basic "+o.secret)
	case o.tokens != nil:
		tok, err := o.tokens.Token()
		if err != nil {
			return nil, tool.Errorf(tool.KindUnavailable, "no OAuth2 token for the %s API from %s: %s", o.spec.Source, o.auth.OAuth2.TokenURL, tokenError(err))
		}
		header.Set("Authorization", tok.Type()+" "+tok.AccessToken)
	}
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, o.method, u.String(), bodyReader)
	if err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "the request could not be built: %v", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, */*;q=0.8")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return req, nil
}

// hasDotSegment reports whether a path parameter value holding a slash (or a
// backslash, which some servers take for one) has a "." or ".." between them.
func hasDotSegment(s string) bool {
	if !strings.ContainsAny(s, `/\`) {
		return false
	}
	for _, el := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == "." || el == ".." {
			return true
		}
	}
	return false
}

// checkSegments refuses a route whose parameters made a whole segment empty, "." or
// "..": the server resolves those away, and the request would reach another route.
// Values are escaped ("/" is %2F), so the route has the template's segments.
func (o *Operation) checkSegments(route string) error {
	tmpl, got := strings.Split(o.route, "/"), strings.Split(route, "/")
	if len(tmpl) != len(got) {
		return nil
	}
	for i, seg := range got {
		if strings.Contains(tmpl[i], "{") && (seg == "" || seg == "." || seg == "..") {
			return tool.Errorf(tool.KindInvalidArgs, "the path parameters of segment %s cannot make it %q: that would reach another route than %s", tmpl[i], seg, o.route)
		}
	}
	return nil
}

func addQuery(q url.Values, p param, v any) {
	if p.deepObj && !p.jsonText {
		// Brackets at every depth: created[gte]=5, expand[0]=customer (Stripe).
		addDeep(q, p.name, v)
		return
	}
	switch x := v.(type) {
	case []any:
		if !p.explode {
			q.Add(p.name, scalar(v, false, p.sep))
			return
		}
		for _, e := range x {
			q.Add(p.name, scalar(e, false, ","))
		}
	case map[string]any:
		if p.jsonText {
			q.Add(p.name, scalar(v, true, ","))
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var pairs []string
		for _, k := range keys {
			switch {
			case p.explode:
				q.Add(k, scalar(x[k], false, ","))
			default:
				// Not exploded: one value, keys and values alternating (x,1,y,2).
				pairs = append(pairs, k, scalar(x[k], false, ","))
			}
		}
		if len(pairs) > 0 {
			q.Add(p.name, strings.Join(pairs, ","))
		}
	default:
		q.Add(p.name, scalar(v, p.jsonText, ","))
	}
}

// styled renders a path or header parameter's value in its style (OpenAPI's simple,
// label or matrix, which are RFC 6570's {v}, {.v} and {;v}), each name and value put
// through esc, the delimiters the style adds not: a matrix array [1, 2] is ;ids=1,2
// (;ids=1;ids=2 exploded), an object {a: 1, b: 2} a,1,b,2 (a=1,b=2 exploded).
func styled(p param, v any, esc func(string) string) string {
	if p.jsonText {
		return esc(scalar(v, true, ","))
	}
	var prefix, sep string // what starts the value, what joins exploded items
	switch p.style {
	case openapi3.SerializationLabel:
		prefix, sep = ".", "."
	case openapi3.SerializationMatrix:
		prefix, sep = ";"+esc(p.name)+"=", ";"+esc(p.name)+"="
	default:
		sep = ","
	}
	var items []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			items = append(items, esc(scalar(e, false, ",")))
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p.explode {
				items = append(items, esc(k)+"="+esc(scalar(x[k], false, ",")))
			} else {
				items = append(items, esc(k), esc(scalar(x[k], false, ",")))
			}
		}
		if p.explode && p.style == openapi3.SerializationMatrix {
			// Each key is a parameter of its own: ;a=1;b=2.
			prefix, sep = ";", ";"
		}
	default:
		return prefix + esc(scalar(v, false, ","))
	}
	if !p.explode {
		sep = ","
	}
	return prefix + strings.Join(items, sep)
}

// scalar renders a value for a path, query, header or cookie.
func scalar(v any, asJSON bool, sep string) string {
	if asJSON {
		b, _ := json.Marshal(integralNumbers(v))
		return string(b)
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return numberText(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalar(e, false, sep)
		}
		return strings.Join(parts, sep)
	}
	b, _ := json.Marshal(integralNumbers(v))
	return string(b)
}

// numberText writes an integral number as an integer (5.0, 1e3 and -0 as 5, 1000 and
// 0): Gemini gives every number as a double, and /pets/5.0 is not /pets/5. Other
// numbers, and numbers from 2^53 on, where a double is no longer exact (2^53+1 reads
// as 2^53), stay as given; so does an integer written as one.
func numberText(n json.Number) string {
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return n.String()
	}
	return strconv.FormatInt(int64(f), 10)
}

// integralNumbers returns v with its integral numbers written as integers (see
// numberText): a server decoding into an int refuses 5.0.
func integralNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return json.Number(numberText(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = integralNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = integralNumbers(e)
		}
		return out
	}
	return v
}

// encodeBody returns the request body and its Content-Type.
func encodeBody(b *body, payload any, fs files) ([]byte, string, error) {
	switch {
	case b.binary:
		return encodeRawFile(b.mediaType, payload, fs)
	case isJSON(b.mediaType):
		data, err := json.Marshal(integralNumbers(payload))
		return data, b.mediaType, err
	case isForm(b.mediaType):
		obj, ok := payload.(map[string]any)
		if !ok {
			return nil, "", errors.New("a form body must be an object")
		}
		form := url.Values{}
		for k, v := range obj {
			if b.deep[k] {
				addDeep(form, k, v)
				continue
			}
			if arr, ok := v.([]any); ok {
				if sep, ok := b.joined[k]; ok {
					form.Set(k, scalar(arr, false, sep))
					continue
				}
				for _, e := range arr {
					form.Add(k, scalar(e, false, ","))
				}
				continue
			}
			form.Set(k, scalar(v, false, ","))
		}
		return []byte(form.Encode()), b.mediaType, nil
	case isMultipart(b.mediaType):
		return encodeMultipart(b, payload, fs)
	}
	if s, ok := payload.(string); ok {
		return []byte(s), b.mediaType, nil
	}
	data, err := json.Marshal(payload)
	return data, b.mediaType, err
}

// addDeep adds a deepObject form field: an object's members and an array's items as
// fields of their own named with their key or index in brackets, at any depth
// (line_items[0][price]=p), the way Stripe's API and PHP and Rack parse forms.
func addDeep(form url.Values, name string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			addDeep(form, name+"["+k+"]", x[k])
		}
	case []any:
		for i, e := range x {
			addDeep(form, name+"["+strconv.Itoa(i)+"]", e)
		}
	case nil:
		form.Add(name, "")
	default:
		form.Add(name, scalar(v, false, ","))
	}
}

// encodeMultipart writes a multipart/form-data body: files as file parts, objects as
// JSON parts (OpenAPI's default for them), arrays as repeated fields, the rest as text.
func encodeMultipart(b *body, payload any, fs files) ([]byte, string, error) {
	obj, ok := payload.(map[string]any)
	if !ok {
		return nil, "", errors.New("a multipart body must be an object")
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		if b.files[k] {
			list, isList := v.([]any)
			if !isList {
				list = []any{v}
			}
			for _, f := range list {
				if err := writeFilePart(w, k, f, fs); err != nil {
					return nil, "", fmt.Errorf("%s: %w", k, err)
				}
			}
			continue
		}
		var err error
		sep, joined := b.joined[k]
		switch x := v.(type) {
		case []any:
			if joined {
				err = w.WriteField(k, scalar(x, false, sep))
				break
			}
			for _, e := range x {
				if err = w.WriteField(k, scalar(e, false, ",")); err != nil {
					break
				}
			}
		case map[string]any:
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="`+quoteEscaper.Replace(k)+`"`)
			h.Set("Content-Type", "application/json")
			var pw io.Writer
			if pw, err = w.CreatePart(h); err == nil {
				err = json.NewEncoder(pw).Encode(integralNumbers(x))
			}
		default:
			err = w.WriteField(k, scalar(v, false, ","))
		}
		if err != nil {
			return nil, "", err
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}

// tokenError is what a failed token request says, without the response body the
// oauth2 package quotes whole (an identity provider's error page).
func tokenError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return strings.TrimSpace(re.ErrorCode + " " + re.ErrorDescription)
		}
		if re.Response != nil {
			return re.Response.Status
		}
	}
	return unwrapURLError(err).Error()
}

// quoteEscaper escapes a quoted-string of a part's header as mime/multipart does.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// files is where a file argument given by path is read: the call's working
// directory, at most max bytes.
type files struct {
	ws  *workspace
	max int64
}

// fileContent is the name and bytes of a file argument {filename, content |
// content_base64 | path}: path names a file of the call's working directory, whose
// name filename, when given, replaces.
func fileContent(v any, fs files) (name string, data []byte, err error) {
	f, ok := v.(map[string]any)
	if !ok {
		return "", nil, errors.New("a file is an object")
	}
	name, _ = f["filename"].(string)
	text, hasText := f["content"].(string)
	b64, hasB64 := f["content_base64"].(string)
	p, hasPath := f["path"].(string)
	if btoi(hasText)+btoi(hasB64)+btoi(hasPath) != 1 {
		return "", nil, errors.New("give one of content, content_base64 and path")
	}
	switch {
	case hasText:
		return name, []byte(text), nil
	case hasPath:
		if fs.ws == nil {
			return "", nil, tool.Errorf(tool.KindUnavailable, "a file cannot be given by path here; give its content or content_base64")
		}
		base, data, err := fs.ws.readFile(p, fs.max)
		if err != nil {
			return "", nil, err
		}
		if name == "" {
			name = base
		}
		return name, data, nil
	}
	if data, err = base64.StdEncoding.DecodeString(b64); err != nil {
		return "", nil, fmt.Errorf("content_base64 is not base64: %w", err)
	}
	return name, data, nil
}

// typeOfFile is the media type a file name's extension says, or octet-stream.
func typeOfFile(name string) string {
	if ct := mime.TypeByExtension(filepath.Ext(name)); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

// encodeRawFile is a raw binary body (binaryBodyArg): its bytes, sent as the
// document's media type, or, when that is a wildcard (*/*, image/*), as the type the
// file name's extension says.
func encodeRawFile(mediaType string, payload any, fs files) ([]byte, string, error) {
	name, data, err := fileContent(payload, fs)
	if err != nil {
		return nil, "", err
	}
	if strings.HasSuffix(mediaType, "/*") {
		mediaType = typeOfFile(name)
	}
	return data, mediaType, nil
}

func writeFilePart(w *multipart.Writer, field string, v any, fs files) error {
	name, data, err := fileContent(v, fs)
	if err == nil && name == "" {
		err = errors.New("a file needs a filename")
	}
	var te *tool.Error
	if errors.As(err, &te) {
		return err // about the file of the working directory: the message says what to do
	}
	if err != nil {
		return fmt.Errorf("%w (a file is {filename, content}, {filename, content_base64} or {path})", err)
	}
	ct := typeOfFile(name)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", multipart.FileContentDisposition(field, name))
	h.Set("Content-Type", ct)
	pw, err := w.CreatePart(h)
	if err == nil {
		_, err = pw.Write(data)
	}
	return err
}

// result turns a response into a tool result.
func (o *Operation) result(resp *http.Response, data []byte, cut bool) *tool.Result {
	ct := resp.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	media := (strings.HasPrefix(mediaType, "image/") || strings.HasPrefix(mediaType, "audio/")) && !cut
	info := map[string]any{"status": resp.StatusCode, "content_type": ct, "bytes": len(data), "cut": cut,
		"method": o.method, "url": o.redacted(resp.Request.URL)}
	retry := ""
	if ra := strings.TrimSpace(resp.Header.Get("Retry-After")); ra != "" && resp.StatusCode >= 400 {
		info["retry_after"] = clip(ra, 100)
		retry = retryAfter(ra)
	}
	var text string
	if !media {
		data = o.redactSecrets(data, resp.Request)
		_, text = o.responseText(resp, data, info)
	}
	details, _ := json.Marshal(info)
	if cut {
		text += fmt.Sprintf("\n[response cut: only the first %d bytes were read]", o.maxBytes)
	}
	if resp.StatusCode/100 != 2 {
		kind := tool.KindFailed
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			kind = tool.KindUnavailable
		}
		if loc, err := resp.Location(); err == nil && isRedirect(resp.StatusCode) {
			// A redirect elsewhere, or one past the last followed, comes back
			// (sameHostRedirects): say so, or the model reads a bare 302 and cannot
			// tell what to do about it.
			why := "redirects go to the API's own scheme and host only, so that its credentials stay there"
			if u := resp.Request.URL; loc.Host == u.Host && loc.Scheme == u.Scheme {
				why = fmt.Sprintf("at most %d redirects are followed", maxRedirects)
			}
			text = fmt.Sprintf("the API redirected to %s://%s%s, which is not followed: %s; %s", loc.Scheme, loc.Host, loc.EscapedPath(), why, text)
		}
		// The URL called (the last one, after redirects on the API), not the route's
		// template: the model sees which of its calls failed.
		if resp.StatusCode == http.StatusUnauthorized && o.tokens != nil {
			// The token may have been revoked before it expired: the next call asks
			// for a new one rather than sending it again until then.
			o.tokens.Refresh()
			text += "\n[the API refused the OAuth2 token; the next call gets a new one]"
		}
		if retry != "" {
			text += "\n[" + retry + "]"
		}
		res := tool.ErrorResult(kind, "HTTP %d %s from %s %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), o.method, o.redacted(resp.Request.URL), text)
		res.Details = details
		return res
	}
	// What a 201's Location and a Link header (pages: GitHub's next and last) say
	// is part of the answer, and the model reads only the text.
	heads := o.answerHeaders(resp, info, len(data) == 0)
	details, _ = json.Marshal(info)
	if len(data) == 0 {
		res := tool.TextResult(fmt.Sprintf("HTTP %d %s (no body)", resp.StatusCode, http.StatusText(resp.StatusCode)) + heads)
		res.Details = details
		return res
	}
	if media {
		// An image, or audio (OpenAI's speech): a block of its own, which the formats
		// that cannot show it name in a line, and the call's record keeps whole.
		kind := tool.ContentImage
		if strings.HasPrefix(mediaType, "audio/") {
			kind = tool.ContentAudio
		}
		return &tool.Result{Content: []tool.Content{{Type: kind, Data: base64.StdEncoding.EncodeToString(data), MimeType: mediaType}}, Details: details}
	}
	res := tool.TextResult(text + heads)
	res.Details = details
	if isJSON(mediaType) && !cut {
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
			res.Structured = json.RawMessage(trimmed)
		}
	}
	return res
}

// answerHeaders is the Location and Link headers of a 2xx answer, as lines to add to
// its text ("\n[Location: /pets/123]"), credentials redacted; info gets them too.
// Location is a line only when there is no body (a body describes what was made).
func (o *Operation) answerHeaders(resp *http.Response, info map[string]any, noBody bool) string {
	var b strings.Builder
	for _, h := range []string{"Location", "Link"} {
		vs := resp.Header.Values(h)
		if len(vs) == 0 {
			continue
		}
		v := clip(string(o.redactSecrets([]byte(strings.Join(vs, ", ")), resp.Request)), 2000)
		info[strings.ToLower(h)] = v
		if h == "Link" || noBody {
			fmt.Fprintf(&b, "\n[%s: %s]", h, v)
		}
	}
	return b.String()
}

// isRedirect reports whether status is one an HTTP client follows to its Location
// (not 300, 304 or 305, which may carry one too).
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// minSecretLen is the shortest credential looked for in what an API answers: shorter
// ones would blot out ordinary words, and are no credentials anyway.
const minSecretLen = 6

// redactSecrets replaces in a response body the credentials its request carried (the
// token or key, Basic's encoded pair and password, the OAuth2 token sent), as given
// and query-escaped, by REDACTED: an API that quotes the key it was sent (in an error
// about it, or echoing the request) must not hand it to the model, the call's record
// or a UI.
func (o *Operation) redactSecrets(data []byte, req *http.Request) []byte {
	var secrets []string
	add := func(v string) {
		if len(v) >= minSecretLen {
			secrets = append(secrets, v, url.QueryEscape(v))
		}
	}
	add(o.secret)
	if o.auth.basic() {
		if pair, err := base64.StdEncoding.DecodeString(o.secret); err == nil {
			_, pass, _ := strings.Cut(string(pair), ":")
			add(pass)
		}
	}
	if o.tokens != nil && req != nil {
		_, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
		add(tok)
	}
	// Longest first: a value that contains another is replaced whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, v := range secrets {
		if bytes.Contains(data, []byte(v)) {
			data = bytes.ReplaceAll(data, []byte(v), []byte("REDACTED"))
		}
	}
	return data
}

// retryAfter is what a Retry-After header (RFC 9110: seconds, or an HTTP date) tells
// the model, which reads only the result's text.
func retryAfter(v string) string {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return fmt.Sprintf("the API says to retry after %d seconds (Retry-After)", n)
	}
	if t, err := http.ParseTime(v); err == nil {
		return fmt.Sprintf("the API says to retry after %s (Retry-After)", t.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("the API sent Retry-After: %q", clip(v, 100))
}

// redacted is u for the model, logs and UIs: without user info (a base URL's
// user:password), nor the API key of the query.
func (o *Operation) redacted(u *url.URL) string {
	c := *u
	c.User = nil
	if o.auth.APIKeyQuery == "" {
		return c.String()
	}
	q := c.Query()
	if q.Has(o.auth.APIKeyQuery) {
		q.Set(o.auth.APIKeyQuery, "xxxxx")
		c.RawQuery = q.Encode()
	}
	return c.String()
}

// responseText is a response body as the model reads it, credentials redacted: an
// event stream compact (eventStreamText, its count of events in info), any other text
// as it came, binary data named. It returns the body's media type too.
func (o *Operation) responseText(resp *http.Response, data []byte, info map[string]any) (string, string) {
	mediaType, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	data = o.redactSecrets(inCharset(data, params["charset"]), resp.Request)
	text := bodyText(mediaType, data)
	if strings.EqualFold(mediaType, "text/event-stream") && len(data) > 0 && !strings.HasPrefix(text, "[binary body") {
		var n int
		text, n = eventStreamText([]byte(text))
		info["events"] = n
	}
	return mediaType, text
}

// inCharset is data, in the charset its Content-Type declares, as UTF-8: a legacy
// API's ISO-8859-1 or Shift_JIS text would otherwise be taken for binary (labels as
// browsers read them: ISO-8859-1 is windows-1252). Data in UTF-8, in a charset that
// is not known, or that does not decode stays as it is.
func inCharset(data []byte, charset string) []byte {
	cs := strings.ToLower(strings.TrimSpace(charset))
	if cs == "" || cs == "utf-8" || cs == "utf8" || cs == "us-ascii" {
		return data
	}
	enc, err := htmlindex.Get(cs)
	if err != nil {
		return data
	}
	out, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return data
	}
	return out
}

func bodyText(mediaType string, data []byte) string {
	if len(data) == 0 {
		return "(no body)"
	}
	if !utf8.Valid(data) {
		// A cut may split the last character; anything else is binary.
		if v := bytes.ToValidUTF8(data, nil); len(data)-len(v) > 3 {
			return fmt.Sprintf("[binary body: %d bytes of %s]", len(data), mediaType)
		}
		data = bytes.ToValidUTF8(data, nil)
	}
	return string(data)
}

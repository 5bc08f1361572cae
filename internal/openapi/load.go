package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// Source is a loaded OpenAPI document's tools.
type Source struct {
	Name string
	// Spec is where the document was read, for logs: a URL's user info and query,
	// which may carry a credential (a private document's ?token=), read REDACTED.
	Spec  string
	Tools []*Operation
	// Warnings are problems that did not stop loading (validation findings, renamed
	// collisions, schemas left open).
	Warnings []string
}

// Register registers the source's tools with m. An operation m refuses for itself
// (an argument schema the validator cannot take: a regex feature no engine here has)
// is left out with a warning rather than costing the API's other operations; a name
// that is taken fails them all (toolmgr.ErrAlreadyRegistered). It returns how many
// were registered.
func (s *Source) Register(m *toolmgr.Manager) (int, error) {
	tools := make([]tool.Tool, len(s.Tools))
	for i, o := range s.Tools {
		tools[i] = o
	}
	switch err := m.Register(tools...); {
	case err == nil:
		return len(tools), nil
	case errors.Is(err, toolmgr.ErrAlreadyRegistered):
		return 0, err
	}
	// One of them is refused (the whole batch was, untouched): one by one, then.
	n := 0
	for _, o := range s.Tools {
		switch err := m.Register(o); {
		case errors.Is(err, toolmgr.ErrAlreadyRegistered):
			return n, err
		case err != nil:
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s %s is left out: %s", o.method, o.route, deepestCause(err)))
		default:
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("every operation was refused (%s)", strings.Join(s.Warnings, "; "))
	}
	return n, nil
}

// ErrUnreadable marks an error of Load in reading or parsing the document or a file
// it refers to (the network, the server's answer, a body that is no document: an API
// in maintenance serving an HTML page), which a later attempt may not meet. Load's
// other errors are the configuration's (Check) or the parsed document's (more than
// 1000 operations, no usable base URL): reading it again does not change them.
var ErrUnreadable = errors.New("the document could not be read or parsed")

type unreadable struct{ error }

func (u unreadable) Unwrap() error        { return u.error }
func (u unreadable) Is(target error) bool { return target == ErrUnreadable }

// IsURL reports whether a spec is an http(s) URL rather than a file path.
func IsURL(spec string) bool { return isURL(spec) }

// ShownSpec is a spec as logs may show it: a URL's user info and query read REDACTED.
func ShownSpec(spec string) string { return shownSpec(spec) }

// Check returns the error Load would for cfg itself, before reading anything: an
// invalid field, an auth variable that is not set. The error names the source.
func Check(cfg Config) error {
	_, _, err := cfg.prepare()
	return err
}

// prepare validates cfg, fills in its defaults and reads its credentials.
func (cfg *Config) prepare() (string, *tokens, error) {
	if err := cfg.Validate(); err != nil {
		return "", nil, fmt.Errorf("openapi %q: %w", cfg.Name, err)
	}
	cfg.withDefaults()
	secret, err := cfg.credentials()
	if err != nil {
		return "", nil, cfg.failure(err)
	}
	tokens, err := cfg.oauthTokens()
	if err != nil {
		return "", nil, cfg.failure(err)
	}
	return secret, tokens, nil
}

// failure names the source and its spec in err, the spec's credentials redacted.
func (cfg *Config) failure(err error) error {
	if shown := shownSpec(cfg.Spec); shown != cfg.Spec {
		redacted := fmt.Errorf("openapi %q (%s): %s", cfg.Name, shown, redactSpecCredentials(err.Error(), cfg.Spec))
		if errors.Is(err, ErrUnreadable) {
			return unreadable{redacted}
		}
		return redacted
	}
	return fmt.Errorf("openapi %q (%s): %w", cfg.Name, cfg.Spec, err)
}

// Load reads and parses the document of cfg and builds one tool per operation. The
// error names the source and says what is wrong; errors.Is(err, ErrUnreadable) tells
// the ones a later attempt may not meet.
func Load(ctx context.Context, cfg Config) (*Source, error) {
	secret, tokens, err := cfg.prepare()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Source, error) { return nil, cfg.failure(err) }
	// fetch_timeout bounds reading the document and every file it refers to.
	fetchCtx, cancel := context.WithTimeout(ctx, cfg.FetchTimeout)
	defer cancel()
	files, err := newSpecFiles(fetchCtx, cfg)
	if err != nil {
		return fail(err)
	}
	data, err := files.readRoot()
	if err != nil {
		return fail(unreadable{err})
	}
	src := &Source{Name: cfg.Name, Spec: shownSpec(cfg.Spec)}
	var doc *openapi3.T
	swagger2 := isSwagger(data)
	if swagger2 {
		var notes []string
		doc, notes, err = parseSwagger2(ctx, data, files)
		src.Warnings = append(src.Warnings, notes...)
	} else {
		doc, err = parse(ctx, data, files)
	}
	if err != nil {
		return fail(unreadable{err})
	}
	var specURL *url.URL
	if isURL(cfg.Spec) {
		specURL = files.root
	}
	if err := validateDoc(ctx, doc); err != nil {
		// Real-world documents often break a rule that does not matter for calling
		// them; say so and go on. Broken references and syntax already failed above.
		src.Warnings = append(src.Warnings, "document does not validate: "+firstLine(err.Error()))
	}
	base, err := baseURL(cfg, doc, specURL, swagger2)
	if err != nil {
		return fail(err)
	}
	files.absoluteRefs(doc)
	b := &builder{cfg: cfg, doc: doc, files: files, base: base, specURL: specURL, secret: secret, tokens: tokens}
	if b.root, err = genericDoc(doc); err != nil {
		return fail(err)
	}
	if err := b.build(src); err != nil {
		return fail(err)
	}
	return src, nil
}

// shownSpec is a document's location for logs and errors: a URL's user info and
// query read REDACTED.
func shownSpec(spec string) string {
	if !isURL(spec) {
		return spec
	}
	u, err := url.Parse(spec)
	if err != nil {
		return "(a URL that cannot be parsed)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "REDACTED", false
	}
	return u.String()
}

// redactSpecCredentials replaces in text what the URL spec carries that may be a
// credential (its password, its query and each value in it, as written and decoded)
// by REDACTED: an error quotes the URLs it fetched (Go's own masks the password only).
// The user name counts too: a token is often written as one.
func redactSpecCredentials(text, spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return strings.ReplaceAll(text, spec, "(a URL that cannot be parsed)")
	}
	var secrets []string
	add := func(v string) {
		if len(v) >= minSecretLen {
			secrets = append(secrets, v, url.QueryEscape(v), url.PathEscape(v))
		}
	}
	if p, ok := u.User.Password(); ok {
		add(p)
	}
	// A token may be the user name alone (https://TOKEN@host/…), which Go's errors
	// quote whole: they mask only a password.
	add(u.User.Username())
	add(u.RawQuery)
	for _, vs := range u.Query() {
		for _, v := range vs {
			add(v)
		}
	}
	// Longest first: a value that contains another is replaced whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, v := range secrets {
		text = strings.ReplaceAll(text, v, "REDACTED")
	}
	return text
}

func readCapped(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d MiB", what, limit>>20)
	}
	return data, nil
}

// parse loads an OpenAPI 3.0 or 3.1 document (parseSwagger2 a Swagger 2.0 one).
// References to other files or URLs are read through files, whose policy decides
// which may be.
func parse(ctx context.Context, data []byte, files *specFiles) (doc *openapi3.T, err error) {
	// The loader panics on some malformed input; a bad document is an error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			doc, err = nil, fmt.Errorf("the document could not be parsed: %v", p)
		}
	}()
	load := func(data []byte) (*openapi3.T, error) {
		loader := openapi3.NewLoader()
		loader.Context = ctx
		// With ReadFromURIFunc set the loader no longer checks IsExternalRefsAllowed
		// itself (see its doc): files.loaderRead is the policy. Set the flag anyway, to
		// say what is meant.
		loader.IsExternalRefsAllowed = true
		loader.ReadFromURIFunc = files.loaderRead
		return loader.LoadFromDataWithPath(data, files.root)
	}
	doc, err = load(data)
	var refused *errRefused
	if (err != nil && !errors.As(err, &refused)) || hasOperationRefs(doc) {
		// A document that puts operations in files of their own, or gives a tag a $ref
		// for its description, is rewritten and read again; the rewriting costs a
		// second parse only for such documents (and ones that fail anyway).
		rewritten, changed, rerr := files.rewriteRoot(data)
		if rerr != nil {
			return nil, rerr
		}
		if changed {
			doc, err = load(rewritten)
		}
	}
	if err != nil {
		// A refused reference is the whole story (kin-openapi's text names the
		// reference as written, ours where it leads and why).
		if errors.As(err, &refused) {
			return nil, errors.New(firstLine(err.Error()))
		}
		return nil, fmt.Errorf("the document could not be parsed: %s", firstLine(err.Error()))
	}
	v := doc.OpenAPI
	if !strings.HasPrefix(v, "3.0") && !strings.HasPrefix(v, "3.1") {
		if v == "" {
			return nil, errors.New("the document has no openapi or swagger version field; only OpenAPI 3.0 and 3.1 and Swagger 2.0 are supported")
		}
		return nil, fmt.Errorf("openapi version %q is not supported (use 3.0 or 3.1, or Swagger 2.0)", v)
	}
	if doc.Paths == nil || doc.Paths.Len() == 0 {
		return nil, errors.New("the document has no paths")
	}
	return doc, nil
}

// isSwagger reports whether data is a Swagger (OpenAPI 2) document: one with a swagger
// field and no openapi field. A document without the word as a key (block YAML or
// JSON) is not parsed for it: 3.x documents, the most, are parsed once, not twice.
func isSwagger(data []byte) bool {
	if !bytes.HasPrefix(data, []byte("swagger:")) && !bytes.Contains(data, []byte("\nswagger:")) &&
		!bytes.Contains(data, []byte(`"swagger"`)) && !bytes.Contains(data, []byte(`'swagger'`)) {
		return false
	}
	var head struct {
		Swagger any `yaml:"swagger"`
		OpenAPI any `yaml:"openapi"`
	}
	if yaml.Unmarshal(data, &head) != nil {
		return false
	}
	return head.Swagger != nil && head.OpenAPI == nil
}

// genericDoc is the document as plain JSON values, for resolving references.
func genericDoc(doc *openapi3.T) (any, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("the document could not be re-encoded: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// baseURL is the configured override, else the document's first server (resolved
// against the document's own URL when relative). A Swagger 2.0 document's server is
// its host, basePath and scheme; without a host it is served where it was read.
func baseURL(cfg Config, doc *openapi3.T, specURL *url.URL, swagger2 bool) (*url.URL, error) {
	raw := cfg.BaseURL
	if raw == "" && len(doc.Servers) > 0 && doc.Servers[0] != nil {
		raw = serverText(doc.Servers[0])
	}
	if raw == "" {
		if specURL == nil && swagger2 {
			return nil, errors.New("no base URL: the Swagger 2.0 document has no host; set base_url to the API's URL")
		}
		if specURL == nil {
			return nil, errors.New("no base URL: the document lists no servers; set base_url")
		}
		raw = "/"
	}
	if u, err := url.Parse(raw); err == nil && !u.IsAbs() && specURL == nil {
		if swagger2 {
			return nil, fmt.Errorf("no base URL: the Swagger 2.0 document has no host, only the basePath %q; set base_url to the API's URL, base path included", raw)
		}
		return nil, fmt.Errorf("the document's server URL %q is relative; set base_url", raw)
	}
	return resolveServer(raw, specURL)
}

// serverText is a server's URL with its variables' defaults filled in.
func serverText(s *openapi3.Server) string {
	raw := s.URL
	for name, v := range s.Variables {
		if v != nil {
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
	}
	return raw
}

// resolveServer parses a server URL, resolving a relative one against against (the
// document's URL, or for an operation's own server the API's base URL).
func resolveServer(raw string, against *url.URL) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", raw, err)
	}
	if !u.IsAbs() && against != nil {
		u = against.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("base URL %q is not http(s)", u)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// operationBase is where an operation's calls go: its own servers' first, else its
// path item's, else the API's base URL, which is also what base_url makes it. A
// relative server URL resolves against the document's URL, or, for a document read
// from a file, against the API's base URL.
func (b *builder) operationBase(item *openapi3.PathItem, op *openapi3.Operation) (*url.URL, error) {
	servers := item.Servers
	if op.Servers != nil && len(*op.Servers) > 0 {
		servers = *op.Servers
	}
	if b.cfg.BaseURL != "" || len(servers) == 0 || servers[0] == nil {
		return b.base, nil
	}
	against := b.specURL
	if against == nil {
		against = b.base
	}
	u, err := resolveServer(serverText(servers[0]), against)
	if err != nil {
		return nil, fmt.Errorf("the operation's server: %w", err)
	}
	return u, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

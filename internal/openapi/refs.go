package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/jsontext"
)

// specFiles reads a source's document and the files it refers to ($ref:
// "./schemas/pet.yaml", "common.yaml#/components/schemas/Error") under one policy.
// The document is untrusted input: it must not make the daemon read /etc/passwd as a
// schema or reach another host. So a document read from a file may refer only to
// files in its own directory tree, one read from a URL only to URLs on its own
// scheme, host and port; together they are at most MaxSpecFiles files and
// MaxSpecTotalBytes bytes, each at most MaxSpecBytes. kin-openapi reads through it
// (loaderRead) and so does the inliner (json), which shares what was read.
type specFiles struct {
	cfg Config
	// ctx carries the deadline of every fetch: fetch_timeout covers the document and
	// all it refers to together, so a slow host cannot stall start once per file.
	ctx context.Context
	// root is the main document's location: {Path: absolute path} for a file (the
	// form kin-openapi joins relative references to), else its URL.
	root    *url.URL
	rootKey string
	// dir and realDir are a file document's directory, as written and with symlinks
	// resolved: a referenced file must be inside both.
	dir, realDir string
	data         map[string][]byte
	parsed       map[string]any
	total        int64
	// fixing holds the files fixFile is rewriting, whose references must not lead
	// back to them.
	fixing map[string]bool
}

// errRefused is a reference the policy or the bounds do not allow; its text says why.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

func refused(format string, args ...any) error { return &errRefused{fmt.Sprintf(format, args...)} }

func newSpecFiles(ctx context.Context, cfg Config) (*specFiles, error) {
	f := &specFiles{cfg: cfg, ctx: ctx, data: map[string][]byte{}, parsed: map[string]any{}, fixing: map[string]bool{}}
	if isURL(cfg.Spec) {
		u, err := url.Parse(cfg.Spec)
		if err != nil {
			return nil, fmt.Errorf("spec URL: %w", err)
		}
		u.Fragment = ""
		f.root = u
	} else {
		abs, err := filepath.Abs(cfg.Spec)
		if err != nil {
			return nil, err
		}
		f.root = &url.URL{Path: filepath.ToSlash(abs)}
		f.dir = filepath.Dir(abs)
		if f.realDir, err = filepath.EvalSymlinks(f.dir); err != nil {
			return nil, err
		}
	}
	f.rootKey = f.root.String()
	return f, nil
}

func isURL(spec string) bool {
	return strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://")
}

// readRoot reads the main document, which the configuration names and so needs no
// policy, and counts it against the bounds.
func (f *specFiles) readRoot() ([]byte, error) {
	var data []byte
	var err error
	if f.dir == "" {
		data, err = f.fetch(f.root, "the document")
	} else {
		data, err = readFileCapped(filepath.FromSlash(f.root.Path), "the document")
	}
	if err != nil {
		return nil, err
	}
	f.total = int64(len(data))
	f.data[f.rootKey] = data
	return data, nil
}

// locate applies the policy to a reference's target (without fragment) and returns
// its canonical form, the key of what was read from it.
func (f *specFiles) locate(u *url.URL) (*url.URL, error) {
	t := *u
	t.Fragment, t.RawFragment = "", ""
	if f.dir == "" {
		// kin-openapi takes a path-absolute reference ("/schemas/pet.yaml") for a
		// file path; on the web it means the same server, as RFC 3986 has it.
		if t.Scheme == "" && t.Host == "" && t.Opaque == "" {
			t = *f.root.ResolveReference(&t)
		}
		if !strings.EqualFold(t.Scheme, f.root.Scheme) || !strings.EqualFold(t.Host, f.root.Host) {
			return nil, refused("reference to %s is refused: a document read from %s://%s may refer only to URLs on that scheme, host and port",
				displayURL(u), f.root.Scheme, f.root.Host)
		}
		t.User = nil
		return &t, nil
	}
	outside := func() error {
		return refused("reference to %s is refused: a document read from a file may refer only to files in its directory %s",
			displayURL(u), f.dir)
	}
	if (t.Scheme != "" && t.Scheme != "file") || (t.Host != "" && t.Host != "localhost") || t.Opaque != "" || !path.IsAbs(t.Path) {
		return nil, outside()
	}
	p := filepath.Clean(filepath.FromSlash(t.Path))
	if p == filepath.FromSlash(f.root.Path) {
		return f.root, nil
	}
	if !within(f.dir, p) {
		return nil, outside()
	}
	// A symlink in the tree must not lead out of it either.
	if real, err := filepath.EvalSymlinks(p); err == nil && !within(f.realDir, real) {
		return nil, outside()
	}
	return &url.URL{Path: filepath.ToSlash(p)}, nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func displayURL(u *url.URL) string {
	t := *u
	t.User = nil
	return t.String()
}

// read returns the content of a referenced file or URL, reading it once.
func (f *specFiles) read(u *url.URL) ([]byte, string, error) {
	loc, err := f.locate(u)
	if err != nil {
		return nil, "", err
	}
	key := loc.String()
	if data, ok := f.data[key]; ok {
		return data, key, nil
	}
	if len(f.data) >= MaxSpecFiles {
		return nil, "", refused("reference to %s is refused: the document would span more than %d files", displayURL(u), MaxSpecFiles)
	}
	what := displayURL(loc)
	var data []byte
	if f.dir == "" {
		data, err = f.fetch(loc, what)
	} else {
		data, err = readFileCapped(filepath.FromSlash(loc.Path), what)
	}
	if err != nil {
		return nil, "", err
	}
	if f.total += int64(len(data)); f.total > MaxSpecTotalBytes {
		return nil, "", refused("reference to %s is refused: the document and the files it refers to come to more than %d MiB", what, MaxSpecTotalBytes>>20)
	}
	if f.fixing[key] {
		return nil, "", refused("reference to %s is refused: its properties lead back to it through $refs", what)
	}
	f.fixing[key] = true
	data, err = f.fixFile(loc, data)
	delete(f.fixing, key)
	if err != nil {
		return nil, "", err
	}
	f.data[key] = data
	return data, key, nil
}

// fixFile rewrites a referenced file where it departs from OpenAPI as inlineProperties
// says; data is returned unchanged when nothing does.
func (f *specFiles) fixFile(loc *url.URL, data []byte) ([]byte, error) {
	if !bytes.Contains(data, []byte("properties")) || !bytes.Contains(data, []byte("$ref")) {
		return data, nil
	}
	var v any
	if yaml.Unmarshal(data, &v) != nil {
		return data, nil // kin-openapi says what is wrong with it
	}
	v = jsontext.FromYAML(v)
	changed, err := f.inlineProperties(loc, v)
	if err != nil || !changed {
		return data, err
	}
	return json.Marshal(v)
}

// inlineProperties puts in place the schemas' `properties` written as a $ref to an
// object of properties elsewhere (`properties: {$ref: attributes.yml#/droplet_ids}`,
// as DigitalOcean's load balancers have them), which JSON Schema does not allow and
// kin-openapi cannot read, in v, read from the document at base. A property named
// `$ref` keeps its schema (an object, not a string).
func (f *specFiles) inlineProperties(base *url.URL, v any) (bool, error) {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok && len(props) == 1 {
			if ref, ok := props["$ref"].(string); ok {
				inlined, err := f.inlineAt(base, ref, "properties")
				if err != nil {
					return false, err
				}
				v["properties"] = inlined
				changed = true
			}
		}
		for _, e := range v {
			c, err := f.inlineProperties(base, e)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	case []any:
		for _, e := range v {
			c, err := f.inlineProperties(base, e)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}

// loaderRead is kin-openapi's ReadFromURIFunc. Setting one makes the loader skip its
// own IsExternalRefsAllowed check: the policy is read's.
func (f *specFiles) loaderRead(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
	data, _, err := f.read(u)
	return data, err
}

// isRoot reports whether u (fragment aside) is the main document.
func (f *specFiles) isRoot(u *url.URL) bool {
	loc, err := f.locate(u)
	return err == nil && loc.String() == f.rootKey
}

// json is the referenced document at u as generic JSON, for the inliner.
func (f *specFiles) json(u *url.URL) (any, string, error) {
	data, key, err := f.read(u)
	if err != nil {
		return nil, "", err
	}
	if v, ok := f.parsed[key]; ok {
		return v, key, nil
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, "", fmt.Errorf("%s could not be parsed: %s", displayURL(u), firstLine(err.Error()))
	}
	v = jsontext.FromYAML(v)
	f.parsed[key] = v
	return v, key, nil
}

// resolve is the absolute location of ref written in the document at base, joined
// as kin-openapi joins it (the base's directory and the ref's path, the base's query
// kept), so that both ask read for the same files.
func (f *specFiles) resolve(base *url.URL, ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("reference %s: %w", ref, err)
	}
	if r.Scheme != "" || r.Host != "" || r.Opaque != "" {
		return r, nil
	}
	out := *base
	out.Fragment, out.RawFragment = r.Fragment, r.RawFragment
	switch {
	case r.Path == "":
	case path.IsAbs(r.Path):
		out.Path = r.Path
	default:
		out.Path = path.Join(path.Dir(base.Path), r.Path)
	}
	out.RawPath = ""
	return &out, nil
}

// fetch GETs u under the shared deadline, refusing anything over MaxSpecBytes.
func (f *specFiles) fetch(u *url.URL, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/yaml, application/json;q=0.9, */*;q=0.5")
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("fetching %s took longer than %s", what, f.cfg.FetchTimeout)
		}
		return nil, fmt.Errorf("fetching %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("fetching %s: HTTP %s", what, resp.Status)
	}
	return readCapped(resp.Body, MaxSpecBytes, what)
}

func readFileCapped(p, what string) ([]byte, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	// A FIFO or device in the tree would block or never end.
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return readCapped(fh, MaxSpecBytes, what)
}

// absoluteRefs rewrites the schema references of the operations' parameters and
// bodies that kin-openapi resolved somewhere other than the main document into the
// absolute location it found them at. The inliner reads schemas as JSON, where a
// reference written in paths/pets.yaml as "../schemas/pet.yaml" no longer says which
// file it is relative to; the location kin-openapi recorded does. References inside
// the referenced files need no rewriting: the inliner resolves them against the file
// it is reading.
func (f *specFiles) absoluteRefs(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var schema func(s *openapi3.SchemaRef)
	schema = func(s *openapi3.SchemaRef) {
		if s == nil {
			return
		}
		if s.Ref != "" {
			if rp := s.RefPath(); rp != nil && (!strings.HasPrefix(s.Ref, "#") || !f.isRoot(rp)) {
				s.Ref = rp.String()
			}
			return
		}
		if s.Value == nil || seen[s.Value] {
			return
		}
		seen[s.Value] = true
		subschemas(s.Value, schema)
	}
	content := func(c openapi3.Content) {
		for _, mt := range c {
			if mt != nil {
				schema(mt.Schema)
			}
		}
	}
	params := func(ps openapi3.Parameters) {
		for _, p := range ps {
			if p != nil && p.Value != nil {
				schema(p.Value.Schema)
				content(p.Value.Content)
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		if item == nil {
			continue
		}
		params(item.Parameters)
		for _, op := range item.Operations() {
			params(op.Parameters)
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				content(op.RequestBody.Value.Content)
			}
		}
	}
}

var (
	schemaRefType  = reflect.TypeFor[*openapi3.SchemaRef]()
	additionalType = reflect.TypeFor[openapi3.AdditionalProperties]()
)

// subschemas calls fn on every schema directly inside s (items, properties, allOf,
// and the 3.1 keywords), found by reflection so keywords kin-openapi adds are not
// missed.
func subschemas(s *openapi3.Schema, fn func(*openapi3.SchemaRef)) {
	v := reflect.ValueOf(s).Elem()
	for i := 0; i < v.NumField(); i++ {
		fv := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch {
		case fv.Type() == schemaRefType:
			fn(fv.Interface().(*openapi3.SchemaRef))
		case fv.Kind() == reflect.Slice && fv.Type().Elem() == schemaRefType:
			for j := 0; j < fv.Len(); j++ {
				fn(fv.Index(j).Interface().(*openapi3.SchemaRef))
			}
		case fv.Kind() == reflect.Map && fv.Type().Elem() == schemaRefType:
			for _, k := range fv.MapKeys() {
				fn(fv.MapIndex(k).Interface().(*openapi3.SchemaRef))
			}
		case fv.Type() == additionalType:
			fn(fv.Interface().(openapi3.AdditionalProperties).Schema)
		}
	}
}

// operationMethods are the keys of a path item that hold operations.
var operationMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// hasOperationRefs reports whether an operation of doc was written as a $ref, which
// kin-openapi reads as an empty operation (the $ref kept among its extensions).
func hasOperationRefs(doc *openapi3.T) bool {
	if doc == nil || doc.Paths == nil {
		return false
	}
	for _, item := range doc.Paths.Map() {
		if item == nil {
			continue
		}
		for _, op := range item.Operations() {
			if _, ok := op.Extensions["$ref"]; ok {
				return true
			}
		}
	}
	return false
}

// rewriteRoot rewrites the main document where real multi-file documents (those
// edited with Redocly's tools, DigitalOcean's public API) depart from OpenAPI in a way
// kin-openapi cannot read: an operation written as a $ref to a file of its own (`get:
// {$ref: resources/droplets/droplets_list.yml}`; OpenAPI allows a $ref for a whole
// path item only) is put in place, its own references made absolute so that they
// still lead where they did from that file; a tag whose description is not a string
// (a $ref to a Markdown section) loses it, since tags make no tool. It reports whether
// anything changed. Only the main document's path items are rewritten.
func (f *specFiles) rewriteRoot(data []byte) ([]byte, bool, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, false, nil
	}
	root, _ := jsontext.FromYAML(v).(map[string]any)
	if root == nil {
		return nil, false, nil
	}
	changed := false
	tags, _ := root["tags"].([]any)
	for _, t := range tags {
		if tag, ok := t.(map[string]any); ok {
			if d, ok := tag["description"]; ok {
				if _, isString := d.(string); !isString {
					delete(tag, "description")
					changed = true
				}
			}
		}
	}
	paths, _ := root["paths"].(map[string]any)
	for route, it := range paths {
		item, _ := it.(map[string]any)
		for _, method := range operationMethods {
			op, _ := item[method].(map[string]any)
			ref, ok := op["$ref"].(string)
			if !ok {
				continue
			}
			inlined, err := f.inlineAt(f.root, ref, "an operation")
			if err != nil {
				return nil, false, fmt.Errorf("operation %s %s: %w", strings.ToUpper(method), route, err)
			}
			item[method] = inlined
			changed = true
		}
	}
	// After the operations, whose properties may be written so too.
	if c, err := f.inlineProperties(f.root, root); err != nil {
		return nil, false, err
	} else if c {
		changed = true
	}
	if !changed {
		return nil, false, nil
	}
	out, err := json.Marshal(root)
	return out, err == nil, err
}

// inlineAt is the object (what: an operation, properties) a $ref written in the
// document at base leads to, with every reference in it rewritten to be read from
// anywhere: absolute, or local when it leads into the main document.
func (f *specFiles) inlineAt(base *url.URL, ref, what string) (map[string]any, error) {
	u, err := f.resolve(base, ref)
	if err != nil {
		return nil, err
	}
	if f.isRoot(u) {
		return nil, fmt.Errorf("reference %s: %s may be a $ref to another file only", ref, what)
	}
	doc, key, err := f.json(u)
	if err != nil {
		return nil, err
	}
	target, err := pointer(doc, "#"+u.EscapedFragment())
	if err != nil {
		return nil, err
	}
	if _, ok := target.(map[string]any); !ok {
		return nil, fmt.Errorf("reference %s does not lead to %s (an object)", ref, what)
	}
	if base, err = url.Parse(key); err != nil {
		return nil, err
	}
	absolute := func(ref string) (string, error) {
		r, err := f.resolve(base, ref)
		if err != nil {
			return "", err
		}
		if f.isRoot(r) {
			return "#" + r.EscapedFragment(), nil
		}
		return r.String(), nil
	}
	var rewrite func(v any) (any, error)
	rewrite = func(v any) (any, error) {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				if s, ok := e.(string); ok && k == "$ref" {
					var err error
					if out[k], err = absolute(s); err != nil {
						return nil, err
					}
					continue
				}
				var err error
				if out[k], err = rewrite(e); err != nil {
					return nil, err
				}
			}
			// A discriminator's mapping names schemas by reference too, unless a value
			// is a bare schema name.
			if d, ok := out["discriminator"].(map[string]any); ok {
				if mapping, ok := d["mapping"].(map[string]any); ok {
					for tag, target := range mapping {
						if s, ok := target.(string); ok && strings.ContainsAny(s, "#/.") {
							var err error
							if mapping[tag], err = absolute(s); err != nil {
								return nil, err
							}
						}
					}
				}
			}
			return out, nil
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				var err error
				if out[i], err = rewrite(e); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		return v, nil
	}
	out, err := rewrite(target)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

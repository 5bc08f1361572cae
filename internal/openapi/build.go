package openapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

type builder struct {
	cfg   Config
	doc   *openapi3.T
	files *specFiles
	root  any
	base  *url.URL
	// specURL is the document's URL; nil for a document read from a file.
	specURL *url.URL
	secret  string
	tokens  *tokens // nil without OAuth2
	// md keeps the descriptions whose HTML became Markdown (descMarkdown).
	md map[string]string
}

// param is one argument of a tool and where it goes in the request.
type param struct {
	arg  string // the argument's name in the tool's schema
	name string // the name in the request
	in   string // path, query, header, cookie
	// style is how the value is written: form (query and cookie, by default), simple
	// (path and header, by default), label or matrix (path), or a query's
	// spaceDelimited, pipeDelimited or deepObject.
	style    string
	explode  bool
	deepObj  bool
	sep      string // what joins an array's values when not exploded: "," unless the style says " " or "|"
	jsonText bool   // content-encoded parameter: send the value as JSON text
}

// body is how the request body is built.
type body struct {
	mediaType string
	// flat: the body object's properties are top-level arguments; else the body is
	// the "body" argument.
	flat  bool
	props map[string]bool
	// arg is the argument holding the whole body when it is not flat.
	arg      string
	required bool
	// needs are the fields a flat body that is not required must have when it is sent
	// (any of its fields given): its schema's required.
	needs []string
	// files names the multipart body's file fields (see fileArgs).
	files map[string]bool
	// binary: the body is raw bytes (a tar, an upload), given as a file (binaryBodyArg).
	binary bool
	// joined maps a form field whose encoding is not exploded to what joins its
	// array's values: one field "a,b" rather than the field repeated.
	joined map[string]string
	// deep names the form fields whose encoding is deepObject (Stripe's metadata,
	// line_items): sent as metadata[k]=v, line_items[0][price]=p.
	deep map[string]bool
}

var methods = []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodTrace}

func (b *builder) build(src *Source) error {
	names := map[string]string{} // tool name → operation, for collisions
	b.md = map[string]string{}
	var ops []*Operation
	schemaBytes := 0
	for _, p := range b.doc.Paths.InMatchingOrder() {
		item := b.doc.Paths.Value(p)
		if item == nil {
			continue
		}
		for _, method := range methods {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			id := op.OperationID
			if id == "" {
				id = nameFromRoute(method, p)
			}
			if !b.selected(id) {
				continue
			}
			if ref, ok := op.Extensions["$ref"]; ok {
				// kin-openapi reads it as an empty operation; only those of the main
				// document's path items are put in place (rewriteRoot).
				return fmt.Errorf("%s %s: the operation is a $ref (%v) in a path item of another file, which is not read: "+
					"write the operation there, or its $ref in the main document's path item", method, p, ref)
			}
			if len(ops) >= MaxOperations {
				return fmt.Errorf("more than %d operations; choose some with include", MaxOperations)
			}
			t, notes, err := b.operation(method, p, id, item, op)
			if err != nil {
				return fmt.Errorf("%s %s: %w", method, p, err)
			}
			if schemaBytes += len(t.spec.Parameters); schemaBytes > MaxSchemaBytes {
				return fmt.Errorf("the argument schemas of the operations come to more than %d MiB once their references are expanded "+
					"(%s %s alone makes %d KiB); choose fewer operations with include", MaxSchemaBytes>>20, method, p, len(t.spec.Parameters)>>10)
			}
			for _, n := range notes {
				src.Warnings = append(src.Warnings, fmt.Sprintf("%s %s: %s", method, p, n))
			}
			route := method + " " + p
			if prev, dup := names[t.spec.Name]; dup {
				renamed := toolmgr.WithSuffix(t.spec.Name, "_"+toolmgr.ShortHash(route))
				src.Warnings = append(src.Warnings, fmt.Sprintf("%s and %s both make tool %s; %s is named %s", prev, route, t.spec.Name, route, renamed))
				t.spec.Name = renamed
			}
			names[t.spec.Name] = route
			ops = append(ops, t)
		}
	}
	if len(ops) == 0 {
		return fmt.Errorf("no operations left (include %v, exclude %v)", b.cfg.Include, b.cfg.Exclude)
	}
	if n := len(src.Warnings); n > maxWarnings {
		src.Warnings = append(src.Warnings[:maxWarnings], fmt.Sprintf("and %d more warnings like these", n-maxWarnings))
	}
	src.Tools = ops
	return nil
}

// deepestCause is the last line of a schema compiler's error, where it names the
// keyword at fault ("at '/properties/q/pattern': … is not valid regex: …"), or the
// error itself when it has one line.
func deepestCause(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(lines) > 1 {
		last = "its argument schema does not compile: " + strings.TrimPrefix(last, "- ")
	}
	return firstLine(last)
}

func (b *builder) selected(id string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, id); ok {
				return true
			}
		}
		return false
	}
	if len(b.cfg.Include) > 0 && !match(b.cfg.Include) {
		return false
	}
	return !match(b.cfg.Exclude)
}

// nameFromRoute is a stable name for an operation without an id: get_pets_petId.
func nameFromRoute(method, route string) string {
	var parts []string
	for _, seg := range strings.Split(route, "/") {
		seg = strings.Trim(seg, "{}")
		if seg != "" {
			parts = append(parts, seg)
		}
	}
	if len(parts) == 0 {
		parts = []string{"root"}
	}
	return strings.ToLower(method) + "_" + strings.Join(parts, "_")
}

func (b *builder) toolName(id string) string {
	return toolmgr.CapName(b.cfg.Prefix + "__" + sanitize(id))
}

// operation builds the tool of one operation.
func (b *builder) operation(method, key, id string, item *openapi3.PathItem, op *openapi3.Operation) (*Operation, []string, error) {
	in := &inliner{root: b.root, files: b.files, md: b.md}
	// A path key may carry a query that tells two operations on one path apart (the
	// OpenAI API has "/responses" and "/responses?beta=true"): it is sent with every
	// call, not escaped into the path.
	route, rawQuery, _ := strings.Cut(key, "?")
	fixedQuery, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("the query in path %q: %w", key, err)
	}
	props := map[string]any{}
	var required []string
	var params []param
	taken := map[string]bool{}
	argName := func(name, where string) string {
		a := sanitizeArg(name)
		if taken[a] {
			a = sanitizeArg(where + "_" + name)
		}
		for i := 2; taken[a]; i++ {
			a = fmt.Sprintf("%s_%d", sanitizeArg(where+"_"+name), i)
		}
		taken[a] = true
		return a
	}

	// Operation parameters override path-item ones with the same name and location.
	all := map[string]*openapi3.Parameter{}
	var order []string
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, pr := range list {
			if pr == nil || pr.Value == nil {
				continue
			}
			key := pr.Value.In + ":" + pr.Value.Name
			if _, seen := all[key]; !seen {
				order = append(order, key)
			}
			all[key] = pr.Value
		}
	}
	for _, key := range order {
		p := all[key]
		if p.In != openapi3.ParameterInPath && p.In != openapi3.ParameterInQuery && p.In != openapi3.ParameterInHeader && p.In != openapi3.ParameterInCookie {
			return nil, nil, fmt.Errorf("parameter %q: unknown location %q", p.Name, p.In)
		}
		if p.In == openapi3.ParameterInHeader && isManagedHeader(p.Name) || b.authFills(p) {
			continue
		}
		pm := param{name: p.Name, in: p.In, style: p.Style, deepObj: p.Style == openapi3.SerializationDeepObject, sep: ","}
		if pm.style == "" {
			pm.style = openapi3.SerializationSimple
			if p.In == openapi3.ParameterInQuery || p.In == openapi3.ParameterInCookie {
				pm.style = openapi3.SerializationForm
			}
		}
		// Only the form style explodes by default.
		pm.explode = pm.style == openapi3.SerializationForm
		if p.Explode != nil {
			pm.explode = *p.Explode
		}
		switch p.Style {
		case openapi3.SerializationSpaceDelimited:
			pm.sep = " "
		case openapi3.SerializationPipeDelimited:
			pm.sep = "|"
		}
		var schema any = map[string]any{}
		if p.Schema != nil {
			schema = in.inline(jsonValue(p.Schema), nil)
		} else if len(p.Content) > 0 {
			for _, mt := range p.Content {
				if mt != nil && mt.Schema != nil {
					schema = in.inline(jsonValue(mt.Schema), nil)
				}
				break
			}
			pm.jsonText = true
		}
		pm.arg = argName(p.Name, p.In)
		if sm, ok := schema.(map[string]any); ok {
			where := p.In
			if pm.arg != p.Name {
				// The name the model sees is not the API's: "DateSent<" and "DateSent>"
				// (Twilio) become DateSent_ and query_DateSent_, told apart only here.
				where = fmt.Sprintf("%s parameter %q", p.In, p.Name)
			}
			sm = withDescription(sm, descMarkdown(p.Description, b.md), where)
			schema = sm
		}
		props[pm.arg] = schema
		if p.Required || p.In == openapi3.ParameterInPath {
			required = append(required, pm.arg)
		}
		params = append(params, pm)
	}

	// A template parameter the document does not declare (it warns of it) is a
	// required string: without it no call could be made.
	for _, name := range templateParams(route) {
		if _, declared := all["path:"+name]; declared {
			continue
		}
		pm := param{name: name, in: openapi3.ParameterInPath, style: openapi3.SerializationSimple, sep: ",", arg: argName(name, openapi3.ParameterInPath)}
		props[pm.arg] = map[string]any{"type": "string", "description": "(path; the document does not declare it)"}
		required = append(required, pm.arg)
		params = append(params, pm)
	}

	var bd *body
	closed := false // a flat body whose schema says additionalProperties: false
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		rb := op.RequestBody.Value
		mediaType, mt := pickMediaType(rb.Content)
		if mt != nil {
			nodes := in.nodes
			schema := in.inlineBody(mt)
			if mpType, mp := multipartOf(rb.Content); mp != nil && isJSON(mediaType) && hasFiles(schema) {
				// Files are binary strings, which JSON cannot carry: an operation that
				// offers both (OpenAI's container files and skills, with one schema) is
				// sent as multipart, or its files could not be uploaded.
				in.nodes = nodes
				mediaType, mt, schema = mpType, mp, in.inlineBody(mp)
			}
			bd = &body{mediaType: mediaType, required: rb.Required, joined: joinedFields(mt.Encoding), deep: deepFields(mt.Encoding)}
			sm, _ := schema.(map[string]any)
			bodyProps, _ := sm["properties"].(map[string]any)
			if isMultipart(mediaType) {
				bd.files = fileArgs(bodyProps)
			}
			// A schema that lists properties and says no type (twelve of DigitalOcean's
			// bodies) is an object of fields too.
			flat := (isJSON(mediaType) || isForm(mediaType) || isMultipart(mediaType)) && len(bodyProps) > 0 && (sm["type"] == nil || fmt.Sprint(sm["type"]) == "object") &&
				sm["oneOf"] == nil && sm["anyOf"] == nil && sm["allOf"] == nil
			for name := range bodyProps {
				if taken[name] || !validArg(name) {
					flat = false
				}
			}
			if flat {
				bd.flat, bd.props = true, map[string]bool{}
				closed = sm["additionalProperties"] == false
				for name, s := range bodyProps {
					props[name] = s
					bd.props[name] = true
					taken[name] = true
				}
				if req, ok := sm["required"].([]any); ok {
					for _, r := range req {
						if s, ok := r.(string); ok && rb.Required {
							required = append(required, s)
						} else if ok {
							bd.needs = append(bd.needs, s)
						}
					}
				}
			} else {
				binary := isRawBinary(mediaType, sm)
				if sm != nil {
					sm = withDescription(sm, descMarkdown(rb.Description, b.md), "body")
					schema = sm
				}
				if binary {
					// After the API's description, which says what the bytes are.
					bd.binary = true
					schema = binaryBodyArg(sm)
				}
				bd.arg = argName("body", "request")
				props[bd.arg] = schema
				if rb.Required {
					required = append(required, bd.arg)
				}
			}
		}
	}

	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		schema["required"] = dedupe(required)
	}
	if bd == nil || !bd.flat {
		schema["additionalProperties"] = false
	} else if closed {
		// The body takes no other fields, so no other argument either: a misspelt one
		// is refused here rather than by the API.
		schema["additionalProperties"] = false
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, nil, fmt.Errorf("schema: %w", err)
	}

	readOnly := method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
	risk := tool.RiskMedium
	switch {
	case readOnly:
		risk = tool.RiskLow
	case method == http.MethodDelete:
		risk = tool.RiskHigh
	}
	summary := strings.TrimSpace(descMarkdown(op.Summary, b.md))
	desc := summary
	if d := strings.TrimSpace(descMarkdown(op.Description, b.md)); d != "" {
		if desc != "" && !strings.Contains(d, desc) {
			desc += "\n\n" + d
		} else {
			desc = d
		}
	}
	if desc == "" {
		desc = method + " " + key
	}
	desc = fmt.Sprintf("%s\n\n(%s %s on the %s API)", clip(desc, 2000), method, key, b.cfg.Name)
	base, err := b.operationBase(item, op)
	if err != nil {
		return nil, nil, err
	}
	t := &Operation{
		spec: tool.Spec{
			Name: b.toolName(id), Label: clip(firstLine(summary), 80), Description: desc, Parameters: raw,
			Flags:   tool.Flags{ReadOnly: readOnly, ConcurrencySafe: readOnly},
			Risk:    risk,
			RiskWhy: fmt.Sprintf("a %s of the %s API", method, b.cfg.Name),
			Mode:    tool.ModeDirect,
			Timeout: b.cfg.Timeout,
			Source:  "openapi:" + b.cfg.Name,
		},
		method: method, route: route, fixedQuery: fixedQuery, params: params, body: bd,
		base: base, auth: b.cfg.Auth, secret: b.secret, tokens: b.tokens,
		client: b.cfg.Client, maxBytes: b.cfg.MaxResponseBytes,
		workspaces: b.cfg.Workspaces, maxFileBytes: b.cfg.MaxFileBytes,
	}
	return t, in.notes, nil
}

// templateParams are the names of a path template's parameters: pets and id in
// /pets/{pets}/{id}.json.
func templateParams(route string) []string {
	var names []string
	for rest := route; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return names
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return names
		}
		if name := rest[i+1 : i+j]; name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
		rest = rest[i+j+1:]
	}
}

// authFills reports whether p is where the source's auth puts the key (a document
// may declare its X-API-Key header or api_key query parameter): the configured key
// is sent there, so the model is not asked for one.
func (b *builder) authFills(p *openapi3.Parameter) bool {
	a := b.cfg.Auth
	switch {
	case a.APIKeyHeader != "" && p.In == openapi3.ParameterInHeader:
		return strings.EqualFold(p.Name, a.APIKeyHeader)
	case a.APIKeyQuery != "" && p.In == openapi3.ParameterInQuery:
		return p.Name == a.APIKeyQuery
	}
	return false
}

// isManagedHeader reports headers the HTTP client sets itself.
func isManagedHeader(name string) bool {
	switch strings.ToLower(name) {
	case "content-type", "accept", "authorization", "content-length", "host":
		return true
	}
	return false
}

const formMediaType = "application/x-www-form-urlencoded"

// isForm and isMultipart tell a body's media type as a document writes it, with
// parameters or capitals (application/x-www-form-urlencoded; charset=UTF-8).
func isForm(mediaType string) bool { return mediaEssence(mediaType) == formMediaType }

func isMultipart(mediaType string) bool { return mediaEssence(mediaType) == "multipart/form-data" }

// mediaEssence is a media type without its parameters, in lower case.
func mediaEssence(mediaType string) string {
	essence, _, _ := strings.Cut(mediaType, ";")
	return strings.ToLower(strings.TrimSpace(essence))
}

// inlineBody is the schema of a request body's media type, references inlined.
func (in *inliner) inlineBody(mt *openapi3.MediaType) any {
	if mt.Schema == nil {
		return map[string]any{}
	}
	return in.inline(jsonValue(mt.Schema), nil)
}

// multipartOf is the multipart/form-data entry of a body's content, if it has one.
func multipartOf(content openapi3.Content) (string, *openapi3.MediaType) {
	for k, mt := range content {
		if isMultipart(k) && mt != nil {
			return k, mt
		}
	}
	return "", nil
}

// hasFiles reports whether an object schema has a file property (see fileArg).
func hasFiles(schema any) bool {
	props, _ := asMap(schema)["properties"].(map[string]any)
	for _, s := range props {
		if _, ok := fileArg(asMap(s)); ok {
			return true
		}
	}
	return false
}

// fileArgs replaces, in a multipart body's properties, the schema of each file by the
// object a model can fill in (fileArg), and returns their names. A model cannot send
// bytes: it names the file and gives its content as text or base64.
func fileArgs(props map[string]any) map[string]bool {
	files := map[string]bool{}
	for name, s := range props {
		if fs, ok := fileArg(asMap(s)); ok {
			props[name] = fs
			files[name] = true
		}
	}
	return files
}

// fileArg is the argument schema of a file property: a binary string, an array of
// them, or a oneOf/anyOf whose every alternative is one of those (OpenAI's skill
// files: a zip, or an array of files).
func fileArg(sm map[string]any) (map[string]any, bool) {
	switch {
	case isFileSchema(sm):
		return fileArgSchema(sm), true
	case sm["type"] == "array" && isFileSchema(asMap(sm["items"])):
		arr := maps.Clone(sm)
		arr["items"] = fileArgSchema(asMap(sm["items"]))
		return arr, true
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		alts, _ := sm[k].([]any)
		if len(alts) == 0 {
			continue
		}
		out := make([]any, len(alts))
		for i, a := range alts {
			fs, ok := fileArg(asMap(a))
			if !ok {
				return nil, false
			}
			out[i] = fs
		}
		s := maps.Clone(sm)
		s[k] = out
		return s, true
	}
	return nil, false
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func isFileSchema(s map[string]any) bool {
	if s == nil || s["type"] != "string" {
		return false
	}
	f, _ := s["format"].(string)
	return f == "binary" || f == "base64" || s["contentMediaType"] != nil || s["contentEncoding"] != nil
}

func fileArgSchema(orig map[string]any) map[string]any {
	desc, _ := orig["description"].(string)
	desc = strings.TrimSpace(desc + "\n\nA file: one of content (text), content_base64 (bytes, base64-encoded) or path (a file of the working directory, sent as it is: " +
		"the way to send a file a command made), and its filename (the extension may tell the API its type; with path, the file's own name unless given).")
	return map[string]any{
		"type":        "object",
		"description": desc,
		"properties": map[string]any{
			"filename":       map[string]any{"type": "string", "minLength": 1},
			"content":        map[string]any{"type": "string", "description": "the file's content, as text"},
			"content_base64": map[string]any{"type": "string", "description": "the file's content, base64-encoded (for binary files)"},
			"path":           pathArgSchema(),
		},
		"additionalProperties": false,
	}
}

// pathArgSchema is the path alternative of a file argument.
func pathArgSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1,
		"description": "a file in the session's working directory, relative to it (as the file tools take paths): its bytes are sent"}
}

// isRawBinary reports whether a request body that is neither JSON nor a form is raw
// bytes: a string of format binary (Docker's build context, its archives), or an
// application/octet-stream body without a schema saying otherwise. A base64 string is
// text the API decodes itself, and stays one.
func isRawBinary(mediaType string, sm map[string]any) bool {
	if isJSON(mediaType) || isForm(mediaType) || isMultipart(mediaType) {
		return false
	}
	if sm["type"] == "string" && (sm["format"] == "binary" || sm["contentMediaType"] != nil && sm["contentEncoding"] == nil) {
		return true
	}
	return strings.EqualFold(mediaType, "application/octet-stream") && (len(sm) == 0 || sm["type"] == "string" && sm["format"] == nil && sm["contentEncoding"] == nil)
}

// binaryBodyArg is the argument of a raw binary body: like a multipart file
// (fileArgSchema), but the file name is optional, since the body has none.
func binaryBodyArg(orig map[string]any) map[string]any {
	desc, _ := orig["description"].(string)
	desc = strings.TrimSpace(desc + "\n\nThe body's bytes: as text in content, base64-encoded in content_base64, or, for binary data such as a tar or gzip archive, " +
		"a file of the working directory named by path, sent as it is. filename is optional; when the API takes a body of any type, its extension " +
		"(with path, the file's own unless given) gives the Content-Type.")
	return map[string]any{
		"type":        "object",
		"description": desc,
		"properties": map[string]any{
			"filename":       map[string]any{"type": "string"},
			"content":        map[string]any{"type": "string", "description": "the body, as text"},
			"content_base64": map[string]any{"type": "string", "description": "the body, base64-encoded"},
			"path":           pathArgSchema(),
		},
		"additionalProperties": false,
	}
}

// joinedFields are the form fields whose encoding says explode false, and what joins
// their values.
func joinedFields(enc map[string]*openapi3.Encoding) map[string]string {
	joined := map[string]string{}
	for name, e := range enc {
		if e == nil || e.Explode == nil || *e.Explode {
			continue
		}
		switch e.Style {
		case "", openapi3.SerializationForm:
			joined[name] = ","
		case openapi3.SerializationSpaceDelimited:
			joined[name] = " "
		case openapi3.SerializationPipeDelimited:
			joined[name] = "|"
		}
	}
	return joined
}

// deepFields are the form fields whose encoding says deepObject.
func deepFields(enc map[string]*openapi3.Encoding) map[string]bool {
	deep := map[string]bool{}
	for name, e := range enc {
		if e != nil && e.Style == openapi3.SerializationDeepObject {
			deep[name] = true
		}
	}
	return deep
}

// pickMediaType prefers JSON, then form encoding, then anything else.
func pickMediaType(content openapi3.Content) (string, *openapi3.MediaType) {
	keys := make([]string, 0, len(content))
	for k := range content {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, pref := range []func(string) bool{
		func(k string) bool { return k == "application/json" },
		isJSON,
		isForm,
		func(string) bool { return true },
	} {
		for _, k := range keys {
			if pref(k) {
				return k, content[k]
			}
		}
	}
	return "", nil
}

func isJSON(mediaType string) bool {
	m := strings.ToLower(mediaType)
	return m == "application/json" || strings.HasSuffix(m, "+json") || strings.Contains(m, "/json")
}

func withDescription(s map[string]any, desc, where string) map[string]any {
	note := "(" + where + ")"
	if desc = strings.TrimSpace(desc); desc != "" {
		note = clip(desc, 500) + " " + note
	}
	if d, ok := s["description"].(string); ok && d != "" && !strings.Contains(note, d) {
		note = d + " " + note
	}
	out := make(map[string]any, len(s)+1)
	for k, v := range s {
		out[k] = v
	}
	out["description"] = note
	return out
}

// jsonValue marshals a kin schema reference to plain JSON: nested references stay
// $refs, which the inliner then resolves with its bounds.
func jsonValue(ref *openapi3.SchemaRef) any {
	b, err := json.Marshal(ref)
	if err != nil {
		return map[string]any{}
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return map[string]any{}
	}
	return v
}

func dedupe(in []string) []string {
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sanitize replaces characters providers reject in tool names with '_'.
func sanitize(s string) string {
	if s = toolmgr.SanitizeName(s); s == "" {
		return "_"
	}
	return s
}

// sanitizeArg makes a property name every provider accepts ([a-zA-Z0-9_.-]{1,64}).
func sanitizeArg(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		out = "_"
	}
	if len(out) > toolmgr.MaxNameLen {
		out = toolmgr.WithSuffix(out, "_"+toolmgr.ShortHash(s))
	}
	return out
}

func validArg(s string) bool { return s != "" && sanitizeArg(s) == s }

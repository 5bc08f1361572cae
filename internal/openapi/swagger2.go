package openapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/jsontext"
)

// parseSwagger2 loads a Swagger 2.0 document and converts it to OpenAPI 3.0 with
// kin-openapi's own converter (openapi2conv), so that one builder makes the tools of
// both: the converter is maintained with the library the 3.x path uses, and maps body
// and formData parameters to request bodies, collectionFormat to styles, type: file,
// x-nullable and securityDefinitions as that library reads 3.0. What the converter
// leaves to the reader (defaults Swagger 2.0 implies, operations it would refuse
// together with the whole document) is settled on the 2.0 document first (prepare).
//
// A Swagger 2.0 document must be one file: the converter turns the main document
// only, and a file it refers to would be read as OpenAPI 3 (a 2.0 parameter or a
// string discriminator there means something else, or nothing), so a reference to
// another file is refused before anything is read.
func parseSwagger2(ctx context.Context, data []byte, files *specFiles) (doc *openapi3.T, notes []string, err error) {
	// The converter panics on some malformed input; a bad document is an error.
	defer func() {
		if p := recover(); p != nil {
			doc, notes, err = nil, nil, fmt.Errorf("the Swagger 2.0 document could not be converted to OpenAPI 3: %v", p)
		}
	}()
	var raw any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("the document could not be parsed: %s", firstLine(err.Error()))
	}
	raw = jsontext.FromYAML(raw)
	if top, _ := raw.(map[string]any); fmt.Sprint(top["swagger"]) != "2.0" {
		return nil, nil, fmt.Errorf("this is a Swagger %q document; only Swagger 2.0 and OpenAPI 3.0 and 3.1 are supported", fmt.Sprint(top["swagger"]))
	}
	if err := checkRefs(raw, raw, ""); err != nil {
		return nil, nil, err
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the document could not be parsed: %s", firstLine(err.Error()))
	}
	var doc2 openapi2.T
	if err := json.Unmarshal(js, &doc2); err != nil {
		return nil, nil, fmt.Errorf("the Swagger 2.0 document could not be parsed: %s", firstLine(err.Error()))
	}
	if len(doc2.Paths) == 0 {
		return nil, nil, errors.New("the document has no paths")
	}
	forms, notes := prepare(&doc2)
	if !slices.ContainsFunc(slices.Collect(maps.Values(doc2.Paths)), func(item *openapi2.PathItem) bool { return len(item.Operations()) > 0 }) {
		return nil, nil, fmt.Errorf("the document has no operations left: %s", strings.Join(notes, "; "))
	}
	loader := openapi3.NewLoader()
	loader.Context = ctx
	// Only references within the document are left (checkRefs); should one get
	// through, it is read under the policy of every other document.
	loader.IsExternalRefsAllowed = true
	loader.ReadFromURIFunc = files.loaderRead
	doc, err = openapi2conv.ToV3WithLoader(&doc2, loader, files.root)
	if err != nil {
		return nil, nil, fmt.Errorf("the Swagger 2.0 document could not be converted to OpenAPI 3: %s", firstLine(err.Error()))
	}
	finishForms(doc, forms)
	return doc, notes, nil
}

// checkRefs refuses a $ref to anything but the document itself, and one that leads
// nowhere in it, saying where it is: the converter's own word for the latter names
// neither. Values that are data (examples, defaults, enums, extensions) are not
// looked into.
func checkRefs(root, v any, at string) error {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			if !strings.HasPrefix(ref, "#") {
				return fmt.Errorf("the Swagger 2.0 document refers to another file (%s at #%s): a Swagger 2.0 document must be a single file; "+
					"bundle it into one (swagger-cli bundle) or convert it to OpenAPI 3, where references to files in its directory are allowed", ref, at)
			}
			if _, err := pointer(root, ref); err != nil {
				return fmt.Errorf("the reference at #%s leads nowhere: %v", at, err)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if dataKeys[k] || k == "examples" || strings.HasPrefix(k, "x-") {
				continue
			}
			if err := checkRefs(root, x[k], at+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkRefs(root, e, fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

const multipartMediaType = "multipart/form-data"

// prepare settles on doc what Swagger 2.0 implies and the converter does not say:
//   - a query array without collectionFormat is csv (the converter would leave it to
//     OpenAPI 3's default, which repeats the parameter);
//   - formData is sent as a form: multipart/form-data when a field is a file or the
//     operation consumes it, else application/x-www-form-urlencoded (the converter
//     would take the document's consumes, JSON as often as not);
//   - a body without consumes is JSON;
//   - the calls use https when the document offers it, and never a scheme other than
//     http(s);
//   - an operation with two body parameters, or a body and formData, is left out with
//     a note (the converter would refuse the whole document for it);
//   - an OAuth2 flow the converter does not know is dropped with a note: the daemon
//     takes its credentials from the source's auth, not from securityDefinitions.
//
// It returns the operations with formData ("METHOD path", each with the
// collectionFormat of its array fields but multi: the converter drops them, and
// finishForms puts them back) and the notes.
func prepare(doc *openapi2.T) (forms map[string]map[string]string, notes []string) {
	forms = map[string]map[string]string{}
	param := func(p *openapi2.Parameter) *openapi2.Parameter {
		if name, ok := strings.CutPrefix(p.Ref, "#/parameters/"); ok && doc.Parameters[name] != nil {
			return doc.Parameters[name]
		}
		return p
	}
	csv := func(p *openapi2.Parameter, where string) {
		if p.In != "query" || p.Type == nil || !p.Type.Is("array") {
			return
		}
		switch p.CollectionFormat {
		case "":
			p.CollectionFormat = "csv"
		case "tsv":
			notes = append(notes, fmt.Sprintf("%squery parameter %q: collectionFormat tsv has no OpenAPI 3 equivalent; its values are sent as repeated parameters", where, p.Name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Parameters)) {
		if p := doc.Parameters[name]; p != nil {
			csv(p, "")
		}
	}

	var schemes []string
	for _, s := range doc.Schemes {
		if s == "https" {
			schemes = append([]string{s}, schemes...)
		} else if s == "http" {
			schemes = append(schemes, s)
		}
	}
	if len(doc.Schemes) > 0 && len(schemes) == 0 {
		notes = append(notes, fmt.Sprintf("the document's schemes %v have neither http nor https; the calls use https", doc.Schemes))
	}
	doc.Schemes = schemes

	for _, path := range slices.Sorted(maps.Keys(doc.Paths)) {
		item := doc.Paths[path]
		if item == nil {
			notes = append(notes, fmt.Sprintf("path %s is empty", path))
			delete(doc.Paths, path)
			continue
		}
		for _, p := range item.Parameters {
			if p != nil {
				csv(p, path+": ")
			}
		}
		for _, method := range methods {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			where := method + " " + path
			own := map[string]bool{}
			var params []*openapi2.Parameter
			for _, p := range op.Parameters {
				if p != nil {
					csv(p, where+": ")
					r := param(p)
					own[r.In+" "+r.Name] = true
					params = append(params, r)
				}
			}
			for _, p := range item.Parameters {
				if p != nil && !own[param(p).In+" "+param(p).Name] {
					params = append(params, param(p))
				}
			}
			bodies, fields, file := 0, 0, false
			joined := map[string]string{}
			for _, p := range params {
				switch p.In {
				case "body":
					bodies++
				case "formData":
					fields++
					file = file || (p.Type != nil && p.Type.Is("file"))
					if p.Type != nil && p.Type.Is("array") && p.CollectionFormat != "multi" {
						joined[p.Name] = cmp.Or(p.CollectionFormat, "csv")
					}
				}
			}
			switch {
			case bodies > 1:
				notes = append(notes, where+" is left out: it has more than one body parameter, which Swagger 2.0 does not allow")
				item.SetOperation(method, nil)
				continue
			case bodies > 0 && fields > 0:
				notes = append(notes, where+" is left out: it has both a body parameter and formData parameters, which Swagger 2.0 does not allow")
				item.SetOperation(method, nil)
				continue
			}
			consumes := op.Consumes
			if len(consumes) == 0 {
				consumes = doc.Consumes
			}
			switch {
			case fields > 0:
				forms[where] = joined
				switch {
				case file || slices.Contains(consumes, multipartMediaType):
					op.Consumes = []string{multipartMediaType}
				default:
					op.Consumes = []string{formMediaType}
				}
			case bodies > 0 && len(consumes) == 0:
				op.Consumes = []string{"application/json"}
			}
		}
	}

	for name, s := range doc.SecurityDefinitions {
		if s != nil && s.Type == "oauth2" && !slices.Contains([]string{"implicit", "accessCode", "password", "application"}, s.Flow) {
			notes = append(notes, fmt.Sprintf("securityDefinitions %q: OAuth2 flow %q is not one of Swagger 2.0's and is ignored (the source's auth says how calls authenticate)", name, s.Flow))
			delete(doc.SecurityDefinitions, name)
		}
	}
	sort.Strings(notes)
	return forms, notes
}

// finishForms gives the request body the converter made of each operation's formData
// what the converter drops: the body is required when one of its fields is (in
// Swagger 2.0 a required field is required of the request), and an array field that
// is not collectionFormat multi is one joined value (an encoding of explode false).
func finishForms(doc *openapi3.T, forms map[string]map[string]string) {
	styles := map[string]string{"csv": openapi3.SerializationForm, "ssv": openapi3.SerializationSpaceDelimited, "pipes": openapi3.SerializationPipeDelimited}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			joined, ok := forms[method+" "+path]
			if !ok || op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for _, mt := range op.RequestBody.Value.Content {
				if mt == nil {
					continue
				}
				if mt.Schema != nil && mt.Schema.Value != nil && len(mt.Schema.Value.Required) > 0 {
					op.RequestBody.Value.Required = true
				}
				for field, format := range joined {
					if style, ok := styles[format]; ok {
						if mt.Encoding == nil {
							mt.Encoding = map[string]*openapi3.Encoding{}
						}
						mt.Encoding[field] = &openapi3.Encoding{Style: style, Explode: openapi3.Ptr(false)}
					}
				}
			}
		}
	}
}

package openapi

import (
	"context"

	"github.com/getkin/kin-openapi/openapi3"
)

// validationOptions are kin-openapi's checks Load leaves out: examples, defaults and
// patterns do not stop a call (a pattern is checked, or refused, when the tool's
// argument schema is compiled).
func validationOptions() []openapi3.ValidationOption {
	return []openapi3.ValidationOption{openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation(), openapi3.DisableSchemaPatternValidation()}
}

// validateDoc is kin-openapi's (*T).Validate of doc, the error it would return, at a
// fraction of the cost for a document whose operations refer to shared component
// schemas (Stripe's 417 operations: validating took 65% of loading).
//
// kin-openapi validates each schema it meets at every place it meets it, with a set of
// visited schemas of its own for each: every operation's responses walk the whole
// graph of component schemas they reach again, though doc.Components.Schemas was
// validated, each of them in full, before the paths are. Validity is the schema's own
// (the options are the document's; no check of a schema looks at the values of its
// subschemas but for their being resolved), so where a reference outside the
// component schemas leads to one of them, validating an empty schema in its place
// gives the same answer: validateDoc does that for the time of the validation. Only
// the first error is reported, and which comes first could differ; so a document
// that does not validate that way is validated again as it is, for kin-openapi's own
// first error.
func validateDoc(ctx context.Context, doc *openapi3.T) error {
	if err := validateSkippingComponents(ctx, doc); err == nil {
		return nil
	}
	return doc.Validate(ctx, validationOptions()...)
}

func validateSkippingComponents(ctx context.Context, doc *openapi3.T) error {
	s := skipComponents(doc)
	defer s.restore()
	return doc.Validate(ctx, validationOptions()...)
}

// skipComponents empties, in doc, each reference to a component schema but those of
// doc.Components.Schemas itself, until restore.
func skipComponents(doc *openapi3.T) *componentSkipper {
	s := &componentSkipper{empty: &openapi3.Schema{}}
	if c := doc.Components; c != nil && len(c.Schemas) > 0 {
		s.tops = make(map[*openapi3.Schema]bool, len(c.Schemas))
		for _, ref := range c.Schemas {
			if ref != nil && ref.Value != nil {
				s.tops[ref.Value] = true
			}
		}
		s.seen = map[any]bool{}
		// A component schema is validated as itself; where another one leads to it, it
		// is emptied like anywhere else.
		for top := range s.tops {
			s.schema(top)
		}
		for _, p := range c.Parameters {
			if p != nil && p.Value != nil {
				s.parameter(p.Value)
			}
		}
		for _, h := range c.Headers {
			if h != nil && h.Value != nil {
				s.parameter(&h.Value.Parameter)
			}
		}
		for _, b := range c.RequestBodies {
			if b != nil && b.Value != nil {
				s.content(b.Value.Content)
			}
		}
		for _, r := range c.Responses {
			s.response(r)
		}
		if doc.Paths != nil {
			for _, item := range doc.Paths.Map() {
				s.pathItem(item)
			}
		}
	}
	return s
}

// componentSkipper puts empty schemas in place of component schemas outside
// doc.Components.Schemas, and puts them back (restore).
type componentSkipper struct {
	empty *openapi3.Schema
	tops  map[*openapi3.Schema]bool
	seen  map[any]bool
	// swapped: each reference changed, and the schema it led to.
	swapped []swap
}

type swap struct {
	ref   *openapi3.SchemaRef
	value *openapi3.Schema
}

func (s *componentSkipper) restore() {
	for i := len(s.swapped) - 1; i >= 0; i-- {
		s.swapped[i].ref.Value = s.swapped[i].value
	}
	s.swapped = nil
}

// first reports whether p is met for the first time.
func (s *componentSkipper) first(p any) bool {
	if s.seen[p] {
		return false
	}
	s.seen[p] = true
	return true
}

func (s *componentSkipper) pathItem(item *openapi3.PathItem) {
	if item == nil || !s.first(item) {
		return
	}
	s.parameters(item.Parameters)
	for _, op := range item.Operations() {
		if op == nil || !s.first(op) {
			continue
		}
		s.parameters(op.Parameters)
		if op.RequestBody != nil && op.RequestBody.Value != nil {
			s.content(op.RequestBody.Value.Content)
		}
		if op.Responses != nil {
			for _, r := range op.Responses.Map() {
				s.response(r)
			}
		}
	}
}

func (s *componentSkipper) response(r *openapi3.ResponseRef) {
	if r == nil || r.Value == nil || !s.first(r.Value) {
		return
	}
	s.content(r.Value.Content)
	for _, h := range r.Value.Headers {
		if h != nil && h.Value != nil {
			s.parameter(&h.Value.Parameter)
		}
	}
}

func (s *componentSkipper) parameters(ps openapi3.Parameters) {
	for _, p := range ps {
		if p != nil && p.Value != nil {
			s.parameter(p.Value)
		}
	}
}

func (s *componentSkipper) parameter(p *openapi3.Parameter) {
	if !s.first(p) {
		return
	}
	s.schemaRef(p.Schema)
	s.content(p.Content)
}

func (s *componentSkipper) content(c openapi3.Content) {
	for _, mt := range c {
		if mt == nil || !s.first(mt) {
			continue
		}
		s.schemaRef(mt.Schema)
		s.schemaRef(mt.ItemSchema)
	}
}

// schemaRef empties ref when it leads to a component schema, else looks into the
// schema it leads to.
func (s *componentSkipper) schemaRef(ref *openapi3.SchemaRef) {
	if ref == nil || ref.Value == nil {
		return
	}
	if s.tops[ref.Value] {
		s.swapped = append(s.swapped, swap{ref, ref.Value})
		ref.Value = s.empty
		return
	}
	s.schema(ref.Value)
}

// schema looks into v, emptying the references in it that lead to component schemas.
func (s *componentSkipper) schema(v *openapi3.Schema) {
	if v == s.empty || !s.first(v) {
		return
	}
	s.schemaRef(v.Items)
	s.schemaRef(v.Not)
	s.schemaRef(v.AdditionalProperties.Schema)
	for _, refs := range []openapi3.SchemaRefs{v.OneOf, v.AnyOf, v.AllOf, v.PrefixItems} {
		for _, r := range refs {
			s.schemaRef(r)
		}
	}
	for _, r := range v.Properties {
		s.schemaRef(r)
	}
}

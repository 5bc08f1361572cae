package toolmgr

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Bounds of an invalid_args message, so that a schema of many alternatives or
// arguments with many wrong items cannot make a result larger than a model can use.
const (
	maxReportLines     = 20
	maxReportLineChars = 300
	maxNamedChoices    = 8
)

// How well a value fits one alternative of a oneOf or anyOf, worst first.
const (
	fitOtherType = iota // the value is of another JSON type, or not the alternative's constant
	fitOtherTag         // its tag property ("type": …) names another alternative, or is missing
	fitInside           // the alternative's failures are inside the value
	fitTagged           // its tag property names this alternative
)

// failure is one line of the message: a failing location and what is wrong there.
type failure struct {
	loc  []string
	kind jsonschema.ErrorKind // nil for a line that sums up alternatives
	line string
}

// describeValidation turns a validation error into one line per failing location, in
// words a model can act on. Where no alternative of a oneOf or anyOf matched, only the
// failures of the alternative the model most likely meant are listed (see
// describer.alternatives); the message is bounded in any case.
func describeValidation(name string, index *schemaIndex, args any, err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Sprintf("invalid arguments for %s: %v", name, err)
	}
	d := &describer{index: index, args: args}
	seen := map[string]bool{}
	var lines []string
	for _, f := range d.failures(ve) {
		if !seen[f.line] {
			seen[f.line] = true
			lines = append(lines, f.line)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "- /: "+clip(ve.ErrorKind.LocalizedString(printer)))
	}
	sort.Strings(lines)
	if len(lines) > maxReportLines {
		more := len(lines) - (maxReportLines - 1)
		lines = append(lines[:maxReportLines-1], fmt.Sprintf("- … %d more", more))
	}
	return fmt.Sprintf("invalid arguments for %s (fix these and call again):\n%s", name, strings.Join(lines, "\n"))
}

type describer struct {
	index *schemaIndex
	args  any
}

// schemaIndex finds the subschemas of a tool's compiled schema by location, which is
// how validation errors name them. It is built on the first failure that needs it
// (0.4 ms for OpenAI's createResponse) and kept.
type schemaIndex struct {
	root       *jsonschema.Schema
	once       sync.Once
	byLocation map[string]*jsonschema.Schema
}

func (x *schemaIndex) lookup(location string) *jsonschema.Schema {
	if x == nil || x.root == nil {
		return nil
	}
	x.once.Do(func() {
		e := &expansion{}
		e.collect(x.root)
		x.byLocation = make(map[string]*jsonschema.Schema, len(e.all))
		for _, s := range e.all {
			x.byLocation[s.Location] = s
		}
	})
	return x.byLocation[location]
}

// failures lists the leaves of e's tree, choosing among the alternatives of a failed
// oneOf or anyOf.
func (d *describer) failures(e *jsonschema.ValidationError) []failure {
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		if len(e.Causes) > 0 {
			return d.alternatives(e)
		}
	case *kind.OneOf:
		if k.Subschemas == nil && len(e.Causes) > 0 {
			return d.alternatives(e)
		}
	}
	if len(e.Causes) > 0 {
		var out []failure
		for _, c := range e.Causes {
			out = append(out, d.failures(c)...)
		}
		return out
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Group, *kind.Schema, *kind.Reference:
		return nil
	case *kind.AdditionalProperties:
		if len(e.InstanceLocation) == 0 && d.index != nil {
			if holder := fieldsHolder(d.index.root, k.Properties); holder != "" {
				return []failure{{loc: e.InstanceLocation, kind: e.ErrorKind, line: lineAt(e.InstanceLocation,
					fmt.Sprintf("%s (they are fields of %s: give them inside it)", k.LocalizedString(printer), display(holder)))}}
			}
		}
	}
	return []failure{{loc: e.InstanceLocation, kind: e.ErrorKind, line: lineAt(e.InstanceLocation, e.ErrorKind.LocalizedString(printer))}}
}

// fieldsHolder is the argument of root whose object schema (in any of its
// alternatives) declares every one of names, when exactly one does: the request body
// of an HTTP API tool (`body`) whose fields a model gave beside the other arguments.
func fieldsHolder(root *jsonschema.Schema, names []string) string {
	if root == nil || len(names) == 0 {
		return ""
	}
	holder := ""
	for arg, s := range root.Properties {
		all := true
		for _, n := range names {
			if !declares(s, n, 0) {
				all = false
				break
			}
		}
		if all {
			if holder != "" {
				return ""
			}
			holder = arg
		}
	}
	return holder
}

// declares reports whether s, or one of its alternatives or parts, has a property name.
func declares(s *jsonschema.Schema, name string, depth int) bool {
	if s == nil || depth > 8 {
		return false
	}
	if _, ok := s.Properties[name]; ok {
		return true
	}
	if declares(s.Ref, name, depth+1) {
		return true
	}
	for _, group := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range group {
			if declares(sub, name, depth+1) {
				return true
			}
		}
	}
	return false
}

type option struct {
	index    int
	failures []failure
	fit      int
	depth    int // of its deepest failure: how far the value matched its shape
}

// alternatives describes a oneOf or anyOf none of whose alternatives matched. The
// validator reports every alternative's failures, in their order (all were tried),
// which on real schemas (OpenAI's input items, dozens of tagged objects) is dozens of
// lines about alternatives the model never meant. The alternative meant is the one
// whose tag property (a property that alternatives fix with a const or a one-value
// enum, like "type") has the value's tag; else one whose failures are inside
// the value rather than about its type or tag, the deepest first. When none stands
// out, the nearest one's failures are given with one line naming the alternatives.
func (d *describer) alternatives(e *jsonschema.ValidationError) []failure {
	at := e.InstanceLocation
	value, _ := valueAt(d.args, at)
	alts := d.alternativeSchemas(e)
	tag, tags := tagProperty(alts)
	obj, _ := value.(map[string]any)

	opts := make([]option, len(e.Causes))
	for i, c := range e.Causes {
		fs := d.failures(c)
		o := option{index: i, failures: fs, fit: fitOf(fs, at)}
		for _, f := range fs {
			o.depth = max(o.depth, len(f.loc))
		}
		if tag != "" && tags[i] != nil && obj != nil && o.fit != fitOtherType {
			if v, ok := obj[tag]; ok && reflect.DeepEqual(v, tags[i]) {
				o.fit = fitTagged
			} else if !ok && requires(alts[i], tag, 0) {
				o.fit = fitOtherTag
			}
		}
		opts[i] = o
	}
	sort.SliceStable(opts, func(a, b int) bool {
		x, y := opts[a], opts[b]
		if x.fit != y.fit {
			return x.fit > y.fit
		}
		if x.depth != y.depth {
			return x.depth > y.depth
		}
		return len(x.failures) < len(y.failures)
	})
	best := opts[0]
	switch best.fit {
	case fitTagged:
		var out []failure
		for _, o := range opts {
			if o.fit == fitTagged {
				out = append(out, o.failures...)
			}
		}
		return out
	case fitOtherType:
		return []failure{{loc: at, line: lineAt(at, wantedTypes(opts, at, value))}}
	case fitOtherTag:
		// The model is to pick a tag first; what the alternative it picks lacks is
		// told when it calls with that.
		if tag != "" {
			if _, ok := obj[tag]; !ok {
				return []failure{{loc: at, line: lineAt(at, fmt.Sprintf("missing property %s (one of %s)", display(tag), tagValues(tags)))}}
			}
			tagAt := append(append([]string(nil), at...), tag)
			return []failure{{loc: tagAt, line: lineAt(tagAt, "value must be one of "+tagValues(tags))}}
		}
	case fitInside:
		if clearlyMeant(opts) {
			return best.failures
		}
	}
	names := make([]string, len(e.Causes))
	for i := range names {
		names[i] = alternativeName(alts, i)
	}
	sum := fmt.Sprintf("matches none of %d alternatives: %s (failures shown for %s)",
		len(names), bounded(names), names[best.index])
	return append(best.failures, failure{loc: at, line: lineAt(at, sum)})
}

// clearlyMeant says whether the first of opts, which fit inside, stands out: no other
// does, or those that do fail less deep (those failing in just the same way aside).
func clearlyMeant(opts []option) bool {
	for _, o := range opts[1:] {
		if o.fit != fitInside {
			return true
		}
		if sameLines(o.failures, opts[0].failures) {
			continue
		}
		return o.depth < opts[0].depth
	}
	return true
}

func sameLines(a, b []failure) bool {
	set := map[string]bool{}
	for _, f := range a {
		set[f.line] = true
	}
	for _, f := range b {
		if !set[f.line] {
			return false
		}
		delete(set, f.line)
	}
	return len(set) == 0
}

// fitOf tells from an alternative's failures whether the value at is of another type
// than it takes (or is not its constant), or has a property fixed to another value.
func fitOf(fs []failure, at []string) int {
	fit := fitInside
	for _, f := range fs {
		own, child := len(f.loc) == len(at), len(f.loc) == len(at)+1
		switch k := f.kind.(type) {
		case *kind.Type:
			if own {
				return fitOtherType
			}
		case *kind.Const:
			if own {
				return fitOtherType
			}
			if child {
				fit = fitOtherTag
			}
		case *kind.Enum:
			if own {
				return fitOtherType
			}
			if child && len(k.Want) == 1 {
				fit = fitOtherTag
			}
		}
	}
	return fit
}

// wantedTypes says, for a value no alternative takes the type of, what they take.
func wantedTypes(opts []option, at []string, value any) string {
	sort.SliceStable(opts, func(a, b int) bool { return opts[a].index < opts[b].index })
	var want []string
	seen := map[string]bool{}
	literal := false
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			want = append(want, s)
		}
	}
	for _, o := range opts {
		for _, f := range o.failures {
			if len(f.loc) != len(at) {
				continue
			}
			switch k := f.kind.(type) {
			case *kind.Type:
				for _, t := range k.Want {
					add(t)
				}
			case *kind.Const:
				add(display(k.Want))
				literal = true
			case *kind.Enum:
				for _, v := range k.Want {
					add(display(v))
				}
				literal = true
			}
		}
	}
	got := jsonTypeName(value)
	if literal {
		got = display(value)
	}
	if len(want) == 0 {
		return "matches none of the alternatives"
	}
	if len(want) > maxNamedChoices {
		return fmt.Sprintf("got %s, want one of %s", got, bounded(want))
	}
	if len(want) == 1 {
		return fmt.Sprintf("got %s, want %s", got, want[0])
	}
	return fmt.Sprintf("got %s, want %s or %s", got, strings.Join(want[:len(want)-1], ", "), want[len(want)-1])
}

// alternativeSchemas returns the alternatives of e's oneOf or anyOf, index for index
// with e.Causes, or nil when they cannot be told.
func (d *describer) alternativeSchemas(e *jsonschema.ValidationError) []*jsonschema.Schema {
	s := d.index.lookup(e.SchemaURL)
	if s == nil {
		return nil
	}
	alts := s.OneOf
	if _, ok := e.ErrorKind.(*kind.AnyOf); ok {
		alts = s.AnyOf
	}
	if len(alts) != len(e.Causes) {
		return nil
	}
	return alts
}

// tagProperty finds the property most alternatives (two at least) fix to one value,
// and that value for each alternative (nil where it has none).
func tagProperty(alts []*jsonschema.Schema) (string, []any) {
	consts := make([]map[string]any, len(alts))
	count := map[string]int{}
	for i, a := range alts {
		consts[i] = map[string]any{}
		fixedProperties(a, consts[i], 0)
		for p := range consts[i] {
			count[p]++
		}
	}
	tag := ""
	for p, n := range count {
		if n < 2 {
			continue
		}
		if tag == "" || n > count[tag] || n == count[tag] && (p == "type" || tag != "type" && p < tag) {
			tag = p
		}
	}
	if tag == "" {
		return "", nil
	}
	values := make([]any, len(alts))
	for i := range alts {
		values[i] = consts[i][tag]
	}
	return tag, values
}

// maxSchemaHops bounds how far references and allOf are followed to find what an
// alternative declares.
const maxSchemaHops = 4

// fixedProperties gathers the properties s fixes to one value (const, or an enum of
// one), through its reference and allOf.
func fixedProperties(s *jsonschema.Schema, into map[string]any, hops int) {
	if s == nil || hops > maxSchemaHops {
		return
	}
	for p, ps := range s.Properties {
		if _, ok := into[p]; ok || ps == nil {
			continue
		}
		for ps.Ref != nil && ps.Const == nil && ps.Enum == nil && hops < maxSchemaHops {
			ps, hops = ps.Ref, hops+1
		}
		switch {
		case ps.Const != nil:
			into[p] = *ps.Const
		case ps.Enum != nil && len(ps.Enum.Values) == 1:
			into[p] = ps.Enum.Values[0]
		}
	}
	fixedProperties(s.Ref, into, hops+1)
	for _, a := range s.AllOf {
		fixedProperties(a, into, hops+1)
	}
}

// requires says whether s requires property p, through its reference and allOf.
func requires(s *jsonschema.Schema, p string, hops int) bool {
	if s == nil || hops > maxSchemaHops {
		return false
	}
	for _, r := range s.Required {
		if r == p {
			return true
		}
	}
	if requires(s.Ref, p, hops+1) {
		return true
	}
	for _, a := range s.AllOf {
		if requires(a, p, hops+1) {
			return true
		}
	}
	return false
}

func tagValues(tags []any) string {
	var vs []string
	seen := map[string]bool{}
	for _, t := range tags {
		if t == nil {
			continue
		}
		if s := display(t); !seen[s] {
			seen[s] = true
			vs = append(vs, s)
		}
	}
	return bounded(vs)
}

// alternativeName names alternative i for a model: its title, else the types it takes.
func alternativeName(alts []*jsonschema.Schema, i int) string {
	if alts != nil {
		s := alts[i]
		for hops := 0; s.Ref != nil && s.Title == "" && s.Types == nil && hops < maxSchemaHops; hops++ {
			s = s.Ref
		}
		if s.Title != "" {
			return s.Title
		}
		if s.Types != nil {
			return strings.Join(s.Types.ToStrings(), " or ")
		}
	}
	return "#" + strconv.Itoa(i)
}

func bounded(names []string) string {
	if len(names) > maxNamedChoices {
		return fmt.Sprintf("%s … %d more", strings.Join(names[:maxNamedChoices], ", "), len(names)-maxNamedChoices)
	}
	return strings.Join(names, ", ")
}

func lineAt(loc []string, msg string) string {
	return clip(fmt.Sprintf("- /%s: %s", strings.Join(loc, "/"), msg))
}

func clip(s string) string {
	if len(s) <= maxReportLineChars {
		return s
	}
	cut := maxReportLineChars
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// valueAt is the part of v at an instance location.
func valueAt(v any, loc []string) (any, bool) {
	for _, tok := range loc {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// display writes a value the way the validator's messages do.
func display(v any) string {
	switch v := v.(type) {
	case string:
		q := strconv.Quote(v)
		q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
		return "'" + strings.ReplaceAll(q, `'`, `\'`) + "'"
	case []any, map[string]any:
		return "value"
	default:
		return fmt.Sprint(v)
	}
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	default:
		return "number"
	}
}

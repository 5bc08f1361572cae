package toolmgr

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// drawSchema is a tagged oneOf of five shapes; a label's font is a tagged oneOf of
// four sources and an image's src an anyOf of a string and an object.
const drawSchema = `{"type":"object","required":["shapes"],"properties":{
 "shapes":{"type":"array","items":{"oneOf":[
  {"title":"Circle","type":"object","required":["type","radius"],"properties":{"type":{"const":"circle"},"radius":{"type":"number","minimum":0}}},
  {"title":"Rectangle","type":"object","required":["type","width","height"],"properties":{"type":{"const":"rect"},"width":{"type":"number"},"height":{"type":"number"}}},
  {"title":"Line","type":"object","required":["type","points"],"properties":{"type":{"const":"line"},"points":{"type":"array","items":{"type":"number"},"minItems":4}}},
  {"title":"Label","type":"object","required":["type","text","font"],"properties":{"type":{"const":"label"},"text":{"type":"string"},"font":{"oneOf":[
   {"type":"object","required":["source","name"],"properties":{"source":{"const":"system"},"name":{"enum":["serif","sans","mono"]}}},
   {"type":"object","required":["source","url"],"properties":{"source":{"const":"url"},"url":{"type":"string"}}},
   {"type":"object","required":["source","data","format"],"properties":{"source":{"const":"embedded"},"data":{"type":"string"},"format":{"enum":["ttf","woff2"]}}},
   {"type":"object","required":["source","family"],"properties":{"source":{"enum":["google"]},"family":{"type":"string"}}}]}}},
  {"title":"Image","type":"object","required":["type","src"],"properties":{"type":{"const":"image"},"src":{"anyOf":[
   {"type":"string"},
   {"type":"object","required":["bytes"],"properties":{"bytes":{"type":"string"}}}]}}}]}},
 "untagged":{"anyOf":[
  {"title":"By name","type":"object","required":["name"],"properties":{"name":{"type":"string"}}},
  {"title":"By id","type":"object","required":["id"],"properties":{"id":{"type":"integer"}}}]}}}`

// TestValidationOneOf: a failing oneOf or anyOf is described by the alternative the
// model most likely meant (its tag matched, or its value's type did), not by every
// alternative's failures; when none is meant, one line says which exist.
func TestValidationOneOf(t *testing.T) {
	t.Parallel()
	m := New()
	m.MustRegister(&fnTool{
		spec: tool.Spec{Name: "draw", Parameters: json.RawMessage(drawSchema)},
		run:  func(_ *tool.Context, a json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil },
	})
	e, _ := m.Lookup("draw")
	cases := []struct {
		name, args string
		want       []string
	}{
		{"tag matches one shape, a field is missing", `{"shapes":[{"type":"rect","width":2}]}`,
			[]string{"- /shapes/0: missing property 'height'"}},
		{"tag matches one shape, a field is wrong", `{"shapes":[{"type":"line","points":[1,2]}]}`,
			[]string{"- /shapes/0/points: minItems: got 2, want 4"}},
		{"unknown tag", `{"shapes":[{"type":"circel","radius":2}]}`,
			[]string{"- /shapes/0/type: value must be one of 'circle', 'rect', 'line', 'label', 'image'"}},
		{"no tag", `{"shapes":[{"radius":2}]}`,
			[]string{"- /shapes/0: missing property 'type' (one of 'circle', 'rect', 'line', 'label', 'image')"}},
		{"nested: enum inside the meant font", `{"shapes":[{"type":"label","text":"hi","font":{"source":"system","name":"comic"}}]}`,
			[]string{"- /shapes/0/font/name: value must be one of 'serif', 'sans', 'mono'"}},
		{"nested: unknown font tag", `{"shapes":[{"type":"label","text":"hi","font":{"source":"file","path":"a.ttf"}}]}`,
			[]string{"- /shapes/0/font/source: value must be one of 'system', 'url', 'embedded', 'google'"}},
		{"nested: missing field in the meant font", `{"shapes":[{"type":"label","text":"hi","font":{"source":"embedded","data":"AAA"}}]}`,
			[]string{"- /shapes/0/font: missing property 'format'"}},
		{"nested: font of no alternative's type", `{"shapes":[{"type":"label","text":"hi","font":"serif"}]}`,
			[]string{"- /shapes/0/font: got string, want object"}},
		{"anyOf: the type decides", `{"shapes":[{"type":"image","src":{"byte":"AAA"}}]}`,
			[]string{"- /shapes/0/src: missing property 'bytes'"}},
		{"anyOf: no alternative's type", `{"shapes":[{"type":"image","src":5}]}`,
			[]string{"- /shapes/0/src: got number, want string or object"}},
		{"anyOf without tags: nearest and the list", `{"shapes":[],"untagged":{"nam":"x"}}`,
			[]string{"- /untagged: matches none of 2 alternatives: By name, By id (failures shown for By name)", "- /untagged: missing property 'name'"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(c.args)})
			if res.ErrorKind != tool.KindInvalidArgs {
				t.Fatalf("got %s: %s", res.ErrorKind, res.Text())
			}
			want := "invalid arguments for draw (fix these and call again):\n" + strings.Join(c.want, "\n")
			if res.Text() != want {
				t.Errorf("got\n%s\nwant\n%s", res.Text(), want)
			}
		})
	}
}

// TestValidationMessageBounded: however many failures, the message stays a few
// lines, saying how many more there are.
func TestValidationMessageBounded(t *testing.T) {
	t.Parallel()
	alts := make([]string, 40)
	for i := range alts {
		alts[i] = fmt.Sprintf(`{"title":"Alt %d","type":"object","required":["p%d"]}`, i, i)
	}
	schema := `{"type":"object","properties":{"many":{"type":"array","items":{"type":"integer"}},"one":{"anyOf":[` + strings.Join(alts, ",") + `]},"long":{"enum":["` + strings.Repeat("x", 400) + `"]}}}`
	m := New()
	m.MustRegister(&fnTool{
		spec: tool.Spec{Name: "big", Parameters: json.RawMessage(schema)},
		run:  func(_ *tool.Context, a json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil },
	})
	e, _ := m.Lookup("big")
	items := strings.TrimSuffix(strings.Repeat(`"a",`, 100), ",")
	res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"many":[` + items + `],"one":{},"long":"y"}`)})
	lines := strings.Split(res.Text(), "\n")
	if len(lines) != 1+maxReportLines || lines[len(lines)-1] != "- … 84 more" {
		t.Fatalf("got %d lines, ending %q:\n%s", len(lines), lines[len(lines)-1], res.Text())
	}
	for _, l := range lines {
		if len(l) > maxReportLineChars+len("…") {
			t.Errorf("line of %d characters: %.80s…", len(l), l)
		}
	}
	res = m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"one":{}}`)})
	if !strings.Contains(res.Text(), "- /one: matches none of 40 alternatives: Alt 0, Alt 1, Alt 2, Alt 3, Alt 4, Alt 5, Alt 6, Alt 7 … 32 more (failures shown for Alt 0)") {
		t.Errorf("alternatives not summed up:\n%s", res.Text())
	}
}

func BenchmarkPrepare(b *testing.B) {
	m := New()
	m.MustRegister(&fnTool{spec: tool.Spec{Name: "draw", Parameters: json.RawMessage(drawSchema)}})
	e, _ := m.Lookup("draw")
	for _, c := range []struct{ name, args string }{
		{"valid", `{"shapes":[{"type":"rect","width":2,"height":3},{"type":"label","text":"hi","font":{"source":"google","family":"Inter"}}]}`},
		{"tagged", `{"shapes":[{"type":"label","text":"hi","font":{"source":"system","name":"comic"}}]}`},
		{"untagged", `{"shapes":[{"type":"circel","radius":2},{"radius":1}],"untagged":{"nam":"x"}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				e.Prepare(json.RawMessage(c.args))
			}
		})
	}
}

// BenchmarkPrepareNoArgs: a call of a tool without parameters, the commonest call
// there is (bench/overhead's noop).
func BenchmarkPrepareNoArgs(b *testing.B) {
	m := New()
	m.MustRegister(&fnTool{spec: tool.Spec{Name: "noop", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}})
	e, _ := m.Lookup("noop")
	for b.Loop() {
		if _, res := e.Prepare(json.RawMessage(`{}`)); res != nil {
			b.Fatal(res.Text())
		}
	}
}

// TestValidationArgumentsThatBelongInside: an HTTP API's request body that is not one
// object of fields (DigitalOcean's droplets_create: one droplet or several) is one
// argument, `body`; a model that gives the body's fields beside the other arguments
// is told they go inside it, not only that they are not allowed.
func TestValidationArgumentsThatBelongInside(t *testing.T) {
	t.Parallel()
	m := New()
	m.MustRegister(&fnTool{
		spec: tool.Spec{Name: "create", Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,
		 "required":["body"],"properties":{
		  "project":{"type":"string"},
		  "body":{"anyOf":[
		   {"type":"object","required":["name"],"properties":{"name":{"type":"string"},"size":{"type":"string"}}},
		   {"type":"object","required":["names"],"properties":{"names":{"type":"array","items":{"type":"string"}},"size":{"type":"string"}}}]}}}`)},
		run: func(_ *tool.Context, a json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil },
	})
	e, _ := m.Lookup("create")
	for args, want := range map[string]string{
		`{"name":"web-1","size":"s-1"}`:        "- /: additional properties 'name', 'size' not allowed (they are fields of 'body': give them inside it)",
		`{"body":{"name":"a"},"colour":"red"}`: "- /: additional properties 'colour' not allowed",
	} {
		res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(args)})
		if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), want+"\n") && !strings.HasSuffix(res.Text(), want) {
			t.Errorf("%s: got %s: %s\nwant a line %s", args, res.ErrorKind, res.Text(), want)
		}
	}
}

package toolmgr

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

type greetArgs struct {
	Name  string `json:"name" jsonschema:"description=who to greet,minLength=1"`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=3"`
}

func TestFuncToolSchemaAndRun(t *testing.T) {
	t.Parallel()
	ft, err := NewFunc(tool.Spec{Name: "greet", Description: "greets"}, func(_ *tool.Context, a greetArgs) (*tool.Result, error) {
		if a.Times == 0 {
			a.Times = 1
		}
		return tool.TextResult(strings.Repeat("hi "+a.Name+";", a.Times)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
		Additional *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(ft.Spec().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Required) != 1 || schema.Required[0] != "name" || schema.Additional == nil || *schema.Additional {
		t.Fatalf("derived schema wrong: %s", ft.Spec().Parameters)
	}
	if !strings.Contains(string(schema.Properties["name"]), "who to greet") {
		t.Fatalf("description tag lost: %s", schema.Properties["name"])
	}
	m := New()
	m.MustRegister(ft)
	e, _ := m.Lookup("greet")
	if res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"name":"ada","times":2}`)}); res.Text() != "hi ada;hi ada;" {
		t.Fatalf("got %q", res.Text())
	}
	// 2.0 is an integer to JSON Schema, and the Go field takes it too.
	if res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"name":"ada","times":2.0}`)}); res.Text() != "hi ada;hi ada;" {
		t.Fatalf("times 2.0: got %q", res.Text())
	}
	res := m.Run(e, Invocation{Ctx: newCtx(t), Args: json.RawMessage(`{"times":9}`)})
	if res.ErrorKind != tool.KindInvalidArgs || !strings.Contains(res.Text(), "/times") || !strings.Contains(res.Text(), "name") {
		t.Fatalf("derived schema not enforced: %s", res.Text())
	}
}

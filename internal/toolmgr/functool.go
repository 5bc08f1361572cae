package toolmgr

import (
	"encoding/json"
	"fmt"

	"github.com/invopop/jsonschema"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// FuncTool is a tool backed by a Go function whose arguments are a struct A. Its JSON
// Schema is derived from A (field types, `json` tags, `jsonschema` tags for
// descriptions, enums and bounds; fields without omitempty are required).
type FuncTool[A any] struct {
	spec tool.Spec
	fn   func(ctx *tool.Context, args A) (*tool.Result, error)
}

// NewFunc builds a FuncTool. spec.Parameters is filled from A.
func NewFunc[A any](spec tool.Spec, fn func(ctx *tool.Context, args A) (*tool.Result, error)) (*FuncTool[A], error) {
	r := &jsonschema.Reflector{
		DoNotReference:            true,
		ExpandedStruct:            true,
		AllowAdditionalProperties: false,
	}
	var zero A
	s := r.Reflect(&zero)
	s.Version = "" // leave the dialect to the validator's default (2020-12)
	s.ID = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("toolmgr: schema for %s: %w", spec.Name, err)
	}
	spec.Parameters = b
	return &FuncTool[A]{spec: spec, fn: fn}, nil
}

// Spec implements tool.Tool.
func (f *FuncTool[A]) Spec() tool.Spec { return f.spec }

// Run implements tool.Tool.
func (f *FuncTool[A]) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var a A
	if err := tool.UnmarshalArgs(raw, &a); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "arguments do not fit %s: %v", f.spec.Name, err)
	}
	return f.fn(ctx, a)
}

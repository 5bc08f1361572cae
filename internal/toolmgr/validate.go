package toolmgr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolserverd/toolserverd/internal/jsontext"
)

var printer = message.NewPrinter(language.English)

// identityFields are argument names a model could use to act as another session or user.
// They are removed unless the tool's schema declares them as its own parameters
// (rootDeclared).
var identityFields = []string{"session_id", "user_id", "tenant", "tenant_id", "_session", "_agent_state", "_user"}

func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, map[string]bool, error) {
	if err := checkSchemaDepth(raw); err != nil {
		return nil, nil, fmt.Errorf("toolmgr: tool %q: parameters schema refused: %w", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("toolmgr: tool %q: parameters are not JSON: %w", name, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("toolmgr: tool %q: parameters must be a JSON Schema object", name)
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, nil, fmt.Errorf("toolmgr: tool %q: parameters schema must have type object, not %v", name, t)
	}
	s, err := compileDoc("mem:///tools/"+name+".json", doc)
	if err != nil {
		return nil, nil, fmt.Errorf("toolmgr: tool %q: parameters schema %w", name, err)
	}
	return s, rootDeclared(obj), nil
}

// CheckParameters reports what keeps raw from being a tool's parameters schema
// (what Register would refuse): not a JSON object, a type other than object, or a
// schema that does not compile here (an unknown $schema dialect, a reference to
// elsewhere, an expansion past the bound).
func CheckParameters(raw json.RawMessage) error {
	_, _, err := compileSchema("parameters", raw)
	return err
}

// maxSchemaDepth bounds how deep a tool's parameters or output schema may nest arrays
// and objects (a property's schema lies two levels below its parent's: 64 levels of
// nested objects). Compiling a schema checks it against the meta-schema at a cost that
// grows faster than the square of its depth, and the compiled schema keeps memory that
// grows the same way: measured per schema, about 5 ms at 128 levels, 65-75 ms, 38 MiB
// allocated and 587 KiB kept at 256, 1 s at 1,000 (an MCP server's schema 3,000 deep
// held a connection in "connecting" for minutes; one listing 1,000 tools 250 deep took
// 55 s and 4.6 GB). Real schemas, references inlined, nest a few dozen levels; tool
// listings also carry them to clients whose decoders stop short of 1,000 levels.
const maxSchemaDepth = 128

// checkSchemaDepth refuses a schema nested more than maxSchemaDepth levels deep.
func checkSchemaDepth(raw json.RawMessage) error {
	if len(raw) > 2*maxSchemaDepth && jsontext.Deeper(raw, maxSchemaDepth) {
		return fmt.Errorf("it nests arrays and objects more than %d levels deep", maxSchemaDepth)
	}
	return nil
}

// compileDoc compiles a schema document under url (absolute, so that nothing resolves
// against the working directory) with no loader, so that a schema can never make the
// daemon fetch a URL. Its errors read after "schema".
func compileDoc(url string, doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(schemaRegexp)
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	if err := checkExpansion(s); err != nil {
		return nil, fmt.Errorf("refused: %w", err)
	}
	return s, nil
}

// CheckOutputSchema reports what keeps raw from being a tool's output schema. MCP
// wants an object schema ("type": "object"); the TypeScript SDK's client refuses a
// whole tools/list, every tool of it, over one outputSchema without that type or with
// a property schema that is not an object, and throws from its listing when the
// schema does not compile. The daemon never validates results against it.
func CheckOutputSchema(raw json.RawMessage) error {
	if err := checkSchemaDepth(raw); err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("it is not JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return errors.New("it is not a JSON object")
	}
	if t := obj["type"]; t != "object" {
		b, _ := json.Marshal(t)
		return fmt.Errorf(`its type must be "object", not %s`, b)
	}
	if p, ok := obj["properties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return errors.New("its properties are not an object")
		}
		for k, v := range props {
			if _, ok := v.(map[string]any); !ok {
				return fmt.Errorf("property %q has a schema that is not an object", k)
			}
		}
	}
	if r, ok := obj["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return errors.New("its required is not an array")
		}
		for _, v := range list {
			if _, ok := v.(string); !ok {
				return errors.New("its required holds something else than names")
			}
		}
	}
	if _, err := compileDoc("mem:///tools/output.json", doc); err != nil {
		return fmt.Errorf("the schema %w", err)
	}
	return nil
}

// objectSchema returns a compiled parameters schema with the top-level "type":"object"
// and "properties" that providers require of a function's parameters (OpenAI refuses
// one without properties, Anthropic an input_schema without type) and JSON Schema
// lets a tool leave out; adding them changes nothing that validates.
func objectSchema(raw json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	_, hasType := obj["type"]
	_, hasProps := obj["properties"]
	if hasType && hasProps {
		return raw, nil
	}
	if !hasType {
		obj["type"] = json.RawMessage(`"object"`)
	}
	if !hasProps {
		obj["properties"] = json.RawMessage(`{}`)
	}
	return json.Marshal(obj)
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s, which is not loaded (remote references are not fetched)", url)
}

// decodeArgs parses arguments with numbers kept exact, as the validator expects.
func decodeArgs(raw json.RawMessage) (any, error) {
	// No arguments, the commonest case, needs no decoder (its buffer is most of
	// what validating them allocates).
	if string(raw) == "{}" || len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonType(v))
	}
	return v, nil
}

func stripIdentity(args any, declared map[string]bool) bool {
	obj, ok := args.(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for _, f := range identityFields {
		if _, present := obj[f]; present && !declared[f] {
			delete(obj, f)
			changed = true
		}
	}
	return changed
}

func jsonType(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

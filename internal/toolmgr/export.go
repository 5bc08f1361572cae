package toolmgr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Format is a provider's schema and message dialect.
type Format string

const (
	FormatNative    Format = "native"
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	FormatMCP       Format = "mcp"
	// FormatOpenAIResponses is the OpenAI Responses API: flat function tools,
	// function_call_output items.
	FormatOpenAIResponses Format = "openai_responses"
	// FormatGemini is the Gemini API: function declarations, functionResponse parts.
	FormatGemini Format = "gemini"
)

// ParseFormat accepts the formats a schema listing can be exported in; "" is native.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatNative:
		return FormatNative, nil
	case FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatGemini, FormatMCP:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown format %q (use openai, openai_responses, anthropic, gemini, mcp or native)", s)
}

// provider is the key of the format's declarations in Spec.ProviderSpecs, "" for a
// format that takes none. OpenAI's ({"type":"web_search"}, declared as openai) are
// Responses API tools: Chat Completions takes functions and custom tools only and
// refuses a whole request holding another ("Invalid value: 'web_search'. Supported
// values are: 'function' and 'custom'."), so format openai gets none.
func (f Format) provider() string {
	switch f {
	case FormatOpenAIResponses:
		return string(FormatOpenAI)
	case FormatOpenAI:
		return ""
	}
	return string(f)
}

// chatCompletionsHosted is why format openai leaves out a tool OpenAI hosts.
const chatCompletionsHosted = "OpenAI runs its hosted tools in the Responses API only (format openai_responses); Chat Completions takes functions"

// Export renders specs (already in the order wanted) as the provider expects them in a
// request's tool list. A tool with a declaration in the provider's own format
// (Spec.ProviderSpecs) is sent as that declaration. Hosted tools run at the provider:
// they are sent only to the providers that host them (native lists them all, marked).
// A tool whose name the provider refuses is left out (see Omitted).
func Export(specs []tool.Spec, f Format) []any {
	out := make([]any, 0, len(specs))
	for _, s := range specs {
		if f != FormatNative {
			if decl, ok := s.ProviderSpecs[f.provider()]; ok {
				out = append(out, decl)
				continue
			}
			if s.Hosted || refusedName(s.Name, f) != "" {
				continue
			}
		}
		out = append(out, exportOne(s, f))
	}
	return out
}

// OmittedTool is a tool Export left out of a format: another provider runs it
// (HostedBy), or this one refuses its name (Reason).
type OmittedTool struct {
	Name     string   `json:"name"`
	HostedBy []string `json:"hosted_by,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}

// Omitted lists the tools Export leaves out of format f.
func Omitted(specs []tool.Spec, f Format) []OmittedTool {
	var out []OmittedTool
	if f == FormatNative {
		return nil
	}
	for _, s := range specs {
		if _, ok := s.ProviderSpecs[f.provider()]; ok {
			continue
		}
		if s.Hosted {
			o := OmittedTool{Name: s.Name, HostedBy: s.HostedBy()}
			if f == FormatOpenAI && slices.Contains(o.HostedBy, string(FormatOpenAI)) {
				o.Reason = chatCompletionsHosted
			}
			out = append(out, o)
		} else if why := refusedName(s.Name, f); why != "" {
			out = append(out, OmittedTool{Name: s.Name, Reason: why})
		}
	}
	return out
}

// refusedName says why format f cannot carry a tool of this name, or "". Registry
// names are what every provider takes ([a-zA-Z0-9_-]{1,64}), except that Gemini
// wants a letter or '_' first and refuses the whole request over one function named
// otherwise (an MCP tool "2fa_code" under prefix: never).
func refusedName(name string, f Format) string {
	if f != FormatGemini || name == "" {
		return ""
	}
	if c := name[0]; c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
		return ""
	}
	return "Gemini function names must start with a letter or an underscore"
}

// maxOpenAIDescription is the longest function description OpenAI accepts, in
// characters: one longer makes it refuse the whole request ("string_above_max_length"),
// and with it every tool of the list.
const maxOpenAIDescription = 1024

func exportOne(s tool.Spec, f Format) any {
	switch f {
	case FormatOpenAI:
		return openAITool{Type: "function", Function: openAIFunction{Name: s.Name, Description: capChars(s.Description, maxOpenAIDescription), Parameters: withArrayItems(forProviders(s.Parameters))}}
	case FormatOpenAIResponses:
		// strict is sent false: the Responses API makes a function without it strict,
		// rewriting its schema so that every property is required and no other
		// allowed, which turns optional arguments into ones the model must invent.
		return openAIResponsesTool{Type: "function", Name: s.Name, Description: capChars(s.Description, maxOpenAIDescription), Parameters: withArrayItems(forProviders(s.Parameters))}
	case FormatGemini:
		return geminiTool{Name: s.Name, Description: s.Description, ParametersJSONSchema: forProviders(s.Parameters)}
	case FormatAnthropic:
		return anthropicTool{Name: s.Name, Description: s.Description, InputSchema: forProviders(s.Parameters)}
	case FormatMCP:
		t := mcpTool{Name: s.Name, Title: s.Label, Description: s.Description, InputSchema: s.Parameters, OutputSchema: s.AdvertisedOutputSchema()}
		t.Annotations.ReadOnlyHint = s.ReadOnly
		t.Annotations.DestructiveHint = s.DestructiveHint(s.Risk)
		t.Annotations.IdempotentHint = s.Idempotent
		t.Annotations.OpenWorldHint = s.OpenWorld
		t.Annotations.Title = s.Label
		return t
	default:
		return nativeTool{Spec: s, Timeout: s.Timeout.Milliseconds()}
	}
}

// withArrayItems gives every array schema in a parameters schema that has no "items"
// an "items": {} (any item: what no items means). OpenAI refuses a whole request
// whose tool list holds one function with a bare {"type":"array"} ("array schema
// missing items"), which JSON Schema allows and MCP servers publish. Only places
// that hold schemas are walked (not default, const, enum, examples); keys keep their
// order, and a schema with nothing to add is returned as it is.
func withArrayItems(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"array"`)) {
		return raw
	}
	if out, ok := arrayItems.get(raw); ok {
		return out
	}
	out := raw
	if fixed, changed := rewriteSchemas(raw, addItems); changed {
		out = fixed
	}
	arrayItems.put(raw, out)
	return out
}

// arrayItems keeps withArrayItems' answers by schema: the walk reads a nested schema
// again at each level of it (28 ms for 50 tools twelve levels deep against 0.8 ms to
// list them unchanged; 0.4 s for the 288 operations of OpenAI's own document), and
// every openai listing asks again for the same schemas.
var arrayItems = schemaCache{max: 64 << 20}

// schemaCache maps schemas to their rewriting, by content: a hash picks the entries
// and a comparison of the bytes makes sure. It holds at most about max bytes of
// schemas and rewritings, and starts over when full.
type schemaCache struct {
	max   int
	seed  maphash.Seed
	once  sync.Once
	mu    sync.Mutex
	m     map[uint64][]cachedSchema
	bytes int
}

type cachedSchema struct{ in, out json.RawMessage }

func (c *schemaCache) key(raw json.RawMessage) uint64 {
	c.once.Do(func() { c.seed = maphash.MakeSeed() })
	return maphash.Bytes(c.seed, raw)
}

func (c *schemaCache) get(raw json.RawMessage) (json.RawMessage, bool) {
	k := c.key(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.m[k] {
		if bytes.Equal(e.in, raw) {
			return e.out, true
		}
	}
	return nil, false
}

func (c *schemaCache) put(raw, out json.RawMessage) {
	k := c.key(raw)
	size := len(raw) + len(out)
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+size > c.max {
		c.m, c.bytes = map[uint64][]cachedSchema{}, 0
	}
	c.m[k] = append(c.m[k], cachedSchema{in: raw, out: out})
	c.bytes += size
}

// addItems gives an array schema without "items" an "items": {}.
func addItems(members []member) ([]member, bool) {
	isArray, hasItems := false, false
	for _, m := range members {
		switch m.key {
		case "type":
			var one string
			var many []string
			isArray = (json.Unmarshal(m.val, &one) == nil && one == "array") ||
				(json.Unmarshal(m.val, &many) == nil && slices.Contains(many, "array"))
		case "items":
			hasItems = true
		}
	}
	if !isArray || hasItems {
		return members, false
	}
	return append(members, member{key: "items", val: json.RawMessage(`{}`)}), true
}

// capChars cuts s to at most n characters, the last an ellipsis when it was cut.
func capChars(s string, n int) string {
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + "…"
}

type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// openAIResponsesTool is a function tool of the Responses API: flat, not nested
// under "function" as in Chat Completions.
type openAIResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// geminiTool is a Gemini FunctionDeclaration. parametersJsonSchema takes JSON Schema
// as it is; "parameters" takes Gemini's OpenAPI-style Schema, which would need a
// translation (and loses what it cannot say).
type geminiTool struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type mcpTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is MCP's outputSchema; the other formats have no place for one.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  struct {
		Title           string `json:"title,omitempty"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint,omitempty"`
		IdempotentHint  bool   `json:"idempotentHint,omitempty"`
		OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
	} `json:"annotations"`
}

type nativeTool struct {
	tool.Spec
	Timeout int64 `json:"timeout_ms,omitempty"`
}

package toolmgr

import (
	"encoding/json"
	"fmt"
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
)

// ParseFormat accepts the formats a schema listing can be exported in; "" is native.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatNative:
		return FormatNative, nil
	case FormatOpenAI, FormatAnthropic, FormatMCP:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown format %q (use openai, anthropic, mcp or native)", s)
}

// Export renders specs (already in the order wanted) as the provider expects them in a
// request's tool list. A tool with a declaration in the provider's own format
// (Spec.ProviderSpecs) is sent as that declaration. Hosted tools run at the provider:
// they are sent only to the providers that host them (native lists them all, marked).
func Export(specs []tool.Spec, f Format) []any {
	out := make([]any, 0, len(specs))
	for _, s := range specs {
		if f != FormatNative {
			if decl, ok := s.ProviderSpecs[string(f)]; ok {
				out = append(out, decl)
				continue
			}
			if s.Hosted {
				continue
			}
		}
		out = append(out, exportOne(s, f))
	}
	return out
}

// OmittedTool is a tool Export left out of a format because another provider runs it.
type OmittedTool struct {
	Name     string   `json:"name"`
	HostedBy []string `json:"hosted_by"`
}

// Omitted lists the hosted tools Export leaves out of format f.
func Omitted(specs []tool.Spec, f Format) []OmittedTool {
	var out []OmittedTool
	if f == FormatNative {
		return nil
	}
	for _, s := range specs {
		if _, ok := s.ProviderSpecs[string(f)]; s.Hosted && !ok {
			out = append(out, OmittedTool{Name: s.Name, HostedBy: s.HostedBy()})
		}
	}
	return out
}

// maxOpenAIDescription is the longest function description OpenAI accepts, in
// characters: one longer makes it refuse the whole request ("string_above_max_length"),
// and with it every tool of the list.
const maxOpenAIDescription = 1024

func exportOne(s tool.Spec, f Format) any {
	switch f {
	case FormatOpenAI:
		return openAITool{Type: "function", Function: openAIFunction{Name: s.Name, Description: capChars(s.Description, maxOpenAIDescription), Parameters: s.Parameters}}
	case FormatAnthropic:
		return anthropicTool{Name: s.Name, Description: s.Description, InputSchema: s.Parameters}
	case FormatMCP:
		t := mcpTool{Name: s.Name, Title: s.Label, Description: s.Description, InputSchema: s.Parameters}
		t.Annotations.ReadOnlyHint = s.ReadOnly
		destructive := !s.ReadOnly && s.Risk.Rank() >= tool.RiskHigh.Rank()
		t.Annotations.DestructiveHint = &destructive
		t.Annotations.Title = s.Label
		return t
	default:
		return nativeTool{Spec: s, Timeout: s.Timeout.Milliseconds()}
	}
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
	Annotations struct {
		Title           string `json:"title,omitempty"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	} `json:"annotations"`
}

type nativeTool struct {
	tool.Spec
	Timeout int64 `json:"timeout_ms,omitempty"`
}

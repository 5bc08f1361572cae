package tool

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// Content block types.
const (
	ContentText     = "text"
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// Content is one block of a result: text, an image or audio (base64 data with a MIME
// type) or a resource (URI, optional inline text or data).
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	URI      string `json:"uri,omitempty"`
	// Name and Description of a resource given by link (MCP's resource_link): what
	// the server called it ("report.txt") and said of it.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
}

// Validate reports what makes a block unusable: an unknown type, or a field its type
// needs that is missing or malformed.
func (c Content) Validate() error {
	switch c.Type {
	case ContentText:
	case ContentImage, ContentAudio:
		if c.MimeType == "" {
			return fmt.Errorf("a %s block needs mime_type", c.Type)
		}
		if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil || c.Data == "" {
			return fmt.Errorf("a %s block needs its bytes in data, base64-encoded", c.Type)
		}
	case ContentResource:
		if c.URI == "" {
			return errors.New("a resource block needs uri")
		}
	default:
		return fmt.Errorf("block type %q is not one of text, image, audio, resource", c.Type)
	}
	return nil
}

// MaxStructuredDepth bounds how deep a result's structured output may nest arrays and
// objects. The daemon sends it in every message and keeps it in the call's record, and
// a client parsing either with a recursive decoder fails on deeper JSON: Python's json
// module near 1,000 levels (less, deep inside an agent's call stack), Go's
// encoding/json at 10,000. Real structured output nests a few levels.
const MaxStructuredDepth = 256

// Result is what a call produced.
type Result struct {
	Content []Content `json:"content"`
	// Structured is machine-readable output, sent to the model alongside the text.
	Structured json.RawMessage `json:"structured,omitempty"`
	// Details is for logs and UIs; it is never sent to the model.
	Details json.RawMessage `json:"details,omitempty"`
	IsError bool            `json:"is_error"`
	// ErrorKind is set when IsError is.
	ErrorKind ErrorKind `json:"error_kind,omitempty"`
	// Truncated is set when the text sent to the model was cut to the token budget.
	Truncated bool `json:"truncated,omitempty"`
}

// TextResult is a successful result holding one text block.
func TextResult(text string) *Result {
	return &Result{Content: []Content{{Type: ContentText, Text: text}}}
}

// JSONResult is a successful result whose text is the JSON encoding of v and whose
// structured content is the same value.
func JSONResult(v any) (*Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &Result{Content: []Content{{Type: ContentText, Text: string(b)}}, Structured: b}, nil
}

// ErrorResult is an is_error result of the given kind.
func ErrorResult(kind ErrorKind, format string, args ...any) *Result {
	return &Result{
		Content:   []Content{{Type: ContentText, Text: sprintf(format, args...)}},
		IsError:   true,
		ErrorKind: kind,
	}
}

// FromError converts an error returned by a tool into a result. A *Error keeps its
// kind; anything else is KindFailed.
func FromError(err error) *Result {
	var te *Error
	if errors.As(err, &te) {
		return ErrorResult(te.Kind, "%s", te.Message)
	}
	return ErrorResult(KindFailed, "%s", err.Error())
}

// Text joins the text of every text block (and inline resource text) with newlines:
// the string a provider that only accepts text is given.
func (r *Result) Text() string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		switch c.Type {
		case ContentText:
			parts = append(parts, c.Text)
		case ContentResource:
			if c.Text != "" {
				parts = append(parts, c.Text)
			} else if c.URI != "" {
				parts = append(parts, resourceLinkText(c))
			}
		case ContentImage, ContentAudio:
			parts = append(parts, "["+c.Type+": "+c.MimeType+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// resourceLinkText is how a resource given by link reads to a model: its URI, and
// its name and description when the server gave them.
func resourceLinkText(c Content) string {
	t := "[resource: " + c.URI
	if c.Name != "" && c.Name != c.URI {
		t += " (" + c.Name + ")"
	}
	if c.Description != "" {
		t += ": " + c.Description
	}
	return t + "]"
}

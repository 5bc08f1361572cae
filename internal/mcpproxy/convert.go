package mcpproxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// specFor describes an upstream tool to the registry. note, when not empty, says
// what of the tool's declaration is not passed on.
func specFor(cfg *ServerConfig, name string, t *mcp.Tool) (spec tool.Spec, note string, err error) {
	params, inNote, err := inputSchema(t)
	if err != nil {
		return tool.Spec{}, "", err
	}
	output, note := outputSchema(t)
	if inNote != "" {
		note = strings.TrimPrefix(inNote+"; "+note, "; ")
		note = strings.TrimSuffix(note, "; ")
	}
	a := t.Annotations
	trusted := cfg.trustsAnnotations()
	// An untrusted server's readOnlyHint is not taken: it would put the tool on the
	// permission check's no-approval path. Its destructiveHint, which only makes the
	// check more careful, is.
	readOnly := trusted && isTrue(a.ReadOnlyHint)
	risk, riskWhy := tool.RiskMedium, ""
	switch {
	case readOnly:
		// The MCP spec: destructiveHint is meaningful only when readOnlyHint is false.
		risk = tool.RiskLow
	case isTrue(a.DestructiveHint):
		risk, riskWhy = tool.RiskHigh, fmt.Sprintf("MCP server %s marks it destructive", cfg.Name)
	case isTrue(a.ReadOnlyHint):
		riskWhy = fmt.Sprintf("MCP server %s marks it read-only, but its annotations are not trusted (trust_annotations: false)", cfg.Name)
	}
	// A trusted server's destructiveHint is passed on to MCP clients as it was said
	// (false: the tool only adds); an untrusted one's true made the tool high risk.
	var destructive *bool
	if trusted && a.DestructiveHint != nil && !readOnly {
		destructive = a.DestructiveHint
	}
	label := t.Title
	if label == "" {
		label = a.Title
	}
	if label == "" {
		label = t.Name
	}
	return tool.Spec{
		Name:          name,
		Label:         label,
		Description:   t.Description,
		Parameters:    params,
		OutputSchema:  output,
		Documentation: documentation(cfg.Name, t, trusted),
		Flags:         tool.Flags{ReadOnly: readOnly, ConcurrencySafe: readOnly, Idempotent: trusted && isTrue(a.IdempotentHint), OpenWorld: a.OpenWorldHint, Destructive: destructive},
		Risk:          risk,
		RiskWhy:       riskWhy,
		Mode:          tool.ModeDirect,
		Timeout:       cfg.CallTimeout,
		Source:        "mcp:" + cfg.Name,
	}, note, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// runsAsTask reports whether the server requires the tool to be called as a task.
// "optional" tools are called plainly (see callTask).
func runsAsTask(t *mcp.Tool) bool {
	return t.Execution != nil && t.Execution.TaskSupport == mcp.TaskSupportRequired
}

// documentation records where the tool comes from and what its annotations say, for
// the model to read on demand (openWorldHint among them) without lengthening every
// prompt's description, and whether they were trusted.
func documentation(server string, t *mcp.Tool, trusted bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nProvided by MCP server %q as tool %q.", t.Description, server, t.Name)
	if runsAsTask(t) {
		b.WriteString(" It runs as an MCP task on the server (taskSupport: required): the call waits for the task's end, within the call's deadline, and the task's status messages come as progress.")
	}
	a := t.Annotations
	var hints []string
	for _, h := range []struct {
		name string
		v    *bool
	}{{"read-only", a.ReadOnlyHint}, {"destructive", a.DestructiveHint}, {"idempotent", a.IdempotentHint}, {"open-world (reaches outside systems)", a.OpenWorldHint}} {
		if h.v != nil {
			hints = append(hints, fmt.Sprintf("%s: %v", h.name, *h.v))
		}
	}
	switch {
	case len(hints) == 0:
	case trusted:
		fmt.Fprintf(&b, " Annotations: %s.", strings.Join(hints, ", "))
	default:
		fmt.Fprintf(&b, " Annotations (not trusted: the server is configured with trust_annotations false, so they neither make the tool read-only nor lower its risk): %s.", strings.Join(hints, ", "))
	}
	return strings.TrimSpace(b.String())
}

// inputSchema returns the tool's argument schema as an object schema: the
// listing's own bytes (see toolListing), so that arguments are checked against all
// the server declares (a root anyOf, dependentRequired, minProperties …), which
// mcp-go's typed decoding (type, properties, required, additionalProperties, $defs)
// would lose. A schema the registry would refuse as written (a $schema dialect it
// does not know, a remote reference) falls back to that typed reading, with a note.
// A property with a default is not required (toolmgr.OptionalDefaults): the server
// fills it in.
func inputSchema(t *mcp.Tool) (json.RawMessage, string, error) {
	if len(t.RawInputSchema) > 0 {
		params, err := objectSchema(t.Name, t.RawInputSchema)
		if err != nil {
			return nil, "", err
		}
		cerr := toolmgr.CheckParameters(params)
		if cerr == nil {
			return params, "", nil
		}
		var typed mcp.ToolInputSchema
		if json.Unmarshal(t.RawInputSchema, &typed) != nil {
			return nil, "", fmt.Errorf("tool %q: input schema: %w", t.Name, cerr)
		}
		params, err = typedSchema(t.Name, typed)
		if err != nil {
			return nil, "", err
		}
		return params, fmt.Sprintf("tool %q: its inputSchema as written is refused (%v); only its type, properties, required, additionalProperties and $defs are used", t.Name, cerr), nil
	}
	params, err := typedSchema(t.Name, t.InputSchema)
	return params, "", err
}

func typedSchema(name string, s mcp.ToolInputSchema) (json.RawMessage, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", name, err)
	}
	return objectSchema(name, b)
}

// objectSchema is an input schema with a type and properties, and without required
// properties that have a default.
func objectSchema(name string, raw json.RawMessage) (json.RawMessage, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON object", name)
	}
	changed := false
	if typ, ok := obj["type"]; !ok || typ == "" {
		obj["type"] = "object"
		changed = true
	}
	if p, ok := obj["properties"]; !ok || p == nil {
		obj["properties"] = map[string]any{}
		changed = true
	}
	if changed {
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("tool %q: input schema: %w", name, err)
		}
		raw = b
	}
	if out, changed := toolmgr.OptionalDefaults(raw); changed {
		return out, nil
	}
	return raw, nil
}

// outputSchema returns the tool's outputSchema as the server wrote it (the listing's
// own bytes, see toolListing: mcp-go's typed decoding would keep only type,
// properties, required, additionalProperties and $defs, losing $schema, a root $ref,
// anyOf and the like), or nil. One the daemon could not show MCP clients (see
// toolmgr.CheckOutputSchema) is left out with a note: the tool itself, and the
// structured content of its results, still pass.
func outputSchema(t *mcp.Tool) (json.RawMessage, string) {
	raw := t.RawOutputSchema
	if len(raw) == 0 {
		o := t.OutputSchema
		if o.Type == "" && o.Properties == nil && o.Required == nil && o.AdditionalProperties == nil && o.Defs == nil {
			return nil, ""
		}
		b, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Sprintf("tool %q: its outputSchema is not passed on: %v", t.Name, err)
		}
		raw = b
	}
	if string(raw) == "null" {
		return nil, ""
	}
	if err := toolmgr.CheckOutputSchema(raw); err != nil {
		return nil, fmt.Sprintf("tool %q: its outputSchema is not passed on, as MCP clients would refuse it: %v", t.Name, err)
	}
	return raw, ""
}

// listedSchema is a listed tool's inputSchema and outputSchema as written (nil for
// one it has not).
type listedSchema struct{ input, output json.RawMessage }

// listedSchemas maps the tools of a tools/list result to their schemas as written;
// a name listed twice keeps its first.
func listedSchemas(result json.RawMessage) map[string]listedSchema {
	var page struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &page) != nil {
		return nil
	}
	out := make(map[string]listedSchema, len(page.Tools))
	for _, t := range page.Tools {
		if _, dup := out[t.Name]; !dup {
			out[t.Name] = listedSchema{input: t.InputSchema, output: t.OutputSchema}
		}
	}
	return out
}

// decodeProblem says what is wrong with a tool list entry in MCP's words: Go's decoder
// names its own types ("cannot unmarshal string into Go struct field Tool.inputSchema
// of type struct { Definitions …"), which tell an operator nothing.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return oneLine(err.Error())
	}
	field := te.Field
	if field == "" {
		field = "the entry"
	}
	want := "another type"
	switch te.Type.Kind() {
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		want = "a number"
	}
	return fmt.Sprintf("%s is a JSON %s where MCP wants %s", field, te.Value, want)
}

// readableTools returns a tools/list result without the entries mcp-go cannot
// decode (an inputSchema that is not an object or whose type is a list, a name that
// is not a string), which would make it refuse the whole list and with it every tool
// of the server; how many tools the page has; and a note per dropped entry.
func readableTools(result json.RawMessage) (json.RawMessage, int, []string) {
	var page map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(result, &page) != nil || json.Unmarshal(page["tools"], &tools) != nil {
		return result, 0, nil // mcp-go says what is wrong
	}
	var whole mcp.ListToolsResult
	if json.Unmarshal(result, &whole) == nil {
		return result, len(tools), nil
	}
	kept := make([]json.RawMessage, 0, len(tools))
	var notes []string
	for _, raw := range tools {
		var t mcp.Tool
		err := json.Unmarshal(raw, &t)
		if err == nil {
			kept = append(kept, raw)
			continue
		}
		var named struct {
			Name json.RawMessage `json:"name"`
		}
		_ = json.Unmarshal(raw, &named)
		name := string(named.Name)
		if len(name) > 100 {
			name = name[:100] + "…"
		}
		notes = append(notes, fmt.Sprintf("tool %s is not registered: its entry in tools/list does not decode: %s", name, decodeProblem(err)))
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return result, len(tools), nil
	}
	page["tools"] = b
	if b, err = json.Marshal(page); err != nil {
		return result, len(tools), nil
	}
	return b, len(kept), notes
}

// lenientResult decodes a tools/call result that mcp-go refused because of content
// blocks it does not know (a type of a later protocol version, a block that is not an
// object): those become text blocks holding their JSON, the others are kept. It
// reports false for a result refused for another reason.
func lenientResult(raw json.RawMessage) (*tool.Result, bool) {
	if raw == nil {
		return nil, false
	}
	var r struct {
		Content    []json.RawMessage `json:"content"`
		Structured json.RawMessage   `json:"structuredContent"`
		IsError    bool              `json:"isError"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Content == nil {
		return nil, false
	}
	res := &tool.Result{Content: make([]tool.Content, 0, len(r.Content))}
	unknown := 0
	for _, b := range r.Content {
		if c, err := mcp.UnmarshalContent(b); err == nil {
			res.Content = append(res.Content, usable(convertContent(c)))
			continue
		}
		unknown++
		text := string(b)
		if len(text) > 1000 {
			text = strings.ToValidUTF8(text[:1000], "") + "…"
		}
		res.Content = append(res.Content, tool.Content{Type: tool.ContentText, Text: "[a content block the proxy cannot read: " + text + "]"})
	}
	if unknown == 0 {
		return nil, false
	}
	if len(r.Structured) > 0 && string(r.Structured) != "null" {
		res.Structured = r.Structured
	}
	if r.IsError {
		res.IsError, res.ErrorKind = true, tool.KindFailed
	}
	return res, true
}

// readResult converts a tools/call result as convertResult(mcp.ParseCallToolResult)
// would, decoding it once; it reports false where mcp-go would fail it or ask for
// input (mcp-go then parses it and says what is wrong, or answers). The fields are
// those mcp.CallToolResult.UnmarshalJSON decodes, with their types, so that it
// fails where mcp-go fails.
func readResult(raw json.RawMessage) (*tool.Result, bool) {
	var r struct {
		Meta              *mcp.Meta         `json:"_meta,omitempty"`
		ResultType        mcp.ResultType    `json:"resultType,omitempty"`
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
		IsError           bool              `json:"isError,omitempty"`
		InputRequests     mcp.InputRequests `json:"inputRequests,omitempty"`
		RequestState      string            `json:"requestState,omitempty"`
	}
	if raw == nil || json.Unmarshal(raw, &r) != nil || r.Content == nil || r.ResultType == mcp.ResultTypeInputRequired {
		return nil, false
	}
	if len(r.StructuredContent) > 0 {
		// mcp-go also decodes it into an any, which fails on a number out of
		// float64's range.
		var v any
		if json.Unmarshal(r.StructuredContent, &v) != nil {
			return nil, false
		}
	}
	mr := mcp.CallToolResult{Content: make([]mcp.Content, len(r.Content)), RawStructuredContent: r.StructuredContent, IsError: r.IsError}
	for i, b := range r.Content {
		c, err := readContent(b)
		if err != nil {
			return nil, false
		}
		mr.Content[i] = c
	}
	return convertResult(&mr), true
}

// readContent is mcp.UnmarshalContent, with text blocks decoded once instead of
// twice: a block that decodes as mcp.TextContent with type "text" is the one
// mcp.UnmarshalContent would return.
func readContent(b json.RawMessage) (mcp.Content, error) {
	var t mcp.TextContent
	if json.Unmarshal(b, &t) == nil && t.Type == mcp.ContentTypeText {
		return t, nil
	}
	return mcp.UnmarshalContent(b)
}

// convertResult maps an MCP call result, block for block, into a tool result.
func convertResult(r *mcp.CallToolResult) *tool.Result {
	res := &tool.Result{Content: make([]tool.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		res.Content = append(res.Content, usable(convertContent(c)))
	}
	switch {
	case len(r.RawStructuredContent) > 0:
		res.Structured = append(json.RawMessage(nil), r.RawStructuredContent...)
	case r.StructuredContent != nil:
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			res.Structured = b
		}
	}
	if r.IsError {
		res.IsError = true
		res.ErrorKind = tool.KindFailed
	}
	return res
}

func convertContent(c mcp.Content) tool.Content {
	switch v := c.(type) {
	case mcp.TextContent:
		return tool.Content{Type: tool.ContentText, Text: v.Text}
	case *mcp.TextContent:
		return tool.Content{Type: tool.ContentText, Text: v.Text}
	case mcp.ImageContent:
		return tool.Content{Type: tool.ContentImage, Data: v.Data, MimeType: v.MIMEType}
	case *mcp.ImageContent:
		return tool.Content{Type: tool.ContentImage, Data: v.Data, MimeType: v.MIMEType}
	case mcp.AudioContent:
		return tool.Content{Type: tool.ContentAudio, Data: v.Data, MimeType: v.MIMEType}
	case *mcp.AudioContent:
		return tool.Content{Type: tool.ContentAudio, Data: v.Data, MimeType: v.MIMEType}
	case mcp.EmbeddedResource:
		return embedded(v.Resource)
	case *mcp.EmbeddedResource:
		return embedded(v.Resource)
	case mcp.ResourceLink:
		return resourceLink(&v)
	case *mcp.ResourceLink:
		return resourceLink(v)
	default:
		b, _ := json.Marshal(c)
		return tool.Content{Type: tool.ContentText, Text: string(b)}
	}
}

// resourceLink is a resource given by link, with the name and description its
// server gave it (its title when it gave no name).
func resourceLink(v *mcp.ResourceLink) tool.Content {
	name := v.Name
	if name == "" {
		name = v.Title
	}
	return tool.Content{Type: tool.ContentResource, URI: v.URI, MimeType: v.MIMEType, Name: name, Description: v.Description}
}

// usable replaces an image or audio block that a model provider would refuse (no
// media type, no data, data that is not base64) with a text block saying so: one such block
// makes the provider refuse the whole request that carries it, and with it every
// later turn of the conversation.
func usable(c tool.Content) tool.Content {
	if c.Type != tool.ContentImage && c.Type != tool.ContentAudio {
		return c
	}
	reason := ""
	switch {
	case c.MimeType == "":
		reason = "it has no mime type"
	case c.Data == "":
		// Said apart: a server's own failure to make the image (@playwright/mcp's
		// full-page screenshot of a very long page), not a broken encoding.
		reason = "its data is empty"
	default:
		if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil {
			reason = "its data is not valid base64"
		}
	}
	if reason == "" {
		return c
	}
	return tool.Content{Type: tool.ContentText, Text: fmt.Sprintf("[%s %s from the MCP server omitted: %s]", c.Type, c.MimeType, reason)}
}

func embedded(r mcp.ResourceContents) tool.Content {
	switch v := r.(type) {
	case mcp.TextResourceContents:
		return tool.Content{Type: tool.ContentResource, URI: v.URI, MimeType: v.MIMEType, Text: v.Text}
	case *mcp.TextResourceContents:
		return tool.Content{Type: tool.ContentResource, URI: v.URI, MimeType: v.MIMEType, Text: v.Text}
	case mcp.BlobResourceContents:
		return tool.Content{Type: tool.ContentResource, URI: v.URI, MimeType: v.MIMEType, Data: v.Blob}
	case *mcp.BlobResourceContents:
		return tool.Content{Type: tool.ContentResource, URI: v.URI, MimeType: v.MIMEType, Data: v.Blob}
	default:
		return tool.Content{Type: tool.ContentResource}
	}
}

// isSessionLost reports whether the server no longer knows the connection's
// session: an HTTP server that restarted answers 400 "No valid session ID" (or 404,
// which mcp-go turns into ErrSessionTerminated). The request was refused before it
// ran, so it is safe to send again on a new session.
func isSessionLost(err error) bool {
	if errors.Is(err, transport.ErrSessionTerminated) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "no valid session") || strings.Contains(msg, "session not found") ||
		strings.Contains(msg, "invalid session") || strings.Contains(msg, "unknown session")
}

// isTransportFailure reports whether err says the connection (not the server's
// answer) failed.
func isTransportFailure(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) || errors.Is(err, transport.ErrTransportClosed)
}

// isConnectionGone reports errors that settle, without a second opinion, that the
// connection is unusable: the stdio child is gone, nothing listens on the port, the
// session is lost.
func isConnectionGone(err error) bool {
	return errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || isSessionLost(err)
}

// isAnswerCutOff reports a request whose response stream (streamable HTTP's SSE
// answer) ended without the answer: the upstream went away mid-call. A POST whose
// connection closed before any answer (Go's HTTP client says EOF) counts too: it had
// been written, and a server that answers only once it has the result (the official
// Go SDK's) may have been running it for a while when it died.
func isAnswerCutOff(err error) bool {
	return isTransportFailure(err) && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "unexpected nil response"))
}

// isTimeout reports a deadline, which a busy server may miss once.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded)
}

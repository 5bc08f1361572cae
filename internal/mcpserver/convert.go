package mcpserver

import (
	"bytes"
	"encoding/json"
	"hash/fnv"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/tool"
)

// visibleSpecs are the tools a session's calls may use now: the allowed tools
// (whitelist, active groups) in the turn's selection, tool_expand_tools when the
// selection hides some, and reset_tools when groups exist. Hosted tools, run by a
// model provider, are not offered. Sorted by name.
func visibleSpecs(sess *session.Session) []tool.Spec {
	all := sess.Tools.Specs()
	out := make([]tool.Spec, 0, len(all)+2)
	narrowed := false
	for _, sp := range all {
		if sp.Hosted {
			continue
		}
		if !sess.Selected(sp.Name) {
			narrowed = true
			continue
		}
		out = append(out, sp)
	}
	var extra []tool.Spec
	if narrowed {
		if _, e, ok := sess.Tools.Resolve(session.ExpandToolName); ok {
			extra = append(extra, e.Spec)
		}
	}
	if sess.GroupsConfigured() {
		extra = append(extra, sess.ResetToolSpec())
	}
	for _, x := range extra {
		i := 0
		for i < len(out) && out[i].Name < x.Name {
			i++
		}
		if i < len(out) && out[i].Name == x.Name {
			continue
		}
		out = append(out[:i], append([]tool.Spec{x}, out[i:]...)...)
	}
	return out
}

// allowedSpecs returns every tool the session allows but hosted ones, whether the
// turn's narrowed list (a ranked listing, tool_expand_tools) offers it or not: read
// in one pass, so a selection changing meanwhile cannot leave one out.
func allowedSpecs(sess *session.Session) []tool.Spec {
	var out []tool.Spec
	for _, sp := range sess.Tools.Specs() {
		if !sp.Hosted {
			out = append(out, sp)
		}
	}
	return out
}

// fingerprint identifies a tool set as a client sees it.
func fingerprint(specs []tool.Spec) uint64 {
	h := fnv.New64a()
	for _, sp := range specs {
		h.Write([]byte(sp.Name))
		h.Write([]byte{0})
		h.Write([]byte(sp.Description))
		h.Write([]byte{0})
		h.Write(sp.Parameters)
		h.Write([]byte{0})
		// A client holds results to the output schema it was told: a changed one
		// must reach it.
		h.Write(sp.AdvertisedOutputSchema())
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func toMCPTool(sp tool.Spec) mcp.Tool {
	schema := sp.Parameters
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	t := mcp.NewToolWithRawSchema(sp.Name, sp.Description, schema)
	t.Title = sp.Label
	if out := sp.AdvertisedOutputSchema(); len(out) > 0 {
		t.RawOutputSchema = out
	}
	t.Annotations = mcp.ToolAnnotation{
		Title:           sp.Label,
		ReadOnlyHint:    mcp.ToBoolPtr(sp.ReadOnly),
		DestructiveHint: sp.DestructiveHint(sp.Risk),
		OpenWorldHint:   sp.OpenWorld,
	}
	if sp.Idempotent {
		t.Annotations.IdempotentHint = mcp.ToBoolPtr(true)
	}
	return t
}

// Keys of toolserverd's facts in a result's _meta.
const (
	metaCallID    = "toolserverd/call_id"
	metaErrorKind = "toolserverd/error_kind"
	metaTruncated = "toolserverd/truncated"
)

// toCallToolResult maps a call's message (already cut to the token budget) to MCP.
func toCallToolResult(callID string, res *tool.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: res.IsError, Content: make([]mcp.Content, 0, len(res.Content))}
	for _, c := range res.Content {
		switch c.Type {
		case tool.ContentImage:
			out.Content = append(out.Content, mcp.NewImageContent(c.Data, c.MimeType))
		case tool.ContentAudio:
			out.Content = append(out.Content, mcp.NewAudioContent(c.Data, c.MimeType))
		case tool.ContentResource:
			switch {
			case c.Text != "":
				out.Content = append(out.Content, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: c.URI, MIMEType: c.MimeType, Text: c.Text}))
			case c.Data != "":
				out.Content = append(out.Content, mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: c.URI, MIMEType: c.MimeType, Blob: c.Data}))
			default:
				name := c.Name
				if name == "" {
					name = c.URI
				}
				out.Content = append(out.Content, mcp.NewResourceLink(c.URI, name, c.Description, c.MimeType))
			}
		default:
			out.Content = append(out.Content, mcp.NewTextContent(c.Text))
		}
	}
	if len(out.Content) == 0 {
		out.Content = append(out.Content, mcp.NewTextContent(""))
	}
	// MCP's structuredContent is an object. Its bytes pass as they are: decoded into
	// Go values, a number beyond float64's precision (an id) would change.
	if s := bytes.TrimSpace(res.Structured); len(s) > 0 && s[0] == '{' && json.Valid(s) {
		out.RawStructuredContent = s
	}
	meta := map[string]any{metaCallID: callID}
	if res.IsError {
		meta[metaErrorKind] = string(res.ErrorKind)
	}
	if res.Truncated {
		meta[metaTruncated] = true
	}
	out.Meta = &mcp.Meta{AdditionalFields: meta}
	return out
}

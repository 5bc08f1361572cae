package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/session"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// toolCallsRequest is the body of POST /v1/sessions/{id}/tool-calls and, with Session,
// of POST /v1/tool-calls.
type toolCallsRequest struct {
	Calls     []wireCall    `json:"calls"`
	Strategy  string        `json:"strategy"`
	BatchSize int           `json:"batch_size"`
	TimeoutMS int64         `json:"timeout_ms"`
	Session   *session.Spec `json:"session,omitempty"`
	// Resume: a call whose tool_call_id the session already has on record is not run
	// again; its recorded result is sent (once it has one). See resume.go.
	Resume bool `json:"resume"`
	// OnDisconnect is "cancel" (the default) or "continue": whether the calls end or
	// go on when the client goes away.
	OnDisconnect string `json:"on_disconnect"`
}

// detached reports whether the request's calls go on when its client goes away.
func (req toolCallsRequest) detached() (bool, error) {
	switch req.OnDisconnect {
	case "", "cancel":
		return false, nil
	case "continue":
		return true, nil
	}
	return false, errorf(CodeBadRequest, fmt.Sprintf("on_disconnect must be cancel or continue, not %q", req.OnDisconnect))
}

// wireCall is a call in any of the accepted shapes: the daemon's own
// {"id","name","arguments":{…}}, an OpenAI tool_call
// {"id","type":"function","function":{"name","arguments":"<JSON string>"}} or an
// Anthropic tool_use block {"type":"tool_use","id","name","input":{…}}, or an OpenAI
// Responses function_call item {"type":"function_call","id":"fc_…","call_id",
// "name","arguments":"<JSON string>"}, or a Gemini part {"functionCall":{"id"?,
// "name","args":{…}}} (or the functionCall object alone). Fields a provider adds that
// we do not use are ignored (a Gemini part's thoughtSignature), so calls can be
// forwarded untouched.
type wireCall struct {
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Args      json.RawMessage `json:"args"`
	Function  *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	FunctionCall *geminiFunctionCall `json:"functionCall"`
	// Custom is an OpenAI Chat Completions custom tool's call
	// ({"id","type":"custom","custom":{"name","input"}}), read only to leave it out.
	Custom json.RawMessage `json:"custom"`
	// Parts of a Gemini candidate that are not calls, read only to say so.
	Text             json.RawMessage `json:"text"`
	InlineData       json.RawMessage `json:"inlineData"`
	FileData         json.RawMessage `json:"fileData"`
	ExecutableCode   json.RawMessage `json:"executableCode"`
	CodeResult       json.RawMessage `json:"codeExecutionResult"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
	// Gemini 3's calls and results of its own tools (Google Search, URL context)
	// beside function calls.
	ToolCall           json.RawMessage `json:"toolCall"`
	ToolResponse       json.RawMessage `json:"toolResponse"`
	AudioTranscription json.RawMessage `json:"audioTranscription"`
	// A whole assistant message sent as one call (OpenAI's choices[0].message, an
	// Anthropic {role, content}, a Gemini {role, parts}), read only to say so.
	Role      string          `json:"role"`
	ToolCalls json.RawMessage `json:"tool_calls"`
	Content   json.RawMessage `json:"content"`
	Parts     json.RawMessage `json:"parts"`
}

// wholeMessage names the field of a whole assistant message that holds its calls,
// when c is one rather than a call: "" otherwise. An entry with a type (a Responses
// "message" item beside its function_call items) is not one: it is left out as no
// call.
func (c wireCall) wholeMessage() string {
	if c.Role == "" || c.Type != "" || c.Name != "" || c.Function != nil || c.FunctionCall != nil {
		return ""
	}
	isList := func(v json.RawMessage) bool { v = bytes.TrimSpace(v); return len(v) > 0 && v[0] == '[' }
	switch {
	case isList(c.ToolCalls):
		return "tool_calls"
	case isList(c.Parts):
		return "parts"
	case isList(c.Content):
		return "content"
	}
	return ""
}

// nonCallTypes are the types of the entries of a model's output that are no call for
// the daemon: Anthropic content blocks and OpenAI Responses output items other than
// tool_use and function_call (server_tool_use and web_search_call are calls the
// provider ran itself; computer_call, shell_call, apply_patch_call and
// custom_tool_call call tools of the provider's own kinds, which the daemon never
// lists: the backend answers them, as it does an OpenAI Chat "custom" tool call). Other types are read as calls, as before:
// LangChain's ToolCall ({"name","args","id","type":"tool_call"}) is one. The lists
// follow the SDKs' ContentBlock and ResponseOutputItem (testdata/sdktypes).
var nonCallTypes = map[string]bool{
	// Anthropic
	"text": true, "thinking": true, "redacted_thinking": true, "server_tool_use": true,
	"web_search_tool_result": true, "web_fetch_tool_result": true, "code_execution_tool_result": true,
	"bash_code_execution_tool_result": true, "text_editor_code_execution_tool_result": true,
	"tool_search_tool_result": true, "container_upload": true,
	"mcp_tool_use": true, "mcp_tool_result": true, "tool_result": true, "image": true, "document": true,
	// OpenAI Responses
	"reasoning": true, "message": true, "web_search_call": true, "file_search_call": true,
	"computer_call": true, "computer_call_output": true, "code_interpreter_call": true, "image_generation_call": true,
	"mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true,
	"function_call_output": true, "compaction": true, "additional_tools": true,
	"tool_search_call": true, "tool_search_output": true, "program": true, "program_output": true,
	"local_shell_call": true, "local_shell_call_output": true, "shell_call": true, "shell_call_output": true,
	"apply_patch_call": true, "apply_patch_call_output": true, "custom_tool_call": true, "custom_tool_call_output": true,
}

// notACall names what c is when it is some other entry of a model's output than a
// function call (an Anthropic text, thinking or server_tool_use block, a Responses
// reasoning, message or web_search_call item, a Gemini text part), forwarded with
// the calls by a backend that passed the whole output on; "" for a call. Such an
// entry is left out: answered as a call, it would give the model a result under an
// id that names no call, which its provider refuses.
func (c wireCall) notACall() string {
	if nonCallTypes[c.Type] {
		return fmt.Sprintf("a %q item", c.Type)
	}
	// A custom tool's call among an OpenAI Chat Completions message's tool_calls
	// (the SDK's ChatCompletionMessageCustomToolCall): like the Responses API's
	// custom_tool_call, the call of a tool the daemon never lists, which the backend
	// answers.
	if c.Type == "custom" && len(c.Custom) > 0 {
		return `an OpenAI "custom" tool call`
	}
	if c.Type != "" || c.FunctionCall != nil || c.Name != "" {
		return ""
	}
	for _, p := range []struct {
		key string
		v   json.RawMessage
	}{{"text", c.Text}, {"inlineData", c.InlineData}, {"fileData", c.FileData}, {"executableCode", c.ExecutableCode},
		{"codeExecutionResult", c.CodeResult}, {"functionResponse", c.FunctionResponse},
		{"toolCall", c.ToolCall}, {"toolResponse", c.ToolResponse}, {"audioTranscription", c.AudioTranscription}} {
		if len(p.v) > 0 {
			return fmt.Sprintf("a Gemini %q part", p.key)
		}
	}
	return ""
}

// geminiFunctionCall is a Gemini FunctionCall; id is often absent.
type geminiFunctionCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// UnmarshalJSON decodes leniently: unknown fields of provider shapes are allowed.
func (c *wireCall) UnmarshalJSON(b []byte) error {
	type plain wireCall
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = wireCall(p)
	return nil
}

// toCallRequest normalizes a wire call of a request in format f. Arguments that
// cannot be read are reported in ArgError (the call is then answered invalid_args),
// never replaced by {}.
func (c wireCall) toCallRequest(f toolmgr.Format) session.CallRequest {
	req := session.CallRequest{ToolCallID: c.ID, Name: c.Name}
	var args json.RawMessage
	switch {
	case c.Function != nil || c.Type == "function":
		if c.Function != nil {
			req.Name = c.Function.Name
			args = c.Function.Arguments
		}
	case c.Type == "tool_use":
		args = c.Input
	case c.Type == "function_call":
		// A Responses item: its id names the output item; the result
		// (function_call_output) must name call_id.
		if c.CallID != "" {
			req.ToolCallID = c.CallID
		}
		args = c.Arguments
	case c.FunctionCall != nil:
		// A Gemini part. Without an id the call is answered under the daemon's own
		// (Plan), and its functionResponse names none, as the model named none.
		fc := c.FunctionCall
		req.ToolCallID, req.Name, req.NoID = fc.ID, fc.Name, fc.ID == ""
		args = fc.Args
	case len(c.Args) > 0 && len(c.Arguments) == 0 && len(c.Input) == 0,
		f == toolmgr.FormatGemini && c.Type == "" && len(c.Arguments) == 0 && len(c.Input) == 0:
		// A Gemini FunctionCall object alone (an SDK's functionCalls list). Gemini
		// leaves out args for a function without parameters, and often id: under
		// format gemini such a call is one, not the daemon's shape without its id.
		req.NoID = c.ID == ""
		args = c.Args
	default:
		args = c.Arguments
		if len(args) == 0 {
			args = c.Input
		}
	}
	req.Arguments, req.ArgError = normalizeArgs(args)
	return req
}

// normalizeArgs accepts an object, null/absent (no arguments) or a string holding JSON
// (OpenAI's form; "" and "null" mean no arguments).
func normalizeArgs(raw json.RawMessage) (json.RawMessage, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), ""
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, "the arguments string is not a valid JSON string"
		}
		inner := bytes.TrimSpace([]byte(s))
		if len(inner) == 0 || string(inner) == "null" {
			return json.RawMessage(`{}`), ""
		}
		if !json.Valid(inner) {
			var v any
			err := json.Unmarshal(inner, &v)
			return json.RawMessage(s), fmt.Sprintf("malformed JSON in the arguments string (%v)", err)
		}
		raw = inner
	}
	if !utf8.Valid(raw) {
		// Bytes that are not UTF-8 (Latin-1 text) reach the tool as U+FFFD, and are
		// recorded so: no store could keep them as they are.
		raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
	}
	raw = replaceLoneSurrogates(raw)
	if raw[0] != '{' {
		return raw, "arguments must be a JSON object"
	}
	return raw, ""
}

// replaceLoneSurrogates rewrites each \uXXXX escape of a UTF-16 surrogate that is not
// half of a pair (\ud800 alone, as a model that cut an emoji in half writes it) as
// \ufffd, which is what the tool reads (Go's decoder does the same), so the record
// keeps the arguments as they ran and stays JSON that strict parsers (jq, Rust's
// serde_json) read. raw is valid JSON; pairs and other escapes are kept.
func replaceLoneSurrogates(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(`\u`)) {
		return raw
	}
	surrogate := func(b []byte, i int) (rune, bool) { // b[i:] starts with \u
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(v), err == nil && v >= 0xd800 && v <= 0xdfff
	}
	var out []byte
	last := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		hi, ok := surrogate(raw, i)
		if !ok {
			i++ // another escape: skip the character it escapes (\\ included)
			continue
		}
		if lo, ok := surrogate(raw, i+6); ok && hi < 0xdc00 && lo >= 0xdc00 {
			i += 11 // a pair
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(raw))
		}
		out = append(append(out, raw[last:i]...), `\ufffd`...)
		last = i + 6
		i += 5
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// toBatch reads the request's calls; f is the format of the request.
func (req toolCallsRequest) toBatch(f toolmgr.Format) (session.Batch, error) {
	strategy, err := session.ParseStrategy(req.Strategy)
	if err != nil {
		return session.Batch{}, errorf(CodeBadRequest, err.Error())
	}
	if req.BatchSize < 0 {
		return session.Batch{}, errorf(CodeBadRequest, "batch_size must not be negative")
	}
	if req.TimeoutMS < 0 {
		return session.Batch{}, errorf(CodeBadRequest, "timeout_ms must not be negative")
	}
	if req.Calls == nil {
		return session.Batch{}, errorf(CodeBadRequest, "calls is required: an array of tool calls")
	}
	// Saturated, not wrapped: a huge timeout_ms means "as long as the server allows"
	// (the executor caps it at calls.max_timeout), never a timeout of a few µs.
	timeout := time.Duration(math.MaxInt64)
	if req.TimeoutMS <= int64(timeout/time.Millisecond) {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	b := session.Batch{Strategy: strategy, BatchSize: req.BatchSize, Timeout: timeout}
	// A model's whole output forwarded as it came (Anthropic content, Responses
	// output, Gemini parts) holds entries that are no call: they are left out, and
	// the calls among them run. Only when none is left is it an error.
	for i, c := range req.Calls {
		if field := c.wholeMessage(); field != "" {
			return session.Batch{}, errorf(CodeBadRequest, fmt.Sprintf("calls[%d] is a whole assistant message (role %q): send its %q as calls, "+
				"the list that holds the model's function calls, as it came", i, c.Role, field))
		}
	}
	firstSkipped, skipped := -1, ""
	for i, c := range req.Calls {
		if what := c.notACall(); what != "" {
			if firstSkipped < 0 {
				firstSkipped, skipped = i, what
			}
			if b.Positions == nil {
				b.Positions = make([]int, 0, len(req.Calls))
				for j := range i {
					b.Positions = append(b.Positions, j)
				}
			}
			continue
		}
		b.Calls = append(b.Calls, c.toCallRequest(f))
		if b.Positions != nil {
			b.Positions = append(b.Positions, i)
		}
	}
	if len(b.Calls) == 0 && firstSkipped >= 0 {
		return session.Batch{}, errorf(CodeBadRequest, fmt.Sprintf("calls holds no call for toolserverd to run (calls[%d] is %s): send the model's function calls "+
			"(OpenAI tool_calls, Anthropic tool_use blocks, Responses function_call items, Gemini functionCall parts)", firstSkipped, skipped))
	}
	return b, nil
}

// Stream events as they go on the wire.

type startEvent struct {
	Type       string  `json:"type"`
	ToolCallID string  `json:"tool_call_id"`
	CallID     string  `json:"call_id"`
	Name       string  `json:"name"`
	Resumed    bool    `json:"resumed,omitempty"`
	TS         float64 `json:"ts"`
}

type messageEvent struct {
	Type       string         `json:"type"`
	ToolCallID string         `json:"tool_call_id"`
	CallID     string         `json:"call_id"`
	Name       string         `json:"name"`
	IsError    bool           `json:"is_error"`
	ErrorKind  tool.ErrorKind `json:"error_kind,omitempty"`
	Truncated  bool           `json:"truncated,omitempty"`
	Resumed    bool           `json:"resumed,omitempty"`
	GoesOn     bool           `json:"goes_on,omitempty"`
	Message    any            `json:"message"`
	TS         float64        `json:"ts"`
}

type doneEvent struct {
	Type string  `json:"type"`
	TS   float64 `json:"ts"`
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// msgFormat is how a stream shapes its messages: the provider's format, and
// whether images may go where only the newer models of that provider take them
// (?multimodal=true: Gemini 3's functionResponse parts).
type msgFormat struct {
	format     toolmgr.Format
	multimodal bool
}

// messageFormat reads the format of a stream's messages (every schema format but mcp).
func messageFormat(r *http.Request) (msgFormat, error) {
	q := r.URL.Query()
	f, err := toolmgr.ParseFormat(q.Get("format"))
	if err != nil || f == toolmgr.FormatMCP {
		return msgFormat{}, errorf(CodeBadRequest, "format must be native, openai, openai_responses, anthropic or gemini")
	}
	mf := msgFormat{format: f}
	if v := q.Get("multimodal"); v != "" {
		if mf.multimodal, err = strconv.ParseBool(v); err != nil {
			return msgFormat{}, errorf(CodeBadRequest, fmt.Sprintf("multimodal must be true or false, not %q", v))
		}
	}
	return mf, nil
}

// message shapes a call's result as the provider's tool-result message.
func message(mf msgFormat, call *session.Call, r *tool.Result) any {
	toolCallID, name := call.ToolCallID, call.Name
	switch mf.format {
	case toolmgr.FormatOpenAI:
		return openAIMessage{Role: "tool", ToolCallID: toolCallID, Content: textOnly(r, "OpenAI Chat Completions tool messages carry only text")}
	case toolmgr.FormatOpenAIResponses:
		return openAIResponsesOutput{Type: "function_call_output", CallID: toolCallID, Output: responsesOutput(r)}
	case toolmgr.FormatGemini:
		// The model's id, or none: a call it gave no id has the daemon's id (Plan),
		// which the model never saw.
		id := toolCallID
		if id == call.ID {
			id = ""
		}
		// Gemini reads "output", or "error" for a failed call.
		text, parts := geminiOutput(r, mf.multimodal)
		resp := map[string]string{"output": text}
		if r.IsError {
			resp = map[string]string{"error": text}
		}
		return geminiPart{FunctionResponse: geminiFunctionResponse{ID: id, Name: name, Response: resp, Parts: parts}}
	case toolmgr.FormatAnthropic:
		blocks := make([]any, 0, len(r.Content))
		for _, c := range r.Content {
			if mt := strings.ToLower(c.MimeType); c.Type == tool.ContentImage && anthropicImageTypes[mt] {
				blocks = append(blocks, anthropicImage{Type: "image", Source: anthropicSource{Type: "base64", MediaType: mt, Data: c.Data}})
				continue
			}
			// Anthropic refuses text blocks that are empty or only whitespace; images
			// of other types are named in text.
			if t := blockText(c, unsupportedImage); strings.TrimSpace(t) != "" {
				blocks = append(blocks, anthropicText{Type: "text", Text: t})
			}
		}
		if len(blocks) == 0 {
			blocks = append(blocks, anthropicText{Type: "text", Text: "(no output)"})
		}
		return anthropicMessage{Role: "user", Content: []anthropicToolResult{{Type: "tool_result", ToolUseID: toolCallID, Content: blocks, IsError: r.IsError}}}
	default:
		m := nativeMessage{Role: "tool", ToolCallID: toolCallID, Name: name, Content: r.Text(), IsError: r.IsError, ErrorKind: r.ErrorKind, Structured: r.Structured}
		for _, c := range r.Content {
			if c.Type != tool.ContentText {
				m.Blocks = r.Content
				break
			}
		}
		return m
	}
}

// unsupportedImage is why an image of a type the provider refuses is not shown.
const unsupportedImage = "the model takes JPEG, PNG, GIF and WebP images only"

// textOnly is the result's text for a message that cannot carry its images and
// audio: each is replaced by a line saying it is not shown, and why, so that the
// model neither believes it saw it nor asks for it again in vain. (Result.Text's
// "[image: image/png]" reads as if the image came with it.)
func textOnly(r *tool.Result, why string) string {
	parts := make([]string, 0, len(r.Content))
	for _, c := range r.Content {
		if t := blockText(c, why); t != "" || c.Type == tool.ContentText {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// blockText is one block's text as textOnly has it.
func blockText(c tool.Content, why string) string {
	if c.Type == tool.ContentAudio && why == unsupportedImage {
		why = "tool results carry no audio"
	}
	if c.Type == tool.ContentImage || c.Type == tool.ContentAudio {
		return fmt.Sprintf("[%s %s not shown: %s]", c.MimeType, c.Type, why)
	}
	return (&tool.Result{Content: []tool.Content{c}}).Text()
}

// geminiImageTypes are the image types Gemini 3 takes in a function response's parts.
var geminiImageTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp"}

// geminiOutput is a function response's text and, with multimodal, its images as
// parts, each named in the text where it was (image_1.png, …) so that the model
// can tell them apart. Without multimodal, or for images of other types and audio,
// the text says what is not shown.
func geminiOutput(r *tool.Result, multimodal bool) (string, []geminiResponsePart) {
	if !multimodal {
		return textOnly(r, "Gemini function responses carry only text here"), nil
	}
	var parts []geminiResponsePart
	lines := make([]string, 0, len(r.Content))
	for _, c := range r.Content {
		mt := strings.ToLower(c.MimeType)
		if ext, ok := geminiImageTypes[mt]; ok && c.Type == tool.ContentImage && c.Data != "" {
			name := fmt.Sprintf("image_%d%s", len(parts)+1, ext)
			parts = append(parts, geminiResponsePart{InlineData: geminiBlob{MimeType: mt, Data: c.Data, DisplayName: name}})
			lines = append(lines, fmt.Sprintf("[%s image attached: %s]", mt, name))
			continue
		}
		if t := blockText(c, "Gemini takes PNG, JPEG and WebP images in function responses"); t != "" || c.Type == tool.ContentText {
			lines = append(lines, t)
		}
	}
	return strings.Join(lines, "\n"), parts
}

// anthropicImageTypes are the media types Anthropic accepts in an image block.
var anthropicImageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// openAIImageTypes are the media types OpenAI accepts in an input_image.
var openAIImageTypes = anthropicImageTypes

// responsesOutput is a function_call_output's output: the text, or, when the result
// holds images OpenAI reads, the content-part array (input_text, input_image as a
// data URL) the Responses API takes there. Images of other types are named in text.
func responsesOutput(r *tool.Result) any {
	images := false
	for _, c := range r.Content {
		images = images || (c.Type == tool.ContentImage && openAIImageTypes[strings.ToLower(c.MimeType)])
	}
	if !images {
		return textOnly(r, unsupportedImage)
	}
	parts := make([]any, 0, len(r.Content))
	for _, c := range r.Content {
		if mt := strings.ToLower(c.MimeType); c.Type == tool.ContentImage && openAIImageTypes[mt] {
			parts = append(parts, responsesImage{Type: "input_image", ImageURL: "data:" + mt + ";base64," + c.Data, Detail: "auto"})
			continue
		}
		if t := blockText(c, unsupportedImage); strings.TrimSpace(t) != "" {
			parts = append(parts, responsesText{Type: "input_text", Text: t})
		}
	}
	return parts
}

type nativeMessage struct {
	Role       string          `json:"role"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Content    string          `json:"content"`
	IsError    bool            `json:"is_error"`
	ErrorKind  tool.ErrorKind  `json:"error_kind,omitempty"`
	Structured json.RawMessage `json:"structured,omitempty"`
	// Blocks holds every content block when some are not text (images, resources).
	Blocks []tool.Content `json:"blocks,omitempty"`
}

type openAIMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

type openAIResponsesOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

type responsesText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type responsesImage struct {
	Type     string `json:"type"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

// geminiPart is a Content part holding a functionResponse; the backend puts the
// parts of a turn's results in one Content (role "user").
type geminiPart struct {
	FunctionResponse geminiFunctionResponse `json:"functionResponse"`
}

type geminiFunctionResponse struct {
	ID       string               `json:"id,omitempty"`
	Name     string               `json:"name"`
	Response map[string]string    `json:"response"`
	Parts    []geminiResponsePart `json:"parts,omitempty"`
}

// geminiResponsePart is a FunctionResponsePart holding an image's bytes.
type geminiResponsePart struct {
	InlineData geminiBlob `json:"inlineData"`
}

type geminiBlob struct {
	MimeType    string `json:"mimeType"`
	Data        string `json:"data"`
	DisplayName string `json:"displayName"`
}

type anthropicMessage struct {
	Role    string                `json:"role"`
	Content []anthropicToolResult `json:"content"`
}

type anthropicToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   []any  `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicImage struct {
	Type   string          `json:"type"`
	Source anthropicSource `json:"source"`
}

type anthropicSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

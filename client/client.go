// Package client is a Go client for the toolserverd HTTP API: sessions, tool schemas,
// streaming tool calls, call records, progress and approvals. toolserverctl and the
// end-to-end tests use it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one toolserverd.
type Client struct {
	base   string
	http   *http.Client
	apiKey string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (the default has no overall timeout, since tool
// call streams can be long).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithAPIKey sends the key as a bearer token.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// New returns a client for the daemon at base (e.g. http://127.0.0.1:8080).
func New(base string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(base, "/"), http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an HTTP error from the API.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is how long to wait before trying again, from the Retry-After header
	// of a 429 (a key over its limits) or a 503; 0 without one.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("toolserverd: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsNotFound reports whether err is a 404 from the API.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			e.Code, e.Message = "http", strings.TrimSpace(string(b))
		} else {
			e.Code, e.Message = eb.Error.Code, eb.Error.Message
		}
		return nil, e
	}
	return resp, nil
}

// retryAfter reads a Retry-After value: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Health asks the daemon whether it is alive (GET /healthz) or, with ready, whether
// its checks pass (GET /readyz, which fails while the store is unreachable). It
// returns nil on HTTP 200 and an *Error otherwise. Neither endpoint needs a key.
func (c *Client) Health(ctx context.Context, ready bool) error {
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	return c.do(ctx, http.MethodGet, path, nil, nil)
}

// SessionSpec is what a session is created with.
type SessionSpec struct {
	// AvailableTools whitelists tools by name or glob pattern: nil for every tool, an
	// empty slice for none. AvailableSkills does the same for skills.
	AvailableTools  []string       `json:"available_tools"`
	AvailableSkills []string       `json:"available_skills"`
	PermissionMode  string         `json:"permission_mode,omitempty"`
	Workdir         string         `json:"workdir,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	// ActiveGroups are the tool groups switched on at creation.
	ActiveGroups []string `json:"active_groups,omitempty"`
	// Rules are the session's own permission rules.
	Rules *Rules `json:"rules,omitempty"`
}

// Rules are permission rules, such as execute_command(git status:*).
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Ask   []string `json:"ask,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Session is a created session.
type Session struct {
	ID             string    `json:"id"`
	Tools          []string  `json:"tools"`
	PermissionMode string    `json:"permission_mode"`
	Workdir        string    `json:"workdir"`
	CreatedAt      time.Time `json:"created_at"`
	Warnings       []string  `json:"warnings"`
	// AvailableTools and AvailableSkills are the session's whitelists as created: nil
	// means every tool (skill), empty none.
	AvailableTools  []string       `json:"available_tools"`
	AvailableSkills []string       `json:"available_skills"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	// Rules are the session's rules now (approvals for the session add to them).
	Rules *Rules `json:"rules,omitempty"`
}

// CreateSession creates a session.
func (c *Client) CreateSession(ctx context.Context, spec SessionSpec) (*Session, error) {
	var s Session
	return &s, c.do(ctx, http.MethodPost, "/v1/sessions", spec, &s)
}

// GetSession reads a session.
func (c *Client) GetSession(ctx context.Context, id string) (*Session, error) {
	var s Session
	return &s, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, &s)
}

// DeleteSession deletes a session that has nothing running or waiting, with its
// records and the directories the daemon made for it (409 otherwise).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// Tools lists tool schemas in a format (native, openai, openai_responses, anthropic,
// gemini, mcp): of a session, or of the whole registry when sessionID is empty. The
// tools the format leaves out are not said: SessionTools and ListTools say them.
func (c *Client) Tools(ctx context.Context, sessionID, format string) ([]json.RawMessage, error) {
	path := "/v1/tools"
	if sessionID != "" {
		path = "/v1/sessions/" + url.PathEscape(sessionID) + "/tools"
	}
	var out struct {
		Tools []json.RawMessage `json:"tools"`
	}
	err := c.do(ctx, http.MethodGet, path+"?format="+url.QueryEscape(format), nil, &out)
	return out.Tools, err
}

// ListTools lists every registered tool in a format (GET /v1/tools), with the tools
// the format leaves out named in Omitted.
func (c *Client) ListTools(ctx context.Context, format string) (ToolList, error) {
	path := withFormat("/v1/tools", format)
	var out ToolList
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// ToolsQuery asks for a session's tools ranked for a turn (GET
// /v1/sessions/{id}/tools?query=…): the best Limit of them (0: the server's
// default, a dozen) plus tool_expand_tools. The turn's calls are held to that list
// until the model expands others.
type ToolsQuery struct {
	Format string // native, openai, openai_responses, anthropic, gemini or mcp; "" is native
	Query  string // the user's latest message; "" sends none: what the turn may call now
	Limit  int
	// AllTools lifts the narrowing of an earlier ranked listing (an empty query,
	// ?query=): every tool the session allows. Query is then not sent.
	AllTools bool
}

// ToolList is a listing of tool schemas.
type ToolList struct {
	Format string            `json:"format"`
	Tools  []json.RawMessage `json:"tools"`
	// NoMatch says a ranked listing's query matched no tool: Tools are the previous
	// turn's selection (at most the limit) and tool_expand_tools.
	NoMatch bool `json:"no_match,omitempty"`
	// Omitted are the tools the format cannot carry, with why.
	Omitted []OmittedTool `json:"omitted,omitempty"`
}

// OmittedTool is a tool left out of a listing's format.
type OmittedTool struct {
	Name     string   `json:"name"`
	HostedBy []string `json:"hosted_by,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}

// SessionTools lists a session's tools as q asks.
func (c *Client) SessionTools(ctx context.Context, sessionID string, q ToolsQuery) (ToolList, error) {
	v := url.Values{}
	if q.Format != "" {
		v.Set("format", q.Format)
	}
	switch {
	case q.AllTools:
		v.Set("query", "")
	case q.Query != "":
		v.Set("query", q.Query)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/v1/sessions/" + url.PathEscape(sessionID) + "/tools"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out ToolList
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Call is one tool call to run.
type Call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Batch is a request to run calls.
type Batch struct {
	Calls     []Call       `json:"calls"`
	Strategy  string       `json:"strategy,omitempty"`
	BatchSize int          `json:"batch_size,omitempty"`
	TimeoutMS int64        `json:"timeout_ms,omitempty"`
	Session   *SessionSpec `json:"session,omitempty"`
	// Resume sends the batch again without running again the calls the session has
	// on record under the same ids: their recorded results come back, Resumed.
	Resume bool `json:"resume,omitempty"`
	// OnDisconnect is "continue" to let the calls run to their end if the connection
	// drops (to be collected with Resume); "" or "cancel" ends them.
	OnDisconnect string `json:"on_disconnect,omitempty"`
	// ModelCalls, instead of Calls, are the model's calls as it gave them: OpenAI
	// tool_calls, Responses output items, Anthropic content blocks or Gemini parts,
	// the model's whole output included: entries that are not calls (text, thinking,
	// reasoning, message items) are left out by the daemon and get no event. Run's
	// format then shapes each message as that provider's tool result.
	ModelCalls []json.RawMessage `json:"-"`
}

// MarshalJSON sends ModelCalls as the calls when set.
func (b Batch) MarshalJSON() ([]byte, error) {
	type plain Batch
	if len(b.ModelCalls) == 0 {
		return json.Marshal(plain(b))
	}
	if len(b.Calls) > 0 {
		return nil, errors.New("toolserverd: a batch takes Calls or ModelCalls, not both")
	}
	return json.Marshal(struct {
		plain
		Calls []json.RawMessage `json:"calls"`
	}{plain(b), b.ModelCalls})
}

// Event is one line of a tool-calls stream. Message is the provider-shaped message
// (native unless another format was asked for).
type Event struct {
	Type       string `json:"type"`
	ToolCallID string `json:"tool_call_id"`
	CallID     string `json:"call_id"`
	Name       string `json:"name"`
	IsError    bool   `json:"is_error"`
	ErrorKind  string `json:"error_kind"`
	// Truncated says the message was cut to the token budget (the record is whole).
	Truncated bool `json:"truncated"`
	// Resumed marks the tool_start and message of a call that ran for an earlier
	// request (Batch.Resume): the message is its recorded result.
	Resumed bool `json:"resumed"`
	// GoesOn marks the message of a call that is not over although the stream ends:
	// the daemon stopped while it waited for a decision or an answer (kept in the
	// store). Send the batch again with Resume once the daemon answers, or follow the
	// call (FollowCall), for its result; this message only says it goes on.
	GoesOn  bool            `json:"goes_on"`
	Message json.RawMessage `json:"message"`
	Stream  string          `json:"stream"`
	Text    string          `json:"text"`
	// Data is the base64 of a progress chunk's exact bytes, set when they are not
	// UTF-8 (Text then has U+FFFD in their place).
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
	Closed bool   `json:"closed"`
	// OutputLost, on the closed event of a call's progress stream, says the call ran
	// on a replica that has stopped, which held its output: gone, not empty.
	OutputLost bool `json:"output_lost,omitempty"`
	// Progress is the call's numeric progress on a tool_progress event written after
	// it changed; nil on the others.
	Progress *ProgressValue  `json:"progress,omitempty"`
	Approval json.RawMessage `json:"approval"`
	// Arguments are the call's arguments on input_required (what ask_user asks).
	Arguments json.RawMessage `json:"arguments"`
	TS        float64         `json:"ts"`
}

// ProgressValue is how far a call is, as its tool reported it: Progress of Total
// units, Total 0 when unknown.
type ProgressValue struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// Content returns a native message's content text.
func (e Event) Content() string {
	var m struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(e.Message, &m)
	return m.Content
}

// Run posts a batch to a session (or, with Batch.Session and sessionID empty, as a
// one-shot call) and calls fn for every event until done. format shapes messages.
func (c *Client) Run(ctx context.Context, sessionID, format string, b Batch, fn func(Event) error) error {
	path := "/v1/tool-calls"
	if sessionID != "" {
		path = "/v1/sessions/" + url.PathEscape(sessionID) + "/tool-calls"
	}
	path = withFormat(path, format)
	resp, err := c.request(ctx, http.MethodPost, path, b)
	if err != nil {
		return err
	}
	return readEvents(resp, fn)
}

// FollowCall replays one call's events (tool_start, approval requests, output so
// far) and follows it until its message and done (GET /v1/tool-calls/{id}/events):
// for a backend that lost its stream (Batch.OnDisconnect "continue") or one watching a
// call started elsewhere. format shapes the message, as for Run. A daemon that stops
// while the call waits for a decision ends the stream with a cancelled message saying
// the call goes on: follow it again after the restart.
func (c *Client) FollowCall(ctx context.Context, callID, format string, fn func(Event) error) error {
	path := withFormat("/v1/tool-calls/"+url.PathEscape(callID)+"/events", format)
	resp, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return readEvents(resp, fn)
}

// SessionEvents follows a session's background results (GET
// /v1/sessions/{id}/events): fn sees a tool_result event when a call of a background
// tool finishes, an approval_required when one waits for a person, and keepalives. It
// returns when ctx ends (its error), when fn returns an error, or nil when the daemon
// ends the stream (it stops: connect again, to another replica or the restarted one).
func (c *Client) SessionEvents(ctx context.Context, sessionID, format string, fn func(Event) error) error {
	path := withFormat("/v1/sessions/"+url.PathEscape(sessionID)+"/events", format)
	resp, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("toolserverd: bad stream line: %w", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

// readEvents calls fn for every line of an NDJSON event stream until done.
func readEvents(resp *http.Response, fn func(Event) error) error {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("toolserverd: bad stream line: %w", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
		if ev.Type == "done" {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("toolserverd: the stream ended before done")
}

// Answer is the answer to a call of an external tool (ask_user) that waits for one:
// Text (or Content, blocks such as {"type":"text","text":"…"}), optionally Structured,
// and IsError when the person declined or could not answer.
type Answer struct {
	Text       string            `json:"-"`
	Content    []json.RawMessage `json:"-"`
	Structured json.RawMessage   `json:"structured,omitempty"`
	IsError    bool              `json:"is_error,omitempty"`
	ErrorKind  string            `json:"error_kind,omitempty"`
}

// MarshalJSON sends Content when set, else Text.
func (a Answer) MarshalJSON() ([]byte, error) {
	type plain Answer
	var content any = a.Text
	if len(a.Content) > 0 {
		content = a.Content
	}
	return json.Marshal(struct {
		Content any `json:"content"`
		plain
	}{content, plain(a)})
}

// AnswerCall answers a waiting external call (POST /v1/tool-calls/{id}/result); the
// answer becomes its result. A second answer is a 409 Error.
func (c *Client) AnswerCall(ctx context.Context, callID string, a Answer) error {
	return c.do(ctx, http.MethodPost, "/v1/tool-calls/"+url.PathEscape(callID)+"/result", a, nil)
}

// ProvideInput answers a stateful call that yielded (tool_yield) with any JSON value.
func (c *Client) ProvideInput(ctx context.Context, callID string, input any) error {
	return c.do(ctx, http.MethodPost, "/v1/tool-calls/"+url.PathEscape(callID)+"/input", map[string]any{"input": input}, nil)
}

// Interrupt steers a session's running batches: calls not started yet return skipped,
// quoting message.
func (c *Client) Interrupt(ctx context.Context, sessionID, message string) error {
	var body any
	if message != "" {
		body = map[string]string{"message": message}
	}
	return c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/interrupt", body, nil)
}

// CallRecord is the durable record of a call.
type CallRecord struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Status     string          `json:"status"`
	Result     *struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text,omitempty"`
			Data     string `json:"data,omitempty"`
			MimeType string `json:"mime_type,omitempty"`
			URI      string `json:"uri,omitempty"`
		} `json:"content"`
		Structured json.RawMessage `json:"structured,omitempty"`
		Details    json.RawMessage `json:"details,omitempty"`
		IsError    bool            `json:"is_error"`
		ErrorKind  string          `json:"error_kind,omitempty"`
		Truncated  bool            `json:"truncated,omitempty"`
	} `json:"result"`
	ErrorKind  string     `json:"error_kind,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// DurationMS is from start to finish; nil for a call that did not run.
	DurationMS *float64 `json:"duration_ms"`
	// OutputOpen: the call finished but its output goes on (a background job it
	// started streams under the call until the job ends).
	OutputOpen bool `json:"output_open"`
}

// GetCall reads a call record by the daemon's id.
func (c *Client) GetCall(ctx context.Context, id string) (*CallRecord, error) {
	var r CallRecord
	return &r, c.do(ctx, http.MethodGet, "/v1/tool-calls/"+url.PathEscape(id), nil, &r)
}

// GetSessionCall reads the newest call record of a session by the model's id of the
// call (its tool_call_id): what a backend that lost the stream reads the result from.
func (c *Client) GetSessionCall(ctx context.Context, sessionID, toolCallID string) (*CallRecord, error) {
	var r CallRecord
	return &r, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/tool-calls/"+url.PathEscape(toolCallID), nil, &r)
}

// Prompt is a session's system-prompt fragment: the tools' hints and the skills it may
// open, the skills part cut to the daemon's budget.
type Prompt struct {
	Prompt string `json:"prompt"`
	// Skills are the skills the prompt names, in its order: the first SkillsDescribed
	// with their descriptions, the rest by name only.
	Skills          []string `json:"skills"`
	SkillsCut       bool     `json:"skills_cut"`
	SkillsDescribed int      `json:"skills_described"`
	// SkillsLeftOut counts the skills the prompt does not name (the skill tool's query
	// finds them).
	SkillsLeftOut      int `json:"skills_left_out"`
	SkillsTokens       int `json:"skills_tokens"`
	SkillsBudgetTokens int `json:"skills_budget_tokens"`
}

// Prompt reads a session's system-prompt fragment (GET /v1/sessions/{id}/prompt), to
// add to the model's system prompt.
func (c *Client) Prompt(ctx context.Context, sessionID string) (*Prompt, error) {
	var p Prompt
	return &p, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/prompt", nil, &p)
}

// Page pages a listing, newest first. The zero value asks for the first page of the
// daemon's default size.
type Page struct {
	// Limit caps the page (1 to 1000); 0 is the daemon's default (50 calls, 100
	// approvals).
	Limit int
	// Before asks for the page after a previous one: its NextBefore (which goes on
	// working after the record it follows is deleted) or the id of its last item.
	// An id naming a record that is gone is a 404 Error.
	Before string
}

func (p Page) query(q url.Values) url.Values {
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Before != "" {
		q.Set("before", p.Before)
	}
	return q
}

// CallFilter selects the calls ListCalls lists.
type CallFilter struct {
	// Statuses keeps calls in any of these states (pending, running, waiting,
	// succeeded, failed); empty keeps all.
	Statuses []string
	// Live keeps only live calls: unfinished, or finished with their output still
	// open (CallRecord.OutputOpen). With Statuses, a call must match both.
	Live bool
	Page
}

// CallList is a page of call records, newest first.
type CallList struct {
	Calls []CallRecord `json:"calls"`
	// Truncated says the page stopped after 32 MiB of arguments and results.
	Truncated bool `json:"truncated,omitempty"`
	// NextBefore is Page.Before for the next page; empty when this page is the last.
	NextBefore string `json:"next_before,omitempty"`
}

// ListCalls lists the calls of the key's tenant across sessions (GET /v1/tool-calls).
func (c *Client) ListCalls(ctx context.Context, f CallFilter) (*CallList, error) {
	q := f.Page.query(url.Values{})
	if len(f.Statuses) > 0 {
		q.Set("status", strings.Join(f.Statuses, ","))
	}
	if f.Live {
		q.Set("live", "true")
	}
	var l CallList
	return &l, c.do(ctx, http.MethodGet, "/v1/tool-calls?"+q.Encode(), nil, &l)
}

// ListSessionCalls lists a session's calls (GET /v1/sessions/{id}/tool-calls).
func (c *Client) ListSessionCalls(ctx context.Context, sessionID string, p Page) (*CallList, error) {
	var l CallList
	return &l, c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/tool-calls?"+p.query(url.Values{}).Encode(), nil, &l)
}

// CancelCall cancels a running call.
func (c *Client) CancelCall(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/tool-calls/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// Approval is a request for a human decision.
type Approval struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Risk        string          `json:"risk"`
	Reason      string          `json:"reason"`
	Suggestions []string        `json:"suggestions"`
	Status      string          `json:"status"`
	// Decision is who decided what, once the request is decided.
	Decision  *ApprovalDecision `json:"decision,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	DecidedAt *time.Time        `json:"decided_at,omitempty"`
}

// ApprovalDecision is the decision of a decided approval request.
type ApprovalDecision struct {
	Kind   string `json:"kind"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	Actor  string `json:"actor"`
	// ByPolicy: a deny the daemon recorded in the policy's name when Actor approved
	// a call the policy by then denied; false for a person's own decision.
	ByPolicy bool `json:"by_policy"`
}

// Approvals lists approvals with a status (pending, approved, denied, expired or ""
// for all): the newest page of them. wait > 0 long-polls: with none matching, the
// call returns as soon as one appears or after wait.
func (c *Client) Approvals(ctx context.Context, status string, wait time.Duration) ([]Approval, error) {
	l, err := c.ListApprovals(ctx, ApprovalFilter{Status: status, Wait: wait})
	if err != nil {
		return nil, err
	}
	return l.Approvals, nil
}

// ApprovalFilter selects the approvals ListApprovals lists; zero fields do not filter.
type ApprovalFilter struct {
	Status    string // pending, approved, denied or expired
	SessionID string
	CallID    string // the requests of one call (tc_…)
	// Wait > 0 long-polls: with none matching, the answer comes as soon as one
	// appears, or empty after Wait (at most 2 minutes).
	Wait time.Duration
	Page
}

// ApprovalList is a page of approval requests, newest first.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
	// Truncated says the page stopped after 32 MiB of arguments.
	Truncated bool `json:"truncated,omitempty"`
	// NextBefore is Page.Before for the next page; empty when this page is the last.
	NextBefore string `json:"next_before,omitempty"`
}

// ListApprovals lists approval requests (GET /v1/approvals).
func (c *Client) ListApprovals(ctx context.Context, f ApprovalFilter) (*ApprovalList, error) {
	q := f.Page.query(url.Values{})
	for k, v := range map[string]string{"status": f.Status, "session_id": f.SessionID, "call_id": f.CallID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Wait > 0 {
		q.Set("wait", f.Wait.String())
	}
	var l ApprovalList
	return &l, c.do(ctx, http.MethodGet, "/v1/approvals?"+q.Encode(), nil, &l)
}

// GetApproval reads one approval.
func (c *Client) GetApproval(ctx context.Context, id string) (*Approval, error) {
	var a Approval
	return &a, c.do(ctx, http.MethodGet, "/v1/approvals/"+url.PathEscape(id), nil, &a)
}

// Decision is an approver's answer: approve, approve_for_session, approve_with_rule
// (Rule: one of the suggestions) or deny (Reason goes to the model).
type Decision struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Actor names the person deciding; the record names the API key as well.
	Actor string `json:"actor,omitempty"`
}

// Decide records a decision; a second decision on the same approval is a 409 Error.
func (c *Client) Decide(ctx context.Context, id string, d Decision) (*Approval, error) {
	var a Approval
	return &a, c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/decision", d, &a)
}

// APIKey is a key's metadata; Key is set only in the answer to CreateKey.
type APIKey struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name"`
	Roles     []string   `json:"roles"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	Key       string     `json:"key,omitempty"`
}

// APIKey returns the key the client sends.
func (c *Client) APIKey() string { return c.apiKey }

// CreateKey creates an API key (admin); the returned Key is shown only here.
func (c *Client) CreateKey(ctx context.Context, name, tenant string, roles []string) (*APIKey, error) {
	var k APIKey
	return &k, c.do(ctx, http.MethodPost, "/v1/keys", map[string]any{"name": name, "tenant": tenant, "roles": roles}, &k)
}

// Keys lists API keys (admin); tenant "" lists every tenant's.
func (c *Client) Keys(ctx context.Context, tenant string) ([]APIKey, error) {
	var out struct {
		Keys []APIKey `json:"keys"`
	}
	return out.Keys, c.do(ctx, http.MethodGet, "/v1/keys?"+url.Values{"tenant": {tenant}}.Encode(), nil, &out)
}

// RevokeKey revokes an API key (admin).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/keys/"+url.PathEscape(id)+"/revoke", nil, nil)
}

// Principal is who a key acts as.
type Principal struct {
	KeyID  string   `json:"key_id"`
	Name   string   `json:"name"`
	Tenant string   `json:"tenant"`
	Roles  []string `json:"roles"`
}

// Whoami tells the tenant and roles of the client's key.
func (c *Client) Whoami(ctx context.Context) (*Principal, error) {
	var p Principal
	return &p, c.do(ctx, http.MethodGet, "/v1/whoami", nil, &p)
}

// MCPServer is an upstream MCP server's state.
type MCPServer struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	// LastError is why the last connection attempt failed or the connection ended,
	// secrets redacted; it stays after the server recovers: compare LastErrorAt with
	// Since.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Since is when State last changed: a server that is down moves between failed
	// and connecting at every attempt, so see DownSince for how long it is down.
	Since time.Time `json:"since"`
	// DownSince, while the server is not ready (connecting or failed), is when it was
	// last ready or, if it never was, when it was added; zero while ready or disabled.
	DownSince time.Time `json:"down_since,omitzero"`
	// Restarts counts connection attempts after the first.
	Restarts         int      `json:"restarts"`
	Notes            []string `json:"notes,omitempty"`
	Persisted        bool     `json:"persisted,omitempty"`
	UpstreamSessions int      `json:"upstream_sessions,omitempty"`
	// TrustAnnotations says whether the server's readOnlyHint annotations are trusted.
	TrustAnnotations bool `json:"trust_annotations"`
	// NextAttempt is when a failed server is tried again.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// MCPServers lists upstream MCP servers (admin).
func (c *Client) MCPServers(ctx context.Context) ([]MCPServer, error) {
	var out struct {
		Servers []MCPServer `json:"servers"`
	}
	return out.Servers, c.do(ctx, http.MethodGet, "/v1/mcp/servers", nil, &out)
}

// AddMCPServer adds an upstream MCP server at run time (admin); cfg is its JSON
// configuration (name, transport, command/args/env or url/headers, …).
func (c *Client) AddMCPServer(ctx context.Context, cfg json.RawMessage) (*MCPServer, error) {
	var s MCPServer
	return &s, c.do(ctx, http.MethodPost, "/v1/mcp/servers", cfg, &s)
}

// RemoveMCPServer removes an upstream MCP server (admin).
func (c *Client) RemoveMCPServer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/mcp/servers/"+url.PathEscape(name), nil, nil)
}

// RestartMCPServer reconnects an upstream MCP server (admin).
func (c *Client) RestartMCPServer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/mcp/servers/"+url.PathEscape(name)+"/restart", nil, nil)
}

// withFormat is path with the format query when one is given.
func withFormat(path, format string) string {
	if format == "" {
		return path
	}
	return path + "?format=" + url.QueryEscape(format)
}

package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Requests of an HTTP+SSE server. Such a server sends its requests to the client
// (ping, roots/list, sampling/createMessage, elicitation/create) on its event stream,
// and the client answers each with a POST to the message endpoint. mcp-go's SSE
// transport takes every message with an id for the answer to a request of its own:
// it dropped the server's requests, so the server waited for answers that never came
// (the official Go SDK's keep-alive then ends the session: the connection was cut
// every keep-alive interval, failing the calls running then), and a request whose id
// was that of one of the proxy's own in flight would have been taken for its answer.
// sseServerRequests takes the server's requests out of the stream before mcp-go reads
// it, and cancelNotifier.answer answers them with the client's handler, as mcp-go
// does over the other transports.

// serverRequestTimeout bounds answering one request of a server (mcp-go's, over
// streamable HTTP).
const serverRequestTimeout = 30 * time.Second

// sseServerRequests hands the JSON-RPC requests on a server's event streams (GET
// answers of type text/event-stream) to take, leaving them out of the stream.
type sseServerRequests struct {
	next http.RoundTripper
	take func(msg []byte)
}

func (s sseServerRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		resp.Body = &requestFilter{body: resp.Body, r: bufio.NewReader(resp.Body), take: s.take}
	}
	return resp, err
}

// requestFilter passes an event stream on event by event, but for the events that
// carry a JSON-RPC request, which go to take. It reads lines as mcp-go does (a line
// ends at '\n', "\r\n" trimmed; a blank line ends an event). The body under it bounds
// an event's size (boundedBody).
type requestFilter struct {
	body io.ReadCloser
	r    *bufio.Reader
	take func(msg []byte)

	out   []byte // bytes ready for the reader
	event []byte // the lines of the event being read
	name  string // its event field
	data  []byte // its data, lines joined with '\n'
	err   error
}

func (f *requestFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 && f.err == nil {
		line, err := f.r.ReadBytes('\n')
		f.event = append(f.event, line...)
		if err != nil {
			// What there is goes on as it came: mcp-go decides what an event cut
			// short is.
			f.out, f.event, f.err = f.event, nil, err
			break
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0:
			if !f.isRequest() {
				f.out = f.event
			} else {
				f.take(f.data)
			}
			f.event, f.name, f.data = nil, "", nil
		case bytes.HasPrefix(trimmed, []byte("event:")):
			f.name = string(bytes.TrimSpace(trimmed[len("event:"):]))
		case bytes.HasPrefix(trimmed, []byte("data:")):
			value := bytes.TrimPrefix(trimmed[len("data:"):], []byte(" "))
			if f.data != nil {
				f.data = append(f.data, '\n')
			}
			f.data = append(f.data, value...)
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 && f.err != nil {
		return n, f.err
	}
	return n, nil
}

// isRequest reports whether the event read is a message carrying a JSON-RPC request:
// a method and an id (a notification has none).
func (f *requestFilter) isRequest() bool {
	if (f.name != "" && f.name != "message") || len(f.data) == 0 {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(f.data, &msg) == nil && msg.Method != "" && len(msg.ID) > 0 && string(msg.ID) != "null"
}

func (f *requestFilter) Close() error { return f.body.Close() }

// answer answers a request the server sent on its event stream, with a POST to its
// message endpoint, as mcp-go does over streamable HTTP.
func (t *cancelNotifier) answer(msg []byte) {
	var req transport.JSONRPCRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return
	}
	t.conn.spawn(func() {
		ctx, cancel := context.WithTimeout(t.conn.ctx, serverRequestTimeout)
		defer cancel()
		var resp *transport.JSONRPCResponse
		if h := t.handler.Load(); h == nil {
			resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "no handler configured for method: "+req.Method, nil)
		} else {
			r, err := (*h)(ctx, req)
			switch {
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
				resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.REQUEST_INTERRUPTED, "request was cancelled", nil)
			case err != nil:
				resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil)
			case r == nil:
				return // over the rate limit: not answered (see limitRequests)
			default:
				resp = r
			}
		}
		if err := t.post(ctx, resp); err != nil {
			t.conn.log.Debug("mcp: could not answer the server's request", "method", req.Method, "err", err)
		}
	})
}

// post sends an answer to the server's message endpoint, with the headers its
// requests carry.
func (t *cancelNotifier) post(ctx context.Context, resp *transport.JSONRPCResponse) error {
	ep, ok := t.HTTPConnection.(interface{ GetEndpoint() *url.URL })
	if !ok || ep.GetEndpoint() == nil {
		return errors.New("no message endpoint")
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.GetEndpoint().String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if v, _ := t.version.Load().(string); v != "" {
		req.Header.Set(transport.HeaderKeyProtocolVersion, v)
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	r, err := t.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, refusalSample))
	return r.Body.Close()
}

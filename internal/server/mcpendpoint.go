package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
)

// MCPEndpoint serves a session's tools over the MCP streamable-HTTP transport.
// sessionID is the session of a session-scoped URL, or empty on /mcp.
// run is the context a message runs under once its connection is gone, until the
// daemon stops.
type MCPEndpoint interface {
	ServeMCP(w http.ResponseWriter, r *http.Request, sessionID string, run context.Context)
}

// serveMCP hands /mcp and /v1/sessions/{id}/mcp to the MCP endpoint. No timeout
// middleware: its responses may be long-lived event streams. A POST body is read
// here, under the cap of every other route: mcp-go reads whatever it is given.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.MCPEndpoint == nil {
		s.writeError(w, r, errorf(CodeNotFound, "the MCP endpoint is disabled (config mcp_endpoint.enabled)"))
		return
	}
	if r.Method == http.MethodPost {
		body, err := readBody(w, r, s.cfg.MaxBodyBytes)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	// A message may run on after its connection, until the daemon stops: a client
	// whose stream broke (a proxy's idle timeout) resumes it with Last-Event-ID and
	// must find its call still running, or its result kept. The MCP transport has it
	// so: a disconnection is not a cancellation. The endpoint decides how long.
	run, cancel := runContext(r, true)
	defer cancel()
	ew := &mcpErrorWriter{ResponseWriter: w}
	s.MCPEndpoint.ServeMCP(ew, r, pathParam(r, "sessionID"), run)
	if ew.code == "" {
		return
	}
	msg := strings.TrimSpace(string(ew.text))
	if ew.code == CodeInternal {
		s.log.ErrorContext(r.Context(), "MCP endpoint failed", "err", msg, "request_id", requestID(r.Context()), "path", r.URL.Path)
		msg = "internal error (request id " + requestID(r.Context()) + ")"
	}
	s.writeError(w, r, errorf(ew.code, "MCP endpoint: "+msg))
}

// mcpErrorWriter holds back mcp-go's plain-text error answers (an error status with a
// text/plain body) so serveMCP can answer them with the API's error body, like every
// other route; anything else passes straight through, event streams included.
type mcpErrorWriter struct {
	http.ResponseWriter
	code string // set when an error answer is held back
	text []byte
}

// mcpErrorCodes are the error statuses mcp-go answers in plain text.
var mcpErrorCodes = map[int]string{
	http.StatusBadRequest:           CodeBadRequest,
	http.StatusNotFound:             CodeNotFound,
	http.StatusMethodNotAllowed:     CodeMethodNotAllowed,
	http.StatusUnsupportedMediaType: CodeUnsupportedMedia,
	http.StatusInternalServerError:  CodeInternal,
}

func (m *mcpErrorWriter) WriteHeader(status int) {
	if code, ok := mcpErrorCodes[status]; ok && m.code == "" && strings.HasPrefix(m.Header().Get("Content-Type"), "text/plain") {
		m.code = code
		m.Header().Del("Content-Type")
		return
	}
	m.ResponseWriter.WriteHeader(status)
}

func (m *mcpErrorWriter) Write(b []byte) (int, error) {
	if m.code != "" {
		if room := 1024 - len(m.text); room > 0 {
			m.text = append(m.text, b[:min(len(b), room)]...)
		}
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

// Flush sends what was written, unless an error answer is being held back.
func (m *mcpErrorWriter) Flush() {
	if m.code == "" {
		_ = http.NewResponseController(m.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (m *mcpErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/testnet"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func TestRedactor(t *testing.T) {
	t.Parallel()
	cfg := &ServerConfig{
		URL:     "http://bob:PWSECRET1@127.0.0.1:9/mcp?api_key=QSECRET1&v=1",
		Headers: map[string]string{"Authorization": "Bearer HSECRET1", "X-Short": "abc"},
		Env:     map[string]string{"GITHUB_TOKEN": "ESECRET1", "NODE_ENV": "production", "DB": "postgres://u:DBSECRET1@db/x"},
		Args:    []string{"serve", "--api-key=ASECRET1", "--token", "ASECRET2", "--name", "visible-name"},
	}
	r := newRedactor(cfg)
	tests := []struct{ in, want string }{
		// Go's *url.Error as net/http writes it (password masked, query not).
		{`Post "http://bob:***@127.0.0.1:9/mcp?api_key=QSECRET1&v=1": dial tcp 127.0.0.1:9: connect: connection refused`,
			`Post "http://REDACTED@127.0.0.1:9/mcp?REDACTED": dial tcp 127.0.0.1:9: connect: connection refused`},
		// Any URL, the upstream's own included, and punctuation after it.
		{`see (https://other.example/p?sig=x).`, `see (https://other.example/p?REDACTED).`},
		{`GET https://h/a#frag, then`, `GET https://h/a, then`},
		// A log handler's escaped quotes.
		{`err="Post \"http://127.0.0.1:9/mcp?api_key=QSECRET1\": EOF"`, `err="Post \"http://127.0.0.1:9/mcp?REDACTED\": EOF"`},
		// Values on their own, in any form they may be quoted in.
		{`bad token HSECRET1, header "Bearer HSECRET1"`, `bad token REDACTED, header "REDACTED"`},
		{`env ESECRET1 arg ASECRET1 ASECRET2 db DBSECRET1 q=QSECRET1`, `env REDACTED arg REDACTED REDACTED db REDACTED q=REDACTED`},
		// What does not look like a secret stays: short values, ordinary env
		// variables and flags.
		{`abc production visible-name serve`, `abc production visible-name serve`},
		// mcp-go's doubled wrapping of a failed send, said once.
		{`transport error: failed to send request: failed to send request: Post "http://127.0.0.1:9/mcp": EOF`,
			`transport error: failed to send request: Post "http://127.0.0.1:9/mcp": EOF`},
	}
	for _, tt := range tests {
		if got := r.text(tt.in); got != tt.want {
			t.Errorf("text(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
	// Clipping comes after redaction: a secret across the cut is not half shown.
	long := strings.Repeat("x", maxErrText-4) + "QSECRET1" + strings.Repeat("y", 10*maxErrText)
	if got := r.clip(long); strings.Contains(got, "QSEC") || !strings.HasSuffix(got, "("+strconv.Itoa(len(long))+" bytes)") {
		t.Errorf("clip shows part of a secret or loses the length: …%q", got[len(got)-60:])
	}
	if err := (&ServerConfig{Name: "x", Transport: TransportSSE, URL: "ftp://h/p?api_key=QSECRET1"}).Validate(); err == nil ||
		strings.Contains(err.Error(), "QSECRET1") {
		t.Errorf("Validate of a bad URL = %v, want an error without the secret", err)
	}
}

// newCapturedHarness is newHarness with the log also written to a capture.
func newCapturedHarness(t *testing.T, cfg Config) (*harness, *lockedBuffer) {
	t.Helper()
	capture := &lockedBuffer{}
	tw := &testWriter{t: t}
	t.Cleanup(tw.close)
	log := slog.New(slog.NewTextHandler(io.MultiWriter(capture, tw), &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := &harness{tools: toolmgr.New(), reg: prometheus.NewRegistry()}
	m, err := New(cfg, h.tools, nil, log, h.reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.m = m
	t.Cleanup(m.Stop)
	return h, capture
}

// TestSecretsStayOutOfErrors: a server whose URL carries a token in its query and
// userinfo, with an Authorization header, goes down (or never was up). Go's HTTP
// client quotes the whole URL in its errors; none of the secrets may reach the tool
// result the model reads, the server listing (last_error) or the log. A stdio
// server that prints its token argument and environment to stderr as it dies is
// redacted the same way.
func TestSecretsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	secrets := []string{"QUERYSECRET42", "USERSECRET42", "PASSSECRET42", "HEADERSECRET42", "ARGSECRET42", "ENVSECRET42"}
	secretURL := func(base string) string {
		return strings.Replace(base, "http://", "http://USERSECRET42:PASSSECRET42@", 1) + "?api_key=QUERYSECRET42"
	}
	headers := map[string]string{"Authorization": "Bearer HEADERSECRET42"}
	check := func(t *testing.T, what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows %s: %s", what, s, text)
			}
		}
	}
	for _, mode := range []struct{ name, transport, serverMode string }{
		{"streamable_http", TransportStreamableHTTP, "streamableHttp"},
		{"sse", TransportSSE, "sse"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			srv := startHTTPServer(t, mode.serverMode, 0)
			closed := "http://" + testnet.RefusedAddr(t) + "/mcp"
			h, logs := newCapturedHarness(t, Config{HealthInterval: time.Hour, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
				Servers: []ServerConfig{
					{Name: "tok", Transport: mode.transport, URL: secretURL(srv.url()), Headers: headers, Enabled: true},
					{Name: "never", Transport: mode.transport, URL: secretURL(closed), Headers: headers, Enabled: true},
				}})
			h.start(t)
			h.waitState(t, "tok", StateReady, 30*time.Second)
			wantText(t, h.call(t.Context(), t, "mcp__tok__echo", `{"message":"up"}`, nil), "Echo: up")

			srv.kill()
			// The first call finds the server gone (the transport's error), the
			// next one finds it known down (its last_error).
			for i := range 2 {
				res := h.call(t.Context(), t, "mcp__tok__echo", `{"message":"x"}`, nil)
				wantKind(t, res, tool.KindUnavailable)
				check(t, "call "+strconv.Itoa(i), res.Text())
				t.Logf("call %d: %s", i, res.Text())
			}
			st := h.waitState(t, "tok", StateFailed, 10*time.Second)
			// Wait for a failed reconnection attempt too: its error is the dial's.
			if !eventually(10*time.Second, func() bool { st = h.status(t, "tok"); return st.Restarts >= 2 && st.State == StateFailed }) {
				t.Fatalf("no failed reconnection: %+v", st)
			}
			res := h.call(t.Context(), t, "mcp__tok__echo", `{"message":"x"}`, nil)
			check(t, "call after a failed reconnection", res.Text())
			if !strings.Contains(res.Text(), "127.0.0.1:"+strconv.Itoa(srv.port)) {
				t.Errorf("call result %q does not say which address failed", res.Text())
			}

			nv := h.waitState(t, "never", StateFailed, 10*time.Second)
			if nv.LastError == "" {
				t.Fatal("never-connected server has no last_error")
			}
			all, _ := json.Marshal(h.m.Status())
			check(t, "status", string(all))
			t.Logf("status: %s", all)
			if !strings.Contains(nv.LastError, "REDACTED") && !strings.Contains(st.LastError, "REDACTED") {
				t.Errorf("last_error %q / %q: want the URL shown with its secrets REDACTED", st.LastError, nv.LastError)
			}
			h.m.Stop()
			check(t, "log", logs.String())
			if !strings.Contains(logs.String(), "REDACTED") {
				t.Errorf("the log never mentions a redacted URL; did the connection errors get logged at all?")
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		h, logs := newCapturedHarness(t, Config{MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Servers: []ServerConfig{{Name: "talks", Transport: TransportStdio, Command: "sh",
				Args: []string{"-c", `echo "started with $0 and $API_TOKEN" >&2; exit 3`, "--token=ARGSECRET42"},
				Env:  map[string]string{"API_TOKEN": "ENVSECRET42"}, Enabled: true}}})
		h.start(t)
		var st ServerStatus
		if !eventually(10*time.Second, func() bool {
			st = h.status(t, "talks")
			return st.State == StateFailed && strings.Contains(st.LastError, "started with")
		}) {
			t.Fatalf("status %+v: want failed with the child's stderr", st)
		}
		check(t, "last_error", st.LastError)
		if !strings.Contains(st.LastError, "started with --token=REDACTED and REDACTED") {
			t.Errorf("last_error = %q, want the stderr with both secrets redacted", st.LastError)
		}
		h.m.Stop()
		check(t, "log", logs.String())
	})
}

// TestUnavailableNamesALostConnection: a call that finds the connection dead before
// the supervisor has noticed gets the reason (redacted), not "ready since …" alone.
func TestUnavailableNamesALostConnection(t *testing.T) {
	t.Parallel()
	cfg := ServerConfig{Name: "tok", Transport: TransportStreamableHTTP, URL: "http://127.0.0.1:1/mcp?api_key=MODELSEESTHIS"}
	_, cancel := context.WithCancel(context.Background())
	s := &server{cfg: cfg, redact: newRedactor(&cfg), state: StateReady, since: time.Now(), conn: &conn{dead: make(chan struct{}), cancel: cancel}}
	s.conn.markDead(errors.New(`transport error: Post "http://127.0.0.1:1/mcp?api_key=MODELSEESTHIS": EOF`))
	msg := s.unavailable().Error()
	if !strings.Contains(msg, "its connection was lost") || !strings.Contains(msg, "EOF") || strings.Contains(msg, "ready since") || strings.Contains(msg, "MODELSEESTHIS") {
		t.Fatalf("unavailable() = %q", msg)
	}
}

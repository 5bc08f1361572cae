package mcpproxy

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// redactedText stands where a credential was.
const redactedText = "REDACTED"

// minSecretLen is the shortest configured value looked for on its own: shorter ones
// would blot out ordinary words of every message, and are no credentials anyway. A
// URL's query and userinfo are redacted whatever their length (see redactURL).
const minSecretLen = 6

// urlInText finds the URLs in a text. A URL ends at white space, at a quote (Go's
// *url.Error quotes it with %q) and at a backslash (a quote escaped by a log
// handler).
var urlInText = regexp.MustCompile(`(?i)\bhttps?://[^\s"'<>` + "`" + `\\]+`)

// secretName says a configuration key (an env variable, a command flag) names a
// credential.
var secretName = regexp.MustCompile(`(?i)token|secret|key|passw|pwd|auth|credential|cookie|session|private|signature|bearer`)

// redactor hides from every text the proxy shows about a server (tool results,
// last_error, logs) what its configuration may hold of credentials: the query
// string and userinfo of every URL, the values of its headers, the values taken
// from the environment (ExpandEnv), env values and command arguments that look like
// secrets. Go's *url.Error prints the whole URL a
// request went to (only a password is masked) and mcp-go wraps it into the error a
// call gets, so an upstream that is down would otherwise hand its api_key to the
// model, the call records and the logs.
type redactor struct {
	secrets []string // longest first: one that contains another is replaced whole
}

// newRedactor collects the values of cfg not to be shown.
func newRedactor(cfg *ServerConfig) *redactor {
	r := &redactor{}
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) < minSecretLen {
			return
		}
		// The forms a value takes in a URL, in a %q-quoted string and as given.
		quoted := strconv.Quote(v)
		for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v), quoted[1 : len(quoted)-1]} {
			if !seen[f] {
				seen[f] = true
				r.secrets = append(r.secrets, f)
			}
		}
	}
	addURL := func(raw string) {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return
		}
		if u.User != nil {
			add(u.User.Username())
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		add(u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	addURL(cfg.URL)
	for _, v := range cfg.Headers {
		add(v)
		// "Bearer abc…": the token may be quoted alone.
		if _, tok, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
			add(strings.TrimSpace(tok))
		}
	}
	for _, v := range cfg.fromEnv {
		add(v)
	}
	for k, v := range cfg.Env {
		if secretName.MatchString(k) {
			add(v)
		}
		addURL(v) // DATABASE_URL=postgres://user:pass@…
	}
	for i, a := range cfg.Args {
		flag, val, hasVal := strings.Cut(a, "=")
		switch {
		case strings.HasPrefix(a, "-") && secretName.MatchString(flag) && hasVal:
			add(val) // --token=abc
		case strings.HasPrefix(a, "-") && secretName.MatchString(flag) && i+1 < len(cfg.Args):
			add(cfg.Args[i+1]) // --token abc
		}
		addURL(a)
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// text returns s with every URL's query and userinfo, and every configured
// secret, replaced by REDACTED.
func (r *redactor) text(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, redactURL)
	// mcp-go wraps a failed HTTP send twice in the same words; once says it.
	s = strings.ReplaceAll(s, sendFailed+sendFailed, sendFailed)
	if r == nil {
		return s
	}
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, redactedText)
	}
	return s
}

// sendFailed is how mcp-go's HTTP transports begin the error of a request that
// could not be sent.
const sendFailed = "failed to send request: "

// clip is text cut to maxErrText (clipText), redacted before it is cut so that
// the cut cannot leave part of a secret behind.
func (r *redactor) clip(s string) string {
	n := len(s)
	head := s
	if n > 4*maxErrText {
		// Only the head is redacted: going through megabytes a server sent would
		// cost more than the message is worth, and a secret across this cut is
		// past the clip anyway.
		head = strings.ToValidUTF8(s[:4*maxErrText], "")
	}
	head = r.text(head)
	if n > 4*maxErrText || len(head) > maxErrText {
		return strings.ToValidUTF8(head[:min(len(head), maxErrText)], "") + "… (" + strconv.Itoa(n) + " bytes)"
	}
	return head
}

// redactURL replaces a URL's userinfo and query with REDACTED and drops its
// fragment: http://u:p@h/mcp?api_key=x becomes http://REDACTED@h/mcp?REDACTED. It
// works on the text, so that a URL Go would not parse is redacted all the same.
// Punctuation that ends a sentence or a parenthesis is kept out of the URL.
func redactURL(raw string) string {
	body := strings.TrimRight(raw, ".,;:)]}")
	trail := raw[len(body):]
	rest := body
	scheme := ""
	if i := strings.Index(rest, "://"); i >= 0 {
		scheme, rest = rest[:i+3], rest[i+3:]
	}
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = redactedText + authority[i:]
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		if path[i] == '?' {
			path = path[:i] + "?" + redactedText
		} else {
			path = path[:i]
		}
	}
	return scheme + authority + path + trail
}

// redactHandler passes log records on with their message and values redacted.
type redactHandler struct {
	slog.Handler
	r *redactor
}

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindGroup:
		g := a.Value.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = h.attr(ga)
		}
		a.Value = slog.GroupValue(out...)
	case slog.KindString, slog.KindAny:
		// An error or a Stringer is logged as its text, redacted; a value whose
		// text holds nothing to redact is left as it was.
		s := a.Value.String()
		if red := h.r.text(s); red != s {
			a.Value = slog.StringValue(red)
		}
	}
	return a
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return redactHandler{h.Handler.WithAttrs(out), h.r}
}

func (h redactHandler) WithGroup(g string) slog.Handler {
	return redactHandler{h.Handler.WithGroup(g), h.r}
}

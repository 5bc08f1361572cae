package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type received struct {
	header http.Header
	body   []byte
}

// endpoint records what it receives and answers with the codes given, in turn (the
// last one from then on).
func endpoint(t *testing.T, codes ...int) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Header.Clone(), b})
		code := codes[min(len(got), len(codes))-1]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

func payload(v any) func(context.Context) (any, error) {
	return func(context.Context) (any, error) { return v, nil }
}

func newSender(t *testing.T, cfg Config) (*Sender, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s, reg
}

func count(s *Sender, outcome string) float64 {
	return testutil.ToFloat64(s.out.WithLabelValues(outcome))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestSignedDelivery: a delivery carries its type and id, and a signature over the
// timestamp and the body that the receiver can check with the secret.
func TestSignedDelivery(t *testing.T) {
	t.Parallel()
	srv, got := endpoint(t, 204)
	s, _ := newSender(t, Config{URL: srv.URL, Secret: "shh"})
	s.Send(Event{Type: "approval.requested", Payload: payload(map[string]string{"id": "apr_1"})})
	waitFor(t, "a delivery", func() bool { return count(s, "delivered") == 1 })
	r := got()[0]
	var body struct {
		ID, Type, Time string
		Data           map[string]string
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != "approval.requested" || body.Data["id"] != "apr_1" || !strings.HasPrefix(body.ID, "whd_") ||
		r.header.Get("X-Toolserver-Event") != "approval.requested" || r.header.Get("X-Toolserver-Delivery") != body.ID {
		t.Errorf("delivery: %s %v", r.body, r.header)
	}
	if _, err := time.Parse(time.RFC3339Nano, body.Time); err != nil {
		t.Errorf("time %q: %v", body.Time, err)
	}
	ts := r.header.Get("X-Toolserver-Timestamp")
	if sig := r.header.Get("X-Toolserver-Signature"); sig == "" || sig != Sign("shh", ts, r.body) || sig == Sign("other", ts, r.body) {
		t.Errorf("signature %q does not check with the secret", sig)
	}
}

// TestRetriedThenGivenUp: 5xx and 429 are tried again, with the same delivery id, up
// to the attempts; a 4xx other than 408/429 ends the delivery at once.
func TestRetriedThenGivenUp(t *testing.T) {
	t.Parallel()
	srv, got := endpoint(t, 503, 429, 200)
	s, _ := newSender(t, Config{URL: srv.URL, Backoff: time.Millisecond})
	s.Send(Event{Type: "e", Payload: payload(1)})
	waitFor(t, "delivered on the third attempt", func() bool { return count(s, "delivered") == 1 })
	r := got()
	if len(r) != 3 || r[0].header.Get("X-Toolserver-Delivery") != r[2].header.Get("X-Toolserver-Delivery") {
		t.Errorf("%d attempts, ids %q %q", len(r), r[0].header.Get("X-Toolserver-Delivery"), r[len(r)-1].header.Get("X-Toolserver-Delivery"))
	}
	if r[0].header.Get("X-Toolserver-Signature") != "" {
		t.Error("signed without a secret")
	}

	down, gotDown := endpoint(t, 500)
	s2, _ := newSender(t, Config{URL: down.URL, Backoff: time.Millisecond, Attempts: 3})
	s2.Send(Event{Type: "e", Payload: payload(1)})
	waitFor(t, "given up", func() bool { return count(s2, "failed") == 1 })
	if n := len(gotDown()); n != 3 {
		t.Errorf("%d attempts on a failing endpoint, want 3", n)
	}

	refusing, gotRefused := endpoint(t, 400)
	s3, _ := newSender(t, Config{URL: refusing.URL, Backoff: time.Millisecond})
	s3.Send(Event{Type: "e", Payload: payload(1)})
	waitFor(t, "refused", func() bool { return count(s3, "failed") == 1 })
	if n := len(gotRefused()); n != 1 {
		t.Errorf("%d attempts after a 400, want 1", n)
	}
}

// TestSlowEndpointNeverBlocksSend: Send returns at once whatever the endpoint does;
// past the queue, events are dropped and counted. Stop ends with what is left
// dropped once its context ends, and Send after Stop drops.
func TestSlowEndpointNeverBlocksSend(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	s, _ := newSender(t, Config{URL: srv.URL, Queue: 2, Timeout: time.Minute})
	start := time.Now()
	for range 10 {
		s.Send(Event{Type: "e", Payload: payload(1)})
	}
	// Not blocked: the drops below show the events past the queue were dropped
	// rather than waited for. The bound is a hang guard, below the endpoint's 1m
	// timeout that a Send waiting on delivery would sit through.
	t.Logf("10 Sends with a hung endpoint took %s", time.Since(start))
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Send took %s with a hung endpoint", d)
	}
	waitFor(t, "drops counted", func() bool { return count(s, "dropped") >= 7 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s.Stop(ctx)
	s.Send(Event{Type: "e", Payload: payload(1)})
	// 7 past the queue, the one in flight and the 2 queued when Stop gave up, the one
	// sent after Stop.
	if d, dl := count(s, "dropped"), count(s, "delivered"); d != 11 || dl != 0 {
		t.Errorf("after Stop: %v dropped, %v delivered; want all 11 dropped", d, dl)
	}
}

func TestPayloadErrorAndConfig(t *testing.T) {
	t.Parallel()
	srv, got := endpoint(t, 200)
	s, _ := newSender(t, Config{URL: srv.URL})
	s.Send(Event{Type: "e", Payload: func(context.Context) (any, error) { return nil, errors.New("gone") }})
	waitFor(t, "failed", func() bool { return count(s, "failed") == 1 })
	if len(got()) != 0 {
		t.Error("an event whose payload failed was sent")
	}
	for _, c := range []Config{{URL: "ftp://x"}, {URL: "not a url"}, {URL: "http://x", Attempts: -1}} {
		if _, err := New(c, nil, nil); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// syncBuffer is a log destination the sender's goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFailureLogHidesURLCredentials: the endpoint's URL often carries its credential
// (a token in the query, a secret path, user:password), and a network error names the
// URL it was posting to: the log says what failed without the URL's path, query or
// userinfo.
func TestFailureLogHidesURLCredentials(t *testing.T) {
	t.Parallel()
	// Drops every connection without an answer: a network error, not a status.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	var logs syncBuffer
	u := strings.Replace(srv.URL, "http://", "http://hookuser:PASSWORD-1@", 1) + "/services/SECRET-PATH-2?token=SECRET-TOKEN-3"
	s, err := New(Config{URL: u, Backoff: time.Millisecond, Attempts: 2}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	s.Send(Event{Type: "e", Payload: payload(1)})
	waitFor(t, "given up", func() bool { return count(s, "failed") == 1 })
	out := logs.String()
	if !strings.Contains(out, "webhook delivery failed") {
		t.Fatalf("no failure logged: %s", out)
	}
	for _, secret := range []string{"PASSWORD-1", "SECRET-PATH-2", "SECRET-TOKEN-3", "hookuser"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %s of the endpoint's URL: %s", secret, out)
		}
	}
}

// TestRedirectNotFollowed: an endpoint that redirects (to itself, in a loop, or
// elsewhere) gets one attempt; the body and its signature never go to the address a
// redirect names.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	elsewhere, gotElsewhere := endpoint(t, 200)
	var mu sync.Mutex
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		if n%2 == 1 {
			http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
			return
		}
		http.Redirect(w, r, r.URL.String(), http.StatusPermanentRedirect) // a loop
	}))
	t.Cleanup(srv.Close)
	s, _ := newSender(t, Config{URL: srv.URL, Secret: "shh", Backoff: time.Millisecond})
	s.Send(Event{Type: "e", Payload: payload(1)})
	s.Send(Event{Type: "e", Payload: payload(2)})
	waitFor(t, "both failed", func() bool { return count(s, "failed") == 2 })
	mu.Lock()
	n := attempts
	mu.Unlock()
	if n != 2 {
		t.Errorf("%d attempts for two redirected deliveries, want 2", n)
	}
	if r := gotElsewhere(); len(r) != 0 {
		t.Errorf("the redirect target received %d deliveries", len(r))
	}
}

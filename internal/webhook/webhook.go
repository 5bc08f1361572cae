// Package webhook delivers events to an HTTP endpoint an operator configured: a JSON
// POST per event, signed with HMAC-SHA256 when a secret is set, retried with backoff
// while the endpoint fails, from a bounded queue so that a slow or dead endpoint
// never holds up the caller. Delivery is at most a few attempts and lives in memory:
// an event queued when the process stops unexpectedly is lost (the state it reports
// stays readable through the API).
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config of a sender.
type Config struct {
	// URL receives the events (http or https).
	URL string
	// Secret, when set, signs each delivery (see Sender).
	Secret string
	// Timeout bounds one attempt. Default 10s.
	Timeout time.Duration
	// Backoff is the delay before the second attempt; it doubles for each next one.
	// Default 1s.
	Backoff time.Duration
	// Attempts is how many times a delivery is tried. Default 5.
	Attempts int
	// Queue is how many events may wait; past it new ones are dropped (counted and
	// logged). Default 1000.
	Queue int
}

// Validate checks the URL and that nothing is negative.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook: url %q: want an http or https URL", c.URL)
	}
	if c.Timeout < 0 || c.Backoff < 0 || c.Attempts < 0 || c.Queue < 0 {
		return errors.New("webhook: timeout, backoff, attempts and queue must not be negative")
	}
	return nil
}

// Event is one delivery: its type (the X-Toolserver-Event header) and a payload
// function, called when the delivery is first attempted, whose value is sent as the
// body's "data" (it may read what the event is about; an error drops the event).
type Event struct {
	Type    string
	Payload func(ctx context.Context) (any, error)
}

// Sender delivers events in the background, one at a time, in the order queued.
//
// Each delivery is a POST with a JSON body {"id","type","time","data"} and the
// headers X-Toolserver-Event (the type), X-Toolserver-Delivery (the id, the same on
// every attempt: a receiver drops repeats by it) and, with a secret,
// X-Toolserver-Timestamp (Unix seconds) and X-Toolserver-Signature:
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)). A 2xx answer ends
// it; a network error, a 408, 429 or 5xx is tried again after the backoff (doubling);
// any other status ends it as failed, since sending it again would not change it.
type Sender struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	out    *prometheus.CounterVec

	mu      sync.Mutex // Send and Stop: no send on the closed queue
	stopped bool
	queue   chan Event
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

// New starts a sender; its counter toolserverd_webhook_deliveries_total{outcome} is
// registered on reg when reg is not nil. Stop it with Stop.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 5
	}
	if cfg.Queue == 0 {
		cfg.Queue = 1000
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sender{cfg: cfg, log: log, queue: make(chan Event, cfg.Queue), done: make(chan struct{}),
		// Redirects are not followed: the signature and the body are for this URL.
		client: &http.Client{Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		out: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolserverd_webhook_deliveries_total",
			Help: "Webhook deliveries by outcome: delivered, failed (every attempt failed, or the endpoint refused it), dropped (the queue was full, or the daemon stopped first).",
		}, []string{"outcome"})}
	for _, o := range []string{"delivered", "failed", "dropped"} {
		s.out.WithLabelValues(o)
	}
	if reg != nil {
		if err := reg.Register(s.out); err != nil {
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run()
	return s, nil
}

// Send queues ev without waiting; when the queue is full ev is dropped.
func (s *Sender) Send(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		s.out.WithLabelValues("dropped").Inc()
		return
	}
	select {
	case s.queue <- ev:
	default:
		s.out.WithLabelValues("dropped").Inc()
		s.log.Warn("webhook queue full: event dropped", "type", ev.Type, "queue", s.cfg.Queue)
	}
}

// Stop lets the queued events be delivered until ctx ends, then stops; the ones left
// are dropped.
func (s *Sender) Stop(ctx context.Context) {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.queue)
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, s.cancel)
	<-s.done
	stop()
	s.cancel()
}

func (s *Sender) run() {
	defer close(s.done)
	for ev := range s.queue {
		if s.ctx.Err() != nil {
			s.out.WithLabelValues("dropped").Inc()
			continue
		}
		s.deliver(ev)
	}
}

func (s *Sender) deliver(ev Event) {
	data, err := ev.Payload(s.ctx)
	if err != nil {
		s.out.WithLabelValues("failed").Inc()
		s.log.Warn("webhook event not sent: its payload could not be read", "type", ev.Type, "err", err)
		return
	}
	id := newID()
	body, err := json.Marshal(map[string]any{"id": id, "type": ev.Type, "time": time.Now().UTC().Format(time.RFC3339Nano), "data": data})
	if err != nil {
		s.out.WithLabelValues("failed").Inc()
		s.log.Error("webhook event not sent: its payload is not JSON", "type", ev.Type, "err", err)
		return
	}
	delay := s.cfg.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := s.post(ev.Type, id, body)
		if err == nil {
			s.out.WithLabelValues("delivered").Inc()
			return
		}
		if !retry || attempt >= s.cfg.Attempts {
			s.out.WithLabelValues("failed").Inc()
			s.log.Warn("webhook delivery failed", "type", ev.Type, "delivery", id, "attempts", attempt, "err", err)
			return
		}
		select {
		case <-time.After(delay):
		case <-s.ctx.Done():
			s.out.WithLabelValues("dropped").Inc()
			return
		}
		delay *= 2
	}
}

// post makes one attempt; retry says whether another may succeed.
func (s *Sender) post(typ, id string, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolserverd-webhook")
	req.Header.Set("X-Toolserver-Event", typ)
	req.Header.Set("X-Toolserver-Delivery", id)
	if s.cfg.Secret != "" {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("X-Toolserver-Timestamp", ts)
		req.Header.Set("X-Toolserver-Signature", Sign(s.cfg.Secret, ts, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return true, s.hideURL(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return true, fmt.Errorf("the endpoint answered %s", resp.Status)
	default:
		return false, fmt.Errorf("the endpoint answered %s", resp.Status)
	}
}

// hideURL replaces the URL a network error names (http.Client's *url.Error) with
// the endpoint's origin: the path, query or userinfo of a webhook URL is often its
// credential (a token, a secret path), and failures are logged.
func (s *Sender) hideURL(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	origin := "the endpoint"
	if u, perr := url.Parse(s.cfg.URL); perr == nil {
		origin = u.Scheme + "://" + u.Host
	}
	return fmt.Errorf("%s %s: %w", ue.Op, origin, ue.Err)
}

// Sign is the X-Toolserver-Signature of body sent at timestamp (Unix seconds).
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "whd_" + hex.EncodeToString(b)
}

package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Notifier wakes waiters when durable state changed: a decision was taken, a call
// finished. A notification is a hint, never the state itself, and it can be lost (a
// slow subscriber, a dropped database connection, a notification sent while nobody
// listened). So a waiter always re-reads the store when woken AND re-checks it on a
// timer of its own; the timer is the safety net, the notification only makes the
// common case fast. Notify is called after the state change is committed.
//
// Two implementations: InProcessNotifier (one process, the SQLite default) and
// PGNotifier (PostgreSQL LISTEN/NOTIFY, every replica sharing the database).
type Notifier interface {
	// Notify sends payload to the subscribers of topic. The topic must be non-empty and
	// free of '|'; topic and payload together must stay under 8000 bytes (PostgreSQL's
	// limit, applied to both implementations so that code moves between them).
	Notify(ctx context.Context, topic, payload string) error
	// Subscribe returns a channel of topic's payloads and a function that ends the
	// subscription and closes the channel (safe to call more than once). The channel is
	// bounded: when it is full, further payloads for it are dropped, never waited for,
	// and an empty payload follows what it holds. An empty payload means "something
	// may have been missed: re-check everything" (sent after drops, and to every
	// subscriber after a PGNotifier reconnects).
	Subscribe(topic string) (<-chan string, func())
}

// Topics the daemon uses.
const (
	TopicApproval = "approval" // payload: approval id, after a decision is committed
	TopicCall     = "call"     // payload: call id, after a call's finish is committed
	// TopicMCPServers: an MCP server added at run time was added or removed (payload:
	// its name), or is to be restarted (payload: "restart {replica_id} {name}").
	TopicMCPServers = "mcp_servers"
)

// DefaultNotifyBuffer is the capacity of a subscriber's channel when none is given.
const DefaultNotifyBuffer = 64

// notifyMaxPayload is PostgreSQL's NOTIFY payload limit ("shorter than 8000 bytes").
const notifyMaxPayload = 8000 - 1

var (
	_ Notifier = (*InProcessNotifier)(nil)
	_ Notifier = (*PGNotifier)(nil)
)

// checkNotification validates a topic and payload for either implementation.
func checkNotification(topic, payload string) error {
	if topic == "" || strings.Contains(topic, "|") {
		return fmt.Errorf("notify: topic %q must be non-empty and contain no '|': %w", topic, ErrInvalid)
	}
	if n := len(topic) + 1 + len(payload); n > notifyMaxPayload {
		return fmt.Errorf("notify: topic and payload are %d bytes, more than %d: %w", n, notifyMaxPayload, ErrInvalid)
	}
	return nil
}

// notifyHub fans payloads out to subscribers without ever blocking the sender.
type notifyHub struct {
	buffer  int
	mu      sync.Mutex
	subs    map[string]map[*notifySub]struct{}
	dropped atomic.Uint64
}

type notifySub struct {
	ch   chan string
	once sync.Once
}

func newNotifyHub(buffer int) *notifyHub {
	if buffer <= 0 {
		buffer = DefaultNotifyBuffer
	}
	return &notifyHub{buffer: buffer, subs: map[string]map[*notifySub]struct{}{}}
}

func (h *notifyHub) subscribe(topic string) (<-chan string, func()) {
	// One slot more than the buffer, for the empty payload that follows drops.
	s := &notifySub{ch: make(chan string, h.buffer+1)}
	h.mu.Lock()
	if h.subs[topic] == nil {
		h.subs[topic] = map[*notifySub]struct{}{}
	}
	h.subs[topic][s] = struct{}{}
	h.mu.Unlock()
	return s.ch, func() {
		s.once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(h.subs[topic], s)
			if len(h.subs[topic]) == 0 {
				delete(h.subs, topic)
			}
			// Under h.mu: no publish is sending to it now, none will after.
			close(s.ch)
		})
	}
}

// publish delivers payload to topic's subscribers, dropping it for those whose channel
// is full.
func (h *notifyHub) publish(topic, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[topic] {
		h.send(s, payload)
	}
}

// broadcast delivers payload to every subscriber of every topic.
func (h *notifyHub) broadcast(payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for s := range subs {
			h.send(s, payload)
		}
	}
}

// send queues payload for s, or drops it when s's buffer is full and queues an
// empty payload instead ("something may have been missed"), so that a subscriber
// that fell behind re-checks once it catches up. The empty payload has the slot
// past the buffer: a payload goes in only below the buffer, so a channel filled to
// that slot ends with an empty payload not read yet, which covers any drop since.
// The caller holds h.mu (sends are serialized; readers only make room).
func (h *notifyHub) send(s *notifySub, payload string) {
	if payload != "" && len(s.ch) < h.buffer {
		s.ch <- payload
		return
	}
	if payload != "" {
		h.dropped.Add(1)
	}
	select {
	case s.ch <- "":
	default: // an empty payload not read yet is queued already
	}
}

// InProcessNotifier delivers notifications within one process: the notifier for the
// SQLite store, where one process owns the database. The zero value is not usable; call
// NewInProcessNotifier.
type InProcessNotifier struct {
	hub *notifyHub
}

// NewInProcessNotifier returns a notifier whose subscribers get channels of capacity
// buffer (<= 0: DefaultNotifyBuffer).
func NewInProcessNotifier(buffer int) *InProcessNotifier {
	return &InProcessNotifier{hub: newNotifyHub(buffer)}
}

// Notify delivers payload to topic's current subscribers before it returns; it never
// blocks on a subscriber.
func (n *InProcessNotifier) Notify(ctx context.Context, topic, payload string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if err := checkNotification(topic, payload); err != nil {
		return err
	}
	n.hub.publish(topic, payload)
	return nil
}

// Subscribe: see Notifier.
func (n *InProcessNotifier) Subscribe(topic string) (<-chan string, func()) {
	return n.hub.subscribe(topic)
}

// Dropped counts payloads not delivered because a subscriber's channel was full.
func (n *InProcessNotifier) Dropped() uint64 { return n.hub.dropped.Load() }

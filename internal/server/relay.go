package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/toolserverd/toolserverd/internal/progress"
	"github.com/toolserverd/toolserverd/internal/store"
)

// A resumed batch (resume.go) may land on a replica that does not run its calls: the
// retry of a dropped connection goes wherever the Service sends it. The record says
// when such a call is over, but its output is in the data_dir of the replica running
// it. So the output is read from there: the owner's GET /v1/tool-calls/{id}/events
// (its output so far, then live, up to its message), with the client's own key,
// and its tool_progress lines are written to this stream.

// relayIdle bounds how long a followed call's result, once on record, waits for the
// rest of its output from the owner when none arrives: the owner sends it before its
// message, so this only matters when the owner hangs mid-stream.
const relayIdle = 5 * time.Second

// outputRelay is the relay of one followed call's output from its owner.
type outputRelay struct {
	// done is closed when the relay has ended: the owner's stream ended (the call's
	// output is complete), it failed, or stop was called.
	done chan struct{}
	// moved receives a token when an event was relayed.
	moved chan struct{}
	stop  context.CancelFunc
}

// relayOutput starts relaying the output of rec, a call another replica runs, to
// out; nil when rec is this replica's, or there is nothing to relay to.
func (s *Server) relayOutput(ctx context.Context, r *http.Request, rec *store.Call, out chan<- progress.Event) *outputRelay {
	rs := s.Replicas
	if rs == nil || out == nil || rec.Owner == "" || rec.Owner == rs.Self {
		return nil
	}
	ctx, stop := context.WithCancel(ctx)
	rl := &outputRelay{done: make(chan struct{}), moved: make(chan struct{}, 1), stop: stop}
	go func() {
		defer close(rl.done)
		if err := s.relay(ctx, r, rec, out, rl.moved); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "relaying a resumed call's output from its replica failed; the stream has its result without it",
				"call_id", rec.ID, "owner", rec.Owner, "err", err)
		}
	}()
	return rl
}

// relay reads the owner's events stream of rec and sends its tool_progress lines to
// out until the stream ends.
func (s *Server) relay(ctx context.Context, r *http.Request, rec *store.Call, out chan<- progress.Event, moved chan<- struct{}) error {
	rs := s.Replicas
	rep, err := rs.Lookup.GetReplica(ctx, rec.Owner)
	if err != nil {
		return fmt.Errorf("looking up replica %s: %w", rec.Owner, err)
	}
	if !rs.alive(rep) {
		return fmt.Errorf("replica %s is gone (its lease ran out)", rec.Owner)
	}
	u, err := url.JoinPath(rep.Address, "v1", "tool-calls", rec.ID, "events")
	if err != nil {
		return fmt.Errorf("replica %s's advertised address %q: %w", rec.Owner, rep.Address, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	for _, h := range []string{"Authorization", "X-API-Key"} { // the caller's key (auth.go)
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(forwardedHeader, rs.Self)
	transport := rs.Transport
	if transport == nil {
		transport = s.replicaTransport()
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replica %s (%s) answered HTTP %d", rec.Owner, rep.Address, resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var seq uint64 // numbers the values relayed, for the stream's valueGate
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 1 {
			var pe progressEvent
			if json.Unmarshal(line, &pe) == nil && pe.Type == "tool_progress" && pe.CallID == rec.ID {
				ev := fromProgressEvent(pe, &seq)
				select {
				case out <- ev:
				case <-ctx.Done():
					return nil
				}
				select {
				case moved <- struct{}{}:
				default:
				}
			}
		}
		if err != nil {
			return nil // the owner ends its stream after the call's message
		}
	}
}

// fromProgressEvent reads back a tool_progress line as the event it was made from.
func fromProgressEvent(pe progressEvent, seq *uint64) progress.Event {
	ev := progress.Event{CallID: pe.CallID, ToolCallID: pe.ToolCallID, Stream: pe.Stream, Text: pe.Text, Offset: pe.Offset,
		Closed: pe.Closed, TS: time.Unix(0, int64(pe.TS*1e9))}
	if pe.Data != "" {
		if b, err := base64.StdEncoding.DecodeString(pe.Data); err == nil {
			ev.Text = string(b)
		}
	}
	if v := pe.Progress; v != nil {
		*seq++
		ev.Progress = &progress.Value{Progress: v.Progress, Total: v.Total, Message: v.Message, Seq: *seq, TS: ev.TS}
	}
	return ev
}

// wait lets the relay finish after the call's result is on record: until the owner's
// stream ends, ctx ends, or no output came for relayIdle. Then the relay is stopped.
func (rl *outputRelay) wait(ctx context.Context) {
	defer func() {
		rl.stop()
		<-rl.done // nothing is relayed after the call's message
	}()
	idle := time.NewTimer(relayIdle)
	defer idle.Stop()
	for {
		select {
		case <-rl.done:
			return
		case <-ctx.Done():
			return
		case <-idle.C:
			return
		case <-rl.moved:
			idle.Reset(relayIdle)
		}
	}
}

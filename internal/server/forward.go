package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/toolserverd/toolserverd/internal/cluster"
	"github.com/toolserverd/toolserverd/internal/store"
)

// ReplicaLookup finds a replica's advertised address.
type ReplicaLookup interface {
	GetReplica(ctx context.Context, id string) (*store.Replica, error)
}

// Replicas lets a replica answer reads of what only another replica holds: the live
// output of a call runs where the call runs (its log is a file in that replica's
// data_dir). Such a read is forwarded to the owner's advertised address with the
// caller's own Authorization header, so the owner authenticates and checks the tenant
// itself: forwarding grants nothing. Nil when the store is not shared.
type Replicas struct {
	Self   string
	Lookup ReplicaLookup
	// Lease is cluster.lease: a replica whose last heartbeat is older is dead, and
	// what the store says of its calls is the answer. 0: never.
	Lease time.Duration
	// AnswerTimeout is cluster.answer_timeout: how long a forwarded request waits for
	// the other replica's answer to begin before it is answered here. 0:
	// DefaultReplicaAnswerTimeout. Used by the default Transport.
	AnswerTimeout time.Duration
	// Transport reaches the other replicas; nil uses a default with short dial
	// timeouts.
	Transport http.RoundTripper
}

// forwardedHeader marks a request one replica forwarded to another; a replica never
// forwards such a request again (no loops when two replicas disagree on an owner).
const forwardedHeader = cluster.ForwardedHeader

// DefaultReplicaAnswerTimeout is how long a forwarded read waits for the owner's
// answer to begin before it is answered here, unless Replicas.AnswerTimeout says.
const DefaultReplicaAnswerTimeout = 10 * time.Second

func defaultReplicaTransport(answerTimeout time.Duration) http.RoundTripper {
	if answerTimeout <= 0 {
		answerTimeout = DefaultReplicaAnswerTimeout
	}
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		// A replica that is stopped or wedged still has its connections accepted by
		// its kernel, and never answers: the read is then answered here. A replica
		// begins its answers (a poll, an SSE stream's head) within a second or two.
		ResponseHeaderTimeout: answerTimeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
}

// forwardToOwner serves r from the replica that owns rec when that is another
// replica, and reports whether it did. When the owner cannot be reached (it stopped,
// its address is unknown) handler serves r here, from what this replica and the
// store know (the record, which holds a finished call's result).
func (s *Server) forwardToOwner(w http.ResponseWriter, r *http.Request, rec *store.Call, handler http.HandlerFunc) bool {
	return s.forward(w, r, rec, handler, nil, nil)
}

// forwardOutputRead is forwardToOwner for reads of a call's live output (a progress
// poll, its SSE stream), which only the owner has: while the owner is alive but
// cannot be reached, an answer from here would show no output where there may be
// some (a poll's empty data, a stream silent until the call ends; for a finished
// call, "finished" with no data), so it is 503 unavailable with Retry-After, naming
// the owner (and, for a finished call, where its result is: the record holds it, not
// the output). Once the owner's lease has run out (it is dead; the sweep fails its
// calls), handler answers here from the store.
func (s *Server) forwardOutputRead(w http.ResponseWriter, r *http.Request, rec *store.Call, handler http.HandlerFunc) bool {
	return s.forward(w, r, rec, handler, s.outputUnreachable(rec, false), nil)
}

// outputUnreachable answers a read of rec's output whose owner cannot be reached:
// 503 with Retry-After while the owner is alive, else from here (local). With
// finishedHere a finished call is also served from here (its events: the record
// holds its result).
func (s *Server) outputUnreachable(rec *store.Call, finishedHere bool) unreachableFunc {
	return func(w http.ResponseWriter, r *http.Request, local http.HandlerFunc, rep *store.Replica, reason string) {
		if cur, err := s.Calls.GetCall(r.Context(), rec.ID); err == nil && cur.StartedAt == nil {
			// Not started (waiting for approval, or behind another call): it has no
			// output anywhere yet, and whichever replica runs it once decided writes it.
			// One that ended so (denied; failed by the sweep with its dead replica)
			// never had any. Nothing is lost.
			local(w, r)
			return
		}
		if !s.Replicas.alive(rep) {
			local(w, r.WithContext(context.WithValue(r.Context(), ownerGoneKey{}, true)))
			return
		}
		where := "the call runs on replica "
		if cur, err := s.Calls.GetCall(r.Context(), rec.ID); err == nil && cur.Status.Terminal() {
			// Read again: the call may have finished while the forward was tried.
			if finishedHere {
				local(w, r)
				return
			}
			where = "the call finished (its result: GET /v1/tool-calls/" + rec.ID + ") on replica "
		}
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(CodeUnavailable, where+rec.Owner+" ("+rep.Address+"), which holds its output and "+
			"could not be reached ("+reason+"); try again shortly (if that replica stopped, its calls are marked failed once its lease runs out)"))
	}
}

// ownerGoneKey marks a read served here because the replica that ran the call, and
// held its output, has stopped.
type ownerGoneKey struct{}

func ownerGone(ctx context.Context) bool { gone, _ := ctx.Value(ownerGoneKey{}).(bool); return gone }

// alive reports whether rep's lease holds: it heartbeated within the lease. A
// replica never seen (nil) is not alive.
func (rs *Replicas) alive(rep *store.Replica) bool {
	return rep != nil && (rs.Lease <= 0 || rep.Silent < rs.Lease)
}

// unreachableFunc answers r when rec's owner, rep (nil: no replica of that id ever
// heartbeated), cannot be reached; local serves r here.
type unreachableFunc func(w http.ResponseWriter, r *http.Request, local http.HandlerFunc, rep *store.Replica, reason string)

// forward proxies r to rec's owner and reports whether r was answered. When the owner
// cannot be reached, unreachable answers; nil serves handler here (for a lookup
// that fails or an address that is no URL, by reporting false). modify, when set,
// sees the owner's answer before it is relayed.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rec *store.Call, handler http.HandlerFunc, unreachable unreachableFunc, modify func(*http.Response) error) bool {
	rs := s.Replicas
	if rs == nil || rec.Owner == "" || rec.Owner == rs.Self || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	local := func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		r.Header.Set(forwardedHeader, rs.Self)
		handler(w, r)
	}
	rep, err := rs.Lookup.GetReplica(r.Context(), rec.Owner)
	switch {
	case err != nil && unreachable == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		unreachable(w, r, local, nil, "no replica of that id ever ran")
		return true
	case err != nil:
		s.writeError(w, r, err)
		return true
	}
	target, err := url.Parse(rep.Address)
	if err != nil || target.Host == "" {
		if unreachable == nil {
			return false
		}
		unreachable(w, r, local, rep, "its advertised address "+strconv.Quote(rep.Address)+" is not a URL")
		return true
	}
	if unreachable == nil {
		unreachable = func(w http.ResponseWriter, r *http.Request, local http.HandlerFunc, _ *store.Replica, _ string) {
			local(w, r)
		}
	}
	transport := rs.Transport
	if transport == nil {
		transport = s.replicaTransport()
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, rs.Self)
			// One id across both replicas' logs: the owner takes this request's.
			pr.Out.Header.Set("X-Request-Id", requestID(pr.In.Context()))
		},
		Transport:     transport,
		FlushInterval: -1, // progress streams flush every event
		ModifyResponse: func(resp *http.Response) error {
			// The answer already carries this request's id (the owner's is the same);
			// relayed as well, the client would see it twice.
			resp.Header.Del("X-Request-Id")
			if modify != nil {
				return modify(resp)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			s.log.Warn("forwarding a request to the call's replica failed", "call_id", rec.ID,
				"owner", rec.Owner, "address", rep.Address, "method", r.Method, "path", r.URL.Path, "err", err)
			unreachable(w, r, local, rep, err.Error())
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}

func (s *Server) replicaTransport() http.RoundTripper {
	s.transportOnce.Do(func() {
		var answer time.Duration
		if s.Replicas != nil {
			answer = s.Replicas.AnswerTimeout
		}
		s.transport = defaultReplicaTransport(answer)
	})
	return s.transport
}

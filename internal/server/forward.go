package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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
	// Transport reaches the other replicas; nil uses a default with short dial
	// timeouts.
	Transport http.RoundTripper
}

// forwardedHeader marks a request one replica forwarded to another; a replica never
// forwards such a request again (no loops when two replicas disagree on an owner).
const forwardedHeader = cluster.ForwardedHeader

// replicaAnswerTimeout is how long a forwarded read waits for the owner's answer to
// begin before it is answered here.
const replicaAnswerTimeout = 10 * time.Second

func defaultReplicaTransport() http.RoundTripper {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		// A replica that is stopped or wedged still has its connections accepted by
		// its kernel, and never answers: the read is then answered here. A replica
		// begins its answers (a poll, an SSE stream's head) within a second or two.
		ResponseHeaderTimeout: replicaAnswerTimeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
}

// forwardToOwner serves r from the replica that owns rec when that is another
// replica, and reports whether it did. When the owner cannot be reached (it stopped,
// its address is unknown) handler serves r here, from what this replica and the
// store know; a finished call then reads as finished.
func (s *Server) forwardToOwner(w http.ResponseWriter, r *http.Request, rec *store.Call, handler http.HandlerFunc) bool {
	rs := s.Replicas
	if rs == nil || rec.Owner == "" || rec.Owner == rs.Self || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	rep, err := rs.Lookup.GetReplica(r.Context(), rec.Owner)
	if err != nil || rep.Address == "" {
		return false
	}
	target, err := url.Parse(rep.Address)
	if err != nil || target.Host == "" {
		return false
	}
	local := func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		r.Header.Set(forwardedHeader, rs.Self)
		handler(w, r)
	}
	transport := rs.Transport
	if transport == nil {
		transport = s.replicaTransport()
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, rs.Self)
		},
		Transport:     transport,
		FlushInterval: -1, // progress streams flush every event
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			s.log.Warn("forwarding a request to the call's replica failed; answering here", "call_id", rec.ID,
				"owner", rec.Owner, "address", rep.Address, "method", r.Method, "path", r.URL.Path, "err", err)
			local(w, r)
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}

func (s *Server) replicaTransport() http.RoundTripper {
	s.transportOnce.Do(func() { s.transport = defaultReplicaTransport() })
	return s.transport
}

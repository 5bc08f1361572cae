package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/store"
)

// AuditLog is the audit trail: the store appends approval events in the approvals'
// own transactions; the API appends its administrative actions (keys, MCP servers)
// and lists the trail.
type AuditLog interface {
	AppendAudit(ctx context.Context, e *store.AuditEntry) error
	ListAudit(ctx context.Context, f store.AuditFilter) ([]*store.AuditEntry, error)
}

// Audit actions the API appends. Approval events are the store's (store.AuditApproval…).
const (
	AuditKeyCreated        = "key.created"          // subject: the key's id
	AuditKeyRevoked        = "key.revoked"          // subject: the key's id
	AuditMCPServerAdded    = "mcp_server.added"     // subject: the server's name
	AuditMCPServerRemoved  = "mcp_server.removed"   // subject: the server's name
	AuditMCPServerRestart  = "mcp_server.restarted" // subject: the server's name
	maxAuditFilterLen      = 256
	defaultAuditPageLength = 100
)

type auditEntryJSON struct {
	ID      int64           `json:"id"`
	TS      time.Time       `json:"ts"`
	Tenant  string          `json:"tenant"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Subject string          `json:"subject"`
	Detail  json.RawMessage `json:"detail"`
}

// listAudit lists audit entries newest first. Approvers read their tenant's approval
// entries; admins read every tenant's entries, or one's with ?tenant=. ?before= (an
// entry id) pages back from the last entry of the previous page; ?action= and
// ?subject= narrow.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	if s.Audit == nil {
		s.writeError(w, r, errorf(CodeUnavailable, "this daemon keeps no audit log"))
		return
	}
	q := r.URL.Query()
	p := principal(r.Context())
	f := store.AuditFilter{Tenant: p.Tenant, Limit: defaultAuditPageLength, Action: q.Get("action"), Subject: q.Get("subject")}
	if p.Has(auth.RoleAdmin) {
		f.Tenant = q.Get("tenant") // "": every tenant's
	} else if t := q.Get("tenant"); t != "" && t != p.Tenant {
		s.writeError(w, r, errorf(CodeForbidden, "only an admin key reads another tenant's audit log"))
		return
	} else {
		// The administrative entries (keys, MCP servers), in the acting admin's
		// tenant, tell what GET /v1/keys and /v1/mcp/servers tell admins only.
		f.ActionPrefix = "approval."
	}
	for name, v := range map[string]string{"tenant": f.Tenant, "action": f.Action, "subject": f.Subject} {
		if len(v) > maxAuditFilterLen || hasControl(v) {
			s.writeError(w, r, errorf(CodeBadRequest, name+": at most 256 characters, no control characters"))
			return
		}
	}
	n, err := queryLimit(q, f.Limit, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = n
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			s.writeError(w, r, errorf(CodeBadRequest, "before must be the id of a listed audit entry (a positive number): the last one of the previous page"))
			return
		}
		f.Before = n
	}
	entries, err := s.Audit.ListAudit(r.Context(), f)
	if errors.Is(err, store.ErrNotFound) {
		s.writeError(w, r, errorf(CodeBadRequest, "before: no audit entry "+strconv.FormatInt(f.Before, 10)+"; page with the id of the last entry of the previous page"))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]auditEntryJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, auditEntryJSON{ID: e.ID, TS: e.At, Tenant: e.Tenant, Actor: e.Actor, Action: e.Action, Subject: e.Subject, Detail: e.Detail})
	}
	resp := map[string]any{"entries": out}
	if len(entries) == f.Limit {
		// There may be more: the next page starts after the last entry, as the other
		// listings' next_before says (an audit entry is never deleted, so its id is
		// the whole cursor).
		resp["next_before"] = entries[len(entries)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

// actorOf names who acts in a request, as the audit trail records it: the key (its
// name and id), after the person a client names (actor) when it names one.
func actorOf(r *http.Request, actor string) string {
	if p := principal(r.Context()); p.KeyID != "" {
		by := "key " + p.KeyID
		if p.Name != "" {
			by = "key " + p.Name + " (" + p.KeyID + ")"
		}
		if actor == "" {
			return by
		}
		return actor + " via " + by
	}
	if actor == "" {
		return "api"
	}
	return actor
}

// audit appends an administrative action done by r's key, in the key's tenant. The
// action has happened when this runs: a failure to record it is logged, and the
// request still succeeds.
func (s *Server) audit(r *http.Request, action, subject string, detail any) {
	if s.Audit == nil {
		return
	}
	e := &store.AuditEntry{Tenant: tenantOf(r), Actor: actorOf(r, ""), Action: action, Subject: subject}
	if detail != nil {
		b, err := json.Marshal(detail)
		if err == nil {
			e.Detail = b
		}
	}
	if err := s.Audit.AppendAudit(context.WithoutCancel(r.Context()), e); err != nil {
		s.log.ErrorContext(r.Context(), "recording an audit entry failed", "action", action, "subject", subject, "err", err)
	}
}

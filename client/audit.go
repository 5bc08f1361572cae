package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AuditEntry is one entry of the audit trail.
type AuditEntry struct {
	ID      int64           `json:"id"`
	TS      time.Time       `json:"ts"`
	Tenant  string          `json:"tenant"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"` // approval.approved, key.created, mcp_server.added…
	Subject string          `json:"subject"`
	Detail  json.RawMessage `json:"detail"`
}

// AuditQuery selects audit entries; zero fields do not filter.
type AuditQuery struct {
	Tenant  string // admins only
	Action  string
	Subject string
	Limit   int   // 1–1000; 0: the daemon's default (100)
	Before  int64 // the ID of the last entry of the previous page
}

// Audit lists audit entries newest first (approver role; an admin reads every
// tenant's). Page back by passing the last entry's ID as Before.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	v := url.Values{}
	for k, s := range map[string]string{"tenant": q.Tenant, "action": q.Action, "subject": q.Subject} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatInt(q.Before, 10))
	}
	var out struct {
		Entries []AuditEntry `json:"entries"`
	}
	return out.Entries, c.do(ctx, http.MethodGet, "/v1/audit?"+v.Encode(), nil, &out)
}

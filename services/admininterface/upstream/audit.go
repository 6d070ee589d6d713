package upstream

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"threatview/platform/wire"
)

// AuditQuery is a search of the audit trail; zero fields do not filter.
type AuditQuery struct {
	From, To time.Time
	Actor    string
	Action   string
	AppID    string
	Limit    int
	Cursor   string
}

// Values renders q as GET /v1/audit parameters.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	for k, s := range map[string]string{"actor": q.Actor, "action": q.Action, "app_id": q.AppID, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// AuditPage is one page of records in ascending (time, id) order; Next is
// blank on the last page.
type AuditPage struct {
	Records []wire.AuditRecord `json:"records"`
	Next    string             `json:"next_cursor"`
}

// Audit is the audit logger's client.
type Audit struct{ *Client }

// Query returns one page of the audit trail (GET /v1/audit).
func (c Audit) Query(ctx context.Context, bearer string, q AuditQuery) (AuditPage, error) {
	var out AuditPage
	err := c.call(ctx, http.MethodGet, "/v1/audit", q.Values(), bearer, nil, &out)
	return out, err
}

// Record posts one audit record (POST /v1/audit with the internal key); it
// returns once the audit logger answered 2xx, that is once it is durable.
func (c Audit) Record(ctx context.Context, internalKey string, rec wire.AuditRecord) error {
	return c.call(ctx, http.MethodPost, "/v1/audit", nil, internalKey,
		wire.AuditBatch{V: wire.Version, Records: []wire.AuditRecord{rec}}, nil)
}

package upstream

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Erasure is one erasure request of the privacy service and what it did.
type Erasure struct {
	ID       string `json:"id"`
	AppID    string `json:"app_id"`
	DeviceID string `json:"device_id"`
	// UserPseudonyms name the user of a user erasure (DeviceID blank): its
	// pseudonym under each key ("k1:<hex>"), the current key's first. The
	// raw user id is never stored or shown.
	UserPseudonyms []string   `json:"user_pseudonyms"`
	Suppress       bool       `json:"suppress"`
	Status         string     `json:"status"`
	RequestedBy    string     `json:"requested_by"`
	RequestedAt    time.Time  `json:"requested_at"`
	StartedAt      *time.Time `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	Attempts       int        `json:"attempts"`
	// NextAttemptAt is when a running erasure whose last attempt failed for
	// a passing reason is tried again; nil otherwise.
	NextAttemptAt *time.Time    `json:"next_attempt_at"`
	Report        ErasureReport `json:"report"`
	Error         string        `json:"error"`
}

// ByUser reports whether e erases a user's data (named by pseudonyms)
// rather than a device's.
func (e Erasure) ByUser() bool { return e.DeviceID == "" && len(e.UserPseudonyms) > 0 }

// ErasureReport is what an erasure removed, adjusted and rewritten, per
// store, and what the final count found left.
type ErasureReport struct {
	EventsDeleted       int64                `json:"events_deleted"`
	FactsDeleted        int64                `json:"facts_deleted"`
	RollupRowsAdjusted  int64                `json:"rollup_rows_adjusted"`
	RollupRowsRemoved   int64                `json:"rollup_rows_removed"`
	LateEventsDeleted   int64                `json:"late_events_deleted"`
	AuditBodiesRedacted int64                `json:"audit_bodies_redacted"`
	Batches             int                  `json:"batches"`
	ArchivedMonths      []string             `json:"archived_months"`
	ArchivesRewritten   []ArchiveRewrite     `json:"archives_rewritten"`
	Suppressed          bool                 `json:"suppressed"`
	Verification        *ErasureVerification `json:"verification"`
	Seconds             float64              `json:"seconds"`
}

// ArchiveRewrite is one archived month rewritten without the subject's rows.
type ArchiveRewrite struct {
	Table         string `json:"table"`
	Month         string `json:"month"`
	RowsRemoved   int64  `json:"rows_removed"`
	Rows          int64  `json:"rows"`
	ContentSHA256 string `json:"content_sha256"`
	OldLocation   string `json:"old_location"`
	Location      string `json:"location"`
}

// ErasureVerification is the final count of the subject's rows left in
// each store; Clean when every count is 0.
type ErasureVerification struct {
	Events      int64 `json:"events"`
	LateEvents  int64 `json:"late_events"`
	AuditBodies int64 `json:"audit_bodies"`
	Clean       bool  `json:"clean"`
}

// Suppression keeps a device's later events out until an admin lifts it.
type Suppression struct {
	AppID     string    `json:"app_id"`
	DeviceID  string    `json:"device_id"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	ErasureID string    `json:"erasure_id"`
}

// Privacy is the privacy service's client. Every call carries the person's
// access token: the service lets admins only, and audits the person as the
// actor of each request and lift.
type Privacy struct{ *Client }

// Erasures lists the newest limit erasure requests (GET /v1/erasures).
func (c Privacy) Erasures(ctx context.Context, bearer string, limit int) ([]Erasure, error) {
	var out struct {
		Erasures []Erasure `json:"erasures"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/erasures", url.Values{"limit": {strconv.Itoa(limit)}}, bearer, nil, &out)
	return out.Erasures, err
}

// Erasure returns one erasure with its report; ErrNotFound when unknown.
func (c Privacy) Erasure(ctx context.Context, bearer, id string) (Erasure, error) {
	var out Erasure
	err := c.call(ctx, http.MethodGet, "/v1/erasures/"+url.PathEscape(id), nil, bearer, nil, &out)
	return out, err
}

// ErasureRequest names one erasure's subject: a device (DeviceID, with
// Suppress) or a user (UserID, the raw id, which the privacy service
// pseudonymises and never stores). Exactly one of DeviceID and UserID is
// set; the blank one is left out of the request, since the service refuses
// a request naming both.
type ErasureRequest struct {
	AppID    string `json:"app_id"`
	DeviceID string `json:"device_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	// Suppress must be false with UserID: the processor suppresses
	// devices, not users, and the service refuses it.
	Suppress bool `json:"suppress"`
}

// RequestErasure asks for a subject's erasure (POST /v1/erasures) and
// returns its id and status. A refusal (unknown app, an empty or invalid
// field, suppress with a user, no user id key, an erasure of the subject
// already queued or running) is a *ServiceError that unwraps to
// ErrInvalid.
func (c Privacy) RequestErasure(ctx context.Context, bearer string, req ErasureRequest) (Erasure, error) {
	var out Erasure
	err := c.call(ctx, http.MethodPost, "/v1/erasures", nil, bearer, req, &out)
	return out, err
}

// Suppressions lists the devices under suppression.
func (c Privacy) Suppressions(ctx context.Context, bearer string) ([]Suppression, error) {
	var out struct {
		Suppressions []Suppression `json:"suppressions"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/suppressions", nil, bearer, nil, &out)
	return out.Suppressions, err
}

// LiftSuppression ends a device's suppression; ErrNotFound when there is
// none.
func (c Privacy) LiftSuppression(ctx context.Context, bearer, appID, deviceID string) error {
	return c.call(ctx, http.MethodDelete, "/v1/suppressions", url.Values{"app_id": {appID}, "device_id": {deviceID}}, bearer, nil, nil)
}

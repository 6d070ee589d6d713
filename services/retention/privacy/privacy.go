// Package privacy erases a data subject (one device, or one user, of one
// app) from every
// store on request, as a job whose state lives in PostgreSQL
// (events.erasures), and keeps the subject's later events out through a
// suppression the processor honours (events.suppressions).
//
// A job: suppress the subject (always while it runs; kept afterwards when
// the request asked for it), wait until the processors have re-read the
// suppressions, then delete in batches (each batch one short transaction): the events of
// every partition with their facts, subtracting them from every rollup, the
// held late events, and redact the audit bodies that hold the subject's
// events (row and body_sha256 kept). A verification query then counts what
// is left; the job is done only when it finds nothing. Every step can be
// repeated, so a job cut short by a restart resumes from its start.
package privacy

import (
	"context"
	"errors"
	"time"

	"threatview/retention"
)

// Statuses of an erasure. A pending erasure is stored but not yet
// audited: no runner takes it and no job suppresses its subject, and the
// API never shows it (GET answers 404 until it is queued).
const (
	StatusPending = "pending"
	StatusQueued  = "queued"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// Limits of a request's fields (MaxUserID is the collector's user.id).
const (
	MaxAppID    = 128
	MaxDeviceID = 256
	MaxUserID   = 256
)

// Errors of the service; the HTTP layer maps them to statuses.
var (
	// ErrInvalid means a field is missing or malformed (422).
	ErrInvalid = errors.New("invalid request")
	// ErrUnknownApp means no event, late event or rollup names the app (422).
	ErrUnknownApp = errors.New("unknown app")
	// ErrBusy means an erasure of the same subject is queued or running
	// (409): a second request, or lifting the subject's suppression.
	ErrBusy = errors.New("an erasure of this subject is queued or running")
	// ErrNotFound means no such erasure or suppression (404).
	ErrNotFound = errors.New("not found")
	// ErrUnavailable wraps database failures (503).
	ErrUnavailable = errors.New("database unavailable")
)

// Subject is one device of one app, or one user pseudonym of one app
// (DeviceID blank): a user erasure runs once per pseudonym of the user,
// one per configured key.
type Subject struct {
	AppID    string `json:"app_id"`
	DeviceID string `json:"device_id"`
	User     string `json:"user_pseudonym,omitempty"`
}

// key is what names the subject within its app: the device id, or the
// user's pseudonym.
func (s Subject) key() string {
	if s.DeviceID != "" {
		return s.DeviceID
	}
	return s.User
}

// is tells whether a row of app with device and user pseudonym belongs to
// the subject.
func (s Subject) is(app, device, user string) bool {
	if app != s.AppID {
		return false
	}
	if s.DeviceID != "" {
		return device == s.DeviceID
	}
	return s.User != "" && user == s.User
}

// Erasure is one erasure request and its state.
type Erasure struct {
	ID       string `json:"id"`
	AppID    string `json:"app_id"`
	DeviceID string `json:"device_id"`
	// UserPseudonyms name the user of a user erasure (DeviceID blank):
	// its pseudonym under every key configured when it was requested, the
	// current key's first. The raw user id is never stored.
	UserPseudonyms []string   `json:"user_pseudonyms,omitempty"`
	Suppress       bool       `json:"suppress"`
	Status         string     `json:"status"`
	RequestedBy    string     `json:"requested_by"`
	RequestedAt    time.Time  `json:"requested_at"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	Attempts       int        `json:"attempts"`
	// NextAttemptAt is when a running erasure whose last try failed for a
	// transient reason is tried again (shown while it is running).
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	Report        Report     `json:"report"`
	Error         string     `json:"error,omitempty"`
}

// Subject returns the erasure's subject (a user erasure's current
// pseudonym).
func (e *Erasure) Subject() Subject {
	if e.DeviceID == "" && len(e.UserPseudonyms) > 0 {
		return Subject{AppID: e.AppID, User: e.UserPseudonyms[0]}
	}
	return Subject{AppID: e.AppID, DeviceID: e.DeviceID}
}

// Subjects returns what the erasure runs for: its device, or its user's
// pseudonym under each key.
func (e *Erasure) Subjects() []Subject {
	if e.DeviceID != "" || len(e.UserPseudonyms) == 0 {
		return []Subject{{AppID: e.AppID, DeviceID: e.DeviceID}}
	}
	out := make([]Subject, len(e.UserPseudonyms))
	for i, p := range e.UserPseudonyms {
		out[i] = Subject{AppID: e.AppID, User: p}
	}
	return out
}

// Results of a finished erasure (Report.Result).
const (
	// ResultErased: rows of the subject were found and erased.
	ResultErased = "erased"
	// ResultNothingMatched: no store held anything of the subject (a
	// mistyped device id, or one already erased); nothing was erased.
	ResultNothingMatched = "nothing_matched"
)

// Report is what an erasure did, per store; the counts add up over every
// attempt of the erasure.
type Report struct {
	// Result is ResultErased or ResultNothingMatched once the erasure is
	// done.
	Result string `json:"result,omitempty"`
	// Events deleted from events.events (every partition) and their facts.
	Events int64 `json:"events_deleted"`
	Facts  int64 `json:"facts_deleted"`
	// RollupRows is how many rollup rows were decremented (per-app rollups
	// and their all-apps summaries); RollupRowsRemoved those that reached 0
	// and were removed (a bucket no remaining event is in).
	RollupRows        int64 `json:"rollup_rows_adjusted"`
	RollupRowsRemoved int64 `json:"rollup_rows_removed"`
	LateEvents        int64 `json:"late_events_deleted"`
	// DeviceDays are the rows of facts.inv_device_days (the investigation
	// rollup naming each active device per day) deleted.
	DeviceDays int64 `json:"device_days_deleted"`
	// DailyUsers are the rows of facts.inv_daily_users (the user
	// pseudonyms active per app and day) deleted by a user erasure.
	DailyUsers  int64 `json:"daily_users_deleted"`
	AuditBodies int64 `json:"audit_bodies_redacted"`
	Batches     int   `json:"batches"`
	// ArchivedMonths are the months of events.events with a verified
	// archive written before this erasure (whose files may hold the
	// subject's rows; see docs/privacy.md).
	ArchivedMonths []string `json:"archived_months"`
	// ArchivesRewritten are the archives rewritten without the subject's
	// rows (a new verified version each; the old one removed).
	ArchivesRewritten []retention.Rewritten `json:"archives_rewritten"`
	// Suppressed tells whether the subject stays suppressed.
	Suppressed bool `json:"suppressed"`
	// Verification is what a final count found left of the subject.
	Verification *Verification `json:"verification,omitempty"`
	Seconds      float64       `json:"seconds"`
}

// Verification is the result of the final check: every count must be 0.
type Verification struct {
	Events      int64 `json:"events"`
	LateEvents  int64 `json:"late_events"`
	DeviceDays  int64 `json:"device_days"`
	DailyUsers  int64 `json:"daily_users"`
	AuditBodies int64 `json:"audit_bodies"`
	Clean       bool  `json:"clean"`
}

// Store keeps erasures and suppressions and erases from the events DB.
type Store interface {
	// Create stores a pending erasure (not claimable until Queue).
	// Errors: ErrUnknownApp, ErrBusy, ErrUnavailable.
	Create(ctx context.Context, e *Erasure) error
	// Queue makes a pending erasure claimable, once its request is
	// audited. Errors: ErrNotFound (no longer pending), ErrUnavailable.
	Queue(ctx context.Context, e *Erasure) error
	// Delete withdraws a pending erasure (its audit record could not be
	// written); it never ran and suppressed nothing. Errors: ErrUnavailable.
	Delete(ctx context.Context, id string) error
	// Get returns one erasure. Errors: ErrNotFound, ErrUnavailable.
	Get(ctx context.Context, id string) (*Erasure, error)
	// List returns the latest limit erasures, newest first.
	List(ctx context.Context, limit int) ([]Erasure, error)
	// LiftSuppression ends a subject's suppression. Errors: ErrNotFound,
	// ErrBusy (an erasure of the subject is pending, queued or running),
	// ErrUnavailable.
	LiftSuppression(ctx context.Context, s Subject, by string) error
	// CheckLift tells whether LiftSuppression would lift s's suppression
	// now. Errors: ErrNotFound, ErrBusy, ErrUnavailable.
	CheckLift(ctx context.Context, s Subject) error
	// Suppressions lists the active suppressions.
	Suppressions(ctx context.Context) ([]Suppression, error)
}

// Suppression is an active suppression.
type Suppression struct {
	Subject
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	ErasureID string    `json:"erasure_id,omitempty"`
}

// Redactor redacts audit bodies that hold a subject's events.
type Redactor interface {
	// RedactBatch sets the body of at most n audit rows of the subject's
	// app whose body holds the device id to NULL (row and body_sha256
	// kept) and returns how many it changed.
	RedactBatch(ctx context.Context, s Subject, n int) (int64, error)
	// Remaining counts the audit bodies still holding the subject.
	Remaining(ctx context.Context, s Subject) (int64, error)
}

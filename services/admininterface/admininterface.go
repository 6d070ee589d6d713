// Package admininterface is the operators' web UI of Threat View: a
// server-rendered site (package webui) over the same APIs an outside client
// calls — identity for signing in, tokens, the audit logger, the visual
// renderer, every service's /readyz and /metrics — plus the broker (package
// broker) for queue depths and dead-letter queues.
//
// A person signs in with identity; the access token identity returns is kept
// in a sealed session cookie and forwarded as the person's bearer credential
// to tokens, the audit logger and the renderer, which check the role and
// audit the person themselves. Actions the admin interface takes on its own
// (dead-letter replays and deletions) are audited here, through the audit
// logger, with the person as the actor.
package admininterface

import (
	"errors"
	"slices"
	"time"
)

// Sentinel errors the upstream adapters translate their answers into.
var (
	// ErrUnauthorized: the person's access token was refused (expired or
	// revoked); the person must sign in again.
	ErrUnauthorized = errors.New("not signed in")
	// ErrForbidden: the person's roles do not allow the call.
	ErrForbidden = errors.New("not allowed")
	// ErrNotFound: the thing asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input was refused; the error text says why.
	ErrInvalid = errors.New("invalid input")
	// ErrUnavailable: an upstream service or the broker did not answer.
	ErrUnavailable = errors.New("service unavailable")
)

// Roles a person can hold (identity assigns them).
const (
	RoleAdmin     = "admin"      // everything (the reference's Account Owner)
	RoleUserAdmin = "user_admin" // people only (User Administrator)
	RoleAnalyst   = "analyst"    // dashboards, events, reports (Insights Viewer)
	RoleAuditor   = "auditor"    // audit trail
)

// Roles lists the roles in the order the Users page offers them.
var Roles = []string{RoleAdmin, RoleUserAdmin, RoleAnalyst, RoleAuditor}

// RoleName is the name a person reads for role r.
func RoleName(r string) string {
	switch r {
	case RoleAdmin:
		return "Account Owner"
	case RoleUserAdmin:
		return "User Administrator"
	case RoleAnalyst:
		return "Insights Viewer"
	case RoleAuditor:
		return "Auditor"
	}
	return r
}

// User is the signed-in person as identity describes them.
type User struct {
	Username string   `json:"username"`
	Roles    []string `json:"roles"`
}

// Has reports whether u may use a page that needs one of roles; admin may use
// every page.
func (u User) Has(roles ...string) bool {
	if slices.Contains(u.Roles, RoleAdmin) {
		return true
	}
	for _, r := range roles {
		if slices.Contains(u.Roles, r) {
			return true
		}
	}
	return false
}

// Login is identity's answer to a sign-in or a refresh: a short-lived
// access token (minutes) and a refresh token, rotated at every use.
type Login struct {
	AccessToken      string    `json:"access_token"`
	ExpiresAt        time.Time `json:"expires_at"`
	RefreshToken     string    `json:"refresh_token"`
	RefreshExpiresAt time.Time `json:"refresh_expires_at"`
	User             User      `json:"user"`
}

// Actor is how the admin interface names a person in the audit records it
// writes itself (actor_token_id, which GET /v1/audit?actor= filters on):
// the username, as identity and every service using platform/authz do.
func Actor(username string) string { return username }

// Partition is one partition of a time-partitioned table, as the retention
// page shows it.
type Partition struct {
	Database string // events or audit
	Table    string
	Name     string
	Bound    string // the partition bound as the database prints it
	Rows     int64  // the database's estimate (statistics), not a count
	Bytes    int64  // size on disk with indexes
}

// Archive is one verified archive of a monthly partition, as the archiver
// recorded it.
type Archive struct {
	Database   string
	Table      string
	Month      time.Time
	Partition  string
	Rows       int64
	Bytes      int64
	SHA256     string // the archive's content hash
	Location   string
	VerifiedAt time.Time
}

package upstream

import (
	"context"
	"net/http"
	"time"
)

// TrailCheckpoint is a signed checkpoint of the audit trail.
type TrailCheckpoint struct {
	N     int64     `json:"n"`
	Size  uint64    `json:"size"`
	Root  []byte    `json:"root"`
	Time  time.Time `json:"time"`
	KeyID string    `json:"key_id"`
}

// TrailProblem is one finding of a verification.
type TrailProblem struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
}

// TrailKindUnanchored is the problem kind of a verification no checkpoint
// outside the database anchored (docs/audit-trail.md, "Verifying").
const TrailKindUnanchored = "unanchored"

// TrailReport is the answer of GET /v1/audit/verify.
type TrailReport struct {
	OK bool `json:"ok"`
	// Anchored is whether a correctly signed checkpoint read from the
	// object store anchored the check (nil from an audit logger older than
	// the field; its unanchored problem still tells).
	Anchored   *bool            `json:"anchored"`
	Checked    int64            `json:"checked"`
	Checkpoint *TrailCheckpoint `json:"checkpoint"`
	Problems   []TrailProblem   `json:"problems"`
	Archived   int64            `json:"archived"`
	Unchained  int64            `json:"unchained"`
}

// Unanchored reports whether no checkpoint outside the database anchored
// the verification: the rows may agree with the database's own checkpoints,
// but the database alone cannot show it was not rewritten whole.
func (r TrailReport) Unanchored() bool {
	if r.Anchored != nil && !*r.Anchored {
		return true
	}
	for _, p := range r.Problems {
		if p.Kind == TrailKindUnanchored {
			return true
		}
	}
	return false
}

// RowProblems returns the problems other than the unanchored finding: what
// was found wrong in the rows and checkpoints themselves.
func (r TrailReport) RowProblems() []TrailProblem {
	out := make([]TrailProblem, 0, len(r.Problems))
	for _, p := range r.Problems {
		if p.Kind != TrailKindUnanchored {
			out = append(out, p)
		}
	}
	return out
}

// VerifyTrail runs a verification of the whole audit trail.
func (c Audit) VerifyTrail(ctx context.Context, bearer string) (TrailReport, error) {
	var out TrailReport
	err := c.call(ctx, http.MethodGet, "/v1/audit/verify", nil, bearer, nil, &out)
	return out, err
}

// LatestCheckpoint returns the newest signed checkpoint (nil when none).
func (c Audit) LatestCheckpoint(ctx context.Context, bearer string) (*TrailCheckpoint, error) {
	var out struct {
		Latest *TrailCheckpoint `json:"latest"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/audit/checkpoints", map[string][]string{"limit": {"1"}, "after": {"0"}}, bearer, nil, &out)
	return out.Latest, err
}

package webui

import (
	"net/http"
	"sync"
	"time"

	"threatview/admininterface/upstream"
)

// trailResult is the last verification this replica ran (each replica keeps
// its own; the audit logger's auditlogger_trail_* metrics and the scheduled
// auditverify job are the fleet-wide record).
type trailResult struct {
	Report upstream.TrailReport
	At     time.Time
	By     string
}

// trailResults maps a *Server to its *trailResult.
var trailResults sync.Map

type trailData struct {
	Latest *upstream.TrailCheckpoint
	Last   *trailResult
	// Shown counts the problems listed (at most trailShown).
	Problems []upstream.TrailProblem
	More     int
}

// RowProblemCount counts the last verification's problems other than the
// unanchored finding (all of them, the listed and the counted).
func (d trailData) RowProblemCount() int { return len(d.Problems) + d.More }

// trailShown is how many problems the page lists; the rest are counted.
const trailShown = 200

// trailPage shows the trail's state: the newest signed checkpoint and what
// the last verification found.
func (s *Server) trailPage(w http.ResponseWriter, r *http.Request) {
	s.renderTrail(w, r, "")
}

func (s *Server) renderTrail(w http.ResponseWriter, r *http.Request, flash string) {
	latest, err := s.deps.Audit.LatestCheckpoint(r.Context(), sessionOf(r).Token)
	if err != nil {
		s.upstreamFail(w, r, "Reading the audit trail's checkpoints", err)
		return
	}
	d := trailData{Latest: latest}
	if v, ok := trailResults.Load(s); ok {
		d.Last = v.(*trailResult)
		d.Problems = d.Last.Report.RowProblems() // the unanchored finding is a state of its own
		if len(d.Problems) > trailShown {
			d.More = len(d.Problems) - trailShown
			d.Problems = d.Problems[:trailShown]
		}
	}
	s.render(w, r, http.StatusOK, "audit_trail", "Audit trail integrity", d, flash, "")
}

// trailVerify runs a verification now (POST, CSRF-checked by the session
// middleware) and shows its result.
func (s *Server) trailVerify(w http.ResponseWriter, r *http.Request) {
	// A verification reads every row; give it more than a page's time.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(5 * time.Minute))
	rep, err := s.deps.Audit.VerifyTrail(r.Context(), sessionOf(r).Token)
	if err != nil {
		s.upstreamFail(w, r, "Verifying the audit trail", err)
		return
	}
	by := sessionOf(r).User.Username
	trailResults.Store(s, &trailResult{Report: rep, At: s.now().UTC(), By: by})
	s.log.Info("audit trail verified", "by", by, "ok", rep.OK, "anchored", !rep.Unanchored(), "checked", rep.Checked, "problems", len(rep.Problems))
	flash := "The trail verified."
	if !rep.OK {
		flash = "" // the state paragraph says it, as an alert
	}
	s.renderTrail(w, r, flash)
}

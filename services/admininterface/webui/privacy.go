package webui

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
)

// The privacy pages request erasures of a data subject (an app's device,
// or an app's user by their raw user id), list them with their progress
// and failures, show each one's report, and lift suppressions. Every call
// goes to the privacy service with the person's own access token: the
// service lets admins only, and audits the person as the actor of each
// request and lift. The device id and the user id travel in form bodies,
// never in this site's URLs (they end up in access logs and browser
// history). The raw user id goes no further than the pages answering the
// person who typed it (the confirmation, a refused form) and the privacy
// service, which keeps only its pseudonyms: the list and the report show
// those, and nothing here logs it.

// erasuresListMax is how many erasure requests the list shows (the newest).
const erasuresListMax = 100

// shortPseudonym shortens a user pseudonym ("k1:<64 hex>") to its key and
// first 8 digits, enough to tell the rows of a list apart; the full one is
// on the report page.
func shortPseudonym(p string) string {
	key, digest, ok := strings.Cut(p, ":")
	if !ok {
		key, digest = "", p
	} else {
		key += ":"
	}
	if r := []rune(digest); len(r) > 8 {
		return key + string(r[:8]) + "…"
	}
	return p
}

// erasureForm is the request form as typed, kept on a refusal. ByUser
// picks the subject: the user id rather than the device id.
type erasureForm struct {
	AppID, DeviceID, UserID string
	ByUser, Suppress        bool
}

// subject names the form's kind of subject as the page says it.
func (f erasureForm) subject() string {
	if f.ByUser {
		return "user"
	}
	return "device"
}

type privacyData struct {
	Erasures     []upstream.Erasure
	Suppressions []upstream.Suppression
	Form         erasureForm
	ListMax      int
}

// privacyOn answers when no privacy service is configured (it returns
// false when it answered); otherwise it returns r with one deadline for
// every call the page makes. Each call is bounded by the upstream timeout;
// a page making two or three in a row against a slow service would
// otherwise outlast the server's write timeout and end with no answer.
func (s *Server) privacyOn(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if s.deps.Privacy.Client == nil {
		s.fail(w, r, http.StatusNotFound, "not_found", "No privacy service is configured (PRIVACY_SERVICE_URL).")
		return r, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.deps.Privacy.Timeout)
	context.AfterFunc(r.Context(), cancel) // the request's end releases the timer
	return r.WithContext(ctx), true
}

func (s *Server) privacyPage(w http.ResponseWriter, r *http.Request) {
	r, ok := s.privacyOn(w, r)
	if !ok {
		return
	}
	flash := map[string]string{"lifted": "Suppression lifted: the device's new events are stored again."}[r.URL.Query().Get("done")]
	s.renderPrivacy(w, r, http.StatusOK, erasureForm{Suppress: true}, flash, "")
}

// renderPrivacy shows the list page; r comes through privacyOn.
func (s *Server) renderPrivacy(w http.ResponseWriter, r *http.Request, status int, f erasureForm, flash, errMsg string) {
	tok := sessionOf(r).Token
	es, err := s.deps.Privacy.Erasures(r.Context(), tok, erasuresListMax)
	if err != nil {
		s.privacyFail(w, r, "Listing the erasure requests", err, false)
		return
	}
	sup, err := s.deps.Privacy.Suppressions(r.Context(), tok)
	if err != nil {
		s.privacyFail(w, r, "Listing the suppressions", err, false)
		return
	}
	s.render(w, r, status, "privacy", "Privacy: erasures", privacyData{Erasures: es, Suppressions: sup, Form: f, ListMax: erasuresListMax}, flash, errMsg)
}

// requestErasure takes the form in two steps: without confirm=yes it
// shows what will be erased for good and asks; with it, it asks the
// privacy service and goes to the erasure's report. A refusal re-shows the
// form with the service's reason, and nothing is requested.
func (s *Server) requestErasure(w http.ResponseWriter, r *http.Request) {
	r, ok := s.privacyOn(w, r)
	if !ok {
		return
	}
	// The ids are sent as typed (an id with a space is still an id); the
	// app id has no spaces to keep. Only the chosen subject's id is read:
	// a browser without CSS :has shows both fields, and the other may
	// still hold what was typed there.
	f := erasureForm{AppID: strings.TrimSpace(r.PostFormValue("app_id")), ByUser: r.PostFormValue("subject") == "user",
		Suppress: r.PostFormValue("suppress") == "yes"}
	id := r.PostFormValue(f.subject() + "_id")
	if f.ByUser {
		f.UserID = id
	} else {
		f.DeviceID = id
	}
	switch {
	case f.AppID == "":
		s.renderPrivacy(w, r, http.StatusBadRequest, f, "", "Enter the app id. Nothing was requested.")
		return
	case strings.TrimSpace(id) == "":
		s.renderPrivacy(w, r, http.StatusBadRequest, f, "", "Enter the "+f.subject()+" id. Nothing was requested.")
		return
	}
	// The processor suppresses devices, not users, and the privacy service
	// refuses suppress with a user id: the box is the device's option.
	req := upstream.ErasureRequest{AppID: f.AppID, DeviceID: f.DeviceID, UserID: f.UserID, Suppress: f.Suppress && !f.ByUser}
	if r.PostFormValue("confirm") != "yes" {
		s.confirmErasure(w, r, f, req)
		return
	}
	e, err := s.deps.Privacy.RequestErasure(r.Context(), sessionOf(r).Token, req)
	if err != nil {
		if msg, status, ok := privacyRefusal(err, f.AppID, f.subject()); ok {
			s.renderPrivacy(w, r, status, f, "", msg)
			return
		}
		s.privacyFail(w, r, "Requesting the erasure", err, true)
		return
	}
	if _, perr := uuid.Parse(e.ID); perr != nil {
		s.privacyFail(w, r, "Requesting the erasure", errors.New("the privacy service answered no erasure id"), true)
		return
	}
	// Not the device or user id: it is the subject's, and logs are kept
	// longer.
	s.log.Info("erasure requested", "by", sessionOf(r).User.Username, "erasure_id", e.ID, "app_id", f.AppID,
		"subject", f.subject(), "suppress", req.Suppress)
	http.Redirect(w, r, "/privacy/erasures/"+e.ID+"?done=requested", http.StatusSeeOther)
}

// confirmErasure asks before an erasure, saying what is erased for good
// and whether the subject's later events are kept out. The id is shown as
// typed: the person checks it before a request that cannot be undone.
func (s *Server) confirmErasure(w http.ResponseWriter, r *http.Request, f erasureForm, req upstream.ErasureRequest) {
	const erased = "This cannot be undone. Its events and late events are deleted from every partition, the rollups " +
		"adjusted, audit bodies holding them redacted, and archived months rewritten without them. "
	if f.ByUser {
		s.render(w, r, http.StatusOK, "confirm", "Erase a user's data", confirmData{
			Action:   "/privacy/erasures",
			Question: "Erase every event of user “" + f.UserID + "” of app “" + f.AppID + "”?",
			Detail: erased + "The privacy service keeps only the user id's pseudonyms, never the id. Events of this user " +
				"sent later are stored again: suppression applies to devices only.",
			Button: "Erase for good", Cancel: "/privacy",
			Fields: map[string]string{"app_id": f.AppID, "subject": "user", "user_id": f.UserID},
		}, "", "")
		return
	}
	suppress, detail := "no", "Events of this device that arrive later are stored again."
	if req.Suppress {
		suppress, detail = "yes", "Events of this device still on their way or sent later are dropped (and counted) until an admin lifts the suppression."
	}
	s.render(w, r, http.StatusOK, "confirm", "Erase a device's data", confirmData{
		Action:   "/privacy/erasures",
		Question: "Erase every event of device “" + f.DeviceID + "” of app “" + f.AppID + "”?",
		Detail:   erased + detail,
		Button:   "Erase for good", Cancel: "/privacy",
		Fields: map[string]string{"app_id": f.AppID, "subject": "device", "device_id": f.DeviceID, "suppress": suppress},
	}, "", "")
}

type erasureData struct {
	E          upstream.Erasure
	InProgress bool
	// Suppressed tells whether the device is suppressed now ("yes", "no",
	// or "" when the service could not say).
	Suppressed string
}

// erasureReport shows one erasure: its state, and once done the rows
// removed per store, the rollups adjusted, the archives rewritten, the
// final count, or why it failed.
func (s *Server) erasureReport(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such erasure request.")
		return
	}
	r, ok := s.privacyOn(w, r)
	if !ok {
		return
	}
	e, err := s.deps.Privacy.Erasure(r.Context(), sessionOf(r).Token, id)
	if err != nil {
		s.privacyFail(w, r, "Reading the erasure", err, false)
		return
	}
	d := erasureData{E: e, InProgress: e.Status == "queued" || e.Status == "running"}
	// The report is what the erasure did; whether the device is still
	// suppressed is today's state, which a lift may have changed since.
	if sup, err := s.deps.Privacy.Suppressions(r.Context(), sessionOf(r).Token); err != nil {
		s.log.Warn("privacy suppressions", "erasure_id", id, "err", err)
	} else {
		d.Suppressed = "no"
		for _, x := range sup {
			if x.AppID == e.AppID && x.DeviceID == e.DeviceID {
				d.Suppressed = "yes"
			}
		}
	}
	flash := map[string]string{"requested": "Erasure requested and recorded in the audit trail under your name."}[r.URL.Query().Get("done")]
	s.render(w, r, http.StatusOK, "erasure", "Erasure report", d, flash, "")
}

// liftSuppression lets a device's new events be stored again, after a
// confirmation (without confirm=yes it asks).
func (s *Server) liftSuppression(w http.ResponseWriter, r *http.Request) {
	r, ok := s.privacyOn(w, r)
	if !ok {
		return
	}
	app, dev := r.PostFormValue("app_id"), r.PostFormValue("device_id")
	if strings.TrimSpace(app) == "" || strings.TrimSpace(dev) == "" {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Name the app id and the device id of the suppression to lift. Nothing was changed.")
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "confirm", "Lift a suppression", confirmData{
			Action:   "/privacy/suppressions/lift",
			Question: "Lift the suppression of device “" + dev + "” of app “" + app + "”?",
			Detail:   "The device's events sent from now on are stored again. Its erased data does not come back. The lift is audited under your name.",
			Button:   "Lift suppression", Cancel: "/privacy",
			Fields: map[string]string{"app_id": app, "device_id": dev},
		}, "", "")
		return
	}
	if err := s.deps.Privacy.LiftSuppression(r.Context(), sessionOf(r).Token, app, dev); err != nil {
		if errors.Is(err, admininterface.ErrNotFound) {
			s.renderPrivacy(w, r, http.StatusNotFound, erasureForm{Suppress: true}, "", "That device is not suppressed (lifted already?). Nothing was changed.")
			return
		}
		if msg, status, ok := privacyRefusal(err, app, "device"); ok {
			s.renderPrivacy(w, r, status, erasureForm{Suppress: true}, "", msg)
			return
		}
		s.privacyFail(w, r, "Lifting the suppression", err, true)
		return
	}
	s.log.Info("suppression lifted", "by", sessionOf(r).User.Username, "app_id", app)
	http.Redirect(w, r, "/privacy?done=lifted", http.StatusSeeOther)
}

// privacyRefusal turns the privacy service's refusal of a request about
// a subject ("device" or "user") of app (a 4xx other than who-you-are and
// not-found, with its error code) into what the person reads, and the
// status to answer with. A field error's message names the field and why,
// never the value.
func privacyRefusal(err error, app, subject string) (string, int, bool) {
	var se *upstream.ServiceError
	if !errors.As(err, &se) || se.Code == "" || se.Status < 400 || se.Status >= 500 ||
		se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden || se.Status == http.StatusNotFound {
		return "", 0, false
	}
	switch se.Code {
	case "unknown_app":
		return "No data is stored for app “" + app + "”: check the app id. Nothing was requested.", se.Status, true
	case "erasure_in_progress":
		return "An erasure of this " + subject + " is already queued or running (see the list below). Nothing was requested.", se.Status, true
	}
	return "The privacy service refused: " + se.Message + ". Nothing was changed.", se.Status, true
}

// privacyFail answers a failed call to the privacy service: the person's
// session and roles as every page does, and an outage as a readable page
// saying whether something may have changed (change: a request or lift
// whose answer never came).
func (s *Server) privacyFail(w http.ResponseWriter, r *http.Request, what string, err error, change bool) {
	var se *upstream.ServiceError
	switch {
	case errors.Is(err, admininterface.ErrUnauthorized), errors.Is(err, admininterface.ErrForbidden),
		errors.Is(err, admininterface.ErrNotFound), errors.Is(err, admininterface.ErrInvalid):
		s.upstreamFail(w, r, what, err)
	case errors.As(err, &se) && se.Status == http.StatusServiceUnavailable && se.Code != "":
		// The service answered that it cannot take it now (its database or
		// the audit trail is down); its message says what was kept.
		s.log.Warn("privacy service unavailable", "what", what, "err", err)
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", what+": the privacy service cannot take it now ("+se.Message+"). Try again shortly.")
	default:
		s.log.Error("upstream call failed", "what", what, "err", err)
		status, msg := http.StatusBadGateway, what+": the privacy service did not answer; try again shortly."
		if errors.Is(err, context.DeadlineExceeded) {
			status, msg = http.StatusGatewayTimeout, what+": the privacy service did not answer in time; try again shortly."
		}
		if change {
			msg += " The request may have reached it: look at the erasures list before asking again."
		}
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, status, "unavailable", msg)
	}
}

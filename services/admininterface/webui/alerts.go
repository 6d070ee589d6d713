package webui

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
)

// The alerts pages read and change the alerts service (rules, their
// history, the notifications given up on, SIEM forwarders) with the
// person's own access token: the alerts service lets analysts read and
// admins change, and audits every change itself.

// alertsListMax is how many transitions a history or dead-letter page lists.
const alertsListMax = 100

// silenceMax is the longest silence the form offers, in hours (the alerts
// service takes at most a year).
const silenceMax = 24 * 30

type alertsData struct {
	Rules    []upstream.AlertRule
	CanEdit  bool
	Form     ruleForm
	Disabled bool
	// OSFamilies are the OS values a rule can be scoped to (the alerts
	// service's alerts.OSFamilies).
	OSFamilies []string
}

// osFamilies are the alerts service's OS families, offered in the form.
var osFamilies = []string{"android", "ios", "ipados", "windows", "linux", "macos", "other"}

// ruleForm is the create-a-rule form as typed, kept on a refusal.
type ruleForm struct {
	Name, AppID, Threat, Country, OS, Kind, Window, Threshold, Factor, ChannelType, ChannelURL, ChannelTo string
}

// alertsOn answers when no alerts service is configured; it returns false
// when it answered.
func (s *Server) alertsOn(w http.ResponseWriter, r *http.Request) bool {
	if s.deps.Alerts.Client == nil {
		s.fail(w, r, http.StatusNotFound, "not_found", "No alerts service is configured (ALERTS_SERVICE_URL).")
		return false
	}
	return true
}

func canEdit(r *http.Request) bool { return sessionOf(r).User.Has(admininterface.RoleAdmin) }

func (s *Server) alertsPage(w http.ResponseWriter, r *http.Request) {
	flash := map[string]string{"created": "Rule created.", "deleted": "Rule deleted.", "silenced": "Silence saved."}[r.URL.Query().Get("done")]
	s.renderAlerts(w, r, http.StatusOK, ruleForm{Kind: "count", Window: "300", Threshold: "10", ChannelType: "webhook"}, flash, "")
}

func (s *Server) renderAlerts(w http.ResponseWriter, r *http.Request, status int, f ruleForm, flash, errMsg string) {
	if !s.alertsOn(w, r) {
		return
	}
	rules, err := s.deps.Alerts.Rules(r.Context(), sessionOf(r).Token)
	if err != nil {
		s.upstreamFail(w, r, "Listing the alert rules", err)
		return
	}
	s.render(w, r, status, "alerts", "Alert rules", alertsData{Rules: rules, CanEdit: canEdit(r), Form: f,
		OSFamilies: osFamilies}, flash, errMsg)
}

// createRule posts the form to the alerts service; a bad field re-shows
// the form with the reason, and nothing is created.
func (s *Server) createRule(w http.ResponseWriter, r *http.Request) {
	if !s.alertsOn(w, r) {
		return
	}
	f := ruleForm{}
	for p, v := range map[*string]string{&f.Name: "name", &f.AppID: "app_id", &f.Threat: "threat", &f.Country: "country", &f.OS: "os", &f.Kind: "kind",
		&f.Window: "window_seconds", &f.Threshold: "threshold", &f.Factor: "factor", &f.ChannelType: "channel_type",
		&f.ChannelURL: "channel_url", &f.ChannelTo: "channel_to"} {
		*p = strings.TrimSpace(r.PostFormValue(v))
	}
	rule := upstream.AlertRule{Name: f.Name, AppID: f.AppID, Threat: f.Threat, Country: f.Country, OS: f.OS, Kind: f.Kind,
		Channel: upstream.AlertChannel{Type: f.ChannelType, URL: f.ChannelURL, To: f.ChannelTo, Secret: r.PostFormValue("channel_secret")}}
	var err error
	if rule.WindowSeconds, err = strconv.Atoi(f.Window); err != nil {
		s.renderAlerts(w, r, http.StatusBadRequest, f, "", "The window must be a whole number of seconds.")
		return
	}
	if rule.Threshold, err = strconv.ParseInt(f.Threshold, 10, 64); err != nil {
		s.renderAlerts(w, r, http.StatusBadRequest, f, "", "The threshold must be a whole number.")
		return
	}
	if f.Factor != "" {
		if rule.Factor, err = strconv.ParseFloat(f.Factor, 64); err != nil {
			s.renderAlerts(w, r, http.StatusBadRequest, f, "", "The factor must be a number.")
			return
		}
	}
	created, err := s.deps.Alerts.CreateRule(r.Context(), sessionOf(r).Token, rule)
	if err != nil {
		if isInvalid(err) {
			s.renderAlerts(w, r, http.StatusBadRequest, f, "", "The alerts service refused: "+err.Error())
			return
		}
		s.upstreamFail(w, r, "Creating the rule", err)
		return
	}
	s.log.Info("alert rule created", "by", sessionOf(r).User.Username, "rule_id", created.ID)
	http.Redirect(w, r, "/alerts?done=created", http.StatusSeeOther)
}

// pathID is the {id} of the path when it is a UUID; otherwise it answers 404.
func (s *Server) pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such rule or forwarder.")
		return "", false
	}
	return id, true
}

type historyData struct {
	Rule        upstream.AlertRule
	Transitions []upstream.AlertTransition
	CanEdit     bool
}

func (s *Server) ruleHistory(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok || !s.alertsOn(w, r) {
		return
	}
	tok := sessionOf(r).Token
	rule, err := s.deps.Alerts.Rule(r.Context(), tok, id)
	if err != nil {
		s.upstreamFail(w, r, "Finding the rule", err)
		return
	}
	ts, err := s.deps.Alerts.History(r.Context(), tok, id, alertsListMax)
	if err != nil {
		s.upstreamFail(w, r, "Reading the rule's history", err)
		return
	}
	s.render(w, r, http.StatusOK, "alert_history", "Rule “"+rule.Name+"”", historyData{Rule: rule, Transitions: ts, CanEdit: canEdit(r)}, "", "")
}

func (s *Server) confirmDeleteRule(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok || !s.alertsOn(w, r) {
		return
	}
	rule, err := s.deps.Alerts.Rule(r.Context(), sessionOf(r).Token, id)
	if err != nil {
		s.upstreamFail(w, r, "Finding the rule", err)
		return
	}
	s.render(w, r, http.StatusOK, "confirm", "Delete an alert rule", confirmData{
		Action: "/alerts/rules/" + id + "/delete", Question: "Delete rule “" + rule.Name + "” (" + id + ")?",
		Detail: "It stops being evaluated; its history stays in the audit trail.", Button: "Delete rule", Cancel: "/alerts",
	}, "", "")
}

func (s *Server) deleteRule(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok || !s.alertsOn(w, r) {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/alerts/rules/"+id+"/delete", http.StatusSeeOther)
		return
	}
	if err := s.deps.Alerts.DeleteRule(r.Context(), sessionOf(r).Token, id); err != nil {
		s.upstreamFail(w, r, "Deleting the rule", err)
		return
	}
	s.log.Info("alert rule deleted", "by", sessionOf(r).User.Username, "rule_id", id)
	http.Redirect(w, r, "/alerts?done=deleted", http.StatusSeeOther)
}

// silenceRule silences a rule for the hours chosen; 0 ends a silence.
func (s *Server) silenceRule(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	h, err := strconv.Atoi(r.PostFormValue("hours"))
	if err != nil || h < 0 || h > silenceMax {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Silence for 0 to "+strconv.Itoa(silenceMax)+" hours.")
		return
	}
	if !s.alertsOn(w, r) {
		return
	}
	var until *time.Time
	if h > 0 {
		u := s.now().Add(time.Duration(h) * time.Hour).UTC()
		until = &u
	}
	if err := s.deps.Alerts.SilenceRule(r.Context(), sessionOf(r).Token, id, until); err != nil {
		s.upstreamFail(w, r, "Silencing the rule", err)
		return
	}
	s.log.Info("alert rule silenced", "by", sessionOf(r).User.Username, "rule_id", id, "hours", h)
	http.Redirect(w, r, "/alerts?done=silenced", http.StatusSeeOther)
}

func (s *Server) deadNotifications(w http.ResponseWriter, r *http.Request) {
	if !s.alertsOn(w, r) {
		return
	}
	ts, err := s.deps.Alerts.DeadNotifications(r.Context(), sessionOf(r).Token, alertsListMax)
	if err != nil {
		s.upstreamFail(w, r, "Listing the undelivered notifications", err)
		return
	}
	s.render(w, r, http.StatusOK, "alert_dead", "Undelivered notifications", struct{ Transitions []upstream.AlertTransition }{ts}, "", "")
}

type forwarderRow struct {
	upstream.Forwarder
	Status upstream.ForwarderStatus
	Err    string
}

type forwardersData struct {
	Forwarders []forwarderRow
	CanEdit    bool
	Form       upstream.Forwarder
	AppIDs     string
	Threats    string
}

func (s *Server) forwardersPage(w http.ResponseWriter, r *http.Request) {
	flash := map[string]string{"created": "Forwarder created: it starts at the newest threat event.", "deleted": "Forwarder deleted."}[r.URL.Query().Get("done")]
	s.renderForwarders(w, r, http.StatusOK, forwardersData{Form: upstream.Forwarder{Type: "syslog", Format: "cef"}}, flash, "")
}

func (s *Server) renderForwarders(w http.ResponseWriter, r *http.Request, status int, d forwardersData, flash, errMsg string) {
	if !s.alertsOn(w, r) {
		return
	}
	tok := sessionOf(r).Token
	fs, err := s.deps.Alerts.Forwarders(r.Context(), tok)
	if err != nil {
		s.upstreamFail(w, r, "Listing the forwarders", err)
		return
	}
	d.CanEdit = canEdit(r)
	d.Forwarders = make([]forwarderRow, 0, len(fs))
	for _, f := range fs {
		row := forwarderRow{Forwarder: f}
		if row.Status, err = s.deps.Alerts.ForwarderStatus(r.Context(), tok, f.ID); err != nil {
			s.log.Warn("forwarder status", "forwarder_id", f.ID, "err", err)
			row.Err = "unknown: the alerts service did not say"
		}
		d.Forwarders = append(d.Forwarders, row)
	}
	s.render(w, r, status, "forwarders", "SIEM forwarders", d, flash, errMsg)
}

// splitList reads a comma-separated form field.
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) createForwarder(w http.ResponseWriter, r *http.Request) {
	if !s.alertsOn(w, r) {
		return
	}
	d := forwardersData{AppIDs: r.PostFormValue("app_ids"), Threats: r.PostFormValue("threats"), Form: upstream.Forwarder{
		Name: strings.TrimSpace(r.PostFormValue("name")), Type: r.PostFormValue("type"), URL: strings.TrimSpace(r.PostFormValue("url")),
		Format: r.PostFormValue("format")}}
	d.Form.AppIDs, d.Form.Threats = splitList(d.AppIDs), splitList(d.Threats)
	f, err := s.deps.Alerts.CreateForwarder(r.Context(), sessionOf(r).Token, d.Form)
	if err != nil {
		if isInvalid(err) {
			s.renderForwarders(w, r, http.StatusBadRequest, d, "", "The alerts service refused: "+err.Error())
			return
		}
		s.upstreamFail(w, r, "Creating the forwarder", err)
		return
	}
	s.log.Info("forwarder created", "by", sessionOf(r).User.Username, "forwarder_id", f.ID)
	http.Redirect(w, r, "/alerts/forwarders?done=created", http.StatusSeeOther)
}

func (s *Server) confirmDeleteForwarder(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok || !s.alertsOn(w, r) {
		return
	}
	s.render(w, r, http.StatusOK, "confirm", "Delete a forwarder", confirmData{
		Action: "/alerts/forwarders/" + id + "/delete", Question: "Delete forwarder " + id + "?",
		Detail: "Threat events stop going to its destination; a new forwarder starts at the newest event.",
		Button: "Delete forwarder", Cancel: "/alerts/forwarders",
	}, "", "")
}

func (s *Server) deleteForwarder(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok || !s.alertsOn(w, r) {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/alerts/forwarders/"+id+"/delete", http.StatusSeeOther)
		return
	}
	if err := s.deps.Alerts.DeleteForwarder(r.Context(), sessionOf(r).Token, id); err != nil {
		s.upstreamFail(w, r, "Deleting the forwarder", err)
		return
	}
	s.log.Info("forwarder deleted", "by", sessionOf(r).User.Username, "forwarder_id", id)
	http.Redirect(w, r, "/alerts/forwarders?done=deleted", http.StatusSeeOther)
}

package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"threatview/platform/httpserver"
	"threatview/platform/redirect"
	"threatview/visualrenderer/identity"

	"threatview/visualrenderer"
)

// rangePreset is one choice of the range filter: the n buckets of
// granularity g up to and including the current one.
type rangePreset struct {
	ID, Label string
	G         visualrenderer.Granularity
	N         int
}

var presets = []rangePreset{
	{"24h", "Last 24 hours (hourly)", visualrenderer.Hour, 24},
	{"7d", "Last 7 days (hourly)", visualrenderer.Hour, 7 * 24},
	{"30d", "Last 30 days (daily)", visualrenderer.Day, 30},
	{"90d", "Last 90 days (daily)", visualrenderer.Day, 90},
	{"12mo", "Last 12 months (monthly)", visualrenderer.Month, 12},
}

const defaultPreset = "30d"

// filter is a page's app and range, read from and kept in the URL: either
// a preset (range=7d) or an explicit from, to and granularity as in the API.
type filter struct {
	AppID  string
	Range  string // preset id, or "" for an explicit range
	Query  visualrenderer.Query
	Params url.Values // what keeps the filter in a link
}

func (h *Handler) parseFilter(r *http.Request) (filter, error) {
	v := r.URL.Query()
	f := filter{AppID: v.Get("app_id"), Params: url.Values{}}
	if f.AppID != "" {
		f.Params.Set("app_id", f.AppID)
	}
	if v.Get("from") != "" || v.Get("to") != "" {
		q, err := visualrenderer.ParseQuery(string(visualrenderer.Country), v, h.now())
		if err != nil {
			return f, err
		}
		f.Query = q
		for _, k := range []string{"granularity", "from", "to"} {
			f.Params.Set(k, q.Encode().Get(k))
		}
		return f, nil
	}
	f.Range = v.Get("range")
	if f.Range == "" {
		f.Range = defaultPreset
	}
	var p *rangePreset
	for i := range presets {
		if presets[i].ID == f.Range {
			p = &presets[i]
		}
	}
	if p == nil {
		return f, fmt.Errorf("%w: unknown range %q", visualrenderer.ErrInvalid, f.Range)
	}
	to := p.G.Add(p.G.Truncate(h.now()), 1)
	f.Query = visualrenderer.Query{AppID: f.AppID, Granularity: p.G, From: p.G.Add(to, -p.N), To: to}
	f.Params.Set("range", f.Range)
	return f, nil
}

// URL returns path with the filter (and extra parameters) in its query.
func (f filter) URL(path string, extra ...string) string {
	v := url.Values{}
	for k, vs := range f.Params {
		v[k] = vs
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// ChartURL returns the URL of a chart of dim over exactly the page's
// buckets, so the picture and the numbers next to it agree.
func (f filter) ChartURL(dim, kind string, width, height int) string {
	v := f.Query.Encode()
	v.Del("top")
	v.Set("kind", kind)
	v.Set("width", itoa(width))
	v.Set("height", itoa(height))
	return "/v1/charts/" + dim + ".svg?" + v.Encode()
}

// StatsURL returns the stats API's URL for dim over the page's buckets.
func (f filter) StatsURL(dim string) string {
	return "/v1/stats/" + dim + "?" + f.Query.Encode().Encode()
}

func itoa(n int) string { return strconv.Itoa(n) }

// formatPercent renders a share as a percentage with one decimal.
func formatPercent(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) }

// row is one line of a ranked table.
type row struct {
	Rank    int
	Key     string
	Count   int64
	Percent string // share of the total, "12.5"
	Share   float64
}

func rows(s visualrenderer.Stats, n int) []row {
	var out []row
	for i, ser := range s.Series {
		if n > 0 && i == n {
			break
		}
		r := row{Rank: i + 1, Key: ser.Key, Count: ser.Total}
		if s.Total > 0 {
			r.Share = float64(ser.Total) / float64(s.Total)
			r.Percent = formatPercent(r.Share)
		}
		out = append(out, r)
	}
	return out
}

// page is what every dashboard template gets.
type page struct {
	Title     string
	Nav       string // the dimension page shown, "" for the overview
	Filter    filter
	Apps      []string
	Presets   []rangePreset
	CSRF      string
	Error     string
	Username  string // the sign-in form's username, kept after a refusal
	From, To  string // the range shown, UTC
	Dims      []visualrenderer.Dimension
	AdminURL  string // the Administration Interface, linked as the home; "": none
	Overview  *overview
	Dimension *dimensionData
}

type overview struct {
	Events, Threats         int64
	Countries, Models, OSes int
	TopCountries, TopModels []row
	OSSplit, TopThreats     []row
	ThreatTypes             int
}

type dimensionData struct {
	Dim   visualrenderer.Dimension
	Total int64
	Keys  int
	Rows  []row
}

func (h *Handler) basePage(w http.ResponseWriter, r *http.Request, title string) (page, bool) {
	p := page{Title: title, Presets: presets, CSRF: h.auth.csrfToken(w, r), Dims: visualrenderer.Dimensions}
	f, err := h.parseFilter(r)
	p.Filter = f
	apps, aerr := h.store.Apps(r.Context())
	if aerr != nil {
		h.renderError(w, r, p, aerr)
		return p, false
	}
	p.Apps = apps
	if err != nil {
		h.renderError(w, r, p, err)
		return p, false
	}
	p.From = f.Query.From.Format("2006-01-02 15:04")
	p.To = f.Query.To.Format("2006-01-02 15:04")
	return p, true
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, p page, err error) {
	status := http.StatusBadRequest
	p.Error = strings.TrimPrefix(err.Error(), "invalid query: ")
	if !errors.Is(err, visualrenderer.ErrInvalid) {
		h.log.Error("dashboard failed", "path", r.URL.Path, "err", err)
		status = http.StatusServiceUnavailable
		p.Error = "The stats database is unavailable; try again in a moment."
	}
	if p.Presets == nil {
		p.Presets = presets
	}
	p.Overview, p.Dimension = nil, nil
	h.render(w, status, "overview", p)
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, p page) {
	p.AdminURL = h.admin
	var buf bytes.Buffer
	if err := h.pages[name].Execute(&buf, p); err != nil {
		h.log.Error("render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// overview serves GET /: totals, events over time, top countries, top
// device models, the OS split, threats over time and by type.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	p, ok := h.basePage(w, r, "Overview")
	if !ok {
		return
	}
	get := func(d visualrenderer.Dimension) (visualrenderer.Stats, error) {
		q := p.Filter.Query
		q.Dimension, q.TotalsOnly = d, true
		return h.store.Stats(r.Context(), q)
	}
	o := &overview{}
	var all [4]visualrenderer.Stats
	for i, d := range visualrenderer.Dimensions {
		s, err := get(d)
		if err != nil {
			h.renderError(w, r, p, err)
			return
		}
		all[i] = s
	}
	o.Events, o.Countries, o.TopCountries = all[0].Total, len(all[0].Series), rows(all[0], 10)
	o.Models, o.TopModels = len(all[1].Series), rows(all[1], 10)
	o.OSes, o.OSSplit = len(all[2].Series), rows(all[2], 0)
	o.Threats, o.ThreatTypes, o.TopThreats = all[3].Total, len(all[3].Series), rows(all[3], 10)
	p.Overview = o
	h.render(w, http.StatusOK, "overview", p)
}

// dimensionPage serves GET /dashboards/{dimension}: one dimension over
// time and ranked, every key.
func (h *Handler) dimensionPage(w http.ResponseWriter, r *http.Request) {
	d := visualrenderer.Dimension(chi.URLParam(r, "dimension"))
	if !d.Valid() {
		http.Error(w, "no such dashboard", http.StatusNotFound)
		return
	}
	p, ok := h.basePage(w, r, d.Title())
	if !ok {
		return
	}
	p.Nav = string(d)
	q := p.Filter.Query
	q.Dimension, q.TotalsOnly = d, true
	s, err := h.store.Stats(r.Context(), q)
	if err != nil {
		h.renderError(w, r, p, err)
		return
	}
	p.Dimension = &dimensionData{Dim: d, Total: s.Total, Keys: len(s.Series), Rows: rows(s, 100)}
	h.render(w, http.StatusOK, "dimension", p)
}

// signinForm serves GET /signin.
func (h *Handler) signinForm(w http.ResponseWriter, r *http.Request) {
	next, _ := redirect.Local(r.URL.Query().Get("next"))
	p := page{Title: "Sign in", CSRF: h.auth.csrfToken(w, r), Filter: filter{Params: url.Values{"next": {next}}}}
	if h.auth.idp == nil {
		p.Error = "Sign-in is not set up here: the renderer has no identity service (IDENTITY_SERVICE_URL)."
	}
	h.render(w, http.StatusOK, "signin", p)
}

// Bounds of the sign-in form's fields.
const (
	maxUsername = 256
	maxPassword = 1024
)

// signin checks the CSRF token, signs the person in at identity and sets
// the session. Neither the password nor the typed username is logged: a
// password typed into the wrong field must not reach the logs.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	next, _ := redirect.Local(r.PostFormValue("next"))
	p := page{Title: "Sign in", CSRF: h.auth.csrfToken(w, r), Filter: filter{Params: url.Values{"next": {next}}}}
	fail := func(status int, msg string) {
		p.Error = msg
		h.render(w, status, "signin", p)
	}
	if !h.auth.csrfOK(r) {
		fail(http.StatusForbidden, "The form expired; please sign in again.")
		return
	}
	if h.auth.idp == nil {
		fail(http.StatusServiceUnavailable, "Sign-in is not set up here: the renderer has no identity service (IDENTITY_SERVICE_URL).")
		return
	}
	user, pw := strings.TrimSpace(r.PostFormValue("username")), r.PostFormValue("password")
	if user == "" || pw == "" || len(user) > maxUsername || len(pw) > maxPassword {
		fail(http.StatusBadRequest, "Type your username and password.")
		return
	}
	p.Username = user
	ctx, cancel := context.WithTimeout(r.Context(), identityTimeout)
	defer cancel()
	s, err := h.auth.idp.Login(ctx, user, pw, httpserver.ClientAddr(r, h.auth.trusted))
	var te *identity.ThrottledError
	switch {
	case errors.As(err, &te):
		secs := int(math.Ceil(te.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		fail(http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins from here. Try again in %s.", waitText(te.RetryAfter)))
		return
	case errors.Is(err, identity.ErrRefused):
		fail(http.StatusUnauthorized, "Wrong username or password.")
		return
	case err != nil:
		h.log.Warn("sign-in failed: identity unavailable", "err", err)
		w.Header().Set("Retry-After", "5")
		fail(http.StatusServiceUnavailable, "The identity service cannot be reached. Try again shortly.")
		return
	}
	c, err := h.auth.verifier.Verify(r.Context(), s.AccessToken)
	if err != nil {
		h.log.Warn("sign-in failed: access token not verified", "err", err)
		w.Header().Set("Retry-After", "5")
		fail(http.StatusServiceUnavailable, "Your sign-in cannot be checked right now. Try again shortly.")
		return
	}
	if !c.HasAny(roles...) {
		// Signed in but not allowed here: end the session identity just
		// made rather than leave it unused.
		_ = h.auth.idp.Logout(context.WithoutCancel(ctx), s.RefreshToken)
		fail(http.StatusForbidden, "Your account has no role that opens the dashboards (analyst or admin).")
		return
	}
	h.auth.setSession(w, fromIdentity(s))
	h.log.Info("signed in", "username", c.Username)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signout ends the session at identity (its refresh tokens are revoked)
// and clears the cookie.
func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !h.auth.csrfOK(r) {
		http.Error(w, "the form expired; reload the page", http.StatusForbidden)
		return
	}
	if s, ok := h.auth.session(r); ok && h.auth.idp != nil {
		ctx, cancel := context.WithTimeout(r.Context(), identityTimeout)
		if err := h.auth.idp.Logout(ctx, s.Refresh); err != nil {
			h.log.Warn("sign-out: identity did not revoke the session", "err", err)
		}
		cancel()
	}
	h.auth.clearSession(w)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// waitText says a wait as people read it.
func waitText(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d seconds", int(math.Ceil(d.Seconds())))
	}
	return fmt.Sprintf("%d minutes", int(math.Ceil(d.Minutes())))
}

package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

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
	From, To  string // the range shown, UTC
	Dims      []visualrenderer.Dimension
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
	h.render(w, http.StatusOK, "signin", page{Title: "Sign in", CSRF: h.auth.csrfToken(w, r), Filter: filter{Params: url.Values{"next": {safeNext(r.URL.Query().Get("next"))}}}})
}

// signin checks the CSRF token and the admin key and sets the session.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	next := safeNext(r.PostFormValue("next"))
	p := page{Title: "Sign in", CSRF: h.auth.csrfToken(w, r), Filter: filter{Params: url.Values{"next": {next}}}}
	if !csrfOK(r) {
		p.Error = "The form expired; please sign in again."
		h.render(w, http.StatusForbidden, "signin", p)
		return
	}
	if !h.auth.checkKey(r.PostFormValue("key")) {
		p.Error = "That key is not valid."
		h.render(w, http.StatusUnauthorized, "signin", p)
		return
	}
	v, exp := h.auth.newSession()
	h.auth.setCookie(w, sessionCookie, v, int(time.Until(exp).Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signout clears the session.
func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !csrfOK(r) {
		http.Error(w, "the form expired; reload the page", http.StatusForbidden)
		return
	}
	h.auth.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// safeNext keeps a redirect target on this site: a path, never "//host".
func safeNext(s string) string {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/\\") || strings.ContainsAny(s, "\r\n") {
		return "/"
	}
	return s
}

package webui

import (
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"threatview/admininterface/upstream"
)

// dashRange is one choice of the dashboards' time range.
type dashRange struct {
	Value, Label, granularity string
	span                      time.Duration
	Selected                  bool
}

var dashRanges = []dashRange{
	{Value: "24h", Label: "Last 24 hours", granularity: "hour", span: 24 * time.Hour},
	{Value: "7d", Label: "Last 7 days", granularity: "day", span: 7 * 24 * time.Hour},
	{Value: "30d", Label: "Last 30 days", granularity: "day", span: 30 * 24 * time.Hour},
}

var dashDimensions = []struct{ dim, title string }{
	{"country", "Countries"}, {"device_model", "Device models"}, {"os", "Operating systems"}, {"threat", "Threats"},
}

type panel struct {
	Dimension, Title string
	Total            int64
	Series           []upstream.Series
	Err              string
}

type dashData struct {
	AppID       string
	Ranges      []dashRange
	From, To    time.Time
	Granularity string
	Query       template.URL // the page's query string (built by url.Values.Encode)
	Panels      []panel
}

// dashQuery reads the form into the renderer's query: the range ends at the
// next bucket boundary so the current hour or day is included.
func (s *Server) dashQuery(q url.Values) (dashData, url.Values, bool) {
	d := dashData{AppID: strings.TrimSpace(q.Get("app_id"))}
	sel := q.Get("range")
	if sel == "" {
		sel = "24h"
	}
	var chosen *dashRange
	for _, r := range dashRanges {
		r.Selected = r.Value == sel
		if r.Selected {
			rc := r
			chosen = &rc
		}
		d.Ranges = append(d.Ranges, r)
	}
	if chosen == nil || len(d.AppID) > 64 {
		return d, nil, false
	}
	trunc := time.Hour
	if chosen.granularity == "day" {
		trunc = 24 * time.Hour
	}
	d.To = s.now().UTC().Truncate(trunc).Add(trunc)
	d.From = d.To.Add(-chosen.span)
	d.Granularity = chosen.granularity
	v := url.Values{"granularity": {chosen.granularity}, "from": {d.From.Format(time.RFC3339)}, "to": {d.To.Format(time.RFC3339)}, "top": {"10"}}
	if d.AppID != "" {
		v.Set("app_id", d.AppID)
	}
	page := url.Values{"range": {chosen.Value}}
	if d.AppID != "" {
		page.Set("app_id", d.AppID)
	}
	d.Query = template.URL(page.Encode())
	return d, v, true
}

func (s *Server) dashboards(w http.ResponseWriter, r *http.Request) {
	d, q, ok := s.dashQuery(r.URL.Query())
	if !ok {
		s.render(w, r, http.StatusBadRequest, "dashboards", "Dashboards", d, "", "Choose one of the ranges offered; an app id has at most 64 characters.")
		return
	}
	if s.deps.Renderer.Client == nil {
		s.render(w, r, http.StatusOK, "dashboards", "Dashboards", d, "", "No visual renderer is configured (VISUALRENDERER_SERVICE_URL).")
		return
	}
	token := sessionOf(r).Token
	d.Panels = make([]panel, len(dashDimensions))
	errs := make([]error, len(dashDimensions))
	var wg sync.WaitGroup
	for i, dim := range dashDimensions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := panel{Dimension: dim.dim, Title: dim.title}
			st, err := s.deps.Renderer.Stats(r.Context(), token, dim.dim, q)
			if err != nil {
				errs[i] = err
				p.Err = "The visual renderer did not answer for this panel."
			} else {
				p.Total, p.Series = st.Total, st.Series
			}
			d.Panels[i] = p
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && (upstream.IsAuth(err) || isForbidden(err)) {
			s.upstreamFail(w, r, "Reading the dashboards", err)
			return
		}
	}
	s.render(w, r, http.StatusOK, "dashboards", "Dashboards", d, "", "")
}

// dashboardChart passes the renderer's SVG chart through, so the page's
// images come from this origin with the person's own credentials.
func (s *Server) dashboardChart(w http.ResponseWriter, r *http.Request) {
	dim := chi.URLParam(r, "dimension")
	known := false
	for _, d := range dashDimensions {
		known = known || d.dim == dim
	}
	_, q, ok := s.dashQuery(r.URL.Query())
	if !known || !ok {
		s.fail(w, r, http.StatusNotFound, "not_found", "No such chart.")
		return
	}
	if s.deps.Renderer.Client == nil {
		s.fail(w, r, http.StatusNotFound, "not_found", "No visual renderer is configured.")
		return
	}
	resp, err := s.deps.Renderer.Chart(r.Context(), sessionOf(r).Token, dim, q)
	if err != nil {
		s.upstreamFail(w, r, "Drawing the chart", err)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "image/svg+xml")
	// An SVG opened on its own must not run script either.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 4<<20))
}

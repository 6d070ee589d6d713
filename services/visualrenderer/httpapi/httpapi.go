// Package httpapi is the visual renderer's HTTP surface: the stats API, the
// charts, the dashboards and the sign-in form, behind one Auth check, plus
// /healthz, /readyz and /metrics.
package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"threatview/api"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/httpserver"
	"threatview/visualrenderer"
	"threatview/visualrenderer/chart"
	"threatview/visualrenderer/web"
)

// csp allows only this origin's styles, images and forms: no scripts at
// all, no inline styles, no framing.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// svgCSP applies when an SVG chart is opened as a document: the plotting
// library styles its shapes with style attributes, and sandbox forbids any
// script (there is none: keys are escaped).
const svgCSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"

// Handler serves every route.
type Handler struct {
	store visualrenderer.Store
	auth  *Auth
	log   *slog.Logger
	now   func() time.Time
	pages map[string]*template.Template
	inv   *Investigation // the investigation read API; nil: not served
	admin string         // the Administration Interface's URL; "": no link
}

// Option adds to New's routes: an Investigation (the investigation read
// API) or an AdminURL.
type Option interface{ apply(h *Handler) }

func (i Investigation) apply(h *Handler) { h.inv = &i }

// AdminURL is the Administration Interface's public URL, which the pages
// link to as the people's home; blank: no link.
type AdminURL string

func (u AdminURL) apply(h *Handler) { h.admin = string(u) }

// New returns the service's routes, with the options'.
func New(store visualrenderer.Store, auth *Auth, reg *prometheus.Registry, checks map[string]httpserver.Check, log *slog.Logger, opts ...Option) http.Handler {
	h := &Handler{store: store, auth: auth, log: log, now: time.Now, pages: web.Templates()}
	for _, o := range opts {
		o.apply(h)
	}
	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "visualrenderer"), headers)
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	httpserver.MountOps(r, reg, checks)
	httpserver.MountSpec(r, api.VisualRenderer)
	static, _ := fs.Sub(web.Static, "static")
	r.Handle("/static/*", http.StripPrefix("/static/", cacheFor(time.Hour, http.FileServerFS(static))))
	r.Get("/favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	// Cross-origin POSTs (a forged sign-in or sign-out) are refused by the
	// browser-reported origin as well as by the form's CSRF token.
	cop := http.NewCrossOriginProtection()
	r.Get("/signin", h.signinForm)
	r.Method(http.MethodPost, "/signin", cop.Handler(http.HandlerFunc(h.signin)))
	r.Method(http.MethodPost, "/signout", cop.Handler(http.HandlerFunc(h.signout)))
	r.Group(func(r chi.Router) {
		r.Use(auth.API)
		r.Get("/v1/stats/{dimension}", h.stats)
		r.Get("/v1/charts/{file}", h.chart)
		h.mountInvestigation(r)
	})
	r.Group(func(r chi.Router) {
		r.Use(auth.Page)
		r.Get("/", h.overview)
		r.Get("/dashboards", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/?"+r.URL.RawQuery, http.StatusSeeOther)
		})
		r.Get("/dashboards/{dimension}", h.dimensionPage)
	})
	return r
}

func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

func cacheFor(d time.Duration, next http.Handler) http.Handler {
	v := "public, max-age=" + strconv.Itoa(int(d.Seconds()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", v)
		next.ServeHTTP(w, r)
	})
}

// writeErr maps an error to its status: the one table of this service.
func (h *Handler) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, visualrenderer.ErrInvalid), errors.Is(err, chart.ErrInvalid):
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", strings.TrimPrefix(err.Error(), "invalid query: "), nil)
	case errors.Is(err, visualrenderer.ErrTooLarge):
		httpserver.WriteError(w, http.StatusUnprocessableEntity, "too_many_points", strings.TrimPrefix(err.Error(), "stats: "),
			map[string]any{"max_points": visualrenderer.MaxPoints})
	case errors.Is(err, visualrenderer.ErrUnavailable):
		h.log.Error("stats unavailable", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the stats database is unavailable; retry later", nil)
	default:
		h.log.Error("request failed", "path", r.URL.Path, "err", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
	}
}

// stats answers GET /v1/stats/{dimension}.
func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	q, err := visualrenderer.ParseQuery(chi.URLParam(r, "dimension"), r.URL.Query(), h.now())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	s, err := h.store.Stats(r.Context(), q)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "private, max-age=10")
	httpserver.WriteJSON(w, http.StatusOK, s)
}

// chart answers GET /v1/charts/{dimension}.{svg,png} with the stats query
// plus kind (line, the default; bar; total, one line of every key summed),
// width and height in pixels. Without top, a line chart shows the 6 largest
// keys and a bar chart the 10 largest.
func (h *Handler) chart(w http.ResponseWriter, r *http.Request) {
	file := chi.URLParam(r, "file")
	if file == "map.svg" {
		h.mapSVG(w, r)
		return
	}
	dim, ext, ok := strings.Cut(file, ".")
	if !ok {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "charts are /v1/charts/{dimension}.svg or .png", nil)
		return
	}
	o := chart.Options{Format: chart.Format(ext)}
	if o.Format != chart.SVG && o.Format != chart.PNG {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "charts are /v1/charts/{dimension}.svg or .png", nil)
		return
	}
	v := r.URL.Query()
	kind := v.Get("kind")
	total := kind == "total"
	if total {
		kind = string(chart.Lines)
	}
	o.Kind = chart.Kind(kind)
	var err error
	if o.Width, err = intParam(v.Get("width")); err == nil {
		o.Height, err = intParam(v.Get("height"))
	}
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	if v.Get("top") == "" && !total {
		if o.Kind == chart.Bars {
			v.Set("top", "10")
		} else {
			v.Set("top", "6")
		}
	}
	q, err := visualrenderer.ParseQuery(dim, v, h.now())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	q.Summed = total
	s, err := h.store.Stats(r.Context(), q)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	if total {
		s = sumSeries(s)
		o.Title = chart.Title(s, q.AppID, o.Kind)
		o.Title = strings.Replace(o.Title, " by "+lowerTitle(s.Dimension), "", 1)
	}
	var buf bytes.Buffer
	if err := chart.Render(&buf, s, q.AppID, o); err != nil {
		h.writeErr(w, r, err)
		return
	}
	if o.Format == chart.SVG {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Content-Security-Policy", svgCSP)
	} else {
		w.Header().Set("Content-Type", "image/png")
	}
	w.Header().Set("Cache-Control", "private, max-age=10")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

func lowerTitle(d visualrenderer.Dimension) string {
	t := d.Title()
	if t == "OS" {
		return t
	}
	return strings.ToLower(t)
}

// sumSeries folds every series into one, "All <unit>".
func sumSeries(s visualrenderer.Stats) visualrenderer.Stats {
	byT := map[time.Time]int64{}
	for _, ser := range s.Series {
		for _, p := range ser.Points {
			byT[p.T] += p.Count
		}
	}
	one := visualrenderer.Series{Key: "All " + s.Dimension.Unit(), Total: s.Total}
	for t := s.From; t.Before(s.To); t = s.Granularity.Add(t, 1) {
		if n, ok := byT[t]; ok {
			one.Points = append(one.Points, visualrenderer.Point{T: t, Count: n})
		}
	}
	s.Series = []visualrenderer.Series{one}
	return s
}

func intParam(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: width and height are whole numbers of pixels, not %q", chart.ErrInvalid, s)
	}
	return n, nil
}

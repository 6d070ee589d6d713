// Package webui serves the admin interface's pages: one handler per page,
// html/template pages from package web, a sealed session cookie carrying
// the person's access token, CSRF tokens on every form, and a
// Content-Security-Policy that allows no inline script or style.
//
// Pages and the roles they need (admin may use every page):
//
//	/login, /logout                   anyone
//	/profile                          anyone signed in (people.go)
//	/users/...                        user_admin (people.go)
//	/, /events, /timelines/..., /reports/threats/... analyst (analyst.go)
//	/dashboards                       analyst
//	/audit, /audit/export.{csv,ndjson} auditor
//	/tokens, /tokens/apps/{app}       admin
//	/status, /dlq, /retention         admin
//	/alerts/... (alerts.go)           analyst reads, admin changes
//	/privacy/... (privacy.go)         admin (the privacy service's rule)
package webui

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/admininterface"
	"threatview/admininterface/broker"
	"threatview/admininterface/upstream"
	"threatview/admininterface/web"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// Options are the UI's settings.
type Options struct {
	// SessionKey seals the session cookie: 64 hex digits, the same on every
	// replica.
	SessionKey string
	// SecureCookies marks cookies Secure (and names the session cookie with
	// the __Host- prefix). Only a plain-HTTP development stack turns it off.
	SecureCookies bool
	// CollectorURL is the collector's address as apps reach it, for the
	// ready-to-paste curl shown with a new token.
	CollectorURL string
	// OIDC offers sign-in through the company's identity provider (via
	// identity, whose redirect URL must be this site's /login/oidc/callback).
	OIDC bool
	// TrustedProxies are the proxies in front of the UI (an ingress) whose
	// X-Forwarded-For names the browser; the browser's address goes to
	// identity with each sign-in.
	TrustedProxies []netip.Prefix
	// InternalKey authorizes the audit records the UI writes itself.
	InternalKey string
	// ExportKey (the admin key; may be blank) reads an audit export's
	// pages after the first, which the person's own token authorised.
	ExportKey string
	// Targets are the services the status page checks, in display order.
	Targets []Target
	// DepthCap bounds how many messages a queue depth counts (browsing).
	DepthCap int
	// DLQListMax is how many dead-lettered messages a queue's list shows
	// on one page (25 by default: the page lists both queues).
	DLQListMax int
	// EventsQueues are the events queues, one per shard
	// (wire.EventsQueues); nil: the single wire.EventsQueue. The status page
	// shows each one's depth and the DLQ page each one's dead letters.
	EventsQueues []string
	// CleanupCommand runs the retention cleanup (program and arguments;
	// --dry-run is added); empty leaves the dry run out.
	CleanupCommand []string
	// CleanupEnv is the cleanup command's environment.
	CleanupEnv []string
}

// Target is one service the status page checks.
type Target struct {
	Name   string
	Client *upstream.Client
}

// Deps are the services the UI calls. Renderer may have a nil Client when
// no renderer is configured (the dashboards page then says so).
type Deps struct {
	Identity upstream.Identity
	Tokens   upstream.Tokens
	Audit    upstream.Audit
	Renderer upstream.Renderer
	// Alerts has a nil Client when no alerts service is configured.
	Alerts upstream.Alerts
	// Privacy has a nil Client when no privacy service is configured.
	Privacy upstream.Privacy
	Broker  *broker.Broker
	Sampler *Sampler
	// Retention reads the events and audit databases' partitions and
	// archives (read-only); empty when no database is configured.
	Retention []RetentionReader
}

// Server holds the UI's dependencies.
type Server struct {
	opts   Options
	deps   Deps
	log    *slog.Logger
	sealer *sealer
	pages  map[string]*template.Template
	now    func() time.Time
	// dlqQueues are the dead-letter queues the DLQ pages manage (tests
	// point them at queues of their own).
	dlqQueues []dlqQueue

	// auditWait bounds the wait for the audit record a dead-letter action
	// needs before it is taken.
	auditWait time.Duration

	signins    *prometheus.CounterVec
	dlqActions *prometheus.CounterVec
	auditFails prometheus.Counter
}

// New returns the UI; the error names a bad option.
func New(opts Options, deps Deps, log *slog.Logger) (*Server, error) {
	sl, err := newSealer(opts.SessionKey)
	if err != nil {
		return nil, err
	}
	if opts.DepthCap <= 0 {
		opts.DepthCap = 1000
	}
	if opts.DLQListMax <= 0 {
		opts.DLQListMax = 25
	}
	if len(opts.EventsQueues) == 0 {
		opts.EventsQueues = []string{wire.EventsQueue}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Server{opts: opts, deps: deps, log: log, sealer: sl, pages: pages, now: time.Now, dlqQueues: dlqQueuesFor(opts.EventsQueues), auditWait: auditWait,
		signins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admininterface_signins_total",
			Help: "Sign-ins by method (password, oidc) and result (ok, refused, error).",
		}, []string{"method", "result"}),
		dlqActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admininterface_dlq_actions_total",
			Help: "Dead-letter actions by action (dlq.replay, dlq.delete) and outcome status.",
		}, []string{"action", "outcome"}),
		auditFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "admininterface_audit_failures_total",
			Help: "Dead-letter actions whose audit record could not be written (logged as errors).",
		}),
	}, nil
}

var funcs = template.FuncMap{
	"join": strings.Join,
	"bars": bars,
	"roleNames": func(roles []string) string {
		names := make([]string, len(roles))
		for i, r := range roles {
			names[i] = admininterface.RoleName(r)
		}
		return strings.Join(names, ", ")
	},
	"country": countryName,
	"num":     thousands,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"bytes":          bytesHuman,
	"shortPseudonym": shortPseudonym,
	"fmtTime": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		case *time.Time:
			if t == nil || t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		}
		return fmt.Sprint(v)
	},
}

func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(web.Templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || strings.HasPrefix(base, "_") {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(web.Templates, "templates/layout.html", "templates/_partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// Handler returns the router: pages, static files and the ops endpoints.
func (s *Server) Handler(reg *prometheus.Registry, checks map[string]httpserver.Check) http.Handler {
	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "admininterface"))
	reg.MustRegister(s.signins, s.dlqActions, s.auditFails)
	httpserver.MountOps(r, reg, checks)
	static, _ := fs.Sub(web.Static, "static")
	r.Group(func(r chi.Router) {
		r.Use(securityHeaders)
		r.Handle("/static/*", http.StripPrefix("/static/", staticCache(http.FileServerFS(static))))
		r.Group(func(r chi.Router) {
			r.Use(s.withSession)
			r.Get("/login", s.loginPage)
			r.Post("/login", s.login)
			r.Post("/logout", s.logout)
			r.Get("/login/oidc", s.oidcLogin)
			r.Get("/login/oidc/callback", s.oidcCallback)
			r.Get("/", s.home)
			r.Group(func(r chi.Router) {
				r.Use(s.require())
				r.Get("/profile", s.profilePage)
				r.Post("/profile", s.saveProfile)
				r.Post("/profile/password", s.changeOwnPassword)
			})
			r.Group(func(r chi.Router) {
				r.Use(s.require(admininterface.RoleUserAdmin))
				r.Get("/users", s.usersPage)
				r.Post("/users", s.createPerson)
				r.Get("/users/{username}", s.personPage)
				r.Get("/users/{username}/delete", s.confirmDeletePerson)
				r.Post("/users/{username}/{action}", s.changePerson)
			})
			r.Group(func(r chi.Router) {
				r.Use(s.require(admininterface.RoleAnalyst))
				r.With(s.needRenderer).Get("/events", s.eventsPage)
				r.With(s.needRenderer).Get("/events/export.csv", s.eventsExport)
				r.With(s.needRenderer).Get("/events/live", s.eventsLive)
				r.With(s.needRenderer).Get("/timelines/{kind}/{id}", s.timelinePage)
				r.With(s.needRenderer).Get("/reports/threats/{type}", s.threatReportPage)
				r.With(s.needRenderer).Get("/reports/categories/{category}", s.categoryReportPage)
				r.Get("/dashboards", s.dashboards)
				r.Get("/dashboards/chart/{dimension}.svg", s.dashboardChart)
				r.Get("/alerts", s.alertsPage)
				r.Get("/alerts/rules/{id}", s.ruleHistory)
				r.Get("/alerts/dead", s.deadNotifications)
				r.Get("/alerts/forwarders", s.forwardersPage)
			})
			r.Group(func(r chi.Router) {
				r.Use(s.require(admininterface.RoleAuditor))
				r.Get("/audit", s.auditPage)
				r.Get("/audit/export.csv", s.auditExport("csv"))
				r.Get("/audit/export.ndjson", s.auditExport("ndjson"))
				r.Get("/audit/trail", s.trailPage)
				r.Post("/audit/trail/verify", s.trailVerify)
			})
			r.Group(func(r chi.Router) {
				r.Use(s.require(admininterface.RoleAdmin))
				r.Get("/tokens", s.tokensPage)
				r.Post("/tokens", s.createToken)
				r.Get("/tokens/apps/{app}", s.appPage)
				r.Get("/tokens/{id}/revoke", s.confirmRevoke)
				r.Post("/tokens/{id}/revoke", s.revokeToken)
				r.Get("/status", s.statusPage)
				r.Get("/dlq", s.dlqPage)
				r.Get("/dlq/{queue}/message", s.dlqMessage)
				r.Get("/dlq/{queue}/replay", s.confirmReplay)
				r.Post("/dlq/{queue}/replay", s.replay)
				r.Get("/dlq/{queue}/delete", s.confirmDelete)
				r.Post("/dlq/{queue}/delete", s.deleteMessage)
				r.Get("/retention", s.retentionPage)
				r.Post("/retention/dry-run", s.retentionDryRun)
				r.Post("/alerts/rules", s.createRule)
				r.Get("/alerts/rules/{id}/delete", s.confirmDeleteRule)
				r.Post("/alerts/rules/{id}/delete", s.deleteRule)
				r.Post("/alerts/rules/{id}/silence", s.silenceRule)
				r.Post("/alerts/forwarders", s.createForwarder)
				r.Get("/alerts/forwarders/{id}/delete", s.confirmDeleteForwarder)
				r.Post("/alerts/forwarders/{id}/delete", s.deleteForwarder)
				r.Get("/privacy", s.privacyPage)
				r.Post("/privacy/erasures", s.requestErasure)
				r.Get("/privacy/erasures/{id}", s.erasureReport)
				r.Post("/privacy/suppressions/lift", s.liftSuppression)
			})
			r.NotFound(func(w http.ResponseWriter, r *http.Request) {
				s.fail(w, r, http.StatusNotFound, "not_found", "There is no such page.")
			})
			r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
				s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "That method is not allowed here.")
			})
		})
	})
	return r
}

// csp allows scripts, styles and images from this origin only: no inline
// script or style, no plugins, no framing, forms posting only here.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func staticCache(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

type ctxKey struct{}

func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(ctxKey{}).(*session)
	return s
}

// withSession loads the session (making an anonymous one with a CSRF token
// when there is none) and checks the CSRF token and origin of every
// unsafe request.
func (s *Server) withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		sess, fresh := s.loadSession(r)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if crossOrigin.Check(r) != nil || fresh || !csrfOK(sess, r.PostFormValue("csrf")) {
				if fresh {
					_ = s.saveSession(w, sess)
				}
				s.fail(w, r, http.StatusForbidden, "csrf",
					"This form has expired or did not come from this site. Reload the page and try again.")
				return
			}
		}
		if fresh {
			if err := s.saveSession(w, sess); err != nil {
				s.fail(w, r, http.StatusInternalServerError, "internal", "internal error")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, sess)))
	})
}

// crossOrigin refuses an unsafe request a browser marks as coming from
// another site (Sec-Fetch-Site, else an Origin naming another host). The
// CSRF token is checked as well, for browsers that send neither header.
var crossOrigin = http.NewCrossOriginProtection()

// require lets a request through only for a signed-in person holding one
// of roles (or admin) whose access token is still good; others are sent to
// sign in, or refused with 403. It fails closed: when identity cannot renew
// an expired access token, nothing runs on it.
func (s *Server) require(roles ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sess := sessionOf(r)
			if !sess.signedIn(s.now()) {
				if r.Method == http.MethodGet {
					http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				s.fail(w, r, http.StatusUnauthorized, "unauthorized", "Sign in first.")
				return
			}
			if !s.fresh(w, r, sess) {
				return
			}
			if len(roles) > 0 && !sess.User.Has(roles...) {
				s.fail(w, r, http.StatusForbidden, "forbidden",
					fmt.Sprintf("Your roles (%s) do not allow this page.", strings.Join(sess.User.Roles, ", ")))
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead && usesUIPrivileges(r.URL.Path) && !s.stillActive(w, r, sess) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// usesUIPrivileges: the dead-letter and retention actions run with the
// UI's own access to the broker and the databases, not with the person's
// token, so no other service checks the person for them.
func usesUIPrivileges(path string) bool {
	return strings.HasPrefix(path, "/dlq/") || strings.HasPrefix(path, "/retention/")
}

// stillActive asks identity, before an action the UI takes with its own
// privileges, whether the person is still there and still an admin
// (GET /v1/me): a person disabled or demoted a moment ago, or a stolen
// cookie of one, is refused at once, and nothing runs while identity cannot
// say. It returns false when it answered.
func (s *Server) stillActive(w http.ResponseWriter, r *http.Request, sess *session) bool {
	u, err := s.deps.Identity.Me(r.Context(), sess.Token)
	switch {
	case err == nil && u.Has(admininterface.RoleAdmin):
		return true
	case err == nil:
		s.log.Info("ui-privileged action refused: no longer admin", "username", sess.User.Username)
		s.fail(w, r, http.StatusForbidden, "forbidden", "Your roles no longer allow this; nothing was done.")
	case errors.Is(err, admininterface.ErrUnauthorized):
		s.log.Info("session ended: identity no longer accepts the person", "username", sess.User.Username)
		s.clearSession(w)
		s.fail(w, r, http.StatusUnauthorized, "unauthorized", "Your session has ended; sign in again. Nothing was done.")
	default:
		s.log.Warn("ui-privileged action refused: identity did not answer", "username", sess.User.Username, "err", err)
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, "identity_unavailable",
			"The identity service did not answer, so your permission could not be checked; nothing was done. Try again shortly.")
	}
	return false
}

// refreshMargin is how long before its expiry an access token is renewed.
const refreshMargin = 90 * time.Second

// fresh renews the access token when it is about to expire, on page
// requests only: the images and downloads a page pulls in at once need not
// all try (identity lets the same refresh token be presented again only for
// a few seconds). They go out after the page, with its renewed cookie. When
// identity refuses, the session ends; when it cannot be reached, the person
// carries on only while the access token is still good (at most identity's
// access-token lifetime, 5 minutes). It returns false when it answered.
func (s *Server) fresh(w http.ResponseWriter, r *http.Request, sess *session) bool {
	now := s.now()
	if sess.TokenExp.Sub(now) > refreshMargin {
		return true
	}
	if sess.Refresh == "" || !isPage(r) {
		if now.Before(sess.TokenExp) {
			return true
		}
		s.expired(w, r, "Your session has ended; please sign in again.")
		return false
	}
	l, err := s.deps.Identity.Refresh(r.Context(), sess.Refresh)
	switch {
	case err == nil && l.AccessToken != "":
		next := fromLogin(l)
		next.CSRF = sess.CSRF // forms open in other tabs stay valid
		*sess = *next
		if err := s.saveSession(w, sess); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "internal", "internal error")
			return false
		}
		return true
	case errors.Is(err, admininterface.ErrUnauthorized), errors.Is(err, admininterface.ErrInvalid):
		s.log.Info("session ended: refresh refused", "username", sess.User.Username)
		s.clearSession(w)
		if r.Method == http.MethodGet {
			http.Redirect(w, r, "/login?expired=1&next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		} else {
			s.fail(w, r, http.StatusUnauthorized, "unauthorized", "Your session has ended; sign in again. Nothing was done.")
		}
		return false
	default:
		s.log.Warn("session refresh failed", "username", sess.User.Username, "err", err)
		if now.Before(sess.TokenExp) {
			return true // identity is down: carry on while the access token lasts
		}
		// Fail closed, but keep the session: once identity answers again
		// the refresh token renews it.
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, "identity_unavailable",
			"The identity service did not answer, so your session could not be renewed. Try again shortly.")
		return false
	}
}

// expired answers a request whose access token has run out and cannot be
// renewed here.
func (s *Server) expired(w http.ResponseWriter, r *http.Request, msg string) {
	if r.Method == http.MethodGet && isPage(r) {
		http.Redirect(w, r, "/login?expired=1&next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	s.fail(w, r, http.StatusUnauthorized, "unauthorized", msg)
}

// isPage tells page requests from the sub-resources and downloads a page
// pulls in.
func isPage(r *http.Request) bool {
	p := r.URL.Path
	return !strings.HasPrefix(p, "/dashboards/chart/") && !strings.HasPrefix(p, "/audit/export.") &&
		p != "/events/live" && p != "/events/export.csv"
}

// navItem is one link of the main navigation.
type navItem struct {
	Path, Label string
	Current     bool
}

// navAll is the one navigation of every page; a blank role means anyone
// signed in.
var navAll = []struct {
	path, label, role string
}{
	{"/", "Home", admininterface.RoleAnalyst},
	{"/events", "All events", admininterface.RoleAnalyst},
	{"/dashboards", "Dashboards", admininterface.RoleAnalyst},
	{"/alerts", "Alerts", admininterface.RoleAnalyst},
	{"/alerts/forwarders", "SIEM forwarders", admininterface.RoleAnalyst},
	{"/tokens", "Apps and tokens", admininterface.RoleAdmin},
	{"/audit", "Audit trail", admininterface.RoleAuditor},
	{"/audit/trail", "Trail integrity", admininterface.RoleAuditor},
	{"/status", "System status", admininterface.RoleAdmin},
	{"/dlq", "Dead letters", admininterface.RoleAdmin},
	{"/retention", "Retention", admininterface.RoleAdmin},
	{"/privacy", "Privacy", admininterface.RoleAdmin},
	{"/users", "Users", admininterface.RoleUserAdmin},
	{"/profile", "My profile", ""},
}

func (s *Server) nav(u admininterface.User, path string) []navItem {
	var out []navItem
	current := -1 // the longest matching path (/audit/trail, not /audit)
	for _, n := range navAll {
		if n.role == "" || u.Has(n.role) {
			out = append(out, navItem{Path: n.path, Label: n.label})
			match := strings.HasPrefix(path, n.path)
			if n.path == "/" {
				match = path == "/" || strings.HasPrefix(path, "/reports/") || strings.HasPrefix(path, "/timelines/")
			}
			if match && (current < 0 || len(n.path) > len(out[current].Path)) {
				current = len(out) - 1
			}
		}
	}
	if current >= 0 {
		out[current].Current = true
	}
	return out
}

// view is what every page template gets.
type view struct {
	Title string
	User  *admininterface.User
	Nav   []navItem
	CSRF  string
	Flash string
	Error string
	Data  any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any, flash, errMsg string) {
	t, ok := s.pages[page]
	if !ok {
		panic("no page template " + page)
	}
	v := view{Title: title, Data: data, Flash: flash, Error: errMsg}
	if sess := sessionOf(r); sess != nil {
		v.CSRF = sess.CSRF
		if sess.signedIn(s.now()) {
			u := sess.User
			v.User = &u
			v.Nav = s.nav(u, r.URL.Path)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout", v); err != nil {
		s.log.Error("render page", "page", page, "err", err)
	}
}

// fail answers an error: an HTML page for a browser, the JSON error body
// for anything else.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		httpserver.WriteError(w, status, code, msg, nil)
		return
	}
	s.render(w, r, status, "error", http.StatusText(status), struct{ Message string }{msg}, "", "")
}

// upstreamFail answers an error from a service call: an expired or revoked
// access token ends the session, a refusal is 403, anything else is shown.
func (s *Server) upstreamFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, admininterface.ErrUnauthorized) && !isPage(r):
		// An image or download of a page: the page itself decides about the
		// session (a racing chart request must not sign the person out).
		s.fail(w, r, http.StatusUnauthorized, "unauthorized", what+": sign in again.")
	case errors.Is(err, admininterface.ErrUnauthorized):
		s.clearSession(w)
		http.Redirect(w, r, "/login?expired=1", http.StatusSeeOther)
	case errors.Is(err, admininterface.ErrForbidden):
		s.fail(w, r, http.StatusForbidden, "forbidden", what+": the service refused your roles.")
	case errors.Is(err, admininterface.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "not_found", what+": not found.")
	case errors.Is(err, admininterface.ErrInvalid):
		s.fail(w, r, http.StatusBadRequest, "invalid", what+": "+err.Error())
	default:
		s.log.Error("upstream call failed", "what", what, "err", err)
		s.fail(w, r, http.StatusBadGateway, "unavailable", what+": a service did not answer; try again shortly.")
	}
}

func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	sess := sessionOf(r)
	if !sess.signedIn(s.now()) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	if sess.User.Has(admininterface.RoleAnalyst) {
		s.require(admininterface.RoleAnalyst)(s.needRenderer(http.HandlerFunc(s.analystHome))).ServeHTTP(w, r)
		return
	}
	items := s.nav(sess.User, "")
	if len(items) == 0 || items[0].Path == "/profile" && len(sess.User.Roles) == 0 {
		s.fail(w, r, http.StatusForbidden, "forbidden", "Your account has no role that allows any page.")
		return
	}
	http.Redirect(w, r, items[0].Path, http.StatusSeeOther)
}

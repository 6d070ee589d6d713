package webui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
	"threatview/platform/httpserver"
	"threatview/platform/redirect"
)

type loginData struct {
	Next     string
	Username string
	OIDC     bool
}

// safeNext keeps a post-login redirect on this site (redirect.Local).
func safeNext(next string) string {
	n, _ := redirect.Local(next)
	return n
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if sessionOf(r).signedIn(s.now()) {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	msg := ""
	if r.URL.Query().Get("expired") != "" {
		msg = "Your session has ended; please sign in again."
	}
	s.render(w, r, http.StatusOK, "login", "Sign in", loginData{Next: safeNext(r.URL.Query().Get("next")), OIDC: s.opts.OIDC}, msg, "")
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	username := strings.TrimSpace(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	data := loginData{Next: next, Username: username, OIDC: s.opts.OIDC}
	if username == "" || password == "" {
		s.render(w, r, http.StatusBadRequest, "login", "Sign in", data, "", "Enter your username and password.")
		return
	}
	l, err := s.deps.Identity.Login(r.Context(), username, password, httpserver.ClientAddr(r, s.opts.TrustedProxies))
	var retry *upstream.RetryError
	switch {
	case errors.As(err, &retry):
		// Too many failed sign-ins for this username or from this address.
		s.signins.WithLabelValues("password", "throttled").Inc()
		s.log.Info("sign-in throttled")
		wait := max(retry.After, time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		s.render(w, r, http.StatusTooManyRequests, "login", "Sign in", data, "",
			fmt.Sprintf("Too many failed sign-ins for this username or from your address. Try again in %s (at %s UTC).",
				waitText(wait), s.now().Add(wait).UTC().Format("15:04:05")))
		return
	case errors.Is(err, admininterface.ErrUnauthorized), errors.Is(err, admininterface.ErrInvalid), errors.Is(err, admininterface.ErrForbidden):
		s.signins.WithLabelValues("password", "refused").Inc()
		// Not the username: it may be a password typed into the wrong field.
		s.log.Info("sign-in refused")
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", data, "", "Wrong username or password.")
		return
	case err != nil:
		s.signins.WithLabelValues("password", "error").Inc()
		s.log.Error("sign-in failed", "err", err)
		s.render(w, r, http.StatusServiceUnavailable, "login", "Sign in", data, "", "The identity service did not answer; try again shortly.")
		return
	case l.AccessToken == "" || !l.ExpiresAt.After(s.now()):
		s.log.Error("identity answered without a usable access token")
		s.render(w, r, http.StatusBadGateway, "login", "Sign in", data, "", "The identity service gave no usable session.")
		return
	}
	// A new session (and CSRF token) on sign-in, so nothing set before it
	// carries over.
	sess := fromLogin(l)
	if err := s.saveSession(w, sess); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	s.signins.WithLabelValues("password", "ok").Inc()
	s.log.Info("signed in", "username", l.User.Username, "roles", l.User.Roles)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// waitText says a wait in whole minutes, or seconds under a minute.
func waitText(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d seconds", int(d.Seconds()))
	}
	m := int((d + time.Minute - 1) / time.Minute)
	if m == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if sess := sessionOf(r); sess.Refresh != "" {
		if err := s.deps.Identity.Logout(r.Context(), sess.Refresh); err != nil {
			s.log.Warn("identity logout failed", "username", sess.User.Username, "err", err)
		}
	}
	s.clearSession(w)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// oidcLogin starts a sign-in through the company's identity provider, via
// identity. Identity binds the sign-in's state to a cookie of its own; the
// browser never talks to identity, so the state is kept in this session
// instead and presented to identity at the callback. That also ties the
// callback to the browser that started it (no login CSRF).
func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if !s.opts.OIDC {
		s.fail(w, r, http.StatusNotFound, "not_found", "Sign-in through the company's identity provider is not configured.")
		return
	}
	authURL, state, err := s.deps.Identity.OIDCStart(r.Context())
	if err != nil {
		s.log.Error("oidc start failed", "err", err)
		s.render(w, r, http.StatusServiceUnavailable, "login", "Sign in", loginData{OIDC: true, Next: "/"}, "",
			"The company sign-in is unavailable; try again shortly or use a password.")
		return
	}
	sess := sessionOf(r)
	sess.OIDCState = state
	if err := s.saveSession(w, sess); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// oidcCallback is where the identity provider sends the browser back
// (identity's IDENTITY_OIDC_REDIRECT_URL points here).
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	sess := sessionOf(r)
	q := r.URL.Query()
	if !s.opts.OIDC || sess.OIDCState == "" || !csrfOKValue(sess.OIDCState, q.Get("state")) {
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", loginData{OIDC: s.opts.OIDC, Next: "/"}, "",
			"That sign-in was not started here or has expired; start again.")
		return
	}
	l, err := s.deps.Identity.OIDCFinish(r.Context(), q, sess.OIDCState)
	if err != nil || l.AccessToken == "" {
		s.signins.WithLabelValues("oidc", "refused").Inc()
		s.log.Info("oidc sign-in refused", "err", err)
		sess.OIDCState = ""
		_ = s.saveSession(w, sess)
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", loginData{OIDC: true, Next: "/"}, "",
			"The company sign-in was refused.")
		return
	}
	if err := s.saveSession(w, fromLogin(l)); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	s.signins.WithLabelValues("oidc", "ok").Inc()
	s.log.Info("signed in", "username", l.User.Username, "roles", l.User.Roles, "via", "oidc")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

package webui

import (
	"errors"
	"net/http"
	"strings"

	"threatview/admininterface"
)

type loginData struct {
	Next     string
	Username string
}

// safeNext keeps a post-login redirect on this site: a local path only.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
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
	s.render(w, r, http.StatusOK, "login", "Sign in", loginData{Next: safeNext(r.URL.Query().Get("next"))}, msg, "")
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	username := strings.TrimSpace(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	data := loginData{Next: next, Username: username}
	if username == "" || password == "" {
		s.render(w, r, http.StatusBadRequest, "login", "Sign in", data, "", "Enter your username and password.")
		return
	}
	l, err := s.deps.Identity.Login(r.Context(), username, password)
	switch {
	case errors.Is(err, admininterface.ErrUnauthorized), errors.Is(err, admininterface.ErrInvalid), errors.Is(err, admininterface.ErrForbidden):
		s.log.Info("sign-in refused", "username", username)
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", data, "", "Wrong username or password.")
		return
	case err != nil:
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
	s.log.Info("signed in", "username", l.User.Username, "roles", l.User.Roles)
	http.Redirect(w, r, next, http.StatusSeeOther)
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

package webui

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"threatview/admininterface"
)

// session is what the sealed cookie carries. Sealing (AES-256-GCM with the
// configured key) makes it unreadable and unforgeable in the browser, and
// lets every replica read it without a shared store.
type session struct {
	CSRF      string              `json:"c"`
	Token     string              `json:"t,omitempty"` // the person's access token from identity
	TokenExp  time.Time           `json:"te,omitempty"`
	Refresh   string              `json:"r,omitempty"` // identity's refresh token, rotated at every use
	User      admininterface.User `json:"u"`
	Expires   time.Time           `json:"e"`           // the cookie's end: the refresh token's expiry
	OIDCState string              `json:"o,omitempty"` // the state of an OIDC sign-in under way
}

func (s *session) signedIn(now time.Time) bool {
	return s != nil && s.Token != "" && now.Before(s.Expires)
}

// fromLogin builds a signed-in session from identity's answer, with a new
// CSRF token.
func fromLogin(l admininterface.Login) *session {
	exp := l.RefreshExpiresAt
	if l.RefreshToken == "" || exp.Before(l.ExpiresAt) {
		exp = l.ExpiresAt
	}
	return &session{CSRF: randomToken(), Token: l.AccessToken, TokenExp: l.ExpiresAt, Refresh: l.RefreshToken, User: l.User, Expires: exp}
}

// sealer seals and opens session cookies.
type sealer struct{ aead cipher.AEAD }

// newSealer takes a 32-byte key as 64 hex digits.
func newSealer(hexKey string) (*sealer, error) {
	key, err := hex.DecodeString(hexKey)
	if err != nil || len(key) != 32 {
		return nil, errors.New("the session key must be 64 hex digits (32 bytes)")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(sess *session) (string, error) {
	plain, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(cookieAAD))), nil
}

func (s *sealer) open(v string) (*session, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) < s.aead.NonceSize() {
		return nil, errors.New("malformed session cookie")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:n], b[n:], []byte(cookieAAD))
	if err != nil {
		return nil, errors.New("session cookie does not open")
	}
	var sess session
	if err := json.Unmarshal(plain, &sess); err != nil {
		return nil, fmt.Errorf("session cookie: %w", err)
	}
	return &sess, nil
}

const cookieAAD = "threatview-admin-session-v1"

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// cookieName is the session cookie's name: with Secure on, the __Host-
// prefix makes the browser refuse it unless it is Secure, host-only and for
// path /.
func (s *Server) cookieName() string {
	if s.opts.SecureCookies {
		return "__Host-tv_session"
	}
	return "tv_session"
}

// loadSession returns the request's session, or a fresh anonymous one (with
// its CSRF token) when there is none or it does not open.
func (s *Server) loadSession(r *http.Request) (*session, bool) {
	if c, err := r.Cookie(s.cookieName()); err == nil {
		if sess, err := s.sealer.open(c.Value); err == nil && s.now().Before(sess.Expires) {
			return sess, false
		}
	}
	return &session{CSRF: randomToken(), Expires: s.now().Add(anonymousLifetime)}, true
}

// anonymousLifetime bounds a session that only carries a CSRF token.
const anonymousLifetime = 2 * time.Hour

// saveSession sets the session cookie. SameSite=Lax, not Strict: the
// identity provider's redirect back (a top-level GET from another site)
// must bring the OIDC sign-in's state, and following a link to the UI from
// another site must not arrive without the cookie (the UI would then set a
// new anonymous one, signing the person out). Unsafe requests are guarded
// by the CSRF token and crossOrigin; every GET is safe.
func (s *Server) saveSession(w http.ResponseWriter, sess *session) error {
	v, err := s.sealer.seal(sess)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: v, Path: "/", Expires: sess.Expires,
		HttpOnly: true, Secure: s.opts.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

func (s *Server) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.opts.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

func csrfOK(sess *session, presented string) bool {
	return sess != nil && csrfOKValue(sess.CSRF, presented)
}

func csrfOKValue(want, presented string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(presented)) == 1
}

package webui

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"threatview/admininterface/upstream"
)

// tokenListMax is how many tokens the page asks for (the API's maximum).
const tokenListMax = 1000

type appRow struct {
	AppID         string
	Active, Total int
	LastUsed      *time.Time
}

type tokensData struct {
	Apps      []appRow
	Tokens    []upstream.Token
	Truncated bool
	AppID     string
	Name      string
}

func (s *Server) tokensPage(w http.ResponseWriter, r *http.Request) {
	s.renderTokens(w, r, http.StatusOK, tokensData{}, r.URL.Query().Get("done"), "")
}

func (s *Server) renderTokens(w http.ResponseWriter, r *http.Request, status int, d tokensData, flash, errMsg string) {
	toks, err := s.deps.Tokens.List(r.Context(), sessionOf(r).Token, tokenListMax)
	if err != nil {
		s.upstreamFail(w, r, "Listing tokens", err)
		return
	}
	d.Tokens = toks
	d.Truncated = len(toks) >= tokenListMax
	d.Apps = appsOf(toks)
	switch flash {
	case "revoked":
		flash = "Token revoked. The collector refuses it within 30 seconds."
	case "":
	default:
		flash = ""
	}
	s.render(w, r, status, "tokens", "Apps and tokens", d, flash, errMsg)
}

// appsOf groups tokens by app: how many are active, how many in all, and the
// latest use of any of them.
func appsOf(toks []upstream.Token) []appRow {
	by := map[string]*appRow{}
	for _, t := range toks {
		a := by[t.AppID]
		if a == nil {
			a = &appRow{AppID: t.AppID}
			by[t.AppID] = a
		}
		a.Total++
		if t.Active {
			a.Active++
		}
		if t.LastUsedAt != nil && (a.LastUsed == nil || t.LastUsedAt.After(*a.LastUsed)) {
			lu := *t.LastUsedAt
			a.LastUsed = &lu
		}
	}
	out := make([]appRow, 0, len(by))
	for _, a := range by {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AppID < out[j].AppID })
	return out
}

type createdData struct {
	Token upstream.NewToken
	Curl  string
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	d := tokensData{AppID: strings.TrimSpace(r.PostFormValue("app_id")), Name: strings.TrimSpace(r.PostFormValue("name"))}
	if d.AppID == "" || d.Name == "" {
		s.renderTokens(w, r, http.StatusBadRequest, d, "", "Give the app id and a name for the token.")
		return
	}
	nt, err := s.deps.Tokens.Create(r.Context(), sessionOf(r).Token, d.AppID, d.Name)
	if err != nil {
		if isInvalid(err) {
			s.renderTokens(w, r, http.StatusBadRequest, d, "", "The tokens service refused: "+err.Error())
			return
		}
		s.upstreamFail(w, r, "Creating a token", err)
		return
	}
	s.log.Info("token created", "by", sessionOf(r).User.Username, "token_id", nt.ID, "app_id", nt.AppID)
	// The plain token is in this answer only: never cached, never redirected to.
	s.render(w, r, http.StatusCreated, "token_created", "Token created", createdData{Token: nt, Curl: s.curl(nt)}, "", "")
}

// curl is a ready-to-paste command that posts one event with the token.
func (s *Server) curl(nt upstream.NewToken) string {
	body := `{"type":"app.startup","app":{"id":"` + jsonEscape(nt.AppID) + `","version":"1.0.0"},` +
		`"device":{"model":"Pixel 8","manufacturer":"Google","os":"android","os_version":"14"},"threats":[]}`
	return "curl -sS -X POST '" + strings.TrimRight(s.opts.CollectorURL, "/") + "/v1/events' \\\n" +
		"  -H 'Authorization: Bearer " + nt.Secret + "' \\\n" +
		"  -H 'Content-Type: application/json' \\\n" +
		"  -d '" + body + "'"
}

// jsonEscape escapes an app id for a JSON string inside single quotes; app
// ids are letters, digits, '.', '_' and '-', so this is belt and braces.
func jsonEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `'`, `'\''`)
	return r.Replace(s)
}

type confirmData struct {
	Action, Question, Detail, Button, Cancel string
	Fields                                   map[string]string
}

func (s *Server) confirmRevoke(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	t, err := s.deps.Tokens.Get(r.Context(), sessionOf(r).Token, id)
	if err != nil {
		s.upstreamFail(w, r, "Finding the token", err)
		return
	}
	s.render(w, r, http.StatusOK, "confirm", "Revoke a token", confirmData{
		Action:   "/tokens/" + t.ID + "/revoke",
		Question: "Revoke token “" + t.Name + "” of app " + t.AppID + " (" + t.ID + ")?",
		Detail:   "The app's requests with this token are refused within 30 seconds. This cannot be undone.",
		Button:   "Revoke token", Cancel: "/tokens",
	}, "", "")
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/tokens/"+id+"/revoke", http.StatusSeeOther)
		return
	}
	if err := s.deps.Tokens.Revoke(r.Context(), sessionOf(r).Token, id); err != nil {
		s.upstreamFail(w, r, "Revoking the token", err)
		return
	}
	s.log.Info("token revoked", "by", sessionOf(r).User.Username, "token_id", id)
	http.Redirect(w, r, "/tokens?done=revoked", http.StatusSeeOther)
}

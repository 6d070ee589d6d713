package webui

import (
	"net/http"
	"sort"
	"strconv"
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
	// Apps is the page of apps shown; Pager says which and links the others.
	Apps  []appRow
	Pager pager
	// Filter is the apps filter (part of an app id), kept in the links.
	Filter string
	// AllApps is how many apps the counted tokens have, whatever the filter.
	AllApps int
	// Counted is how many tokens were counted; Truncated when the tokens
	// service's maximum cut the list (the newest tokens are counted).
	Counted   int
	Truncated bool
	AppID     string
	Name      string
}

func (s *Server) tokensPage(w http.ResponseWriter, r *http.Request) {
	s.renderTokens(w, r, http.StatusOK, tokensData{}, r.URL.Query().Get("done"), "")
}

// renderTokens shows the apps list: the apps of the newest tokens (plus,
// when the filter is a whole app id, that app's tokens, however old),
// filtered by part of their id and cut into pages.
func (s *Server) renderTokens(w http.ResponseWriter, r *http.Request, status int, d tokensData, flash, errMsg string) {
	q := r.URL.Query()
	filter, err := parseFilter(q.Get("q"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Filter: "+err.Error()+".")
		return
	}
	page, err := parsePage(q.Get("page"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Page: "+err.Error()+".")
		return
	}
	token := sessionOf(r).Token
	toks, err := s.deps.Tokens.List(r.Context(), token, tokenListMax)
	if err != nil {
		s.upstreamFail(w, r, "Listing tokens", err)
		return
	}
	d.Counted, d.Truncated = len(toks), len(toks) >= tokenListMax
	if filter != "" && d.Truncated {
		// An app whose tokens are all older than the newest thousand is
		// still found by its whole id.
		more, err := s.deps.Tokens.ListApp(r.Context(), token, filter, tokenListMax)
		if err != nil {
			s.upstreamFail(w, r, "Listing tokens", err)
			return
		}
		toks = mergeTokens(toks, more)
	}
	apps := appsOf(toks)
	d.AllApps = len(apps)
	d.Filter = filter
	if filter != "" {
		apps = filterApps(apps, filter)
	}
	d.Pager = pageOf(len(apps), appsPerPage, page, func(p int) string { return tokensURL(filter, p) })
	d.Apps = apps[d.Pager.lo:d.Pager.hi]
	switch flash {
	case "revoked":
		flash = "Token revoked. The collector refuses it within 30 seconds."
	case "":
	default:
		flash = ""
	}
	s.render(w, r, status, "tokens", "Apps and tokens", d, flash, errMsg)
}

// filterApps keeps the apps whose id contains part, ignoring case; apps
// whose id starts with it come first.
func filterApps(apps []appRow, part string) []appRow {
	part = strings.ToLower(part)
	var prefix, inside []appRow
	for _, a := range apps {
		id := strings.ToLower(a.AppID)
		switch {
		case strings.HasPrefix(id, part):
			prefix = append(prefix, a)
		case strings.Contains(id, part):
			inside = append(inside, a)
		}
	}
	return append(prefix, inside...)
}

// mergeTokens adds to a the tokens of b it does not hold.
func mergeTokens(a, b []upstream.Token) []upstream.Token {
	seen := make(map[string]bool, len(a))
	for _, t := range a {
		seen[t.ID] = true
	}
	for _, t := range b {
		if !seen[t.ID] {
			a = append(a, t)
		}
	}
	return a
}

type appData struct {
	App    appRow
	Tokens []upstream.Token
	Pager  pager
	// Truncated when the app has more tokens than the service lists.
	Truncated bool
}

// appPage shows one app: its counts and its tokens, a page at a time,
// each active one with its Revoke button.
func (s *Server) appPage(w http.ResponseWriter, r *http.Request) {
	appID := chi.URLParam(r, "app")
	if len(appID) > filterMax || !appIDRe.MatchString(appID) {
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such app: an app id is letters, digits, '.', '_' and '-'.")
		return
	}
	page, err := parsePage(r.URL.Query().Get("page"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Page: "+err.Error()+".")
		return
	}
	toks, err := s.deps.Tokens.ListApp(r.Context(), sessionOf(r).Token, appID, tokenListMax)
	if err != nil {
		s.upstreamFail(w, r, "Listing the app's tokens", err)
		return
	}
	if len(toks) == 0 {
		s.fail(w, r, http.StatusNotFound, "not_found", "App "+appID+" has no tokens.")
		return
	}
	d := appData{Truncated: len(toks) >= tokenListMax}
	d.App = appsOf(toks)[0]
	d.Pager = pageOf(len(toks), appTokensPerPage, page, func(p int) string {
		if p == 1 {
			return appURL(appID)
		}
		return appURL(appID) + "?page=" + strconv.Itoa(p)
	})
	d.Tokens = toks[d.Pager.lo:d.Pager.hi]
	flash := ""
	if r.URL.Query().Get("done") == "revoked" {
		flash = "Token revoked. The collector refuses it within 30 seconds."
	}
	s.render(w, r, http.StatusOK, "app", "App "+appID, d, flash, "")
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
		Button:   "Revoke token", Cancel: appURL(t.AppID),
		Fields: map[string]string{"app": t.AppID},
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
	// Back to the app's page when the form names a plausible app.
	if app := r.PostFormValue("app"); app != "" && len(app) <= filterMax && appIDRe.MatchString(app) {
		http.Redirect(w, r, appURL(app)+"?done=revoked", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/tokens?done=revoked", http.StatusSeeOther)
}

package webui

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
)

// The people pages: /users (role user_admin; an Account Owner too) lists,
// filters, sorts and creates people; /users/{name} changes one (roles, lock,
// password, delete); /profile is everyone's own. identity enforces every
// rule (a User Administrator never touches an Account Owner, the last
// active owner stays, nobody deletes themselves); these pages show its
// answers and offer only what the rules allow.

type roleOption struct {
	Value, Name string
	Checked     bool
}

func roleOptions(have []string) []roleOption {
	out := make([]roleOption, len(admininterface.Roles))
	for i, r := range admininterface.Roles {
		out[i] = roleOption{Value: r, Name: admininterface.RoleName(r), Checked: slices.Contains(have, r)}
	}
	return out
}

// personRow is one row of the Users table.
type personRow struct {
	upstream.Person
	RoleNames string
	Status    string // Active or Locked
	Provider  string // Local, or the identity provider
	Owner     bool
}

func rowOf(p upstream.Person) personRow {
	names := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		names[i] = admininterface.RoleName(r)
	}
	row := personRow{Person: p, RoleNames: strings.Join(names, ", "), Status: "Active", Provider: "Local",
		Owner: slices.Contains(p.Roles, admininterface.RoleAdmin)}
	if row.RoleNames == "" {
		row.RoleNames = "no role"
	}
	if p.Disabled {
		row.Status = "Locked"
	}
	if p.Source == "oidc" {
		row.Provider = "Identity provider (OIDC)"
	}
	return row
}

type usersData struct {
	Rows                    []personRow
	All                     int
	Q, Role, Status, Sort   string
	Desc                    bool
	Roles                   []roleOption
	Sorts                   []sortLink
	NewUsername, NewDisplay string
	CanMakeOwner            bool
	Me                      string
}

type sortLink struct {
	Key, Label, Href, Aria string
}

var userSorts = []struct{ key, label string }{
	{"username", "Username"}, {"display", "Display name"}, {"role", "Role"}, {"status", "Status"}, {"created", "Created"},
}

func (s *Server) usersPage(w http.ResponseWriter, r *http.Request) {
	s.renderUsers(w, r, http.StatusOK, usersData{}, r.URL.Query().Get("done"), "")
}

func (s *Server) renderUsers(w http.ResponseWriter, r *http.Request, status int, d usersData, flash, errMsg string) {
	sess := sessionOf(r)
	people, err := s.deps.Identity.People(r.Context(), sess.Token)
	if err != nil {
		s.upstreamFail(w, r, "Listing people", err)
		return
	}
	q := r.URL.Query()
	d.Q = strings.TrimSpace(q.Get("q"))
	if len(d.Q) > 64 {
		d.Q = d.Q[:64]
	}
	d.Role, d.Status, d.Sort, d.Desc = q.Get("role"), q.Get("status"), q.Get("sort"), q.Get("dir") == "desc"
	if !slices.Contains(admininterface.Roles, d.Role) {
		d.Role = ""
	}
	if d.Status != "active" && d.Status != "locked" {
		d.Status = ""
	}
	d.All = len(people)
	needle := strings.ToLower(d.Q)
	for _, p := range people {
		if needle != "" && !strings.Contains(strings.ToLower(p.Username), needle) && !strings.Contains(strings.ToLower(p.DisplayName), needle) {
			continue
		}
		if d.Role != "" && !slices.Contains(p.Roles, d.Role) {
			continue
		}
		if d.Status == "active" && p.Disabled || d.Status == "locked" && !p.Disabled {
			continue
		}
		d.Rows = append(d.Rows, rowOf(p))
	}
	sortPeople(d.Rows, d.Sort, d.Desc)
	for _, so := range userSorts {
		v := url.Values{}
		for k, vals := range q {
			v[k] = vals
		}
		v.Set("sort", so.key)
		dir, aria := "asc", ""
		if cur := d.Sort == so.key || d.Sort == "" && so.key == "username"; cur {
			aria = "ascending"
			if d.Desc {
				aria = "descending"
			} else {
				dir = "desc"
			}
		}
		v.Set("dir", dir)
		d.Sorts = append(d.Sorts, sortLink{Key: so.key, Label: so.label, Href: "/users?" + v.Encode(), Aria: aria})
	}
	d.CanMakeOwner = sess.User.Has(admininterface.RoleAdmin)
	d.Roles = s.offeredRoles(r, nil)
	d.Me = sess.User.Username
	s.render(w, r, status, "users", "Users", d, flash, errMsg)
}

// offeredRoles are the role boxes a person may tick: an Account Owner's
// only for an Account Owner.
func (s *Server) offeredRoles(r *http.Request, have []string) []roleOption {
	opts := roleOptions(have)
	if sessionOf(r).User.Has(admininterface.RoleAdmin) {
		return opts
	}
	return slices.DeleteFunc(opts, func(o roleOption) bool { return o.Value == admininterface.RoleAdmin })
}

func sortPeople(rows []personRow, key string, desc bool) {
	less := func(a, b personRow) int { return strings.Compare(a.Username, b.Username) }
	by := map[string]func(a, b personRow) int{
		"display": func(a, b personRow) int {
			return strings.Compare(strings.ToLower(a.DisplayName), strings.ToLower(b.DisplayName))
		},
		"role":   func(a, b personRow) int { return strings.Compare(a.RoleNames, b.RoleNames) },
		"status": func(a, b personRow) int { return strings.Compare(a.Status, b.Status) },
		"created": func(a, b personRow) int {
			switch {
			case a.CreatedAt == nil || b.CreatedAt == nil:
				return 0
			default:
				return a.CreatedAt.Compare(*b.CreatedAt)
			}
		},
	}
	f := by[key]
	sort.SliceStable(rows, func(i, j int) bool {
		c := 0
		if f != nil {
			c = f(rows[i], rows[j])
		}
		if c == 0 {
			c = less(rows[i], rows[j])
		}
		if desc {
			return c > 0
		}
		return c < 0
	})
}

func (s *Server) createPerson(w http.ResponseWriter, r *http.Request) {
	p := upstream.NewPerson{
		Username: strings.TrimSpace(r.PostFormValue("username")), Password: r.PostFormValue("password"),
		Roles: r.PostForm["roles"], DisplayName: r.PostFormValue("display_name"),
	}
	if p.Roles == nil {
		p.Roles = []string{}
	}
	created, err := s.deps.Identity.CreatePerson(r.Context(), sessionOf(r).Token, p)
	if err != nil {
		if status, msg, ok := refusal(err); ok {
			s.renderUsers(w, r, status, usersData{NewUsername: p.Username, NewDisplay: p.DisplayName}, "", "Not created: "+msg)
			return
		}
		s.upstreamFail(w, r, "Creating the person", err)
		return
	}
	s.log.Info("person created", "by", sessionOf(r).User.Username, "username", created.Username)
	http.Redirect(w, r, "/users/"+url.PathEscape(created.Username)+"?done="+url.QueryEscape("Created "+created.Username+"."), http.StatusSeeOther)
}

// refusal is identity's refusal of a change (403, 409, 422) as a status and
// its message for the page; ok is false for anything else.
func refusal(err error) (int, string, bool) {
	var se *upstream.ServiceError
	if !errors.As(err, &se) || (!errors.Is(err, admininterface.ErrInvalid) && !errors.Is(err, admininterface.ErrForbidden)) {
		return 0, "", false
	}
	msg := strings.TrimPrefix(se.Message, "invalid input: ")
	msg = strings.TrimPrefix(msg, "conflict: ")
	msg = strings.TrimPrefix(msg, "forbidden: ")
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return se.Status, msg, true
}

type personData struct {
	personRow
	Roles          []roleOption
	Self           bool
	MayChange      bool // a User Administrator may not change an Account Owner
	CanSetPassword bool
}

func (s *Server) findPerson(w http.ResponseWriter, r *http.Request) (upstream.Person, bool) {
	p, err := s.deps.Identity.Person(r.Context(), sessionOf(r).Token, chi.URLParam(r, "username"))
	if err != nil {
		s.upstreamFail(w, r, "Finding the person", err)
		return upstream.Person{}, false
	}
	return p, true
}

func (s *Server) personPage(w http.ResponseWriter, r *http.Request) {
	s.renderPerson(w, r, http.StatusOK, r.URL.Query().Get("done"), "")
}

func (s *Server) renderPerson(w http.ResponseWriter, r *http.Request, status int, flash, errMsg string) {
	p, ok := s.findPerson(w, r)
	if !ok {
		return
	}
	sess := sessionOf(r)
	row := rowOf(p)
	d := personData{personRow: row, Roles: s.offeredRoles(r, p.Roles), Self: p.Username == sess.User.Username,
		MayChange: !row.Owner || sess.User.Has(admininterface.RoleAdmin)}
	d.CanSetPassword = d.MayChange && p.Source != "oidc" && !d.Self
	s.render(w, r, status, "person", p.Username, d, flash, errMsg)
}

// changePerson handles the person page's forms: action roles, lock,
// unlock or password.
func (s *Server) changePerson(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "username")
	token := sessionOf(r).Token
	var err error
	var done string
	switch action := chi.URLParam(r, "action"); action {
	case "roles":
		roles := r.PostForm["roles"]
		if roles == nil {
			roles = []string{}
		}
		display := r.PostFormValue("display_name")
		_, err = s.deps.Identity.ChangePerson(r.Context(), token, name, upstream.PersonChange{Roles: &roles, DisplayName: &display})
		done = "Saved " + name + "'s roles and display name."
	case "lock", "unlock":
		locked := action == "lock"
		_, err = s.deps.Identity.ChangePerson(r.Context(), token, name, upstream.PersonChange{Disabled: &locked})
		done = name + " is " + map[bool]string{true: "locked: their sessions have ended.", false: "active again."}[locked]
	case "password":
		if r.PostFormValue("password") != r.PostFormValue("password2") {
			s.renderPerson(w, r, http.StatusUnprocessableEntity, "", "The two passwords differ; nothing was changed.")
			return
		}
		err = s.deps.Identity.SetPersonPassword(r.Context(), token, name, r.PostFormValue("password"))
		done = "Set a new password for " + name + "; their sessions have ended."
	case "delete":
		if r.PostFormValue("confirm") != "yes" {
			http.Redirect(w, r, "/users/"+url.PathEscape(name)+"/delete", http.StatusSeeOther)
			return
		}
		if err = s.deps.Identity.DeletePerson(r.Context(), token, name); err == nil {
			s.log.Info("person deleted", "by", sessionOf(r).User.Username, "username", name)
			http.Redirect(w, r, "/users?done="+url.QueryEscape("Deleted "+name+"."), http.StatusSeeOther)
			return
		}
	default:
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such page.")
		return
	}
	if err != nil {
		if status, msg, ok := refusal(err); ok {
			s.renderPerson(w, r, status, "", "Nothing was changed: "+msg)
			return
		}
		s.upstreamFail(w, r, "Changing "+name, err)
		return
	}
	http.Redirect(w, r, "/users/"+url.PathEscape(name)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

func (s *Server) confirmDeletePerson(w http.ResponseWriter, r *http.Request) {
	p, ok := s.findPerson(w, r)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "confirm", "Delete a person", confirmData{
		Action:   "/users/" + url.PathEscape(p.Username) + "/delete",
		Question: "Delete " + p.Username + "?",
		Detail:   "They can no longer sign in and their sessions end. This cannot be undone; locking keeps the account instead.",
		Button:   "Delete " + p.Username, Cancel: "/users/" + url.PathEscape(p.Username),
	}, "", "")
}

type profileData struct {
	upstream.Person
	RoleNames string
	Provider  string
	Local     bool
}

func (s *Server) profilePage(w http.ResponseWriter, r *http.Request) {
	s.renderProfile(w, r, http.StatusOK, r.URL.Query().Get("done"), "")
}

func (s *Server) renderProfile(w http.ResponseWriter, r *http.Request, status int, flash, errMsg string) {
	p, err := s.deps.Identity.Profile(r.Context(), sessionOf(r).Token)
	if err != nil {
		s.upstreamFail(w, r, "Reading your profile", err)
		return
	}
	row := rowOf(p)
	s.render(w, r, status, "profile", "My profile", profileData{Person: p, RoleNames: row.RoleNames, Provider: row.Provider, Local: p.Source != "oidc"}, flash, errMsg)
}

func (s *Server) saveProfile(w http.ResponseWriter, r *http.Request) {
	dn, em, ph := r.PostFormValue("display_name"), r.PostFormValue("email"), r.PostFormValue("phone")
	_, err := s.deps.Identity.ChangeProfile(r.Context(), sessionOf(r).Token, upstream.ProfileChange{DisplayName: &dn, Email: &em, Phone: &ph})
	if err != nil {
		if status, msg, ok := refusal(err); ok {
			s.renderProfile(w, r, status, "", "Not saved: "+msg)
			return
		}
		s.upstreamFail(w, r, "Saving your profile", err)
		return
	}
	http.Redirect(w, r, "/profile?done="+url.QueryEscape("Your profile is saved."), http.StatusSeeOther)
}

func (s *Server) changeOwnPassword(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("new_password") != r.PostFormValue("new_password2") {
		s.renderProfile(w, r, http.StatusUnprocessableEntity, "", "The two new passwords differ; nothing was changed.")
		return
	}
	err := s.deps.Identity.ChangeOwnPassword(r.Context(), sessionOf(r).Token, r.PostFormValue("current_password"), r.PostFormValue("new_password"))
	if errors.Is(err, admininterface.ErrUnauthorized) {
		// identity answers a wrong current password with 401: not the end
		// of this session.
		s.renderProfile(w, r, http.StatusUnprocessableEntity, "", "The current password is wrong; nothing was changed.")
		return
	}
	if err != nil {
		if status, msg, ok := refusal(err); ok {
			s.renderProfile(w, r, status, "", "Not changed: "+msg)
			return
		}
		s.upstreamFail(w, r, "Changing your password", err)
		return
	}
	// Every session of this person has ended, this one included.
	s.clearSession(w)
	http.Redirect(w, r, "/login?done=password", http.StatusSeeOther)
}

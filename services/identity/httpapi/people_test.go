package httpapi_test

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"threatview/identity"
	"threatview/identity/httpapi"
)

// TestUsers_UserAdmin: a User Administrator manages people who are not
// Account Owners, and may neither touch an owner nor make one.
func TestUsers_UserAdmin(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	s.createUser(t, "root", pw, "admin")
	s.createUser(t, "uma", pw, "user_admin")
	uma := s.login(t, "uma", pw).AccessToken

	s.do(t, "GET", "/v1/users", uma, nil).want(t, "list as user_admin", 200)
	s.do(t, "POST", "/v1/users", uma, map[string]any{"username": "ann", "password": pw, "roles": []string{"analyst"}, "display_name": "Ann Analyst"}).
		want(t, "create an analyst", 201)
	s.do(t, "PATCH", "/v1/users/ann", uma, map[string]any{"disabled": true}).want(t, "lock ann", 200)
	s.do(t, "POST", "/v1/login", "", map[string]string{"username": "ann", "password": pw}).want(t, "locked ann signs in", 401)
	s.do(t, "PATCH", "/v1/users/ann", uma, map[string]any{"disabled": false}).want(t, "unlock ann", 200)
	s.do(t, "PUT", "/v1/users/ann/password", uma, map[string]any{"password": "reset by uma 1"}).want(t, "reset ann", 204)
	s.login(t, "ann", "reset by uma 1")

	s.do(t, "POST", "/v1/users", uma, map[string]any{"username": "eve", "password": pw, "roles": []string{"admin"}}).want(t, "create an owner", 403)
	s.do(t, "PATCH", "/v1/users/ann", uma, map[string]any{"roles": []string{"admin"}}).want(t, "promote to owner", 403)
	s.do(t, "PATCH", "/v1/users/root", uma, map[string]any{"disabled": true}).want(t, "lock an owner", 403)
	s.do(t, "PUT", "/v1/users/root/password", uma, map[string]any{"password": "taken over 123"}).want(t, "reset an owner", 403)
	s.do(t, "DELETE", "/v1/users/root", uma, nil).want(t, "delete an owner", 403)
	s.do(t, "DELETE", "/v1/users/uma", uma, nil).want(t, "delete yourself", 409)
	s.login(t, "root", pw)
}

// TestUsers_LastOwner: the last active Account Owner can be neither
// deleted, demoted nor locked, by anyone; with a second owner, they can.
func TestUsers_LastOwner(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	s.createUser(t, "root", pw, "admin")
	s.do(t, "PATCH", "/v1/users/root", s.adminKey, map[string]any{"roles": []string{"analyst"}}).want(t, "demote the last owner", 409)
	s.do(t, "PATCH", "/v1/users/root", s.adminKey, map[string]any{"disabled": true}).want(t, "lock the last owner", 409)
	s.do(t, "DELETE", "/v1/users/root", s.adminKey, nil).want(t, "delete the last owner", 409)
	s.login(t, "root", pw)

	s.createUser(t, "second", pw, "admin", "analyst")
	s.do(t, "PATCH", "/v1/users/second", s.adminKey, map[string]any{"disabled": true}).want(t, "lock the second owner", 200)
	s.do(t, "PATCH", "/v1/users/root", s.adminKey, map[string]any{"roles": []string{"analyst"}}).want(t, "demote root while second is locked", 409)
	s.do(t, "PATCH", "/v1/users/second", s.adminKey, map[string]any{"disabled": false}).want(t, "unlock the second owner", 200)
	s.do(t, "PATCH", "/v1/users/root", s.adminKey, map[string]any{"roles": []string{"analyst"}}).want(t, "demote root beside second", 200)
	s.do(t, "DELETE", "/v1/users/second", s.adminKey, nil).want(t, "delete the last owner again", 409)
}

// TestProfile: a person sets, reads and erases their own display name,
// e-mail and phone; bad values are refused without being echoed; each
// change is audited with the fields' names only.
func TestProfile(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	ann := "ann-" + strings.ToLower(hex.EncodeToString([]byte(time.Now().Format("150405.000"))))
	s.createUser(t, ann, pw, "analyst")
	tok := s.login(t, ann, pw).AccessToken

	r := s.do(t, "PATCH", "/v1/me", tok, map[string]any{"display_name": " Ann Example ", "email": "ann@example.com", "phone": "+33 1 23 45 67 89"})
	r.want(t, "set profile", 200)
	var me struct{ DisplayName, Email, Phone string }
	r = s.do(t, "GET", "/v1/me", tok, nil)
	r.want(t, "GET /v1/me", 200)
	_ = json.Unmarshal(r.body, &struct {
		DisplayName *string `json:"display_name"`
		Email       *string `json:"email"`
		Phone       *string `json:"phone"`
	}{&me.DisplayName, &me.Email, &me.Phone})
	if me.DisplayName != "Ann Example" || me.Email != "ann@example.com" || me.Phone != "+33 1 23 45 67 89" {
		t.Fatalf("GET /v1/me = %s, want the profile set", r.body)
	}
	r = s.do(t, "GET", "/v1/users", s.adminKey, nil)
	if strings.Contains(string(r.body), "ann@example.com") || !strings.Contains(string(r.body), "Ann Example") {
		t.Fatalf("GET /v1/users = %s, want the display name and no contact field", r.body)
	}
	for _, bad := range []map[string]any{
		{"email": "not an address"}, {"email": "a@b@c"}, {"phone": "call me maybe"},
		{"display_name": strings.Repeat("x", 129)}, {"display_name": "tab\there"}, {},
	} {
		r := s.do(t, "PATCH", "/v1/me", tok, bad)
		r.want(t, "PATCH /v1/me bad", 422)
		for _, v := range bad {
			if str, _ := v.(string); str != "" && strings.Contains(string(r.body), str) {
				t.Fatalf("PATCH /v1/me %v echoes the value: %s", bad, r.body)
			}
		}
	}
	s.do(t, "PATCH", "/v1/me", tok, map[string]any{"email": "", "phone": ""}).want(t, "erase contact", 200)
	r = s.do(t, "GET", "/v1/me", tok, nil)
	if strings.Contains(string(r.body), "example.com") || strings.Contains(string(r.body), "+33") {
		t.Fatalf("after erasing, GET /v1/me = %s", r.body)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := 0
		for _, rec := range auditRows(t, ann) {
			b, _ := json.Marshal(rec)
			if strings.Contains(string(b), "example.com") || strings.Contains(string(b), "+33") || strings.Contains(string(b), "Ann Example") {
				t.Fatalf("audit record holds a profile value: %s", b)
			}
			if rec["action"] == identity.ActionProfileUpdate {
				n++
			}
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit records %s of %s: %d, want 2", identity.ActionProfileUpdate, ann, n)
		}
		time.Sleep(300 * time.Millisecond)
	}
	s.do(t, "PATCH", "/v1/me", s.adminKey, map[string]any{"email": "k@example.com"}).want(t, "admin key profile", 400)
}

package upstream

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Person is one person as identity's users API describes them.
type Person struct {
	Username    string     `json:"username"`
	DisplayName string     `json:"display_name"`
	Roles       []string   `json:"roles"`
	Source      string     `json:"source"`
	Disabled    bool       `json:"disabled"`
	CreatedAt   *time.Time `json:"created_at"`
	LastLoginAt *time.Time `json:"last_login_at"`
	// Email and Phone come only with the person's own profile (GET /v1/me).
	Email string `json:"email"`
	Phone string `json:"phone"`
}

// NewPerson is what the Users page asks identity to create.
type NewPerson struct {
	Username    string   `json:"username"`
	Password    string   `json:"password"`
	Roles       []string `json:"roles"`
	DisplayName string   `json:"display_name,omitempty"`
}

// PersonChange is a partial change of a person (nil fields left alone).
type PersonChange struct {
	Roles       *[]string `json:"roles,omitempty"`
	Disabled    *bool     `json:"disabled,omitempty"`
	DisplayName *string   `json:"display_name,omitempty"`
}

// ProfileChange is a person's change of their own profile; a blank value
// erases the field.
type ProfileChange struct {
	DisplayName *string `json:"display_name,omitempty"`
	Email       *string `json:"email,omitempty"`
	Phone       *string `json:"phone,omitempty"`
}

// People lists every person (GET /v1/users; role user_admin).
func (c Identity) People(ctx context.Context, bearer string) ([]Person, error) {
	var out struct {
		Users []Person `json:"users"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/users", nil, bearer, nil, &out)
	return out.Users, err
}

// CreatePerson adds a person (POST /v1/users).
func (c Identity) CreatePerson(ctx context.Context, bearer string, p NewPerson) (Person, error) {
	var out Person
	err := c.call(ctx, http.MethodPost, "/v1/users", nil, bearer, p, &out)
	return out, err
}

// ChangePerson changes a person's roles, lock or display name (PATCH
// /v1/users/{username}). The last active owner: ErrInvalid (409).
func (c Identity) ChangePerson(ctx context.Context, bearer, username string, ch PersonChange) (Person, error) {
	var out Person
	err := c.call(ctx, http.MethodPatch, "/v1/users/"+url.PathEscape(username), nil, bearer, ch, &out)
	return out, err
}

// SetPersonPassword sets another person's password (PUT
// /v1/users/{username}/password), ending their sessions.
func (c Identity) SetPersonPassword(ctx context.Context, bearer, username, password string) error {
	return c.call(ctx, http.MethodPut, "/v1/users/"+url.PathEscape(username)+"/password", nil, bearer, map[string]string{"password": password}, nil)
}

// DeletePerson removes a person (DELETE /v1/users/{username}).
func (c Identity) DeletePerson(ctx context.Context, bearer, username string) error {
	return c.call(ctx, http.MethodDelete, "/v1/users/"+url.PathEscape(username), nil, bearer, nil, nil)
}

// Profile is the signed-in person with their contact fields (GET /v1/me).
func (c Identity) Profile(ctx context.Context, bearer string) (Person, error) {
	var out Person
	err := c.call(ctx, http.MethodGet, "/v1/me", nil, bearer, nil, &out)
	return out, err
}

// ChangeProfile changes the signed-in person's profile (PATCH /v1/me).
func (c Identity) ChangeProfile(ctx context.Context, bearer string, ch ProfileChange) (Person, error) {
	var out Person
	err := c.call(ctx, http.MethodPatch, "/v1/me", nil, bearer, ch, &out)
	return out, err
}

// ChangeOwnPassword changes the signed-in person's password (POST
// /v1/me/password); it ends their sessions, this one included.
func (c Identity) ChangeOwnPassword(ctx context.Context, bearer, current, next string) error {
	return c.call(ctx, http.MethodPost, "/v1/me/password", nil, bearer, map[string]string{"current_password": current, "new_password": next}, nil)
}

// Person returns one person (GET /v1/users/{username}).
func (c Identity) Person(ctx context.Context, bearer, username string) (Person, error) {
	var out Person
	err := c.call(ctx, http.MethodGet, "/v1/users/"+url.PathEscape(username), nil, bearer, nil, &out)
	return out, err
}

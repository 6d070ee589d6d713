package upstream

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AlertChannel is where a rule's notifications go (the secret is never
// read back).
type AlertChannel struct {
	Type   string `json:"type"`
	URL    string `json:"url,omitempty"`
	To     string `json:"to,omitempty"`
	Secret string `json:"secret,omitempty"`
}

// AlertRule is one alert rule of the alerts service.
type AlertRule struct {
	ID            string       `json:"id,omitempty"`
	Name          string       `json:"name"`
	AppID         string       `json:"app_id"`
	Threat        string       `json:"threat"`
	Country       string       `json:"country"`
	OS            string       `json:"os"`
	Kind          string       `json:"kind"`
	WindowSeconds int          `json:"window_seconds"`
	Threshold     int64        `json:"threshold"`
	Factor        float64      `json:"factor,omitempty"`
	Channel       AlertChannel `json:"channel"`
	SilencedUntil *time.Time   `json:"silenced_until,omitempty"`
	CreatedBy     string       `json:"created_by,omitempty"`
	CreatedAt     time.Time    `json:"created_at,omitzero"`
	State         string       `json:"state,omitempty"`
}

// AlertTransition is a rule's change between firing and resolved, with
// its notification's delivery.
type AlertTransition struct {
	ID           int64     `json:"id"`
	RuleID       string    `json:"rule_id"`
	State        string    `json:"state"`
	Value        int64     `json:"value"`
	Threshold    int64     `json:"threshold"`
	At           time.Time `json:"at"`
	Silenced     bool      `json:"silenced"`
	Notification string    `json:"notification"`
	Attempts     int       `json:"attempts"`
	LastError    string    `json:"last_error"`
}

// Forwarder is one SIEM forwarder of the alerts service.
type Forwarder struct {
	ID        string    `json:"id,omitempty"`
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	URL       string    `json:"url"`
	Format    string    `json:"format"`
	AppIDs    []string  `json:"app_ids"`
	Threats   []string  `json:"threats"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// ForwarderStatus is a forwarder's progress.
type ForwarderStatus struct {
	Delivered  int64   `json:"delivered"`
	Pending    int64   `json:"pending"`
	Failed     int64   `json:"failed"`
	LagSeconds float64 `json:"lag_seconds"`
	LastError  string  `json:"last_error"`
}

// Alerts is the alerts service's client; every call carries the person's
// access token (analysts read, admins change).
type Alerts struct{ *Client }

// Rules lists the live rules (GET /v1/alert-rules).
func (c Alerts) Rules(ctx context.Context, bearer string) ([]AlertRule, error) {
	var out struct {
		Rules []AlertRule `json:"rules"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/alert-rules", nil, bearer, nil, &out)
	return out.Rules, err
}

// Rule returns one rule; ErrNotFound when unknown.
func (c Alerts) Rule(ctx context.Context, bearer, id string) (AlertRule, error) {
	var out AlertRule
	err := c.call(ctx, http.MethodGet, "/v1/alert-rules/"+url.PathEscape(id), nil, bearer, nil, &out)
	return out, err
}

// CreateRule creates a rule; a refused field is ErrInvalid with the reason.
func (c Alerts) CreateRule(ctx context.Context, bearer string, r AlertRule) (AlertRule, error) {
	var out AlertRule
	err := c.call(ctx, http.MethodPost, "/v1/alert-rules", nil, bearer, r, &out)
	return out, err
}

// DeleteRule deletes a rule; ErrNotFound when unknown.
func (c Alerts) DeleteRule(ctx context.Context, bearer, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/alert-rules/"+url.PathEscape(id), nil, bearer, nil, nil)
}

// SilenceRule silences a rule until the time given (nil ends a silence).
func (c Alerts) SilenceRule(ctx context.Context, bearer, id string, until *time.Time) error {
	return c.call(ctx, http.MethodPut, "/v1/alert-rules/"+url.PathEscape(id)+"/silence", nil, bearer,
		map[string]*time.Time{"until": until}, nil)
}

// History lists up to limit transitions of a rule, newest first.
func (c Alerts) History(ctx context.Context, bearer, id string, limit int) ([]AlertTransition, error) {
	var out struct {
		Transitions []AlertTransition `json:"transitions"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/alert-rules/"+url.PathEscape(id)+"/history",
		url.Values{"limit": {strconv.Itoa(limit)}}, bearer, nil, &out)
	return out.Transitions, err
}

// DeadNotifications lists up to limit notifications that were given up on.
func (c Alerts) DeadNotifications(ctx context.Context, bearer string, limit int) ([]AlertTransition, error) {
	var out struct {
		Notifications []AlertTransition `json:"notifications"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/alert-notifications",
		url.Values{"status": {"dead"}, "limit": {strconv.Itoa(limit)}}, bearer, nil, &out)
	return out.Notifications, err
}

// Forwarders lists the live forwarders (GET /v1/forwarders).
func (c Alerts) Forwarders(ctx context.Context, bearer string) ([]Forwarder, error) {
	var out struct {
		Forwarders []Forwarder `json:"forwarders"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/forwarders", nil, bearer, nil, &out)
	return out.Forwarders, err
}

// CreateForwarder creates a forwarder; a refused field is ErrInvalid.
func (c Alerts) CreateForwarder(ctx context.Context, bearer string, f Forwarder) (Forwarder, error) {
	var out Forwarder
	err := c.call(ctx, http.MethodPost, "/v1/forwarders", nil, bearer, f, &out)
	return out, err
}

// DeleteForwarder deletes a forwarder; ErrNotFound when unknown.
func (c Alerts) DeleteForwarder(ctx context.Context, bearer, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/forwarders/"+url.PathEscape(id), nil, bearer, nil, nil)
}

// ForwarderStatus returns a forwarder's progress.
func (c Alerts) ForwarderStatus(ctx context.Context, bearer, id string) (ForwarderStatus, error) {
	var out ForwarderStatus
	err := c.call(ctx, http.MethodGet, "/v1/forwarders/"+url.PathEscape(id)+"/status", nil, bearer, nil, &out)
	return out, err
}

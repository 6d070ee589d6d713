package privacy_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
	"threatview/retention/privacy"
)

// fakeStore keeps erasures in memory: pure logic for the HTTP layer.
type fakeStore struct {
	erasures map[string]*privacy.Erasure
	known    map[string]bool
	liftErr  error
}

func (f *fakeStore) Create(_ context.Context, e *privacy.Erasure) error {
	if !f.known[e.AppID] {
		return privacy.ErrUnknownApp
	}
	for _, x := range f.erasures {
		if x.AppID == e.AppID && x.DeviceID == e.DeviceID && slices.Equal(x.UserPseudonyms, e.UserPseudonyms) && x.Status == privacy.StatusQueued {
			return privacy.ErrBusy
		}
	}
	e.Status = privacy.StatusPending
	c := *e
	f.erasures[e.ID] = &c
	return nil
}
func (f *fakeStore) Queue(_ context.Context, e *privacy.Erasure) error {
	f.erasures[e.ID].Status, e.Status = privacy.StatusQueued, privacy.StatusQueued
	return nil
}
func (f *fakeStore) CheckLift(context.Context, privacy.Subject) error { return f.liftErr }
func (f *fakeStore) Delete(_ context.Context, id string) error        { delete(f.erasures, id); return nil }
func (f *fakeStore) Get(_ context.Context, id string) (*privacy.Erasure, error) {
	if e, ok := f.erasures[id]; ok {
		return e, nil
	}
	return nil, privacy.ErrNotFound
}
func (f *fakeStore) List(context.Context, int) ([]privacy.Erasure, error) { return nil, nil }
func (f *fakeStore) LiftSuppression(context.Context, privacy.Subject, string) error {
	return f.liftErr
}
func (f *fakeStore) Suppressions(context.Context) ([]privacy.Suppression, error) { return nil, nil }

type fakeAuditor struct {
	err     error
	records []wire.AuditRecord
}

func (a *fakeAuditor) Audit(_ context.Context, r wire.AuditRecord) error {
	if a.err != nil {
		return a.err
	}
	a.records = append(a.records, r)
	return nil
}

func TestAPI_Erasures(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := &fakeStore{erasures: map[string]*privacy.Erasure{}, known: map[string]bool{"app": true}}
	audit := &fakeAuditor{}
	h := privacy.NewAPI(store, audit, nil, log).WithUserKeys(mustKeys(t, userKeys)).Handler(authz.New(nil, "admin-key", log), httpserver.NewRegistry(), nil, nil)
	post := func(body, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/erasures", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	tests := []struct {
		name, body, key string
		want            int
		code            string
	}{
		{"OK", `{"app_id":"app","device_id":"d1"}`, "admin-key", 202, ""},
		{"ErrBusy", `{"app_id":"app","device_id":"d1","suppress":false}`, "admin-key", 409, "erasure_in_progress"},
		{"ErrUnknownApp", `{"app_id":"nope","device_id":"d1"}`, "admin-key", 422, "unknown_app"},
		{"EmptyDevice", `{"app_id":"app","device_id":" "}`, "admin-key", 422, "invalid"},
		{"LongDevice", `{"app_id":"app","device_id":"` + strings.Repeat("x", privacy.MaxDeviceID+1) + `"}`, "admin-key", 422, "invalid"},
		{"NoApp", `{"device_id":"d"}`, "admin-key", 422, "invalid"},
		{"UnknownField", `{"app_id":"app","device_id":"d","x":1}`, "admin-key", 422, "unknown_field"},
		{"NotJSON", `{`, "admin-key", 400, "invalid_json"},
		{"User", `{"app_id":"app","user_id":"u1"}`, "admin-key", 202, ""},
		{"UserBusy", `{"app_id":"app","user_id":"u1","suppress":false}`, "admin-key", 409, "erasure_in_progress"},
		{"UserSuppress", `{"app_id":"app","user_id":"u2","suppress":true}`, "admin-key", 422, "invalid"},
		{"UserAndDevice", `{"app_id":"app","user_id":"u2","device_id":"d2"}`, "admin-key", 422, "invalid"},
		{"UserEmpty", `{"app_id":"app","user_id":""}`, "admin-key", 422, "invalid"},
		{"UserLong", `{"app_id":"app","user_id":"` + strings.Repeat("x", privacy.MaxUserID+1) + `"}`, "admin-key", 422, "invalid"},
		{"UserObject", `{"app_id":"app","user_id":{"id":"u2"}}`, "admin-key", 422, "invalid"},
		{"UserUnknownApp", `{"app_id":"nope","user_id":"u2"}`, "admin-key", 422, "unknown_app"},
		{"NoKey", `{"app_id":"app","device_id":"d2"}`, "", 401, ""},
		{"WrongKey", `{"app_id":"app","device_id":"d2"}`, "guess", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := post(tt.body, tt.key)
			if w.Code != tt.want || (tt.code != "" && !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`)) {
				t.Fatalf("POST %s = %d %s, want %d %s", tt.body, w.Code, w.Body, tt.want, tt.code)
			}
		})
	}
	if len(store.erasures) != 2 || len(audit.records) != 2 || audit.records[0].ActorToken != authz.ActorAdminKey || audit.records[0].Action != "privacy.erasure.request" {
		t.Fatalf("after the table: %d erasures, audit %+v; want the two accepted, audited with the admin key as actor", len(store.erasures), audit.records)
	}
	t.Run("UserWithoutKeys", func(t *testing.T) {
		h := privacy.NewAPI(store, audit, nil, log).Handler(authz.New(nil, "admin-key", log), httpserver.NewRegistry(), nil, nil)
		req := httptest.NewRequest(http.MethodPost, "/v1/erasures", strings.NewReader(`{"app_id":"app","user_id":"u3"}`))
		req.Header.Set("Authorization", "Bearer admin-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 422 || !strings.Contains(w.Body.String(), "PRIVACY_USER_ID_KEYS") || len(store.erasures) != 2 {
			t.Fatalf("POST by user id without keys = %d %s (%d erasures), want 422 naming PRIVACY_USER_ID_KEYS, nothing stored", w.Code, w.Body, len(store.erasures))
		}
	})
	t.Run("AuditDownWithdraws", func(t *testing.T) {
		audit.err = errors.New("audit logger down")
		w := post(`{"app_id":"app","device_id":"d3"}`, "admin-key")
		if w.Code != 503 || w.Header().Get("Retry-After") == "" {
			t.Fatalf("POST with the audit logger down = %d (Retry-After %q), want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		if len(store.erasures) != 2 {
			t.Fatalf("%d erasures stored, want the unaudited one withdrawn", len(store.erasures))
		}
	})
	t.Run("LiftWhileErasing", func(t *testing.T) {
		audit.err, audit.records = nil, nil
		store.liftErr = privacy.ErrBusy
		req := httptest.NewRequest(http.MethodDelete, "/v1/suppressions?app_id=app&device_id=d1", nil)
		req.Header.Set("Authorization", "Bearer admin-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"code":"erasure_in_progress"`) || len(audit.records) != 0 {
			t.Fatalf("DELETE /v1/suppressions while erasing = %d %s (%d audited), want 409 erasure_in_progress, not audited", w.Code, w.Body, len(audit.records))
		}
	})
}

package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"threatview/collector"
	"threatview/collector/httpapi"
	"threatview/platform/wire"
)

const testUserKeys = "k1:000102030405060708090a0b0c0d0e0f"

func withUsers(t testing.TB) func(*httpapi.Deps) {
	return func(d *httpapi.Deps) {
		p, err := wire.ParsePseudonymKeys(testUserKeys)
		if err != nil {
			t.Fatal(err)
		}
		d.Enricher.WithInvestigation(p, 0.1)
	}
}

// TestAPI_InvestigationFields posts an event with session, user, language
// and a fine location: what is published has the session, the user's
// pseudonym (never the raw id), the language and the location on the grid;
// the audit message holds neither the raw id nor the fine location.
func TestAPI_InvestigationFields(t *testing.T) {
	var f *fixture
	f = newFixture(t, func(d *httpapi.Deps) { withUsers(t)(d); withAudit(&f)(d) })
	const rawUser = "alice.raw-user@example.com"
	body := `{"type":"app.startup","app":{"id":"app1"},"device":{"id":"d1","language":"en-GB"},
		"session":{"id":"s-42"},"user":{"id":"` + rawUser + `"},"location":{"lat":48.13743,"lon":-11.57549,"accuracy_m":12.5}}`
	w := f.do(t, post(body))
	if w.Code != http.StatusAccepted {
		t.Fatalf("POST = %d %s, want 202", w.Code, w.Body)
	}
	msgs := f.events.messages()
	if len(msgs) != 1 {
		t.Fatalf("published %d messages, want 1", len(msgs))
	}
	batch, err := wire.DecodeEventBatch(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	ev := batch.Events[0]
	p, _ := wire.ParsePseudonymKeys(testUserKeys)
	if ev.SessionID() != "s-42" || ev.UserPseudonym() != p.Pseudonym(rawUser) || ev.Device.Language != "en-GB" ||
		ev.Location == nil || ev.Location.Lat != 48.1 || ev.Location.Lon != -11.6 {
		t.Errorf("published %+v session %v user %v location %v, want s-42, the pseudonym, en-GB, 48.1,-11.6", ev, ev.Session, ev.User, ev.Location)
	}
	for _, m := range append(msgs, f.audit.messages()...) {
		for _, secret := range []string{rawUser, "48.137", "11.575", "accuracy"} {
			if strings.Contains(string(m), secret) {
				t.Errorf("a published message holds %q: %s", secret, m)
			}
		}
	}
}

// TestAPI_InvestigationBadInput: each bad value is a 422 naming the field,
// and nothing is published.
func TestAPI_InvestigationBadInput(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name, fields, field string
	}{
		{"SessionID129", `"session":{"id":"` + long(129) + `"}`, "session.id"},
		{"SessionIDMissing", `"session":{}`, "session.id"},
		{"SessionNotObject", `"session":"s1"`, "session"},
		{"Lat91", `"location":{"lat":91,"lon":0}`, "location.lat"},
		{"LatMissing", `"location":{"lon":0}`, "location.lat"},
		{"Lon181", `"location":{"lat":0,"lon":-181}`, "location.lon"},
		{"LatString", `"location":{"lat":"48","lon":0}`, "location.lat"},
		{"AccuracyNegative", `"location":{"lat":0,"lon":0,"accuracy_m":-1}`, "location.accuracy_m"},
		{"Language200", `"device":{"language":"` + long(200) + `"}`, "device.language"},
		{"LanguageSyntax", `"device":{"language":"en_GB"}`, "device.language"},
		{"UserIDObject", `"user":{"id":{"email":"a@b"}}`, "user.id"},
		{"UserIDNumber", `"user":{"id":42}`, "user.id"},
		{"UserIDEmpty", `"user":{"id":""}`, "user.id"},
		{"UserUnknownField", `"user":{"id":"u","email":"a@b"}`, "email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withUsers(t))
			for _, body := range []string{
				`{"type":"app.startup","app":{"id":"app1"},` + tc.fields + `}`,
				`{"events":[{"type":"app.startup","app":{"id":"app1"}},{"type":"app.startup","app":{"id":"app1"},` + tc.fields + `}]}`,
			} {
				w := f.do(t, post(body))
				if w.Code != http.StatusUnprocessableEntity {
					t.Fatalf("POST %s = %d %s, want 422", body, w.Code, w.Body)
				}
				e := errorBody(t, w)
				if got, _ := e.Details.(map[string]any)["field"].(string); got != tc.field {
					t.Errorf("POST %s: field %q (%s), want %q", body, got, e.Message, tc.field)
				}
				if strings.Contains(w.Body.String(), "a@b") || strings.Contains(w.Body.String(), long(40)) {
					t.Errorf("error body echoes the value: %s", w.Body)
				}
			}
			if n := len(f.events.messages()); n != 0 {
				t.Errorf("published %d messages, want none", n)
			}
		})
	}
}

// TestAPI_UserIDWithoutKey: with no key configured, a user id is dropped,
// never published.
func TestAPI_UserIDWithoutKey(t *testing.T) {
	f := newFixture(t, nil)
	w := f.do(t, post(`{"type":"app.startup","app":{"id":"app1"},"user":{"id":"bob-raw"}}`))
	if w.Code != http.StatusAccepted {
		t.Fatalf("POST = %d %s, want 202", w.Code, w.Body)
	}
	for _, m := range f.events.messages() {
		if strings.Contains(string(m), "bob-raw") || strings.Contains(string(m), `"user"`) {
			t.Errorf("published %s, want no user", m)
		}
	}
}

func TestCoarsen(t *testing.T) {
	for _, tc := range []struct{ v, grid, want float64 }{
		{48.13743, 0.1, 48.1}, {-11.57549, 0.1, -11.6}, {90, 0.1, 90}, {-180, 0.1, -180},
		{0.3, 0.1, 0.3}, {-0.05, 0.1, -0.1}, {51.5, 1, 51}, {12.3456, 0.01, 12.34},
	} {
		if got := collector.Coarsen(tc.v, tc.grid); got != tc.want {
			t.Errorf("Coarsen(%v, %v) = %v, want %v", tc.v, tc.grid, got, tc.want)
		}
	}
	b, _ := json.Marshal(collector.Coarsen(0.3, 0.1))
	if string(b) != "0.3" {
		t.Errorf("Coarsen(0.3) encodes as %s, want 0.3", b)
	}
}

func TestIsLanguageTag(t *testing.T) {
	for tag, want := range map[string]bool{
		"en": true, "en-GB": true, "zh-Hant-TW": true, "sr-Latn-RS": true, "de-CH-1996": true, "x-klingon": true, "fil-PH": true,
		"": false, "e": false, "en_GB": false, "en-": false, "-en": false, "en--GB": false, "1en": false, "en-GB-toolongsubtag": false, "en GB": false,
	} {
		if got := collector.IsLanguageTag(tag); got != want {
			t.Errorf("IsLanguageTag(%q) = %v, want %v", tag, got, want)
		}
	}
}

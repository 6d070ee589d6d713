package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"
)

// FuzzSession: any cookie value is read without a panic, and a session the
// renderer wrote reads back unchanged.
func FuzzSession(f *testing.F) {
	a := NewAuth(nil, nil, nil, true, nil)
	f.Add("eyJhIjoieC55LnoiLCJlIjoxLCJyIjoiciIsInJlIjoyfQ", "x.y.z", "refresh")
	f.Add("", "", "")
	f.Add("%%%", "a", "b")
	f.Fuzz(func(t *testing.T, raw, access, refresh string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Cookie", "__Host-tv_session="+raw)
		_, _ = a.session(r)
		if access == "" || !utf8.ValidString(access) || !utf8.ValidString(refresh) {
			return // identity's tokens are ASCII
		}
		want := session{Access: access, Expires: 1 << 40, Refresh: refresh, RefreshExp: 1 << 41}
		rec := httptest.NewRecorder()
		a.setSession(rec, want)
		r = httptest.NewRequest(http.MethodGet, "/", nil)
		for _, c := range rec.Result().Cookies() {
			r.AddCookie(c)
		}
		got, ok := a.session(r)
		if len(rec.Result().Cookies()) == 1 && len(rec.Result().Cookies()[0].Value) <= 4096 && (!ok || got != want) {
			t.Fatalf("session round trip = %+v, %v; want %+v", got, ok, want)
		}
	})
}

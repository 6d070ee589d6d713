package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/visualrenderer/httpapi"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

// TestHome_AdminLink: with the Administration Interface's URL configured,
// the dashboards' home links back to it (one home for people); without it,
// no link.
func TestHome_AdminLink(t *testing.T) {
	url, _ := rtest.MustEventsDB(t)
	store, err := postgres.Open(context.Background(), url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name, adminURL, want string
	}{
		{"Configured", "https://admin.example.test/", `<a id="admin-link" href="https://admin.example.test/">Administration Interface</a>`},
		{"None", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			auth := httpapi.NewAuth(authz.New(nil, adminKey, log), nil, nil, true, log)
			srv := httptest.NewServer(httpapi.New(store, auth, httpserver.NewRegistry(), nil, log, httpapi.AdminURL(c.adminURL)))
			t.Cleanup(srv.Close)
			resp, body := get(t, srv, "/", bearer...)
			if resp.StatusCode != 200 {
				t.Fatalf("GET / = %d %s", resp.StatusCode, body)
			}
			if c.want != "" && !strings.Contains(string(body), c.want) {
				t.Errorf("GET / lacks %q:\n%.2000s", c.want, body)
			}
			if c.want == "" && strings.Contains(string(body), "admin-link") {
				t.Errorf("GET / links an Administration Interface though none is configured:\n%.2000s", body)
			}
		})
	}
}

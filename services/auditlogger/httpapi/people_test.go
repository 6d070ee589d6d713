package httpapi_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"threatview/auditlogger/httpapi"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
)

// TestGet_People checks who may read the trail with an access token from
// the identity service: auditors and admins, nobody else; posting stays
// with the internal key.
func TestGet_People(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	pub := priv.Public().(ed25519.PublicKey)
	api := httpapi.New(&fakePublisher{}, &fakeStore{}, httpapi.Options{
		InternalKey: internalKey, AdminKey: adminKey, MaxRequestBytes: 64 << 10, MaxRecords: 10,
		People: authz.NewVerifier(authz.StaticKeys{authz.KeyID(pub): pub}),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(api.Handler(httpserver.NewRegistry(), nil))
	defer srv.Close()
	sign := func(at time.Time, roles ...string) string {
		tok, err := authz.Sign(priv, "someone", roles, at, 5*time.Minute, "jti")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	for _, c := range []struct {
		name, cred string
		get, post  int
	}{
		{"Auditor", sign(now, "auditor"), 200, 401},
		{"Admin", sign(now, "admin"), 200, 401},
		{"AdminKey", adminKey, 200, 401},
		{"Analyst", sign(now, "analyst"), 403, 401},
		{"NoRole", sign(now), 403, 401},
		{"ExpiredAuditor", sign(now.Add(-time.Hour), "auditor"), 401, 401},
		{"InternalKey", internalKey, 401, 422}, // let in, and the empty batch refused
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, _ := do(t, http.MethodGet, srv.URL+"/v1/audit", c.cred, "")
			if resp.StatusCode != c.get {
				t.Fatalf("GET /v1/audit = %d, want %d", resp.StatusCode, c.get)
			}
			resp, _ = do(t, http.MethodPost, srv.URL+"/v1/audit", c.cred, "{}")
			if resp.StatusCode != c.post {
				t.Fatalf("POST /v1/audit = %d, want %d", resp.StatusCode, c.post)
			}
		})
	}
}

package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"threatview/migrations"
	"threatview/platform/auditclient"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/tokens"
	"threatview/tokens/httpapi"
	"threatview/tokens/mariadb"
)

// TestAPI_People checks the role check and the actor of audit records when
// people call with access tokens from the identity service.
func TestAPI_People(t *testing.T) {
	fa := &fakeAudit{}
	audit := httptest.NewServer(fa)
	defer audit.Close()
	db, err := mariadb.Open(testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(context.Background(), db, migrations.Tokens); err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	pub := priv.Public().(ed25519.PublicKey)
	people := authz.NewVerifier(authz.StaticKeys{authz.KeyID(pub): pub})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := mariadb.New(db)
	svc := tokens.NewService(store, auditclient.New(audit.URL, internalKey, auditclient.Options{Timeout: 2 * time.Second, Unavailable: tokens.ErrAuditUnavailable}), nil, time.Hour, log)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Keys{Admin: adminKey, Internal: internalKey, People: people},
		httpserver.NewRegistry(), map[string]httpserver.Check{"database": store.Ping}, log))
	defer srv.Close()
	e := &env{url: srv.URL, db: db, svc: svc}

	sign := func(key ed25519.PrivateKey, user string, at time.Time, roles ...string) string {
		tok, err := authz.Sign(key, user, roles, at, 5*time.Minute, "jti")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	alice := sign(priv, "alice", now, "admin")
	parts := strings.Split(alice, ".")
	claims := []byte(parts[1])
	claims[5] ^= 1

	for _, c := range []struct {
		name, cred string
		want       int
	}{
		{"Analyst", sign(priv, "ann", now, "analyst"), 403},
		{"Auditor", sign(priv, "otto", now, "auditor"), 403},
		{"Expired", sign(priv, "alice", now.Add(-time.Hour), "admin"), 401},
		{"Tampered", parts[0] + "." + string(claims) + "." + parts[2], 401},
		{"OtherIssuerKey", sign(stranger, "alice", now, "admin"), 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []struct{ method, path, body string }{
				{http.MethodPost, "/v1/tokens", `{"app_id":"people-app"}`},
				{http.MethodGet, "/v1/tokens", ""},
			} {
				status, raw := e.do(t, m.method, m.path, c.cred, m.body)
				wantError(t, c.name+" "+m.method+" "+m.path, status, c.want, raw)
			}
		})
	}
	if recs, _ := fa.snapshot(); len(recs) != 0 {
		t.Fatalf("refused calls wrote %d audit records", len(recs))
	}

	t.Run("ActorIsThePerson", func(t *testing.T) {
		for _, c := range []struct{ cred, actor string }{{alice, "alice"}, {adminKey, authz.ActorAdminKey}} {
			status, raw := e.do(t, http.MethodPost, "/v1/tokens", c.cred, `{"app_id":"people-app"}`)
			if status != http.StatusCreated {
				t.Fatalf("POST /v1/tokens as %s = %d %s", c.actor, status, raw)
			}
			var tok created
			_ = json.Unmarshal(raw, &tok)
			if status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+tok.ID, c.cred, ""); status != http.StatusNoContent {
				t.Fatalf("DELETE as %s = %d %s", c.actor, status, raw)
			}
			recs, _ := fa.snapshot()
			last := recs[len(recs)-2:]
			for _, r := range last {
				if r.ActorToken != c.actor || r.Resource != "token:"+tok.ID {
					t.Fatalf("audit record %s %s has actor %q, want %q", r.Action, r.Resource, r.ActorToken, c.actor)
				}
			}
		}
	})
}

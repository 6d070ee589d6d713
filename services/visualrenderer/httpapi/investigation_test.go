package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
	"threatview/visualrenderer/httpapi"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

type fakeAuditor struct {
	mu   sync.Mutex
	recs []wire.AuditRecord
}

func (a *fakeAuditor) Audit(_ context.Context, rec wire.AuditRecord) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, rec)
	return nil
}

func (a *fakeAuditor) all() []wire.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]wire.AuditRecord(nil), a.recs...)
}

const invKeys = "k1:000102030405060708090a0b0c0d0e0f"

func mustInvServer(t *testing.T) (*httptest.Server, *pgxpool.Pool, *fakeAuditor) {
	t.Helper()
	url, pool := rtest.MustEventsDB(t)
	if _, err := pool.Exec(context.Background(), `SELECT events.maintain_partitions(1)`); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	auth := httpapi.NewAuth(authz.New(nil, adminKey, log), nil, nil, true, log)
	users, _ := wire.ParsePseudonymKeys(invKeys)
	aud := &fakeAuditor{}
	srv := httptest.NewServer(httpapi.New(store, auth, httpserver.NewRegistry(), nil, log,
		httpapi.Investigation{Store: store, Users: users, Audit: aud, Poll: 100 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return srv, pool, aud
}

func insertEvent(t *testing.T, pool *pgxpool.Pool, id, device, user string, at time.Time) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, device_id,
		country, user_pseudonym, threat_types) VALUES ($1, $2, $2, 'app.startup', 'app-a', $3, 'DE', $4, '{Hooks}')`, id, at, device, user); err != nil {
		t.Fatal(err)
	}
}

// TestInvestigation_BadParams: every bad parameter is a 422 naming it.
func TestInvestigation_BadParams(t *testing.T) {
	srv, _, _ := mustInvServer(t)
	for path, param := range map[string]string{
		"/v1/events?limit=0":        "limit",
		"/v1/events?limit=501":      "limit",
		"/v1/events?from=yesterday": "from",
		"/v1/events?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z": "from",
		"/v1/events?cursor=bm9wZQ":                                     "cursor",
		"/v1/events?category=spyware":                                  "category",
		"/v1/events?country=DEU":                                       "country",
		"/v1/events?device_id=" + strings.Repeat("d", 300):             "device_id",
		"/v1/overview?to=2020-01-01":                                   "from",
		"/v1/map?k=2":                                                  "k",
		"/v1/reports/threats/Hooks?from=2026-13-01":                    "from",
	} {
		resp, body := get(t, srv, path, bearer...)
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Details struct {
					Parameter string `json:"parameter"`
				} `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusUnprocessableEntity || e.Error.Details.Parameter != param {
			t.Errorf("GET %s = %d %s, want 422 naming %s", path, resp.StatusCode, body, param)
		}
	}
	if resp, _ := get(t, srv, "/v1/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/events without a key = %d, want 401", resp.StatusCode)
	}
}

// TestInvestigation_SearchByRawUserAudited: a search by the raw user id finds
// the pseudonymised events, and is audited with the pseudonym, never the
// raw id.
func TestInvestigation_SearchByRawUserAudited(t *testing.T) {
	srv, pool, aud := mustInvServer(t)
	users, _ := wire.ParsePseudonymKeys(invKeys)
	const raw = "carol-raw@example.com"
	now := time.Now().UTC()
	insertEvent(t, pool, "0190a5d2-0000-7000-8000-000000000001", "d1", users.Pseudonym(raw), now.Add(-time.Minute))
	insertEvent(t, pool, "0190a5d2-0000-7000-8000-000000000002", "d2", "", now.Add(-time.Minute))
	resp, body := get(t, srv, "/v1/events?user_id="+raw, bearer...)
	var page struct {
		Events []struct {
			EventID string `json:"event_id"`
			User    struct {
				Pseudonym string `json:"pseudonym"`
			} `json:"user"`
		} `json:"events"`
	}
	if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != 200 || len(page.Events) != 1 || page.Events[0].User.Pseudonym != users.Pseudonym(raw) {
		t.Fatalf("GET by user = %d %s, want the one event", resp.StatusCode, body)
	}
	recs := aud.all()
	if len(recs) != 1 || recs[0].Action != "events.search" || recs[0].ActorToken != authz.ActorAdminKey ||
		!strings.Contains(string(recs[0].Body), users.Pseudonym(raw)) || strings.Contains(string(recs[0].Body), raw) {
		t.Errorf("audit = %+v, want one events.search by the admin key naming the pseudonym only", recs)
	}
	if _, err := netip.ParseAddr(recs[0].ClientIP); err != nil {
		t.Errorf("audit client_ip %q is not an address (the audit logger refuses it)", recs[0].ClientIP)
	}
	if resp, body := get(t, srv, "/v1/timelines/user/"+raw, bearer...); resp.StatusCode != 200 || !strings.Contains(string(body), `"Hooks":1`) {
		t.Errorf("GET timeline = %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, srv, "/v1/timelines/device/nobody", bearer...); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET timeline of nobody = %d, want 404", resp.StatusCode)
	}
}

// TestInvestigation_Stream: an event stored after the stream opened arrives
// within 2 s; one stored before does not.
func TestInvestigation_Stream(t *testing.T) {
	srv, pool, _ := mustInvServer(t)
	insertEvent(t, pool, "0190a5d2-0000-7000-8000-0000000000aa", "old", "", time.Now().UTC().Add(-time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/events/stream?app_id=app-a", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream = %d %s", resp.StatusCode, ct)
	}
	time.Sleep(300 * time.Millisecond)
	stored := time.Now()
	insertEvent(t, pool, "0190a5d2-0000-7000-8000-0000000000bb", "new", "", time.Now().UTC())
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if strings.Contains(line, "0000000000aa") {
			t.Fatalf("stream sent an event stored before it opened: %s", line)
		}
		if strings.Contains(line, "0000000000bb") {
			if d := time.Since(stored); d > 2*time.Second {
				t.Errorf("event arrived after %v, want within 2 s", d)
			}
			return
		}
	}
	t.Fatalf("stream ended without the event: %v", sc.Err())
}

// TestInvestigation_TaxonomyAdminAudited: GET lists freeRASP's names; PUT
// needs admin, is audited, and rejects an unknown category with 422.
func TestInvestigation_TaxonomyAdminAudited(t *testing.T) {
	srv, _, aud := mustInvServer(t)
	resp, body := get(t, srv, "/v1/taxonomy", bearer...)
	for _, name := range []string{"AppIntegrity", "PrivilegedAccess", "Debug", "Hooks", "Passcode", "Simulator", "SecureHardwareNotAvailable",
		"SystemVPN", "DeviceBinding", "DeviceID", "UnofficialStore", "ObfuscationIssues", "DevMode", "Malware", "ADBEnabled", "Screenshot",
		"ScreenRecording", "MultiInstance"} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"type":"`+name+`"`) {
			t.Errorf("GET /v1/taxonomy lacks %s: %d", name, resp.StatusCode)
		}
	}
	put := func(typ, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/taxonomy/"+typ, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := put("my_threat", `{"category":"spyware","severity":"high"}`); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("PUT with a bad category = %d, want 422", r.StatusCode)
	}
	if r := put("my_threat", `{"category":"malware","severity":"high"}`); r.StatusCode != 200 {
		t.Errorf("PUT = %d, want 200", r.StatusCode)
	}
	if recs := aud.all(); len(recs) != 1 || recs[0].Action != "taxonomy.set" {
		t.Errorf("audit = %+v, want one taxonomy.set", recs)
	}
	if _, body := get(t, srv, "/v1/taxonomy", bearer...); !strings.Contains(string(body), `{"type":"my_threat","category":"malware","severity":"high"}`) {
		t.Errorf("GET after PUT = %s", body)
	}
}

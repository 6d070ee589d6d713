package privacy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

type subject struct{ app, device string }

// post sends n events of s (threats and occurred_at spread over hours and
// days, so several rollup buckets hold them) and checks the 202.
func post(t *testing.T, env e2etest.Env, app e2etest.App, device string, n int) {
	t.Helper()
	var evs []string
	for i := 0; i < n; i++ {
		at := time.Now().UTC().Add(-time.Duration(i*7) * time.Hour).Format(time.RFC3339)
		threats := `["root"]`
		if i%2 == 1 {
			threats = `["root",{"type":"hook"}]`
		}
		evs = append(evs, fmt.Sprintf(`{"type":"app.startup","occurred_at":%q,"app":{"id":%q},"device":{"id":%q,"model":"Model %d","manufacturer":"M","os":"os%d","os_version":"1"},"threats":%s}`,
			at, app.ID, device, i%3, i%2, threats))
	}
	r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, []byte(`{"events":[`+strings.Join(evs, ",")+`]}`),
		map[string]string{"X-Forwarded-For": "1.0.0.10"})
	if r.Status != http.StatusAccepted {
		t.Fatalf("post %s/%s: %d %s", app.ID, device, r.Status, r.Body)
	}
}

func countEvents(ctx context.Context, t *testing.T, pool *pgxpool.Pool, s subject) (events, late int) {
	t.Helper()
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2),
		(SELECT count(*) FROM events.late_events WHERE app_id = $1 AND device_id = $2)`, s.app, s.device).Scan(&events, &late); err != nil {
		t.Fatal(err)
	}
	return events, late
}

// rollupsExact checks every per-app rollup of app against a count(*) over
// its remaining events (the promise "rollups are exact").
func rollupsExact(ctx context.Context, pool *pgxpool.Pool, app string) error {
	return rollupsExactSince(ctx, pool, app, time.Time{})
}

// rollupsExactSince is rollupsExact for the buckets from since on: the
// rollups of a month archived and dropped keep its counts (docs/privacy.md),
// while its events have left events.events.
func rollupsExactSince(ctx context.Context, pool *pgxpool.Pool, app string, since time.Time) error {
	grains := map[string]string{
		"hour":  "date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
		"day":   "(occurred_at AT TIME ZONE 'UTC')::date",
		"month": "date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date",
	}
	keys := map[string][2]string{ // rollup key column, expression over events e
		"country":      {"country", "e.country"},
		"os":           {"os", "e.os"},
		"device_model": {"device_model_id", "(SELECT d.id FROM facts.device_models_dim d WHERE d.manufacturer = e.manufacturer AND d.model = e.device_model)"},
		"threat":       {"threat", "x.threat"},
	}
	for g, bucket := range grains {
		for k, col := range keys {
			from := "events.events e"
			if k == "threat" {
				from = "events.events e, unnest(facts.threat_types(e.payload)) AS x(threat)"
			}
			q := fmt.Sprintf(`WITH want AS (SELECT %[1]s AS bucket, %[2]s::text AS key, count(*) AS n FROM %[3]s WHERE e.app_id = $1 AND %[1]s >= $2 GROUP BY 1, 2),
have AS (SELECT bucket, %[4]s::text AS key, count AS n FROM facts.events_by_%[5]s_per_%[6]s WHERE app_id = $1 AND bucket >= $2)
SELECT count(*) FROM want FULL JOIN have USING (bucket, key) WHERE want.n IS DISTINCT FROM have.n`,
				strings.ReplaceAll(bucket, "occurred_at", "e.occurred_at"), col[1], from, col[0], k, g)
			var bad int
			if err := pool.QueryRow(ctx, q, app, since).Scan(&bad); err != nil {
				return fmt.Errorf("%s per %s: %w", k, g, err)
			}
			if bad != 0 {
				return fmt.Errorf("events_by_%s_per_%s: %d buckets differ from count(*)", k, g, bad)
			}
		}
	}
	return nil
}

func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	r := e2etest.Do(t, http.MethodGet, url+"/metrics", "", nil, nil)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("%s/metrics has no %s", url, name)
	return 0
}

// auditBody posts an audit record of app with the body_sha256 of a body
// holding device's event and returns its id and the body. The stack's
// audit logger keeps no bodies, so the test writes the body into the row
// once stored, as a deployment keeping bodies would have it (the trail's
// leaves cover body_sha256, not the body).
func auditBody(t *testing.T, env e2etest.Env, app, device string) (string, []byte) {
	t.Helper()
	id := e2etest.UUID()
	body := []byte(fmt.Sprintf(`{"type":"app.startup","app":{"id":%q},"device":{"id":%q}}`, app, device))
	sum := sha256.Sum256(body)
	rec, _ := json.Marshal(map[string]any{"id": id, "time": time.Now().UTC().Format(time.RFC3339Nano), "actor_app_id": app,
		"action": "events.collect", "resource": "/v1/events", "outcome": 202, "event_count": 1,
		"body_sha256": fmt.Sprintf("%x", sum), "body": body})
	r := e2etest.Do(t, http.MethodPost, env.AuditURL+"/v1/audit", env.InternalKey, rec, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("post audit record: %d %s", r.Status, r.Body)
	}
	return id, body
}

type erasure struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Report struct {
		Events       int64 `json:"events_deleted"`
		Facts        int64 `json:"facts_deleted"`
		LateEvents   int64 `json:"late_events_deleted"`
		AuditBodies  int64 `json:"audit_bodies_redacted"`
		RollupRows   int64 `json:"rollup_rows_adjusted"`
		Verification *struct {
			Clean bool `json:"clean"`
		} `json:"verification"`
	} `json:"report"`
}

// TestErasure_RemovesOneDeviceEverywhere stores events of two devices of
// each of two apps (the same device id in both apps), held late events and
// audit bodies, erases one device of one app, and checks that nothing of
// it is left, that the rest is untouched, that the rollups are exact, that
// bad requests change nothing, and that the device's later events are
// dropped and counted until the suppression is lifted.
func TestErasure_RemovesOneDeviceEverywhere(t *testing.T) {
	env := e2etest.MustEnv(t)
	privacyURL := testenv.MustEnv(t, "THREATVIEW_PRIVACY_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pool := e2etest.Events(t, env)
	audit := e2etest.MariaDB(t, env.AuditDSN)

	a, b := e2etest.NewApp(t, env, "erase-a"), e2etest.NewApp(t, env, "erase-b")
	victim := subject{a.ID, "device-1"}
	others := []subject{{a.ID, "device-2"}, {b.ID, "device-1"}, {b.ID, "device-3"}}
	post(t, env, a, "device-1", 12)
	post(t, env, a, "device-2", 9)
	post(t, env, b, "device-1", 7)
	post(t, env, b, "device-3", 5)
	// Held late events (as the processor holds them for a month archived
	// and dropped), one of the subject and one of another device.
	for _, s := range []subject{victim, others[0]} {
		if _, err := pool.Exec(ctx, `INSERT INTO events.late_events (id, received_at, occurred_at, type, app_id, device_id, country, reason)
			VALUES (gen_random_uuid(), now() - interval '400 days', now() - interval '400 days', 'app.startup', $1, $2, 'AU', 'e2e: month archived and dropped')`, s.app, s.device); err != nil {
			t.Fatal(err)
		}
	}
	victimAudit, victimBody := auditBody(t, env, a.ID, victim.device)
	otherAudit, otherBody := auditBody(t, env, a.ID, "device-2")

	want := map[subject]int{victim: 12, others[0]: 9, others[1]: 7, others[2]: 5}
	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		for s, n := range want {
			if got, _ := countEvents(ctx, t, pool, s); got != n {
				return false, fmt.Errorf("%v: %d events of %d", s, got, n)
			}
		}
		err := rollupsExact(ctx, pool, a.ID)
		return err == nil, err
	}); err != nil {
		t.Fatalf("events not stored and rolled up: %v", err)
	}
	if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		var n int
		err := audit.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE id IN (UNHEX(REPLACE(?, '-', '')), UNHEX(REPLACE(?, '-', '')))`, victimAudit, otherAudit).Scan(&n)
		return n == 2, err
	}); err != nil {
		t.Fatalf("audit records not stored: %v", err)
	}
	for id, body := range map[string][]byte{victimAudit: victimBody, otherAudit: otherBody} {
		if _, err := audit.ExecContext(ctx, `UPDATE audit_events SET body = ? WHERE id = UNHEX(REPLACE(?, '-', ''))`, body, id); err != nil {
			t.Fatal(err)
		}
	}

	erase := func(body string, key string) e2etest.Response {
		return e2etest.Do(t, http.MethodPost, privacyURL+"/v1/erasures", key, []byte(body), nil)
	}
	t.Run("bad input changes nothing", func(t *testing.T) {
		e2etest.CheckError(t, "no key", erase(`{"app_id":"`+a.ID+`","device_id":"device-1"}`, ""), http.StatusUnauthorized)
		e2etest.CheckError(t, "internal key", erase(`{"app_id":"`+a.ID+`","device_id":"device-1"}`, env.InternalKey), http.StatusUnauthorized)
		eb := e2etest.CheckError(t, "unknown app", erase(`{"app_id":"no-such-app-e2e","device_id":"device-1"}`, env.AdminKey), http.StatusUnprocessableEntity)
		if eb.Error.Code != "unknown_app" {
			t.Errorf("unknown app: code %q, want unknown_app", eb.Error.Code)
		}
		e2etest.CheckError(t, "empty device", erase(`{"app_id":"`+a.ID+`","device_id":""}`, env.AdminKey), http.StatusUnprocessableEntity)
		e2etest.CheckError(t, "no device", erase(`{"app_id":"`+a.ID+`"}`, env.AdminKey), http.StatusUnprocessableEntity)
		e2etest.CheckError(t, "unknown field", erase(`{"app_id":"`+a.ID+`","device_id":"x","who":1}`, env.AdminKey), http.StatusUnprocessableEntity)
		e2etest.CheckError(t, "not JSON", erase(`{`, env.AdminKey), http.StatusBadRequest)
		e2etest.CheckError(t, "unknown id", e2etest.Do(t, http.MethodGet, privacyURL+"/v1/erasures/"+e2etest.UUID(), env.AdminKey, nil, nil), http.StatusNotFound)
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events.erasures WHERE app_id IN ($1, 'no-such-app-e2e')`, a.ID).Scan(&n); err != nil || n != 0 {
			t.Errorf("erasures stored by bad requests: %d (%v)", n, err)
		}
	})

	r := erase(`{"app_id":"`+a.ID+`","device_id":"device-1"}`, env.AdminKey)
	var e erasure
	if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &e) != nil || e.ID == "" || e.Status != "queued" {
		t.Fatalf("POST /v1/erasures: %d %s", r.Status, r.Body)
	}
	eb := e2etest.CheckError(t, "second request while one runs", erase(`{"app_id":"`+a.ID+`","device_id":"device-1","suppress":false}`, env.AdminKey), http.StatusConflict)
	if eb.Error.Code != "erasure_in_progress" {
		t.Errorf("second request: code %q", eb.Error.Code)
	}
	if err := e2etest.WaitFor(2*time.Minute, func() (bool, error) {
		r := e2etest.Do(t, http.MethodGet, privacyURL+"/v1/erasures/"+e.ID, env.AdminKey, nil, nil)
		if err := json.Unmarshal(r.Body, &e); err != nil {
			return false, err
		}
		return e.Status == "done" || e.Status == "failed", nil
	}); err != nil {
		t.Fatalf("erasure not finished: %v (last %+v)", err, e)
	}
	if e.Status != "done" || e.Report.Events != 12 || e.Report.Facts != 12 || e.Report.LateEvents != 1 || e.Report.AuditBodies != 1 ||
		e.Report.RollupRows == 0 || e.Report.Verification == nil || !e.Report.Verification.Clean {
		t.Fatalf("erasure = %+v, want done with 12 events, 12 facts, 1 late event, 1 audit body, clean", e)
	}

	t.Run("nothing of the subject left", func(t *testing.T) {
		if ev, late := countEvents(ctx, t, pool, victim); ev != 0 || late != 0 {
			t.Errorf("subject left: %d events, %d late events", ev, late)
		}
		var body, sum []byte
		if err := audit.QueryRowContext(ctx, `SELECT body, body_sha256 FROM audit_events WHERE id = UNHEX(REPLACE(?, '-', ''))`, victimAudit).Scan(&body, &sum); err != nil {
			t.Fatal(err)
		}
		if body != nil || len(sum) != 32 {
			t.Errorf("subject's audit row: body %q, body_sha256 %x; want the body gone and the row and its hash kept", body, sum)
		}
	})
	t.Run("others untouched", func(t *testing.T) {
		for _, s := range others {
			if ev, _ := countEvents(ctx, t, pool, s); ev != want[s] {
				t.Errorf("%v: %d events, want %d", s, ev, want[s])
			}
		}
		if _, late := countEvents(ctx, t, pool, others[0]); late != 1 {
			t.Errorf("other device's late event: %d, want 1", late)
		}
		var body []byte
		if err := audit.QueryRowContext(ctx, `SELECT body FROM audit_events WHERE id = UNHEX(REPLACE(?, '-', ''))`, otherAudit).Scan(&body); err != nil || !strings.Contains(string(body), "device-2") {
			t.Errorf("other device's audit body = %q, %v; want it kept", body, err)
		}
	})
	t.Run("rollups exact", func(t *testing.T) {
		for _, app := range []string{a.ID, b.ID} {
			if err := rollupsExact(ctx, pool, app); err != nil {
				t.Errorf("app %s: %v", app, err)
			}
		}
	})
	t.Run("audit trail verifies", func(t *testing.T) {
		from := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
		r := e2etest.Do(t, http.MethodGet, env.AuditURL+"/v1/audit/verify?from="+from, env.AdminKey, nil, nil)
		var rep struct {
			OK       bool              `json:"ok"`
			Problems []json.RawMessage `json:"problems"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil || !rep.OK {
			t.Errorf("GET /v1/audit/verify after the redaction: %d %.500s", r.Status, r.Body)
		}
	})
	t.Run("later events suppressed and counted, until lifted", func(t *testing.T) {
		before := metric(t, env.ProcessorURL, "processor_events_suppressed_total")
		post(t, env, a, "device-1", 3)
		post(t, env, a, "device-2", 1) // a marker: once it is stored, the subject's were handled
		if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
			n, _ := countEvents(ctx, t, pool, others[0])
			return n == 10, nil
		}); err != nil {
			t.Fatalf("marker event not stored: %v", err)
		}
		if ev, _ := countEvents(ctx, t, pool, victim); ev != 0 {
			t.Errorf("suppressed device: %d events stored", ev)
		}
		if d := metric(t, env.ProcessorURL, "processor_events_suppressed_total") - before; d < 3 {
			t.Errorf("processor_events_suppressed_total grew by %v, want at least 3", d)
		}
		lift := e2etest.Do(t, http.MethodDelete, privacyURL+"/v1/suppressions?app_id="+a.ID+"&device_id=device-1", env.AdminKey, nil, nil)
		if lift.Status != http.StatusNoContent {
			t.Fatalf("lift: %d %s", lift.Status, lift.Body)
		}
		e2etest.CheckError(t, "lift twice", e2etest.Do(t, http.MethodDelete, privacyURL+"/v1/suppressions?app_id="+a.ID+"&device_id=device-1", env.AdminKey, nil, nil), http.StatusNotFound)
		if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
			post(t, env, a, "device-1", 1)
			time.Sleep(time.Second)
			n, _ := countEvents(ctx, t, pool, victim)
			return n > 0, nil
		}); err != nil {
			t.Errorf("events after the lift not stored: %v", err)
		}
	})
}

package privacy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
	"threatview/retention/store"
)

// userKeys are a rotated key pair: k2 makes new pseudonyms, k1 made the
// older ones.
var userKeys = "k2:" + strings.Repeat("2b", 32) + ",k1:" + strings.Repeat("1a", 32)

func mustKeys(t *testing.T, spec string) *wire.Pseudonymizer {
	t.Helper()
	p, err := wire.ParsePseudonymKeys(spec)
	if err != nil || p == nil {
		t.Fatalf("ParsePseudonymKeys = %v, %v", p, err)
	}
	return p
}

// recordingAuditor keeps every audit record.
type recordingAuditor struct{ records []wire.AuditRecord }

func (a *recordingAuditor) Audit(_ context.Context, rec wire.AuditRecord) error {
	a.records = append(a.records, rec)
	return nil
}

// TestAPI_EraseUser: an erasure by raw user id, through the API and the
// real runner over PostgreSQL, removes the user's events of the app under
// the current and the older key (with their facts, counts in every rollup
// and held late events) and the user's rows of facts.inv_daily_users, and
// reports them; another user of the app and the same user in another app
// keep theirs; no suppression is made; the raw id is in no erasure row,
// audit record, answer or log line. Before, the API refused user_id (422
// unknown field).
func TestAPI_EraseUser(t *testing.T) {
	l := newLifecycle(t)
	ctx := context.Background()
	keys := mustKeys(t, userKeys)
	const raw, other = "alice.raw-user@example.com", "bob.raw-user@example.com"
	alice := keys.All(raw) // [k2, k1]
	bob := keys.Pseudonym(other)
	// app-1: d-1's events under alice's old pseudonym, d-2's under her
	// current one, d-3's bob's; app-0: d-1's alice's current one.
	for _, q := range []struct {
		app, dev, user string
	}{{"app-1", "d-1", alice[1]}, {"app-1", "d-2", alice[0]}, {"app-1", "d-3", bob}, {"app-0", "d-1", alice[0]}} {
		if _, err := l.pool.Exec(ctx, `UPDATE events.events SET user_pseudonym = $3 WHERE app_id = $1 AND device_id = $2`, q.app, q.dev, q.user); err != nil {
			t.Fatal(err)
		}
	}
	stmts := []string{
		`INSERT INTO events.late_events (id, received_at, occurred_at, type, app_id, device_id, device_model, manufacturer, os, country, payload, user_pseudonym, held_at, reason)
		 SELECT gen_random_uuid(), received_at, occurred_at, type, app_id, device_id, device_model, manufacturer, os, country, payload, user_pseudonym, now(), 'test'
		   FROM events.events WHERE app_id IN ('app-1', 'app-0') AND device_id IN ('d-1', 'd-3')`,
		`INSERT INTO facts.inv_daily_users (day, app_id, user_pseudonym)
		 SELECT DISTINCT (received_at AT TIME ZONE 'UTC')::date, app_id, user_pseudonym FROM events.events WHERE user_pseudonym <> ''`,
		`INSERT INTO facts.inv_device_days (day, app_id, threat, country, cell, device_id) VALUES (current_date, 'app-1', '', 'DE', '', 'd-1')`,
	}
	for _, q := range stmts {
		if _, err := l.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	count := func(q string, args ...any) int64 { return l.count(t, q, args...) }
	aliceEvents := count(`SELECT count(*) FROM events.events WHERE app_id = 'app-1' AND user_pseudonym = ANY($1)`, alice)
	aliceDays := count(`SELECT count(*) FROM facts.inv_daily_users WHERE app_id = 'app-1' AND user_pseudonym = ANY($1)`, alice)
	keptEvents := count(`SELECT count(*) FROM events.events WHERE NOT (app_id = 'app-1' AND user_pseudonym = ANY($1))`, alice)
	keptDays := count(`SELECT count(*) FROM facts.inv_daily_users WHERE NOT (app_id = 'app-1' AND user_pseudonym = ANY($1))`, alice)
	if aliceEvents != 10 || aliceDays < 2 || keptDays < 2 {
		t.Fatalf("fixture: %d events, %d days of alice in app-1, %d other days; want 10 events under two keys", aliceEvents, aliceDays, keptDays)
	}

	audit := &recordingAuditor{}
	log := slog.New(slog.NewJSONHandler(l.log, nil))
	h := privacy.NewAPI(l.pg, audit, nil, log).WithUserKeys(keys).Handler(authz.New(nil, "admin-key", log), httpserver.NewRegistry(), nil, nil)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer admin-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	// Refused, nothing stored.
	for _, tt := range []struct{ name, body, field string }{
		{"Suppress", `{"app_id":"app-1","user_id":"` + raw + `","suppress":true}`, "suppress"},
		{"Both", `{"app_id":"app-1","user_id":"` + raw + `","device_id":"d-1"}`, "user_id"},
		{"Empty", `{"app_id":"app-1","user_id":" "}`, "user_id"},
		{"Object", `{"app_id":"app-1","user_id":{"id":"` + raw + `"}}`, "user_id"},
		{"NoApp", `{"user_id":"` + raw + `"}`, "app_id"},
	} {
		if w := do(http.MethodPost, "/v1/erasures", tt.body); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), `"field":"`+tt.field+`"`) {
			t.Errorf("%s: POST %s = %d %s, want 422 naming %s", tt.name, tt.body, w.Code, w.Body, tt.field)
		}
	}
	if n := count(`SELECT count(*) FROM events.erasures`); n != 0 || len(audit.records) != 0 {
		t.Fatalf("after refused requests: %d erasures, %d audit records; want none", n, len(audit.records))
	}

	// One open erasure per user: the same user again is busy, another user
	// of the app is not (both pending: no runner yet).
	pend := func(ps []string) error {
		return l.pg.Create(ctx, &privacy.Erasure{ID: uuid.Must(uuid.NewV7()).String(), AppID: "app-1", UserPseudonyms: ps, RequestedBy: "test"})
	}
	if err := pend(alice); err != nil {
		t.Fatalf("Create(alice) = %v", err)
	}
	if err := pend(alice); !errors.Is(err, privacy.ErrBusy) {
		t.Errorf("Create(alice) again = %v, want ErrBusy", err)
	}
	if err := pend([]string{bob}); err != nil {
		t.Errorf("Create(bob) beside alice's = %v, want nil", err)
	}
	if _, err := l.pool.Exec(ctx, `DELETE FROM events.erasures`); err != nil {
		t.Fatal(err)
	}

	l.run(t, nil, privacy.RunnerConfig{})
	w := do(http.MethodPost, "/v1/erasures", `{"app_id":"app-1","user_id":"`+raw+`"}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("POST by user id = %d %s, want 202", w.Code, w.Body)
	}
	var acc struct{ ID string }
	if err := json.Unmarshal(w.Body.Bytes(), &acc); err != nil {
		t.Fatal(err)
	}
	e := l.wait(t, acc.ID, privacy.StatusDone, 15*time.Second)
	r := e.Report
	if r.Result != privacy.ResultErased || r.Events != aliceEvents || r.Facts != aliceEvents || r.LateEvents != 5 ||
		r.DailyUsers != aliceDays || r.DeviceDays != 0 || r.Suppressed || r.Verification == nil || !r.Verification.Clean {
		t.Errorf("report %+v (verification %+v), want %d events and facts, 5 late events, %d daily users, no device days, clean, not suppressed",
			r, r.Verification, aliceEvents, aliceDays)
	}
	if e.DeviceID != "" || !slices.Equal(e.UserPseudonyms, alice) || e.Suppress {
		t.Errorf("erasure names device %q, users %q, suppress %v; want the user's pseudonyms %q only", e.DeviceID, e.UserPseudonyms, e.Suppress, alice)
	}

	if n := count(`SELECT count(*) FROM events.events WHERE app_id = 'app-1' AND user_pseudonym = ANY($1)`, alice); n != 0 {
		t.Errorf("%d events of the user left", n)
	}
	if n := count(`SELECT count(*) FROM events.late_events WHERE app_id = 'app-1' AND user_pseudonym = ANY($1)`, alice); n != 0 {
		t.Errorf("%d late events of the user left", n)
	}
	if n := count(`SELECT count(*) FROM facts.inv_daily_users WHERE app_id = 'app-1' AND user_pseudonym = ANY($1)`, alice); n != 0 {
		t.Errorf("%d rows of the user left in facts.inv_daily_users", n)
	}
	if n := count(`SELECT count(*) FROM events.events`); n != keptEvents {
		t.Errorf("%d events left, want the other users' and apps' %d", n, keptEvents)
	}
	if n := count(`SELECT count(*) FROM facts.inv_daily_users`); n != keptDays {
		t.Errorf("%d rows of facts.inv_daily_users left, want the others' %d", n, keptDays)
	}
	if n := count(`SELECT count(*) FROM events.late_events`); n != 15 {
		t.Errorf("%d late events left, want the other 15 (bob's, app-0's)", n)
	}
	if n := count(`SELECT count(*) FROM facts.inv_device_days`); n != 1 {
		t.Errorf("%d device days left, want the 1 (a user erasure leaves the devices' rows)", n)
	}
	if n := count(`SELECT count(*) FROM events.suppressions`); n != 0 {
		t.Errorf("%d suppressions, want none for a user erasure", n)
	}
	if bad := exact(t, l.pool); bad != 0 {
		t.Errorf("%d rollup buckets differ from count(*) over the remaining events", bad)
	}

	// The raw id is nowhere: not in the erasure row, the audit records,
	// the answers, the log.
	if n := count(`SELECT count(*) FROM events.erasures e WHERE strpos(row_to_json(e)::text, $1) > 0`, raw); n != 0 {
		t.Errorf("the raw user id is in %d rows of events.erasures", n)
	}
	recs, _ := json.Marshal(audit.records)
	get := do(http.MethodGet, "/v1/erasures/"+acc.ID, "")
	list := do(http.MethodGet, "/v1/erasures", "")
	for name, text := range map[string]string{"audit records": string(recs), "GET": get.Body.String(), "list": list.Body.String(), "log": l.log.String()} {
		if strings.Contains(text, raw) || strings.Contains(text, "alice") {
			t.Errorf("the raw user id is in the %s: %s", name, text)
		}
	}
	if len(audit.records) != 1 || audit.records[0].Action != "privacy.erasure.request" {
		t.Errorf("audit records %+v, want the one request", audit.records)
	}
	if !strings.Contains(get.Body.String(), alice[0]) {
		t.Errorf("GET %s, want the user's pseudonym as its subject", get.Body)
	}
}

// TestArchiveRewriter_User: the archive step of a user erasure finds the
// user's archived events by the user_pseudonym column under each key (two
// devices of the app, one pseudonym each), rewrites the months without
// them and their facts, keeps another user of the same device's rows, and
// finds nothing on a second run.
func TestArchiveRewriter_User(t *testing.T) {
	ctx := context.Background()
	url, db := retentiontest.Postgres(t)
	fill(t, db, 3000, 20)
	keys := mustKeys(t, userKeys)
	user := keys.All("carol.raw-user@example.com")
	otherUser := keys.Pseudonym("dave.raw-user@example.com")
	// app-1's d-3 under the user's current pseudonym, d-5 under the older
	// one; every other event of d-3 belongs to another user.
	for _, q := range []struct{ sql, user string }{
		{`UPDATE events.events SET user_pseudonym = $1 WHERE app_id = 'app-1' AND device_id = 'd-3' AND extract(hour FROM occurred_at)::int % 2 = 0`, user[0]},
		{`UPDATE events.events SET user_pseudonym = $1 WHERE app_id = 'app-1' AND device_id = 'd-5'`, user[1]},
		{`UPDATE events.events SET user_pseudonym = $1 WHERE app_id = 'app-1' AND device_id = 'd-3' AND user_pseudonym = ''`, otherUser},
	} {
		if _, err := db.ExecContext(ctx, q.sql, q.user); err != nil {
			t.Fatal(err)
		}
	}
	src := retentiontest.EventsSource(t, url)
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 100, Log: quiet}
	if sum, err := a.Run(ctx); err != nil || sum.Partitions != 6 {
		t.Fatalf("archive = %+v, %v; want the 3 finished months of events and facts", sum, err)
	}
	archived := func(ps []string) (n int64) {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events.events WHERE app_id = 'app-1' AND user_pseudonym = ANY($1) AND received_at < $2`,
			ps, retentiontest.Month(0)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	held, kept := archived(user), archived([]string{otherUser})
	if archived(user[:1]) == 0 || archived(user[1:]) == 0 || kept == 0 {
		t.Fatalf("fixture: %d archived events of the user under %d keys, %d of the other user", held, len(user), kept)
	}
	pool := open(t, url)
	pg := privacy.NewPG(pool)
	w := &privacy.ArchiveRewriter{Archiver: a, Audit: &auditLog{}, Log: quiet, Rollups: pg}
	removed := map[string]int64{}
	for _, p := range user {
		s := privacy.Subject{AppID: "app-1", User: p}
		eraseAll(t, pg, s, 1000)
		rw, err := w.Rewrite(ctx, "e-user", s)
		if err != nil {
			t.Fatalf("Rewrite(%v) = %v", s, err)
		}
		for _, r := range rw {
			removed[r.Table] += r.RowsRemoved
		}
		if rw, err := w.Rewrite(ctx, "e-user", s); err != nil || len(rw) != 0 {
			t.Errorf("second Rewrite(%v) = %+v, %v; want nothing", s, rw, err)
		}
	}
	if removed["events.events"] != held || removed["facts.facts"] != held {
		t.Errorf("the rewrites removed %v rows, the user had %d archived events with their facts", removed, held)
	}
	if n := archived([]string{otherUser}); n != kept {
		t.Errorf("%d events of the other user of the device left, want %d", n, kept)
	}
	var rows int64
	for _, table := range []string{"events.events", "facts.facts"} {
		for m := retentiontest.Month(-2); m.Before(retentiontest.Month(0)); m = m.AddDate(0, 1, 0) {
			err := a.ReadArchive(ctx, table, m, func(line []byte) error {
				if strings.Contains(string(line), user[0]) || strings.Contains(string(line), user[1]) {
					rows++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if rows != 0 {
		t.Errorf("%d archived rows still name the user's pseudonyms", rows)
	}
	if bad := exact(t, pool); bad != 0 {
		t.Errorf("after the rewrite %d rollup buckets differ from count(*)", bad)
	}
}
